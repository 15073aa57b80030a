"""Invariants of the prefix index against its slabs, checked by tests after every operation."""

from __future__ import annotations

from collections.abc import Iterable

from simulator.slabs import SlabPool
from simulator.tree import Node


def audit_index(nodes: Iterable[Node], pool: SlabPool) -> list[str]:
    """Violations: a record owned twice or owned while free, free counts out of bounds, a
    malformed edge, bad pins, a leaf holding pages without a row. Empty when all is well."""
    problems: list[str] = []
    rows: dict[int, int] = {}
    pages: dict[int, int] = {}
    for node in nodes:
        if node.row is not None:
            if node.row in rows:
                problems.append(f"row {node.row} owned by {rows[node.row]} and {node.node_id}")
            rows[node.row] = node.node_id
        for page in node.pages:
            if page in pages:
                problems.append(f"page {page} owned by {pages[page]} and {node.node_id}")
            pages[page] = node.node_id
        parent = node.parent
        if parent is None or not node.blocks or len(node.blocks) != len(node.pages):
            problems.append(f"node {node.node_id} has a malformed edge")
        elif parent.children.get(node.blocks[0]) is not node:
            problems.append(f"node {node.node_id} is not its parent's child")
        elif node.depth != parent.depth + len(node.blocks):
            problems.append(f"node {node.node_id} has depth {node.depth}")
        if node.pins < 0 or (not node.durable and node.pins < 1):
            problems.append(f"node {node.node_id} has pins {node.pins}")
        if not node.children and node.row is None and node.pins == 0:
            problems.append(f"leaf {node.node_id} holds pages but no row")
    for slab, owned in ((pool.row, rows), (pool.page, pages)):
        if not 0 <= slab.free <= slab.capacity or slab.free + len(owned) != slab.capacity:
            problems.append(f"{slab.kind} slab: free {slab.free}, owned {len(owned)}")
        problems += [f"{slab.kind} {r} owned, free" for r in owned if not slab.is_allocated(r)]
    return problems
