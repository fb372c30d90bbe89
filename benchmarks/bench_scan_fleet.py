"""Cases per second of `postmortem scan` on 1 and 2 processes and on a Dask local cluster, and the store's size.

    python3 benchmarks/bench_scan_fleet.py [--cases 3000] [--runs 3]

Builds an archive with make_archive.py (log-only cases) in a temporary
directory, then times the whole command (start-up included) into a fresh
store for each engine, alternating engines run by run, and reports the median.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import compile_postmortem, measure
from make_archive import make_archive

ENGINES = {"1 process": ["-j", "1"], "2 processes": ["-j", "2"],
           "dask LocalCluster (2 workers)": ["--engine", "dask", "-j", "2"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--cases", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    compile_postmortem()
    postmortem = str(Path(sys.executable).with_name("postmortem"))
    engines = dict(ENGINES)
    try:
        import distributed  # noqa: F401
    except ImportError:
        print("dask.distributed not installed: the dask engine is not measured")
        engines.popitem()
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "archive"
        make_archive(archive, args.cases)
        walls: dict[str, list[float]] = {name: [] for name in engines}
        size = 0
        for run in range(args.runs):
            for name, extra in engines.items():
                db = Path(tmp) / f"store-{run}.sqlite"
                for leftover in Path(tmp).glob("store-*"):
                    leftover.unlink()
                wall, _rss, status = measure([postmortem, "scan", str(archive), "--db", str(db), *extra],
                                             Path(tmp) / "out.txt")
                if status != 0:
                    print((Path(tmp) / "out.txt").read_text())
                    raise SystemExit(f"{name}: exit status {status}")
                walls[name].append(wall)
                size = db.stat().st_size
        print(f"{args.cases} log-only cases, median of {args.runs} runs (whole command, start-up included):")
        base = None
        for name, times in walls.items():
            rate = args.cases / statistics.median(times)
            base = base or rate
            print(f"  {name:32} {rate:8.0f} cases/s   ({rate / base:.2f}x of 1 process)")
        print(f"  store: {size / 1024 / 1024:.1f} MiB ({size / args.cases / 1024:.1f} KiB per case); "
              f"archive {sum(f.stat().st_size for f in archive.rglob('*') if f.is_file()) / 1024 / 1024:.1f} MiB")
        shutil.rmtree(archive)


if __name__ == "__main__":
    main()
