"""A hostile MCP server over streamable HTTP, for the bounds toolhost keeps
on remote toolsets (`kind: mcp`). Raw HTTP and JSON-RPC, no SDK.

Usage:
    hostile_http.py COUNT_FILE

It answers `initialize` (opening session `s1`) and `tools/list` (one tool,
`a`); every GET of the event stream it answers with one event that asks
the client to come back at once (`retry: 0`), ends the stream, and appends
a line to COUNT_FILE. Its port goes to stdout.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

count_file = sys.argv[1]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body=b"", content_type="application/json", headers=()):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        message = json.loads(self.rfile.read(length) or b"{}")
        method = message.get("method")
        if "id" not in message:
            self.reply(202)
            return
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile-http", "version": "0"},
            }
            headers = [("Mcp-Session-Id", "s1")]
        elif method == "tools/list":
            tool = {"name": "a", "description": "hostile", "inputSchema": {"type": "object"}}
            result, headers = {"tools": [tool]}, []
        else:
            result, headers = {}, []
        answer = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        self.reply(200, json.dumps(answer).encode(), headers=headers)

    def do_GET(self):
        with open(count_file, "a") as count:
            count.write("GET\n")
        # A priming event (no data) that asks for a reconnect at once,
        # and the end of the stream.
        self.reply(200, b"id: 1\nretry: 0\ndata: \n\n", content_type="text/event-stream")

    def do_DELETE(self):
        self.reply(200)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
