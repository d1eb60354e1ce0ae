#!/usr/bin/env python3
"""Reads a weir dataset straight from an S3-compatible bucket with another
engine, and prints its answers to a few questions as JSON ({TABLE: {"sql",
"weir", "columns", "rows"}}, "weir" being the same question in weir's
SQL), for the tests to ask weir the same (crates/cli/tests/s3.rs):

    python3 tools/s3/read_bucket.py duckdb s3://BUCKET/PREFIX
    python3 tools/s3/read_bucket.py spark  s3://BUCKET/PREFIX

The endpoint and keys are the AWS tools' variables (AWS_ENDPOINT_URL,
AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION); the store is
addressed path-style. DuckDB reads through its httpfs extension (the
PyPI package duckdb-extension-httpfs, of the same version as duckdb);
Spark through hadoop-aws (S3A), whose jars are in WEIR_SPARK_S3_JARS.
"""

import glob
import json
import os
import sys
from urllib.parse import urlparse

# Each question as the engine asks it of the files, and as weir's SQL
# asks it (weir's `flows` is a view over the table's files: the two sides
# of a flow as source and destination rather than `a` and `b`; the
# unordered port pair and the totals are the same either way).
FLOWS = (
    "SELECT proto, lo, hi, sum(frames) AS frames, sum(bytes) AS bytes FROM "
    "(SELECT proto, least({a}_port, {b}_port) AS lo, greatest({a}_port, {b}_port) AS hi, "
    "{fa}_frames + {fb}_frames AS frames, {fa}_bytes + {fb}_bytes AS bytes FROM flows) "
    "GROUP BY proto, lo, hi"
)
PACKETS = (
    "SELECT count(*) AS n, sum(wire_len) AS bytes, count(DISTINCT flow_hash) AS flows FROM packets"
)
QUERIES = {
    "packets": (PACKETS, PACKETS),
    "flows": (
        FLOWS.format(a="a", b="b", fa="a", fb="b"),
        FLOWS.format(a="src", b="dst", fa="fwd", fb="rev"),
    ),
}


def plain(v):
    # Spark reads unsigned 64-bit columns as DECIMAL(20,0).
    if hasattr(v, "to_integral_value"):
        return int(v)
    return v


def endpoint():
    url = urlparse(os.environ["AWS_ENDPOINT_URL"])
    return url.netloc, url.scheme == "https"


def with_duckdb(dataset):
    import duckdb
    import duckdb_extension_httpfs

    # The extension as the PyPI package ships it, for this duckdb version.
    pkg = os.path.dirname(duckdb_extension_httpfs.__file__)
    ext = glob.glob(os.path.join(pkg, "extensions", "v*", "httpfs.duckdb_extension"))
    if not ext:
        sys.exit(f"no httpfs extension under {pkg}")
    con = duckdb.connect()
    con.execute(f"LOAD '{ext[0]}'")
    host, tls = endpoint()

    def quoted(v):
        return "'" + v.replace("'", "''") + "'"

    con.execute(
        f"CREATE SECRET weir (TYPE s3, KEY_ID {quoted(os.environ['AWS_ACCESS_KEY_ID'])}, "
        f"SECRET {quoted(os.environ['AWS_SECRET_ACCESS_KEY'])}, "
        f"REGION {quoted(os.environ.get('AWS_REGION', 'us-east-1'))}, ENDPOINT {quoted(host)}, "
        f"URL_STYLE 'path', USE_SSL {'true' if tls else 'false'})"
    )
    for table in QUERIES:
        con.execute(
            f"CREATE VIEW {table} AS SELECT * FROM "
            f"read_parquet('{dataset}/{table}/*.parquet')"
        )
    out = {}
    for table, (sql, weirs) in QUERIES.items():
        result = con.execute(sql)
        columns = [d[0] for d in result.description]
        rows = [list(r) for r in result.fetchall()]
        out[table] = {"sql": sql, "weir": weirs, "columns": columns, "rows": rows}
    return out


def with_spark(dataset):
    from pyspark.sql import SparkSession

    jars = sorted(glob.glob(os.path.join(os.environ["WEIR_SPARK_S3_JARS"], "*.jar")))
    if not jars:
        sys.exit("no jars in WEIR_SPARK_S3_JARS (scripts/lib.sh fetches them)")
    host, tls = endpoint()
    spark = (
        SparkSession.builder.master("local[1]")
        .appName("weir-s3")
        .config("spark.jars", ",".join(jars))
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.legacy.parquet.nanosAsLong", "true")
        .config("spark.hadoop.fs.s3a.endpoint", ("https://" if tls else "http://") + host)
        .config("spark.hadoop.fs.s3a.endpoint.region", os.environ.get("AWS_REGION", "us-east-1"))
        .config("spark.hadoop.fs.s3a.path.style.access", "true")
        .config("spark.hadoop.fs.s3a.connection.ssl.enabled", "true" if tls else "false")
        .config("spark.hadoop.fs.s3a.access.key", os.environ["AWS_ACCESS_KEY_ID"])
        .config("spark.hadoop.fs.s3a.secret.key", os.environ["AWS_SECRET_ACCESS_KEY"])
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    base = "s3a://" + dataset[len("s3://"):]
    for table in QUERIES:
        spark.read.parquet(f"{base}/{table}/*.parquet").createOrReplaceTempView(table)
    out = {}
    for table, (sql, weirs) in QUERIES.items():
        result = spark.sql(sql)
        rows = [[plain(v) for v in r] for r in result.collect()]
        out[table] = {"sql": sql, "weir": weirs, "columns": result.columns, "rows": rows}
    spark.stop()
    return out


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("duckdb", "spark"):
        sys.exit("usage: read_bucket.py duckdb|spark s3://BUCKET/PREFIX")
    engine, dataset = sys.argv[1], sys.argv[2].rstrip("/")
    out = with_duckdb(dataset) if engine == "duckdb" else with_spark(dataset)
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
