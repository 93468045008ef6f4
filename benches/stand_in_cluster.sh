# Sourced by the server benches: starts benches/apiserver.py with QUEUES queues on a free port
# (its pid in api_pid, for the caller's cleanup) and writes "$work/kubeconfig" for it.
# Needs `work` (a directory) and `free_port` from the caller.
api_port=$(free_port)
python3 benches/apiserver.py --queues "$QUEUES" --listen "127.0.0.1:$api_port" >"$work/api.out" 2>&1 &
api_pid=$!
cat >"$work/kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters: [{name: load, cluster: {server: "http://127.0.0.1:$api_port"}}]
users: [{name: load, user: {token: load}}]
contexts: [{name: load, context: {cluster: load, user: load}}]
current-context: load
KUBECONFIG
