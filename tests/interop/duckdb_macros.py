"""Runs docs/duckdb-macros.sql in DuckDB over a dataset's packet files and
prints, as JSON, each (ip_text(ip_src), mac_text(eth_src)) with its count."""

import json
import pathlib
import sys

import duckdb

root = pathlib.Path(__file__).resolve().parents[2]
ds = pathlib.Path(sys.argv[1])
con = duckdb.connect()
con.execute((root / "docs" / "duckdb-macros.sql").read_text())
rows = con.execute(
    "SELECT ip_text(ip_src) AS s, mac_text(eth_src) AS m, count(*) AS n "
    f"FROM read_parquet('{ds}/packets/*.parquet') GROUP BY ALL"
).fetchall()
print(json.dumps(sorted([[s, m, n] for s, m, n in rows], key=json.dumps)))
