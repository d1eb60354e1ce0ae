"""The examples of docs/ANALYSIS.md ("Addresses as text in DuckDB and
Spark") run as they are written there, on a dataset: DuckDB with
docs/duckdb-macros.sql, Spark with tools/spark/addresses.py. Prints, as
JSON, {"duckdb": rows, "spark": rows}, each row [qname, client, answers],
sorted."""

import json
import pathlib
import sys

root = pathlib.Path(__file__).resolve().parents[2]
docs = (root / "docs" / "ANALYSIS.md").read_text()
DUCKDB = (
    "SELECT qname, ip_text(client) AS client, "
    "list_transform(answer_addrs, lambda a: ip_text(a)) AS answers "
    "FROM read_parquet('ds/dns/*.parquet')"
)
SPARK = (
    "SELECT qname, ip_text(client) AS client, ip_texts(answer_addrs) AS answers "
    "FROM parquet.`ds/dns`"
)
for q in (DUCKDB, SPARK):
    assert q in docs, f"docs/ANALYSIS.md no longer shows: {q}"
ds = pathlib.Path(sys.argv[1]).resolve()


def dataset(q):
    return q.replace("'ds/", f"'{ds}/").replace("`ds/", f"`{ds}/")


def rows(rs):
    # Sorted as the test sorts weir's rows: by their compact JSON.
    out = [[q, c, list(a) if a is not None else None] for q, c, a in rs]
    return sorted(out, key=lambda r: json.dumps(r, separators=(",", ":")))


import duckdb  # noqa: E402

con = duckdb.connect()
con.execute((root / "docs" / "duckdb-macros.sql").read_text())
out = {"duckdb": rows(con.execute(dataset(DUCKDB)).fetchall())}

sys.path.insert(0, str(root / "tools" / "spark"))
from addresses import register  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

spark = (
    SparkSession.builder.master("local[2]")
    .appName("weir-addresses")
    .config("spark.ui.enabled", "false")
    .config("spark.sql.legacy.parquet.nanosAsLong", "true")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
register(spark)
out["spark"] = rows(spark.sql(dataset(SPARK)).collect())
spark.stop()
json.dump(out, sys.stdout)
print()
