"""Probe verdicts on an SGLang or vLLM engine (lab/probe/engine_verdicts.py) over every combination of
the inputs the verdict reads: the replay's hits, host tokens restored and miss reasons (each
present or absent), the generation's evidence and the passes' orders. The base verdict is the
one lab/evidence/doc.py computes from the same deltas (exporter.phases.deltas.verdict)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from exporter.labels import IDENTITY_EVIDENCE, MISS_REASONS
from lab.evidence.arithmetic import INVALID, VERDICTS, verdict
from lab.probe import engine_verdicts as ev

counts = st.none() | st.integers(min_value=0, max_value=10_000)
misses: st.SearchStrategy[dict[str, int]] = st.just({}) | st.dictionaries(st.sampled_from(MISS_REASONS),
                                       st.integers(min_value=0, max_value=100), min_size=1)
orders = st.tuples(st.none() | st.sampled_from(("forward", "reverse")),
                   st.none() | st.sampled_from(("forward", "reverse")))
engines = st.builds(lambda kind, evidence: {"kind": kind, "mapping": f"{kind}-x",
                                            "generation_from": evidence},
                    st.sampled_from(ev.KINDS), st.none() | st.sampled_from(IDENTITY_EVIDENCE))


def pair_of(deltas: dict[str, Any], prime_order: str | None, replay_order: str | None
            ) -> tuple[dict[str, Any], dict[str, Any]]:
    found = verdict(deltas, prime_order, replay_order)
    pair = {"prime": "p", "replay": "r", "verdict": found,
            "orders": [prime_order, replay_order], "reading": "as Helios reads it"}
    return pair, {"p": {"name": "p", "deltas": {}}, "r": {"name": "r", "deltas": deltas}}


@given(hits=counts, restored=counts, miss=misses, order=orders, engine=engines)
def test_a_verdict_is_given_only_on_inputs_the_engine_exports(
        hits: int | None, restored: int | None, miss: dict[str, int],
        order: tuple[str | None, str | None], engine: dict[str, Any]) -> None:
    deltas = {"hits": hits, "host_tokens_restored": restored, "misses": miss}
    pair, phases = pair_of(deltas, *order)
    out = ev.judge(pair, phases, engine)
    restart = engine["generation_from"] in ev.RESTART_IDENTITY
    reused = bool(hits) if hits is not None else bool(restored)
    known_reuse = hits is not None or restored is not None
    if not restart or not known_reuse or (not reused and not miss):
        assert out["verdict"] == ev.NOT_EVALUATED
        assert out["missing"] and all(m in out["reading"] for m in out["missing"])
        assert (ev.GENERATION in out["missing"]) == (not restart)
        assert (ev.MISS_REASONS in out["missing"]) == (not reused and not miss)
        return
    assert out["verdict"] in VERDICTS and "missing" not in out
    if reused:
        different = bool(order[0] and order[1] and order[0] != order[1])
        assert out["verdict"] == ("order_sensitive" if different else "reuse")
    else:  # nothing reused, miss reasons known: Helios's reading of them stands
        assert out["verdict"] == pair["verdict"] in ("no_reuse", "incompatible_keys")
    if hits is None:
        assert out["reuse_from"] == ev.HOST_RESTORED and f"{restored:g}" in out["reading"]


@given(hits=counts, restored=counts, miss=misses, order=orders)
def test_helios_and_invalid_pairs_are_left_as_they_are(
        hits: int | None, restored: int | None, miss: dict[str, int],
        order: tuple[str | None, str | None]) -> None:
    pair, phases = pair_of({"hits": hits, "host_tokens_restored": restored, "misses": miss},
                           *order)
    assert ev.judge(pair, phases, None) == pair
    invalid = {**pair, "verdict": INVALID, "reading": "cannot be judged: x", "why": "x"}
    assert ev.judge(invalid, phases, {"kind": "sglang", "generation_from": None}) == invalid


@given(status=st.fixed_dictionaries({}, optional={"engine_kind": st.fixed_dictionaries(
    {}, optional={"kind": st.none() | st.sampled_from(("helios", "sglang", "vllm", "tgi")),
                  "mapping": st.sampled_from(("sglang-0.5.23", "")),
                  "generation_from": st.none() | st.sampled_from(IDENTITY_EVIDENCE)})}))
def test_only_an_sglang_or_vllm_sidecar_changes_the_verdicts(status: dict[str, Any]) -> None:
    engine = ev.engine_of(status)
    kind = (status.get("engine_kind") or {}).get("kind")
    assert (engine is None) == (kind not in ev.KINDS)
    doc: dict[str, Any] = {"phases": [], "probes": []}
    assert ("engine" in ev.apply(doc, engine)) == (engine is not None)


def capture(identity: dict[str, str], counters: dict[str, int]) -> dict[str, Any]:
    return {"identity": identity, "counters": counters}


@given(identity=st.dictionaries(st.sampled_from(("engine", *ev.IDENTITY_KEYS)),
                                st.sampled_from(("a", "sha256:ab")), max_size=3),
       evictions=st.booleans(), engine=engines)
def test_what_the_probe_could_not_check_names_its_input(
        identity: dict[str, str], evictions: bool, engine: dict[str, Any]) -> None:
    counters = {"lookups.total": 3, **({"evictions.row.attempts": 1} if evictions else {})}
    phases = {"p": {"begin": capture(identity, counters), "end": capture(identity, counters)}}
    missing = {c["check"]: c["missing"] for c in ev.checks(phases, engine)}
    has_identity = any(k in identity for k in ev.IDENTITY_KEYS)
    assert ("identity held through the probe" in missing) == (not has_identity)
    assert ("row pressure with page headroom" in missing) == (not evictions)
    assert ("one fresh incarnation per prime" in missing) == (
        engine["generation_from"] not in ev.RESTART_IDENTITY)
    assert ev.checks(phases, None) == []
