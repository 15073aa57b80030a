"""`helios-exporter demo`: the simulated engine, the sidecar and, when installed, Prometheus with
the shipped rules and Alertmanager, all on 127.0.0.1 as child processes, narrated line by line:
the offload tier (row pressure while pages sit free, hits by the order prompts come back in), the
restore window, and every alert as it fires and resolves. Ctrl-C stops them all.
"""

from __future__ import annotations

from lab.demo.command import DESCRIPTION, OPTIONS, run

__all__ = ["DESCRIPTION", "OPTIONS", "run"]
