"""``python -m simulator --listen 127.0.0.1:8000 --scenario steady``."""

from __future__ import annotations

import sys

from simulator.cli import main

if __name__ == "__main__":
    sys.exit(main())
