"""A loopback HTTP proxy that adds one header to every request.

The MCP conformance CLI cannot send custom headers, so it talks to this
proxy, which forwards each request to the backend unchanged - method, path,
Host, Origin and body included, so host and origin checks still see what the
client sent - plus the service-token header.

Usage: header_proxy.py LISTEN_PORT UPSTREAM_PORT "Name: value"
"""

import http.client
import http.server
import sys

HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}


def main() -> None:
    listen_port, upstream_port, header = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    name, value = (part.strip() for part in header.split(":", 1))

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            upstream = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=60)
            upstream.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for key, val in self.headers.items():
                if key.lower() not in HOP_BY_HOP:
                    upstream.putheader(key, val)
            upstream.putheader(name, value)
            upstream.endheaders(body)
            response = upstream.getresponse()
            self.send_response_only(response.status, response.reason)
            for key, val in response.getheaders():
                if key.lower() not in HOP_BY_HOP and key.lower() != "content-length":
                    self.send_header(key, val)
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
            self.end_headers()
            while True:
                chunk = response.read1(65536)
                if not chunk:
                    break
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            upstream.close()
            self.close_connection = True

        do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = do_OPTIONS = _forward

        def log_message(self, *args) -> None:  # quiet
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", listen_port), Handler)
    server.serve_forever()


if __name__ == "__main__":
    main()
