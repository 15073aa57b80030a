"""The metric catalogue (exporter/catalogue/) is what the sidecar exports, no more and no less.

The full golden exposition (tests/golden/full_exposition.prom, every collector as `serve` builds
it) and a second sidecar built the same way with what the golden's inputs leave out (a pin, TLS
with --web-config-file, an open experiment phase, a last window that lost requests, a schema 3
snapshot) and a third of --engine-kind sglang together
export every family: each one must have its row, with its type, HELP and labels, and each row
must be exported by one of them. A family built without a row cannot be built at all.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
from pathlib import Path

import httpx
import pytest

from exporter import catalogue
from exporter.catalogue.model import BASE_UNITS
from exporter.collectors.families import counter, gauge
from exporter.config import Config
from exporter.cycle import derive
from exporter.labels import COLLECTOR_SERIES, COLLECTORS
from exporter.restore.store import STATE_FILE
from exporter.sidecar import build
from exporter.snapshot.parse import snapshot_from_obj
from exporter.sources.engine_metrics import DEFAULT_ALLOW, EXPORT_PREFIX
from tests import engine_expositions
from tests.conftest import FIXTURES
from tests.helpers import StubEngine, contract_example
from tools.harness import families
from tools.pki import CA, write_web_config

GOLDEN = Path(__file__).parents[2] / "golden" / "full_exposition.prom"
# name as scraped (a counter's with _total) -> (type, HELP, label names of its samples)
Exported = dict[str, tuple[str, str, frozenset[str]]]


def exported(text: str | bytes) -> Exported:
    out: Exported = {}
    for f in families(text).values():
        name = f.name + "_total" if f.type == "counter" else f.name
        labels = frozenset(k for s in f.samples for k in s.labels if k != "le")
        out[name] = (f.type, f.documentation, labels)
    return out


def rest_exposition(tmp_path: Path) -> bytes:
    """What the full golden's inputs leave out, through `sidecar.build`: a pin, a web config with
    TLS, an open experiment phase, a last window that lost requests and a schema 3 snapshot."""
    state = json.loads((FIXTURES / "full_exposition" / "restore-state.json").read_text())
    state["state"]["last_window"]["lost"] = 2
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / STATE_FILE).write_text(json.dumps(state))
    server = CA(tmp_path / "pki").issue("sidecar", server=True)
    web = write_web_config(tmp_path / "web.yml", server=server)
    config = Config(engine_url="http://engine.invalid", state_dir=tmp_path / "state", no_nvml=True,
                    expect_ranks=2, web_config_file=web)
    sidecar = build(config, transport=httpx.MockTransport(StubEngine(contract_example(3))))

    async def run() -> None:
        sidecar.loop.load_state()
        await sidecar.loop.cycle()
        await sidecar.phases.begin("catalogue", None)
        await sidecar.client.aclose()

    try:
        asyncio.run(run())
        return sidecar.cache.render(False)
    finally:
        sidecar.close()


def mapped_exposition(tmp_path: Path) -> bytes:
    """A sidecar of --engine-kind sglang: an SGLang-shaped engine, then a vLLM one (the kind,
    the coverage of the last good answer, the mismatch)."""
    texts = [engine_expositions.sglang(), engine_expositions.vllm()]

    def engine(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=texts[0] if request.url.path == "/metrics" else "")

    config = Config(engine_url="http://engine.invalid", state_dir=tmp_path, no_nvml=True,
                    engine_kind="sglang")
    sidecar = build(config, transport=httpx.MockTransport(engine))

    async def run() -> None:
        await sidecar.loop.cycle()
        texts.pop(0)
        await sidecar.loop.cycle()
        await sidecar.client.aclose()

    try:
        asyncio.run(run())
        return sidecar.cache.render(False)
    finally:
        sidecar.close()


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[Exported, Exported]:
    rest = rest_exposition(tmp_path_factory.mktemp("rest"))
    mapped = mapped_exposition(tmp_path_factory.mktemp("mapped"))
    for text in (GOLDEN.read_bytes(), rest, mapped):
        # A collector that builds a family without its row raises, and is left out: none may.
        success = families(text)["helios_exporter_collector_success"]
        failed = [s.labels["collector"] for s in success.samples if s.value != 1.0]
        assert failed == [], f"collectors that raised: {failed}"
    return exported(GOLDEN.read_text()), {**exported(rest), **exported(mapped)}


def _check(name: str, got: tuple[str, str, frozenset[str]]) -> None:
    row = catalogue.match(name)
    assert row is not None, f"{name} is exported but has no row in exporter/catalogue/"
    if row.open:
        return
    kind, doc, labels = got
    assert kind == row.type, name
    if row.help is not None:
        assert doc == row.help, name
    assert labels <= set(row.labels), f"{name}: labels {sorted(labels - set(row.labels))}"


def test_every_exported_family_has_its_row(both: tuple[Exported, Exported]) -> None:
    for fams in both:
        for name, got in fams.items():
            _check(name, got)


def test_every_row_is_exported(both: tuple[Exported, Exported]) -> None:
    names = set(both[0]) | set(both[1])
    for row in catalogue.FAMILIES:
        if row.open:
            assert any(n.startswith(row.prefix) for n in names), row.name
        else:
            assert row.name in names, f"{row.name} is in the catalogue but nothing exports it"


def test_the_golden_samples_carry_every_label_of_their_row(both: tuple[Exported, Exported]) -> None:
    golden, rest = both
    for name, (_, _, labels) in {**rest, **golden}.items():
        row = catalogue.match(name)
        assert row is not None
        if not row.open and labels:
            assert labels == set(row.labels), name


def test_pass_through_families_are_the_allow_listed_ones(both: tuple[Exported, Exported]) -> None:
    natives = {n: t for n, (t, _, _) in both[0].items() if n.startswith(EXPORT_PREFIX)}
    assert natives
    for name, kind in natives.items():
        engine_name = name.removeprefix(EXPORT_PREFIX).removesuffix("_total")
        assert DEFAULT_ALLOW.get(engine_name) == kind, name


def test_a_family_without_its_row_cannot_be_built() -> None:
    with pytest.raises(KeyError, match="not in the metric catalogue"):
        gauge("helios_offload_slab_fre")
    with pytest.raises(TypeError, match="not a gauge"):
        gauge("helios_exporter_poll_cycles_total")
    with pytest.raises(TypeError, match="not a counter"):
        counter("python_info")  # client_python's own


def test_each_row_once_and_in_a_collector_of_the_registry() -> None:
    names = [f.name for f in catalogue.FAMILIES]
    assert len(names) == len(set(names))
    assert {f.collector for f in catalogue.FAMILIES} == {*COLLECTORS, "registry"}
    for f in catalogue.FAMILIES:
        assert f.open == (f.type is None), f.name
        assert f.help is not None or f.collector in ("passthrough", "process", "platform"), f.name


def test_names_say_their_type_and_base_unit() -> None:
    for f in catalogue.FAMILIES:
        if f.open:
            continue
        assert f.name.endswith("_total") == (f.type == "counter"), f.name
        stem = f.name.removesuffix("_total")
        base = [u for u in BASE_UNITS if stem.endswith("_" + u)]
        unit = f.unit.split()[-1] if f.unit else ""
        assert unit in BASE_UNITS if base else unit not in BASE_UNITS, f.name
        if base:
            assert unit == base[0], f"{f.name}: unit {f.unit!r}"


def test_snapshot_rows_name_their_field() -> None:
    """A row read from the snapshot says which field, each `<label>` of the field is one of its
    labels after `generation`, and the path reader has a closed set for it (a bounded label)."""
    rows = [f for f in catalogue.FAMILIES if f.field is not None]
    assert rows
    for f in rows:
        assert f.field is not None
        assert (f.histogram_reader() if f.type == "histogram" else f.reader()) is not None
        assert f.field.startswith("offload."), f.name
        assert f.labels[0] == "generation", f.name
        placeholders = re.findall(r"<(\w+)>", f.field)
        assert placeholders == list(f.labels[1:]), f.name
        assert f.read is not None or set(placeholders) <= set(f.values), f.name
    assert all(f.field is not None for f in catalogue.FAMILIES if f.read is not None)


def test_the_path_reader_keeps_label_values_to_their_closed_set() -> None:
    obj = contract_example()
    obj["offload"]["slabs"]["gpu-7"] = {"capacity": 9, "free": 1, "record_bytes": 4}
    obj["offload"]["retired_leaves"] = {}
    snap = snapshot_from_obj(obj)
    assert snap.offload is not None
    free = catalogue.get("helios_offload_slab_free").reader()
    assert free is not None and set(free(snap.offload) or {}) == {("row",), ("page",)}
    retired = catalogue.get("helios_offload_retired_leaves_total").reader()
    assert retired is not None and retired(snap.offload) is None  # empty: no family


def _bump(obj: dict[str, object], key: str) -> bool:
    """Add 1 to the snapshot field `offload.<key>`; False when the snapshot has no such field."""
    node: object = obj["offload"]
    parts = key.split(".")
    for part in parts[:-1]:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    if not isinstance(node, dict) or not isinstance(node.get(parts[-1]), int):
        return False
    node[parts[-1]] += 1
    return True


def test_every_snapshot_counter_is_watched_for_regressions() -> None:
    """derive.counter_decreases sees a decrease of every counter the catalogue reads from the
    snapshot: forgetting one is not possible, as the rows are what it iterates."""
    snap = snapshot_from_obj(contract_example(3))
    assert snap.offload is not None
    keys = derive.offload_counters(snap.offload)
    for row in catalogue.snapshot_counters():
        read = row.reader()
        assert read is not None
        mine = {row.counter_key(values) for values in read(snap.offload) or {}}
        assert mine and mine <= set(keys), row.name
        tested = 0
        for key in sorted(mine):
            before = copy.deepcopy(contract_example(3))
            if _bump(before, key):  # not a miss reason the example only reaches by the mapping
                assert derive.counter_decreases(snapshot_from_obj(before), snap) == [key]
                tested += 1
        assert tested, f"{row.name}: no decrease of it was tried"


def test_what_a_failing_collector_leaves_out_is_its_own() -> None:
    """Each family or prefix that exporter.labels.COLLECTOR_SERIES says a failing collector leaves
    out (HeliosExporterCollectorFailing and the status page say it) is one of that collector's."""
    for collector, text in COLLECTOR_SERIES.items():
        mine = [f for f in catalogue.FAMILIES if f.collector == collector]
        for said in re.findall(r"\b(?:helios|process|python)_[a-z_]*\*?", text):
            prefix = said.rstrip("*")
            hits = [f for f in mine if (f.name.startswith(prefix) or f.prefix.startswith(prefix))
                    if said.endswith("*") or f.name == said]
            assert hits, f"{collector}: {said} is none of its families"


def test_what_a_failing_collector_leaves_out_names_all_its_families() -> None:
    """... and names every one of them, by its name or a prefix with `*`: the on-call person
    reads there what went missing."""
    for collector, text in COLLECTOR_SERIES.items():
        said = re.findall(r"\b(?:helios|process|python)_[a-z_]*\*?", text)
        for f in (f for f in catalogue.FAMILIES if f.collector == collector):
            assert any(f.prefix.startswith(s.rstrip("*")) if s.endswith("*") else f.name == s
                       for s in said), f"{collector}: {f.name} is not named in COLLECTOR_SERIES"
