#!/usr/bin/env python3
"""Real TCP traffic in both directions for the capture tests.

  tcp_flows.py serve PORT            echo server; exits after 30 s idle
  tcp_flows.py connect HOST PORT N   N connections, each sending 20 kB and
                                     reading the echo back; bounded by
                                     timeouts, never more than N flows
"""
import socket
import sys
import threading

CHUNK = 20_000


def serve(port):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(64)
    srv.settimeout(30)
    print("ready", flush=True)

    def echo(conn):
        with conn:
            conn.settimeout(10)
            try:
                while True:
                    data = conn.recv(65536)
                    if not data:
                        return
                    conn.sendall(data)
            except OSError:
                return

    while True:
        try:
            conn, _ = srv.accept()
        except socket.timeout:
            return
        threading.Thread(target=echo, args=(conn,), daemon=True).start()


def connect(host, port, n):
    payload = bytes(range(256)) * (CHUNK // 256 + 1)
    payload = payload[:CHUNK]
    done = 0
    for _ in range(n):
        with socket.create_connection((host, port), timeout=10) as s:
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            got = 0
            while got < CHUNK:
                data = s.recv(65536)
                if not data:
                    break
                got += len(data)
            done += got == CHUNK
    print(f"flows {done}", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(int(sys.argv[2]))
    else:
        connect(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
