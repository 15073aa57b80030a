"""`helios-exporter phase begin|end NAME` (docs/interface.md section 7): begin or end an
experiment phase on a sidecar. Exit codes: 0 done; 1 the sidecar refused; 2 bad input.
"""

from __future__ import annotations

import argparse
import json

from exporter.options import Option
from lab.client.sidecar import SidecarError, connect
from lab.evidence.command import err, sidecar_options

OPTIONS = (
    Option("action", "str", help="begin or end the phase", choices=("begin", "end")),
    Option("name", "text", help="1-64 of A-Z a-z 0-9 . _ / -, e.g. probe-52/1"),
    *sidecar_options(token=True),
    Option("--note", "text", None, "free text stored with the capture (at most 256 chars)"),
)


def run(args: argparse.Namespace) -> int:
    try:
        client = connect(args, args.token_file)
    except SidecarError as exc:
        err("phase", str(exc))
        return 2
    try:
        answer = client.phase(args.action, args.name, args.note)
    except SidecarError as exc:
        err("phase", str(exc))
        return 1
    finally:
        client.close()
    print(json.dumps(answer, indent=1, sort_keys=True))
    return 0
