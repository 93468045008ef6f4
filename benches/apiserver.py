#!/usr/bin/env python3
"""A Kubernetes API server for load runs, standard library only: it lists QUEUES open Volcano
queues (team-0 ... team-N-1, leaves under root) and holds every watch open without events, so
that `serve`'s queue cache synces once and stays synced. Any bearer token is taken.

    python3 benches/apiserver.py --queues 1000 --listen 127.0.0.1:8001
"""

import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

QUEUES_PATH = "/apis/scheduling.volcano.sh/v1beta1/queues"


def queue(name, parent):
    spec = {"weight": 1, "reclaimable": True}
    if parent:
        spec["parent"] = parent
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name, "resourceVersion": "1", "uid": f"uid-{name}"},
        "spec": spec,
        "status": {"state": "Open"},
    }


def handler(listing):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            url = urlparse(self.path)
            if url.path != QUEUES_PATH:
                self.answer(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                  "reason": "NotFound", "code": 404, "message": f"{url.path} not found"})
                return
            if parse_qs(url.query).get("watch") == ["true"]:
                # An open watch with no events: the cache keeps what it listed.
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.wfile.flush()
                threading.Event().wait()
                return
            self.answer(200, listing)

        def answer(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queues", type=int, default=1000, help="how many leaf queues to list")
    parser.add_argument("--listen", default="127.0.0.1:8001", help="the address to listen on")
    args = parser.parse_args()
    host, port = args.listen.rsplit(":", 1)
    items = [queue("root", None)] + [queue(f"team-{i}", "root") for i in range(args.queues)]
    listing = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "QueueList",
               "metadata": {"resourceVersion": "1"}, "items": items}
    server = ThreadingHTTPServer((host, int(port)), handler(listing))
    server.daemon_threads = True
    print(f"serving http://{server.server_address[0]}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
