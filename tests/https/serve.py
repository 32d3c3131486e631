"""A static HTTPS file server for the tests of https:// plugin sources.

    python3 serve.py DIR CERT_PEM KEY_PEM

Serves DIR over TLS on a free loopback port, prints the port on stdout, and
logs each request's path on stderr (the tests count downloads with it). A
request for PATH where DIR holds PATH.redirect is answered 302 with that
file's text as the Location. A request for PATH where DIR holds
PATH.pace (a number of bytes a second) is answered with the file PATH at
that rate, and `DONE PATH` is logged once all of it is sent.
"""

import functools
import http.server
import os
import ssl
import sys
import time


class Handler(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        target = os.path.join(self.directory, self.path.lstrip("/") + ".redirect")
        if "/" not in self.path.lstrip("/") and os.path.isfile(target):
            with open(target) as f:
                location = f.read().strip()
            self.send_response(302)
            self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        pace = os.path.join(self.directory, self.path.lstrip("/") + ".pace")
        if "/" not in self.path.lstrip("/") and os.path.isfile(pace):
            with open(pace) as f:
                rate = int(f.read().strip())
            with open(os.path.join(self.directory, self.path.lstrip("/")), "rb") as f:
                body = f.read()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                for start in range(0, len(body), rate):
                    self.wfile.write(body[start : start + rate])
                    self.wfile.flush()
                    time.sleep(1)
            except OSError:
                return
            sys.stderr.write(f"DONE {self.path}\n")
            sys.stderr.flush()
            return
        super().do_GET()

    def log_message(self, format, *args):
        sys.stderr.write(f"GET {self.path}\n")
        sys.stderr.flush()


def main():
    directory, cert, key = sys.argv[1:4]
    handler = functools.partial(Handler, directory=directory)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
