"""SIGKILL the sidecar at random instants, 50 times, while a restore window is open.

The window start and the incumbent must survive every kill to the millisecond: checked on disk
after every kill (cheap: `StateStore.load`), and through a live sidecar's /status every tenth
iteration and at the end. Kills land anywhere: during interpreter start, during state load,
between polls, mid-poll and mid-write (the simulator's in-flight count changes between
iterations, so the first poll after each start writes a new state). The sidecar's start costs
1-2 s of this machine's time, so most kills do not wait for it; 5-10 do, and check /status first.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

from exporter.restore.store import STATE_FILE, StateStore
from tests.e2e.procs import Proc, Stack, free_port, http_ok, start_sidecar, wait_for
from tests.hostile.faults.faultlib import FAST, post, scrape, status
from tools.harness import sample

ITERATIONS = 50
VERIFY_EVERY = 10
SIDECAR = ("--poll-interval", "0.1", "--down-grace", "3600")


def test_sigkill_at_random_points_never_moves_the_window(stack: Stack, tmp_path: Path) -> None:
    rng = random.Random(50)
    _, sim_url = stack.simulator("steady", "--seed", "5", "--rate", "2")
    state_dir = tmp_path / "state"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "sidecar.log"

    def spawn() -> Proc:
        return start_sidecar(sim_url, log, *FAST, *SIDECAR, port=port, state_dir=state_dir,
                             ready=None)[0]

    def ready(proc: Proc) -> None:
        wait_for(lambda: http_ok(url + "/readyz"), 30, "sidecar ready", proc, interval=0.05)

    # The incumbent serves, then drains: a window opens.
    first = spawn()
    ready(first)
    incumbent_gen = wait_for(lambda: status(url)["generation"], 10, "generation", first)
    post(sim_url, "/admin/admission", {"state": "draining"})
    win: dict[str, Any] = wait_for(lambda: status(url)["restore"]["window"], 10, "window", first,
                                   interval=0.05)
    start, incumbent = win["start"], win["incumbent"]
    assert incumbent["generation"] == incumbent_gen
    first.kill()

    def check_disk(i: int) -> None:
        saved = StateStore(state_dir).load()  # raises on a torn or corrupt file
        assert saved is not None and saved.window is not None, f"iteration {i}: window lost"
        assert saved.window.start == start, f"iteration {i}: start moved"
        assert saved.window.incumbent is not None
        assert vars_of(saved.window.incumbent) == incumbent, f"iteration {i}: incumbent changed"

    def check_status(i: int) -> None:
        w = status(url)["restore"]["window"]
        assert w is not None, f"iteration {i}: no window after restart"
        assert round(w["start"], 3) == round(start, 3) and w["start"] == start
        assert w["incumbent"] == incumbent

    kinds: dict[str, int] = {"early": 0, "after_ready": 0}
    t0 = time.monotonic()
    for i in range(1, ITERATIONS + 1):
        # A new in-flight count: the next sidecar's first poll changes the window and writes it.
        post(sim_url, "/admin/inflight", {"count": rng.choice([0, 1, 2, 3, None])})
        proc = spawn()
        if i % VERIFY_EVERY == 0 or rng.random() < 0.05:
            # Up and polling every 0.1 s: check the restarted sidecar's view, then kill between,
            # in, or at the end of a poll.
            ready(proc)
            check_status(i)
            time.sleep(rng.uniform(0.0, 0.35))
            kinds["after_ready"] += 1
        else:
            # Anywhere from interpreter start (~1-2 s here) to the first polls.
            time.sleep(rng.uniform(0.05, 1.8))
            kinds["early"] += 1
        proc.kill()
        check_disk(i)
    elapsed = time.monotonic() - t0
    polled = log.read_text(errors="replace").count('"generation_seen"') - 1  # the first process
    print(f"{ITERATIONS} kills in {elapsed:.1f}s: {kinds}, {polled} after a first poll")
    assert min(kinds.values()) >= 5

    # After the loop: a sidecar that stays up still has the same window, exported and valid.
    last = spawn()
    try:
        ready(last)
        check_status(ITERATIONS + 1)
        fams = scrape(url)
        assert sample(fams, "helios_restore_window_start_timestamp_seconds") == start
        assert sample(fams, "helios_restore_window_open") == 1.0
        assert sample(fams, "helios_restore_state_corrupt") == 0.0
    finally:
        last.kill()
    check_disk(ITERATIONS + 1)
    # Nothing was ever found corrupt and moved aside.
    assert not list(state_dir.glob(f"{STATE_FILE}.corrupt-*"))


def vars_of(obj: Any) -> dict[str, Any]:
    return {k: getattr(obj, k) for k in obj.__slots__}
