"""Mutation run over a trace file: changes 1 to 8 random bytes of FILE per mutant and runs `tokenscope validate` on
each, keeping the mutants whose run printed a panic, crashed (an exit code other than 0 or 1) or timed out. Found
this way: tests/data/corrupt/decoder-panic-*.parquet.

    python3 scripts/fuzz/mutate.py small.parquet --seed 1 --mutants 3000 --tokenscope target/release/tokenscope
"""

import argparse
import pathlib
import random
import subprocess


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--mutants", type=int, default=1000)
    parser.add_argument("--tokenscope", default="target/release/tokenscope")
    parser.add_argument("--out", default="mutants")
    args = parser.parse_args()
    source = pathlib.Path(args.file).read_bytes()
    out = pathlib.Path(args.out)
    out.mkdir(exist_ok=True)
    rng = random.Random(args.seed)
    suffix = pathlib.Path(args.file).suffix
    mutant = out / f"current{suffix}"
    kept = 0
    for i in range(args.mutants):
        b = bytearray(source)
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        mutant.write_bytes(b)
        try:
            r = subprocess.run([args.tokenscope, "validate", str(mutant)], capture_output=True, timeout=60)
            bad = "panicked" in r.stderr.decode(errors="replace") or r.returncode not in (0, 1)
            why = f"exit {r.returncode}"
        except subprocess.TimeoutExpired:
            bad, why = True, "timeout"
        if bad:
            kept += 1
            name = out / f"mutant-{args.seed}-{i}{suffix}"
            name.write_bytes(b)
            print(f"{name}: {why}")
    print(f"{args.mutants} mutants, {kept} kept")


if __name__ == "__main__":
    main()
