"""Runs SQL statements in DuckDB and reports the time and CPU they took.

Input (a JSON file): {"setup": [statements], "queries": [statements]}.
Setup statements (views, macros) are not timed; each query's result is
fetched in full. Output: {"wall_s", "cpu_s", "rows"} as JSON.
"""

import json
import resource
import sys
import time

import duckdb

job = json.load(open(sys.argv[1]))
con = duckdb.connect()
for s in job["setup"]:
    con.execute(s)


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


rows = 0
w0, c0 = time.perf_counter(), cpu()
for q in job["queries"]:
    rows += len(con.execute(q).fetchall())
print(json.dumps({"wall_s": time.perf_counter() - w0, "cpu_s": cpu() - c0, "rows": rows}))
