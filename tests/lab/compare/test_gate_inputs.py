"""The gates' declared inputs: no field a gate reads can be deleted, nulled or perturbed, in
either arm, and still leave `compare` saying ADMITTED (exit 0).

The walk is generated from the gates' own declarations (lab.inputs.GATE_INPUTS),
so a new gate's fields are walked without a new test; a second test holds every field the
evidence carries to be either declared or listed in inputs.IRRELEVANT with its reason. The arms
are admitted as built (the first test), so any exit 0 below is a mutation the gate missed.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab.compare.admission import ADMITTED, CANNOT_COMPARE, compare
from lab.compare.inputs import GATE_INPUTS, IRRELEVANT
from lab.evidence.schema import SchemaError, check_evidence
from tests.lab.evidence_builder import LONG_PROMPT, WIDER, Arm

Place = tuple[str | int, ...]


def arm(label: str, primary: list[float], **kwargs: Any) -> dict[str, Any]:
    """The allocator plan's three lanes, small (8, 4 and 4 bodies) to keep the walk quick."""
    a = Arm(label, v3=True, **kwargs)
    return (a.lane("probe-52", primary, n=8)
            .lane("small-12", [0.324, 0.322, 0.324], n=4, row_pressure=0)
            .lane("long-context", [0.35, 0.349, 0.354], n=4, row_pressure=0,
                  prompt=LONG_PROMPT)).doc()


ARMS = {"baseline": arm("base", [0.400, 0.398, 0.402]),
        "candidate": arm("cand", [0.330, 0.328, 0.332], slabs=WIDER)}


def verdict(base: dict[str, Any], cand: dict[str, Any]) -> int:
    """compare's exit code as the command line gives it (the schema first), with the semantic
    gate passed (its inputs are files, tested in test_compare.py)."""
    try:
        check_evidence(base)
        check_evidence(cand)
    except SchemaError:
        return CANNOT_COMPARE
    return compare(base, cand, "probe-52", ("small-12", "long-context"), change="allocator",
                   semantic=("holds", "the team's verdict")).exit_code


def places(doc: Any, path: tuple[str, ...], at: Place = ()) -> Iterator[Place]:
    """Every concrete place (keys and list indices) a declared path reaches in `doc`."""
    if not path:
        yield at
        return
    step, rest = path[0], path[1:]
    if step == "[]" and isinstance(doc, list):
        for i, item in enumerate(doc):
            yield from places(item, rest, (*at, i))
    elif step == "*" and isinstance(doc, dict):
        for key, item in doc.items():
            yield from places(item, rest, (*at, key))
    elif isinstance(doc, dict) and step in doc:
        yield from places(doc[step], rest, (*at, step))


def declared() -> list[tuple[str, ...]]:
    return list(dict.fromkeys(spec.path for _, specs in GATE_INPUTS.values() for spec in specs))


def walk() -> list[tuple[str, tuple[str, ...], int]]:
    """(arm, declared path, number of places) for every declared path the arms hold."""
    out = []
    for label, doc in ARMS.items():
        for path in declared():
            found = list(places(doc, path))
            if found:
                out.append((label, path, len(found)))
    return out


def perturbed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 1.25 + 0.5
    if isinstance(value, str):
        return value[:-1] + ("0" if value[-1:] != "0" else "1") if value else "x"
    if isinstance(value, list):
        return value[:-1] if value else [0]
    if isinstance(value, dict):
        return {**value, "perturbed": 1}
    return 1  # null becomes a number


def mutate(doc: dict[str, Any], place: Place, how: str) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    parent: Any = out
    for step in place[:-1]:
        parent = parent[step]
    key = place[-1]
    if how == "delete":
        del parent[key]
    elif how == "null":
        parent[key] = None
    else:
        parent[key] = perturbed(parent[key])
    return out


def exit_after(label: str, place: Place, how: str) -> int:
    docs = dict(ARMS)
    docs[label] = mutate(ARMS[label], place, how)
    return verdict(docs["baseline"], docs["candidate"])


def test_the_arms_as_built_are_admitted() -> None:
    assert verdict(ARMS["baseline"], ARMS["candidate"]) == ADMITTED


WALK = walk()


def test_the_walk_covers_every_declared_input_in_both_arms() -> None:
    """Every declared path the builder's evidence carries is walked, in both arms (a path the
    arms do not hold, like misses_raw keys or power limits, is named here)."""
    walked = {(label, path) for label, path, _ in WALK}
    absent = {path for path in declared()
              if not any((label, path) in walked for label in ARMS)}
    assert absent == {("phases", "[]", edge, "misses_raw", "*") for edge in ("begin", "end")} | {
        ("phases", "[]", edge, "power_limits_watts") for edge in ("begin", "end")} | {
        ("passes", "[]", "declared", dim) for dim in ("source_commit", "source_diff")}
    for path in declared():
        if path not in absent:
            assert {label for label, p in walked if p == path} == set(ARMS), path


@pytest.mark.parametrize("how", ["delete", "null", "perturb"])
@pytest.mark.parametrize(("label", "path", "count"), WALK,
                         ids=[f"{label}:{'.'.join(path)}" for label, path, _ in WALK])
def test_no_mutation_of_a_gate_input_is_admitted(label: str, path: tuple[str, ...], count: int,
                                                 how: str) -> None:
    """The first and the last place a path reaches (a prime and a measured pass, the primary
    lane and the long-context lane)."""
    found = list(places(ARMS[label], path))
    for place in {found[0], found[-1]}:
        assert exit_after(label, place, how) != ADMITTED, (label, place, how)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_no_mutation_anywhere_is_admitted(data: st.DataObject) -> None:
    """Any place of any declared path, in either arm, any mutation."""
    label, path, count = data.draw(st.sampled_from(WALK))
    place = list(places(ARMS[label], path))[data.draw(st.integers(0, count - 1))]
    how = data.draw(st.sampled_from(["delete", "null", "perturb"]))
    assert exit_after(label, place, how) != ADMITTED, (label, place, how)


def _pattern(text: str) -> tuple[str, ...]:
    return tuple(p for part in text.replace("[]", ".[]").split(".") for p in [part] if p)


def leaves(doc: Any, at: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every leaf of `doc` with list indices as `[]`."""
    if isinstance(doc, dict) and doc:
        for key, value in doc.items():
            yield from leaves(value, (*at, key))
    elif isinstance(doc, list) and doc and isinstance(doc[0], dict | list):
        for item in doc:
            yield from leaves(item, (*at, "[]"))
    else:
        yield at


def covers(pattern: tuple[str, ...], leaf: tuple[str, ...]) -> bool:
    """`pattern` reaches `leaf` or one of its parents (`*`: any key; a trailing `*` also covers
    an empty object)."""
    if pattern[-1:] == ("*",) and len(leaf) == len(pattern) - 1:
        pattern = pattern[:-1]
    return len(pattern) <= len(leaf) and all(p in ("*", s) for p, s in zip(pattern, leaf,
                                                                           strict=False))


def test_every_field_of_the_evidence_is_read_or_listed_irrelevant_with_a_reason() -> None:
    patterns = [*declared(), *(_pattern(text) for text in IRRELEVANT)]
    unread = {".".join(leaf) for doc in ARMS.values() for leaf in leaves(doc)
              if not any(covers(p, leaf) for p in patterns)}
    assert unread == set()
    assert all(reason.strip() for reason in IRRELEVANT.values())
