"""python -m tools.engine_fixtures render [ENGINE ...] [--out DIR] | shapes"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from tools.engine_fixtures import shapes, wheels
from tools.engine_fixtures.engines import ENGINES


def render(name: str, out: Path | None) -> float:
    """Render one engine's fixture in a fresh interpreter; the seconds it took."""
    engine = ENGINES[name]
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", engine.renderer, str(out or engine.folder)], check=True
    )
    return time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.engine_fixtures")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("render", help="download the pinned wheels and render")
    run.add_argument("engines", nargs="*", metavar="ENGINE",
                     help=f"one of {', '.join(ENGINES)} (default: all)")
    run.add_argument("--out", type=Path, help="write here instead of tests/fixtures/engines")
    commands.add_parser("shapes", help="write simulator/shapes/ from the committed fixtures")
    args = parser.parse_args(argv)
    if args.command == "shapes":
        for path in shapes.write():
            print(f"wrote {path.relative_to(wheels.ROOT)}")
        return 0
    unknown = sorted(set(args.engines) - set(ENGINES))
    if unknown:
        parser.error(f"unknown engine {', '.join(unknown)}; known: {', '.join(ENGINES)}")
    for name in args.engines or list(ENGINES):
        out = args.out / f"{name}-{ENGINES[name].wheel.version}" if args.out else None
        seconds = render(name, out)
        print(f"{name} {ENGINES[name].wheel.version}: rendered in {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
