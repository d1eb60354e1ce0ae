#!/usr/bin/env python3
"""One TCP transfer of a known size, for the host-stack tests.

  tcp_transfer.py serve PORT          accept one connection, read to EOF,
                                      print "received N", close; gives up
                                      after 60 s
  tcp_transfer.py send HOST PORT N [PAUSE]
                                      connect, send N bytes in 64 KiB
                                      writes (with PAUSE seconds, at most
                                      5, after the first half is acknowledged;
                                      stderr says "paused" when it starts and
                                      "resuming NS", the wall clock in ns,
                                      when it ends), half-close,
                                      wait for the server to close, print
                                      "sent N LPORT"

Both ends are bounded in bytes and time; they only ever talk to the
address they are given (a veth peer in a test's own namespace).
"""
import fcntl
import socket
import struct
import sys
import termios
import time

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


def wait_acknowledged(s):
    """Until the peer has acknowledged all that was sent (SIOCOUTQ, the
    bytes not yet acknowledged, is 0), for at most 5 s."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        left = struct.unpack("i", fcntl.ioctl(s.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]
        if left == 0:
            return
        time.sleep(0.001)


def send(host, port, n, pause=0.0):
    payload = bytes(range(256)) * (BLOCK // 256)
    with socket.create_connection((host, port), timeout=60) as s:
        left = n
        paused = pause <= 0
        while left > 0:
            if not paused and left <= n // 2:
                wait_acknowledged(s)
                print("paused", file=sys.stderr, flush=True)
                time.sleep(min(pause, 5.0))
                print(f"resuming {time.time_ns()}", file=sys.stderr, flush=True)
                paused = True
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
        pause = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
        send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), pause)
    else:
        sys.exit(__doc__)
