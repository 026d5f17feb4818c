"""Makes a dataset of COPIES x the `large` benchmark trace (each copy's request ids prefixed, so that the copies are
distinct requests), as hive partitions `copy=K/part-0.parquet`: 10 copies are 96 M output tokens, for measuring
`tokenscope summary --out-of-core` beyond one machine's comfortable memory. Streams each copy with polars
(`sink_parquet`), so it needs little memory itself.

    python3 scripts/bench/bench-dataset.py target/bench-data/large-50000.parquet target/bench-data/x10 --copies 10
"""

import argparse
import pathlib

import polars as pl


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source")
    parser.add_argument("out")
    parser.add_argument("--copies", type=int, default=10)
    args = parser.parse_args()
    for k in range(args.copies):
        folder = pathlib.Path(args.out) / f"copy={k}"
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / "part-0.parquet"
        if target.exists():
            continue
        (
            pl.scan_parquet(args.source)
            .with_columns(pl.concat_str(pl.lit(f"c{k}-"), pl.col("request_id")).alias("request_id"))
            .sink_parquet(target, compression="zstd", row_group_size=65536)
        )
        print(f"wrote {target}")


if __name__ == "__main__":
    main()
