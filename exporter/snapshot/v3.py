"""Schema 3's additions (exporter.snapshot.schemas.V3_SECTIONS): one that breaks the schema, or a
histogram whose buckets could not be a Prometheus histogram, is left out of the snapshot and
named, rather than failing the whole snapshot (validate.py hands them here with the schema's
errors); to schema 1 they are unknown fields, left out too."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any

from exporter.bucket_bounds import bucket_bound
from exporter.snapshot.schemas import HISTOGRAM_KEYS, V3_SECTIONS

V3_PATHS: tuple[tuple[str, ...], ...] = tuple(tuple(s.split(".")) for s in V3_SECTIONS)
# Histogram additions: their count, sum and buckets keys (docs/snapshot.md, "Schema v3").
_HISTOGRAM_KEYS: dict[tuple[str, ...], tuple[str, str, str]] = {
    tuple(path.split(".")): keys for path, keys in HISTOGRAM_KEYS.items()}


def _get(obj: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(obj, dict) or part not in obj:
            return None
        obj = obj[part]
    return obj


def without(obj: Any, paths: tuple[tuple[str, ...], ...]) -> Any:
    """`obj` without the fields at `paths`, copying only the objects on the way to them."""
    for path in paths:
        obj = _remove(obj, path)
    return obj


def _remove(node: Any, path: tuple[str, ...]) -> Any:
    """`node` without the field at `path`; `node` itself (no copy) when it has no such field."""
    if not isinstance(node, dict) or path[0] not in node:
        return node
    if len(path) == 1:
        return {k: v for k, v in node.items() if k != path[0]}
    child = _remove(node[path[0]], path[1:])
    return node if child is node[path[0]] else {**node, path[0]: child}


def _addition(path: tuple[Any, ...]) -> tuple[str, ...] | None:
    """The v3 addition a schema error's path lies in; None when it lies outside every one."""
    return next((p for p in V3_PATHS if tuple(path[:len(p)]) == p), None)


def drop_broken_additions(obj: Any, errors: Iterable[tuple[Any, ...]],
                          ) -> tuple[Any, tuple[str, ...], bool]:
    """`obj` without the v3 additions that break the schema (`errors`: the paths of schema 3's
    errors in `obj`) or a histogram rule, their names, and whether the schema held as it was
    (then it need not be checked again).

    An error outside every addition is left for the caller's validation to report."""
    if not isinstance(obj, dict):
        return obj, (), False
    broken: set[tuple[str, ...]] = set()
    outside = False  # the snapshot itself is broken
    for path in errors:
        where = _addition(path)
        if where is None:
            outside = True
        else:
            broken.add(where)
    if outside:
        return without(obj, tuple(broken)), (), False
    valid = not broken
    for path, keys in _HISTOGRAM_KEYS.items():
        if path not in broken and (node := _get(obj, path)) is not None \
                and histogram_problem(node, *keys):
            broken.add(path)
    ordered = tuple(p for p in V3_PATHS if p in broken)
    return without(obj, ordered), tuple(".".join(p) for p in ordered), valid


def histogram_problem(node: Mapping[str, Any], count_key: str, sum_key: str,
                      buckets_key: str) -> str | None:
    """Why a schema-valid histogram cannot be a Prometheus one; None when it can: a bound that is
    not finite other than `+Inf` (the /metrics parser's check), bucket counts that fall as the
    bound grows, `+Inf` other than the count, a sum without observations."""
    bounds = {le: bucket_bound(le) for le in node[buckets_key]}
    if (bad := next((le for le, b in bounds.items() if b is None), None)) is not None:
        return f"bucket bound {bad[:32]!r} is not a finite number or +Inf"
    buckets = sorted((bounds[le], n) for le, n in node[buckets_key].items())
    counts = [n for _, n in buckets]
    if any(b < a for a, b in itertools.pairwise(counts)):
        return "bucket counts fall as the bound grows"
    if node[buckets_key]["+Inf"] != node[count_key]:
        return "+Inf is not the count"
    if node[count_key] == 0 and node[sum_key] != 0:
        return "a sum without observations"
    return None
