"""The console's health probe where it serves on a Unix socket (``console_socket``): the kubelet's
httpGet and tcpSocket probes dial the pod's IP, so the pod runs this in the console's container
instead (an exec probe): ``python -m cyberjurors.console.probe /run/console/console.sock``. Exit 0
when ``/healthz`` answers 200 within the timeout, 1 otherwise. The standard library only: it starts
in a fraction of a second, well within the probe's own timeout."""

from __future__ import annotations

import http.client
import socket
import sys

TIMEOUT_S = 4.0


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)  # the Host header: the console checks no host on /healthz
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def healthy(path: str, timeout_s: float = TIMEOUT_S) -> bool:
    connection = UnixConnection(path, timeout_s)
    try:
        connection.request("GET", "/healthz")
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m cyberjurors.console.probe <console_socket>", file=sys.stderr)
        return 2
    return 0 if healthy(argv[0]) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
