-- POSTs the JSON body in the file named after `--` to every request of a wrk run, as the
-- README's load figures do:
--   wrk -t2 -c64 -d30s -s examples/wrk_post.lua https://localhost:8443/tasks/admit -- body.json
function init(args)
  local file = assert(io.open(args[1], "rb"), "usage: wrk ... -s wrk_post.lua URL -- BODY_FILE")
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.body = file:read("*a")
  file:close()
end
