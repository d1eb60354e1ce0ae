#!/usr/bin/env python3
"""Runs a script from `weir analyze ... --emit-sql` on Spark SQL (pyspark,
local mode) over the datasets' Parquet files, and prints each result as
JSON: {"NAME": {"columns": [...], "rows": [[...], ...]}, ...}.

    weir analyze DATASET flows --emit-sql > flows.sql
    python3 tools/spark/run_sql.py flows.sql DATASET [DATASET...]

The binding the script's header asks for is done here: each table is the
datasets' Parquet files with ts_ns (Spark reads weir's nanosecond
timestamps as BIGINT ns with spark.sql.legacy.parquet.nanosAsLong), rows
restricted as the header says, and ip_text registered as a function.
"""

import decimal
import json
import os
import re
import sys

from addresses import register as register_address_functions


def parse(script):
    """(restriction or None, {table: columns}, [(name, sql)]) from an
    emitted script."""
    restriction = None
    columns = {}
    statements = []
    name, body = None, []
    for line in script.splitlines():
        m = re.match(r"-- columns of (\w+): (.*)$", line)
        if m:
            columns[m.group(1)] = m.group(2)
            continue
        m = re.match(r"-- Only rows where: (.*)$", line)
        if m:
            restriction = m.group(1)
            continue
        m = re.match(r"-- result: (\S+)", line)
        if m:
            name, body = m.group(1), []
            continue
        if name is None or line.startswith("--"):
            continue
        body.append(line)
        if line.rstrip().endswith(";"):
            statements.append((name, "\n".join(body).rstrip().rstrip(";")))
            name, body = None, []
    return restriction, columns, statements


def plain(v):
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    if isinstance(v, decimal.Decimal):
        # Spark reads unsigned 64-bit columns as DECIMAL(20,0).
        return int(v) if v == v.to_integral_value() else float(v)
    return v


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: run_sql.py SCRIPT.sql DATASET [DATASET...]")
    script_path, datasets = sys.argv[1], sys.argv[2:]
    with open(script_path) as f:
        restriction, columns, statements = parse(f.read())
    if not statements:
        sys.exit(f"{script_path}: no '-- result:' statements; make it with weir analyze --emit-sql")

    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(os.environ.get("WEIR_SPARK_MASTER", "local[2]"))
        .appName("weir-emit-sql")
        .config("spark.sql.legacy.parquet.nanosAsLong", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register_address_functions(spark)
    for table, ddl in columns.items():
        paths = [
            os.path.join(d, table)
            for d in datasets
            if os.path.isdir(os.path.join(d, table))
            and any(n.endswith(".parquet") and not n.startswith(".")
                    for n in os.listdir(os.path.join(d, table)))
        ]
        if paths:
            df = spark.read.option("pathGlobFilter", "*.parquet").parquet(*paths)
        else:
            df = spark.createDataFrame([], ddl)
        df = df.withColumn("ts_ns", df["ts"])
        if restriction and table == "packets":
            df = df.where(restriction)
        elif restriction:
            # The window applies to every table; a packet filter only to packets.
            window = " AND ".join(p for p in restriction.split(" AND ") if p.startswith("ts_ns"))
            if window:
                df = df.where(window)
        df.createOrReplaceTempView(table)

    out = {}
    for name, sql in statements:
        result = spark.sql(sql)
        rows = [[plain(v) for v in r] for r in result.collect()]
        out[name] = {"columns": result.columns, "rows": rows}
    spark.stop()
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
