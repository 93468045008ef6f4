#!/usr/bin/env python3
"""A dexaflow.io/admission/v1 webhook in any language: this one in Python, standard library only.

It answers POST /tasks/admit as examples/webhook_server.rs does, by tenant: gpu-lab is admitted
with changes (the GPU pool), finance is held for three seconds after start, umbrella is refused,
every other tenant is admitted. It serves HTTPS with the certificate and key it is given.

    python3 examples/webhook_server.py --listen 127.0.0.1:8443 \
        --cert target/webhook-ca.pem --key target/webhook-ca.key

It prints the address it serves (port 0 resolved) on its first line of standard output.
The request and answer formats are schemas/request.schema.json and schemas/answer.schema.json.
"""

import argparse
import http.server
import json
import ssl
import sys
import time

API_VERSION = "dexaflow.io/admission/v1"
PATH = "/tasks/admit"
FREEZE_SECONDS = 3.0
MAX_BODY_BYTES = 1 << 20
STARTED = time.monotonic()


def decide(call):
    """The decision for one attempt, as the answer's fields (without api_version and uid)."""
    tenant = call.get("tenant", "")
    if tenant == "gpu-lab":
        return {
            "decision": "admit_with",
            "changes": {"node_selector": {"pool": "gpu"}, "labels": {"team": "gpu-lab"}},
        }
    if tenant == "finance" and time.monotonic() - STARTED < FREEZE_SECONDS:
        return {"decision": "hold", "reason": "quarter-end close: deploys frozen"}
    if tenant == "umbrella":
        return {"decision": "refuse", "reason": "tenant umbrella is suspended for unpaid invoices"}
    return {"decision": "admit"}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        if self.path.split("?", 1)[0] != PATH:
            return self.reply(404, {"error": "no service at this path"})
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            return self.reply(400, {"error": "Content-Length is not a number"})
        if length < 0 or length > MAX_BODY_BYTES:
            self.close_connection = True
            return self.reply(413, {"error": f"the body is larger than {MAX_BODY_BYTES} bytes"})
        try:
            call = json.loads(self.rfile.read(length))
            uid = call["uid"]
            if call.get("api_version") != API_VERSION:
                raise ValueError(f"api_version: expected {API_VERSION!r}")
        except (ValueError, KeyError, TypeError) as error:
            return self.reply(400, {"error": f"not an admission request: {error}"})
        self.reply(200, {"api_version": API_VERSION, "uid": uid, **decide(call)})

    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format, *args):
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", default="127.0.0.1:8443", help="address:port to listen on")
    parser.add_argument("--cert", required=True, help="the serving certificate chain (PEM)")
    parser.add_argument("--key", required=True, help="its private key (PEM)")
    args = parser.parse_args()
    host, _, port = args.listen.rpartition(":")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(args.cert, args.key)
    server = http.server.ThreadingHTTPServer((host, int(port)), Handler)
    # The handshake is made by the thread serving the connection, not the one accepting.
    server.socket = context.wrap_socket(
        server.socket, server_side=True, do_handshake_on_connect=False
    )
    address, bound_port = server.server_address[:2]
    print(f"serving https://{address}:{bound_port}{PATH}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
