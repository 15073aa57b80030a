"""`serve --engine-kind auto` as a process against an engine serving the exposition SGLang
0.5.23's own code renders (tests/fixtures/engines/): it decides SGLang, says so in its log, and
serves the host tier through the catalogue, the kind and its coverage."""

from __future__ import annotations

import json
import time

import httpx

from tests.conftest import FIXTURES
from tools.harness import Procs, StubEngine, families

SGLANG = FIXTURES / "engines" / "sglang-0.5.23" / "03-reuse-from-host.prom"


class Exposition(StubEngine):
    """An engine with /metrics and /health and no snapshot (404), as SGLang serves."""

    def answer(self, path: str) -> httpx.Response | None:
        if path == "/debug/offload/snapshot" and not self.down:
            self.requests.append(path)
            return httpx.Response(404)
        return super().answer(path)


def test_auto_reads_an_sglang_engine(procs: Procs) -> None:
    with Exposition(metrics=SGLANG.read_text()) as engine:
        proc, url = procs.sidecar(f"http://{engine.target}", "--engine-kind", "auto",
                                  "--poll-interval", "0.5")
        deadline = time.monotonic() + 20
        while True:
            fams = families(httpx.get(url + "/metrics", timeout=5).content)
            if "helios_engine_signal_coverage" in fams or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        info = [s.labels for s in fams["helios_engine_kind_info"].samples]
        assert info == [{"kind": "sglang", "decided": "auto", "mapping": "sglang-0.5.23"}]
        rows = {s.labels["kind"]: s.value for s in fams["helios_offload_slab_capacity"].samples}
        assert rows == {"row": 512.0, "page": 1048576 // 64}
        absent = {s.labels["signal"] for s in fams["helios_engine_signal_coverage"].samples
                  if s.labels["source"] == "absent"}
        assert "eviction_attempts" in absent and "slab_free.row" not in absent
        assert "helios_offload_eviction_attempts" not in fams
        status = httpx.get(url + "/status", timeout=5).json()
        assert status["engine_kind"]["kind"] == "sglang"
        assert status["engine_kind"]["generation_from"] == "counter_reset"
    events = [json.loads(line) for line in proc.log.read_text().splitlines()
              if line.startswith("{")]
    decided = [e for e in events if e.get("event") == "engine_kind_decided"]
    assert len(decided) == 1 and decided[0]["kind"] == "sglang"
