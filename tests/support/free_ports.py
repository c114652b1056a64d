"""Free TCP ports on loopback for tests whose processes listen on a base port + their local rank."""

import socket


def free_port():
    """A port free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_port_pair():
    """A port P with P and P + 1 both free now (ranks 0 and 1 of a host listen on P + rank)."""
    for _ in range(100):
        port = free_port()
        if port >= 65535:
            continue
        with socket.socket() as second:
            try:
                second.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no two adjacent free ports on 127.0.0.1")
