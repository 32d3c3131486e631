"""A static HTTPS file server for the tests of https:// plugin sources.

    python3 serve.py DIR CERT_PEM KEY_PEM

Serves DIR over TLS on a free loopback port, prints the port on stdout, and
logs each request's path on stderr (the tests count downloads with it).
"""

import functools
import http.server
import ssl
import sys


class Handler(http.server.SimpleHTTPRequestHandler):
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
