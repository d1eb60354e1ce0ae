#!/usr/bin/env python3
"""One TCP transfer of a known size, for the host-stack tests.

  tcp_transfer.py serve PORT          accept one connection, read to EOF,
                                      print "received N", close; gives up
                                      after 60 s
  tcp_transfer.py send HOST PORT N    connect, send N bytes in 64 KiB
                                      writes, half-close, wait for the
                                      server to close, print "sent N LPORT"

Both ends are bounded in bytes and time; they only ever talk to the
address they are given (a veth peer in a test's own namespace).
"""
import socket
import sys

BLOCK = 65536


def serve(port):
    family = socket.AF_INET6
    srv = socket.socket(family, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    srv.bind(("::", port))
    srv.listen(1)
    srv.settimeout(60)
    print("ready", flush=True)
    conn, _ = srv.accept()
    conn.settimeout(60)
    total = 0
    with conn:
        while True:
            data = conn.recv(BLOCK)
            if not data:
                break
            total += len(data)
    srv.close()
    print(f"received {total}", flush=True)


def send(host, port, n):
    payload = bytes(range(256)) * (BLOCK // 256)
    with socket.create_connection((host, port), timeout=60) as s:
        left = n
        while left > 0:
            chunk = payload[: min(BLOCK, left)]
            s.sendall(chunk)
            left -= len(chunk)
        s.shutdown(socket.SHUT_WR)
        # Wait for the server's close, so the whole transfer is over.
        while s.recv(BLOCK):
            pass
        print(f"sent {n} {s.getsockname()[1]}", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(int(sys.argv[2]))
    elif sys.argv[1] == "send":
        send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit(__doc__)
