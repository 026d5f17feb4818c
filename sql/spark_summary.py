"""tokenscope's summary of a trace dataset on Apache Spark: runs sql/tokenscope.sql unchanged and prints the figures
as JSON, with the keys of `tokenscope summary --json`.

    python3 sql/spark_summary.py DATASET [--master local[2]] [--views DIR]

DATASET is a Parquet file or a directory of them (hive partitions `key=value/` are read as Spark reads them). On a
cluster, submit it with `spark-submit sql/spark_summary.py s3://bucket/traces/date=2026-11-30 --master yarn`.
`--views DIR` also writes each view of the SQL file as Parquet under DIR (the requests with their figures, say,
to open in tokenscope or to query further).
"""

import argparse
import json
import pathlib
import re
import sys

from pyspark.sql import SparkSession


def statements(path):
    """The (name, sql) pairs of the SQL file, in order: each statement follows a `-- view: NAME` line."""
    text = pathlib.Path(path).read_text(encoding="utf-8")
    parts = re.split(r"^-- view: (\w+)\s*$", text, flags=re.MULTILINE)
    return [(parts[i], parts[i + 1].strip()) for i in range(1, len(parts), 2)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--sql", default=str(pathlib.Path(__file__).with_name("tokenscope.sql")))
    parser.add_argument("--views", help="write every view as Parquet under this directory")
    args = parser.parse_args()

    spark = (
        SparkSession.builder.master(args.master)
        .appName("tokenscope-summary")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.read.parquet(args.dataset).createOrReplaceTempView("trace")
    for name, sql in statements(args.sql):
        frame = spark.sql(sql)
        frame.createOrReplaceTempView(name)
        if args.views:
            frame.write.mode("overwrite").parquet(str(pathlib.Path(args.views) / name))

    totals = spark.sql("SELECT * FROM totals").collect()[0]
    rows = spark.sql("SELECT * FROM summary").collect()
    reasons = spark.sql("SELECT finish_reason, COUNT(*) AS n FROM requests GROUP BY finish_reason").collect()
    mismatches = spark.sql("SELECT COUNT(*) AS n FROM token_mismatches").collect()[0]["n"]

    def ms(ns):
        """Latencies are ranked in ns; in ms as tokenscope gives them (ns / 1e6, one correctly rounded division)."""
        return None if ns is None else ns / 1e6

    out = {key: totals[key] or 0 for key in ("requests", "input_tokens", "cached_tokens", "output_tokens")}
    span = ms(totals["span_ns"]) if out["requests"] else None
    out["span_ms"] = span
    out["throughput_tok_s"] = out["output_tokens"] / (span / 1e3) if span else None
    for row in rows:
        figure = {"count": row["count"]}
        figure.update({key: ms(row[key]) for key in ("mean", "p50", "p90", "p95", "p99", "max")})
        out[row["figure"] + "_ms"] = figure
    out["finish_reasons"] = {r["finish_reason"]: r["n"] for r in reasons}
    out["token_mismatches"] = mismatches
    json.dump(out, sys.stdout, indent=2, sort_keys=True)
    print()
    spark.stop()


if __name__ == "__main__":
    main()
