"""Engines other than Helios as sources of the one catalogue (`serve --engine-kind`).

An engine kind is a source (exporter/engines/source.py: its `/metrics` and its health path, no
snapshot); each pinned version of it is one mapping table (exporter/engines/sglang.py,
exporter/engines/vllm.py: a row per catalogue signal, native, derived or absent), translated into
the part of the snapshot model it can honestly fill (exporter/engines/translate.py), so that every
collector, dashboard and alert reads it as it reads Helios. docs/engines.md is generated from the
tables.
"""

from __future__ import annotations

from typing import Final

from exporter.engines import sglang, vllm
from exporter.engines.model import Mapping

MAPPINGS: Final[dict[str, Mapping]] = {m.kind: m for m in (sglang.MAPPING, vllm.MAPPING)}
