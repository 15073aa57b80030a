"""The mapping's translation on expositions whose every value the test chooses (rendered with
prometheus_client: tests/engine_expositions.py): values the engine has reach their signals,
values it lacks stay absent (never 0), inconsistent values drop that signal alone."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.engines import MAPPINGS
from exporter.engines.exposition import parse
from exporter.engines.signals import BY_NAME
from exporter.engines.translate import Translated, field_path, translate
from tests import engine_expositions

SGLANG, VLLM = MAPPINGS["sglang"], MAPPINGS["vllm"]


def run(kind: str, text: str) -> Translated:
    mapping = MAPPINGS[kind]
    return translate(mapping, parse(text, mapping.wanted()))


def value(tr: Translated, signal: str) -> Any:
    node: Any = tr.fields
    path = BY_NAME[signal].path
    assert path is not None
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


counts = st.one_of(st.none(), st.integers(0, 10**12).map(float))


@settings(max_examples=150, deadline=None)
@given(mamba_total=counts, mamba_used=counts, host_total=counts, host_used=counts,
       page_size=st.one_of(st.none(), st.integers(-2, 512).map(float)), requests=counts,
       prompt=counts, cached_device=counts, cached_host=counts, backup=counts, load=counts,
       dropped=counts, form=st.sampled_from(["colon", "underscore"]))
def test_sglang_every_value_reaches_its_signal_or_is_absent(
        mamba_total: float | None, mamba_used: float | None, host_total: float | None,
        host_used: float | None, page_size: float | None, requests: float | None,
        prompt: float | None, cached_device: float | None, cached_host: float | None,
        backup: float | None, load: float | None, dropped: float | None, form: str) -> None:
    text = engine_expositions.sglang(
        mamba_total=mamba_total, mamba_used=mamba_used, host_total=host_total,
        host_used=host_used, page_size=page_size, requests=requests, prompt=prompt,
        cached_device=cached_device, cached_host=cached_host, backup_tokens=backup,
        load_back_tokens=load, dropped_host_pressure=dropped, form=form)
    tr = run("sglang", text)
    dropped_paths = set(tr.dropped)
    # The row slab: capacity as exported; free only from a consistent pair.
    assert value(tr, "slab_capacity.row") == mamba_total
    if mamba_total is None or mamba_used is None:
        assert value(tr, "slab_free.row") is None
    elif mamba_used > mamba_total:
        assert value(tr, "slab_free.row") is None
        assert field_path(BY_NAME["slab_free.row"]) in dropped_paths
    else:
        assert value(tr, "slab_free.row") == mamba_total - mamba_used
    # The page slab: in whole pages, only with a usable page size.
    if page_size is not None and page_size < 1:
        assert value(tr, "page_tokens") is None and value(tr, "slab_capacity.page") is None
        assert field_path(BY_NAME["page_tokens"]) in dropped_paths
    elif page_size is None or host_total is None:
        assert value(tr, "slab_capacity.page") is None
    else:
        assert value(tr, "slab_capacity.page") == host_total // page_size
        assert value(tr, "page_tokens") == page_size
    # Host-tier traffic: 0 only where the host tier exists, absent elsewhere.
    host_tier = host_total is not None
    expect_backup = backup if backup is not None else (0.0 if host_tier else None)
    assert value(tr, "host_stores") == expect_backup
    assert value(tr, "store_outcomes.stored") == expect_backup
    assert value(tr, "host_tokens_restored") == (load if load is not None
                                                 else 0.0 if host_tier else None)
    if cached_host is not None:
        assert value(tr, "prompt_tokens.host_restored") == cached_host
    elif prompt is None or not host_tier:
        assert value(tr, "prompt_tokens.host_restored") is None
    else:
        assert value(tr, "prompt_tokens.host_restored") == 0.0
    assert value(tr, "lookups") == requests
    # No value is negative or invented for a signal the mapping says is absent.
    for row in SGLANG.rows:
        if row.how == "absent":
            assert tr.coverage[row.signal] == "absent"
            path = BY_NAME[row.signal].path
            assert path is None or value(tr, row.signal) is None
    assert all(tr.coverage[s] in ("native", "derived", "absent") for s in BY_NAME)


def test_both_name_forms_read_the_same() -> None:
    colon = run("sglang", engine_expositions.sglang(form="colon", cached_host=50))
    underscore = run("sglang", engine_expositions.sglang(form="underscore", cached_host=50))
    assert colon.fields == underscore.fields and colon.fields
    assert colon.coverage == underscore.coverage
    v = run("vllm", engine_expositions.vllm(form="colon"))
    assert v.fields == run("vllm", engine_expositions.vllm(form="underscore")).fields


def test_inconsistent_values_drop_that_signal_and_keep_the_others() -> None:
    tr = run("sglang", engine_expositions.sglang(mamba_total=10, mamba_used=11, page_size=0,
                                                 backup_tokens=5))
    assert set(tr.dropped) == {"offload.slabs.row.free", "offload.slabs.page.capacity",
                               "offload.slabs.page.free", "offload.geometry.page_tokens"}
    assert "above" in tr.dropped["offload.slabs.row.free"]
    assert value(tr, "slab_capacity.row") == 10.0  # the others stand
    assert value(tr, "host_stores") == 5.0


def test_a_negative_value_is_dropped() -> None:
    tr = run("sglang", engine_expositions.sglang(mamba_total=-1, mamba_used=None))
    assert "offload.slabs.row.capacity" in tr.dropped
    assert value(tr, "slab_capacity.row") is None


def test_vllm_deprecated_byte_counters_map_onto_the_same_meanings() -> None:
    new = run("vllm", engine_expositions.vllm(store_bytes=700, load_bytes=300))
    old = run("vllm", engine_expositions.vllm(store_bytes=700, load_bytes=300, total_bytes=True))
    for tr in (new, old):
        assert value(tr, "stored_bytes") == 700 and value(tr, "restore_transfer_bytes") == 300


def test_vllm_occupancy_is_never_read_from_the_pinned_share() -> None:
    text = engine_expositions.vllm() + "vllm:kv_offload_cpu_cache_usage_perc 0.5\n"
    tr = run("vllm", text)
    assert "slabs" not in tr.fields and "resident" not in tr.fields
    for signal in ("slab_capacity.page", "slab_free.page", "resident_records"):
        assert tr.coverage[signal] == "absent"
    assert value(tr, "host_stores") == 4.0 and value(tr, "prompt_tokens.host_restored") == 200


def test_an_info_label_that_is_not_a_number_is_dropped() -> None:
    text = engine_expositions.vllm() + 'vllm:cache_config_info{block_size="sixty"} 1.0\n'
    tr = run("vllm", text)
    assert "offload.geometry.page_tokens" in tr.dropped
    assert value(tr, "host_stores") == 4.0


def test_a_family_the_engine_lacks_is_absent_not_zero() -> None:
    tr = run("sglang", engine_expositions.sglang(host_total=None, host_used=None,
                                                 backup_tokens=None, dropped_host_pressure=None,
                                                 backup_bytes=None, cached_host=None))
    for signal in ("host_stores", "host_tokens_restored", "stored_bytes",
                   "prompt_tokens.host_restored", "slab_capacity.page"):
        assert value(tr, signal) is None, signal
        assert tr.coverage[signal] == "absent", signal


@settings(max_examples=100, deadline=None)
@given(store=counts, load=counts, total_bytes=st.booleans(), compute=counts, device=counts,
       host=counts, stores=st.one_of(st.none(), st.integers(0, 20)), requests=counts,
       form=st.sampled_from(["colon", "underscore"]))
def test_vllm_every_value_reaches_its_signal_or_is_absent(
        store: float | None, load: float | None, total_bytes: bool, compute: float | None,
        device: float | None, host: float | None, stores: int | None, requests: float | None,
        form: str) -> None:
    tr = run("vllm", engine_expositions.vllm(
        store_bytes=store, load_bytes=load, total_bytes=total_bytes, local_compute=compute,
        device=device, host=host, stores=stores, requests=requests, form=form))
    assert tr.dropped == {}
    assert value(tr, "stored_bytes") == store
    assert value(tr, "restore_transfer_bytes") == load
    assert value(tr, "prompt_tokens.host_restored") == host
    assert value(tr, "host_tokens_restored") == host
    assert value(tr, "prompt_tokens.gpu_prefix") == device
    assert value(tr, "host_stores") == (None if stores is None else float(stores))
    assert value(tr, "prompt_tokens_reused") == (None if device is None
                                                 else device + (host or 0.0))
    assert "slabs" not in tr.fields  # the OffloadingConnector states no occupancy


NAMES = sorted(SGLANG.wanted() | VLLM.wanted())
numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10**15))
labels = st.dictionaries(st.sampled_from(["pool", "reason", "cache_source", "source", "le",
                                          "tp_rank", "transfer_type", "outcome"]),
                         st.sampled_from(["kv", "mamba", "host", "device", "host_pressure",
                                          "+Inf", "1.0", "0", "GPU_to_CPU", "stored", "x"]),
                         max_size=3)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(NAMES), labels, numbers), max_size=40),
       st.lists(st.text(max_size=40), max_size=5))
def test_any_exposition_translates_to_finite_counts_or_drops(
        samples: list[tuple[str, dict[str, str], float]], junk: list[str]) -> None:
    """Whatever values the engine's families hold (negative, NaN, infinite, contradicting) and
    whatever junk lines come with them, the translation never raises, and every value it keeps
    is a finite count; what it refuses is named."""
    lines = [f"{name}{{{','.join(f'{k}={chr(34)}{v}{chr(34)}' for k, v in lab.items())}}} {v}"
             for name, lab, v in samples] + [j.replace("\n", " ") for j in junk]
    text = "\n".join(lines) + "\n"
    for kind in ("sglang", "vllm"):
        tr = run(kind, text)

        def walk(node: Any) -> None:
            if isinstance(node, dict):
                for child in node.values():
                    walk(child)
            else:
                assert isinstance(node, float | int) and 0 <= node < float("inf"), node

        walk(tr.fields)
        assert all(path.startswith("offload.") for path in tr.dropped)
