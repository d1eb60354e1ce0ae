#!/usr/bin/env python3
"""Reads a weir dataset's packet table with pyarrow and with DuckDB and
prints, per engine, what it sees: row count, per-column non-null counts and
sums (or distinct counts), and every row's values in a canonical order.

Used by the Rust end-to-end tests to check that real Parquet clients read
weir's files exactly as weir does. Usage: parquet_check.py DATASET
"""
import glob
import json
import os
import sys

import duckdb
import pyarrow.compute as pc
import pyarrow.parquet as pq

NUMERIC = [
    "wire_len", "cap_len", "worker", "iface", "vlan", "ethertype", "ip_version",
    "ip_len", "ip_hdr_len", "ip_proto", "ttl", "dscp", "ip_id", "frag", "src_port",
    "dst_port", "tcp_flags", "tcp_seq", "tcp_ack", "tcp_win", "tcp_hdr_len", "udp_len",
    "icmp_type", "icmp_code", "payload_len", "flow_hash", "pcap_file", "pcap_offset",
]
BINARY = ["eth_src", "eth_dst", "ip_src", "ip_dst"]
ROW = ["ts", "wire_len", "ip_src", "ip_dst", "src_port", "dst_port", "tcp_seq", "tcp_ack",
       "tcp_flags", "payload_len", "flow_hash", "parse_error"]


def canon(v):
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    return v


def with_pyarrow(files):
    table = pq.ParquetDataset(files).read()
    cols = {}
    for name in NUMERIC:
        c = table.column(name)
        cols[name] = {"non_null": len(c) - c.null_count,
                      "sum": int(pc.sum(c.cast("uint64")).as_py() or 0)}
    for name in BINARY + ["parse_error"]:
        c = table.column(name)
        cols[name] = {"non_null": len(c) - c.null_count,
                      "distinct": len(pc.unique(c.drop_null()))}
    ts = table.column("ts").cast("int64").to_pylist()
    rows = []
    data = {n: table.column(n).to_pylist() for n in ROW if n != "ts"}
    for i in range(table.num_rows):
        rows.append([ts[i]] + [canon(data[n][i]) for n in ROW[1:]])
    rows.sort(key=lambda r: json.dumps(r))
    return {"rows": table.num_rows, "columns": cols, "table": rows}


def with_duckdb(files):
    con = duckdb.connect()
    src = "read_parquet([%s])" % ", ".join("'%s'" % f for f in files)
    n = con.execute(f"SELECT count(*) FROM {src}").fetchall()[0][0]
    cols = {}
    for name in NUMERIC:
        nn, s = con.execute(f"SELECT count({name}), coalesce(sum({name}), 0) FROM {src}").fetchall()[0]
        cols[name] = {"non_null": nn, "sum": int(s)}
    for name in BINARY + ["parse_error"]:
        nn, d = con.execute(f"SELECT count({name}), count(DISTINCT {name}) FROM {src}").fetchall()[0]
        cols[name] = {"non_null": nn, "distinct": d}
    select = ", ".join(["epoch_ns(ts)"] + [
        f"lower(hex({c}))" if c in BINARY else c for c in ROW[1:]])
    rows = [list(r) for r in con.execute(f"SELECT {select} FROM {src}").fetchall()]
    rows.sort(key=lambda r: json.dumps(r))
    return {"rows": n, "columns": cols, "table": rows}


def main():
    dataset = sys.argv[1]
    files = sorted(glob.glob(os.path.join(dataset, "packets", "*.parquet")))
    if not files:
        sys.exit(f"{dataset}: no packets/*.parquet files")
    json.dump({"pyarrow": with_pyarrow(files), "duckdb": with_duckdb(files)}, sys.stdout)


if __name__ == "__main__":
    main()
