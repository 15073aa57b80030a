"""Post-restore checks: the restored engine against the reference, and the incumbent's drain.

A check whose inputs are unknown is left out (never exported as a failure). `reasons` says, for
each failed check, what was expected and what was found, for `/status` and the runbooks.
"""

from __future__ import annotations

from typing import Any, Final

from exporter.restore.model import Bounds, Engine, LastWindow, Window

CHECKS: Final = (
    "image",
    "container",
    "package",
    "checkpoint",
    "fresh_generation",
    "drained_admission",
    "preflight_direct",
    "preflight_routed",
)
# check name -> Engine field compared, restored vs reference
IDENTITY: Final = (
    ("image", "image_digest"),
    ("container", "container_id"),
    ("package", "package"),
    ("checkpoint", "checkpoint"),
)
# Checks that judge the incumbent's drain, not the restored engine.
DRAIN_CHECKS: Final = ("drained_admission",)


def identity_checks(reference: Engine | None, incumbent: Engine | None,
                    restored: Engine | None) -> dict[str, bool]:
    checks: dict[str, bool] = {}
    if reference is None or restored is None:
        return checks
    for check, name in IDENTITY:
        expected, found = getattr(reference, name), getattr(restored, name)
        if expected is not None and found is not None:
            checks[check] = expected == found
    earlier = {reference.generation} | ({incumbent.generation} if incumbent else set())
    checks["fresh_generation"] = restored.generation not in earlier
    return checks


def compute_checks(window: Window, restored: Engine | None, bounds: Bounds) -> dict[str, bool]:
    """Checks at the close of `window`; `window.lost` must already be final."""
    checks = identity_checks(window.compared_with(), window.incumbent, restored)
    if window.drained and not window.lost:
        checks["drained_admission"] = True
    elif window.lost is not None or window.last_inflight is not None:
        checks["drained_admission"] = False  # never knew the incumbent's in-flight: unknown
    for probe in bounds.preflight:
        if probe in window.preflight:
            checks[f"preflight_{probe}"] = window.preflight[probe]
        elif restored is not None:
            checks[f"preflight_{probe}"] = False
    return checks


def verified(checks: dict[str, bool]) -> bool:
    """Every known check of the restored engine passed (the drain is the incumbent's affair)."""
    return all(ok for name, ok in checks.items() if name not in DRAIN_CHECKS)


def reasons(checks: dict[str, bool], judged: LastWindow | None) -> list[dict[str, Any]]:
    """Expected vs found for every failed check, in CHECKS order."""
    out: list[dict[str, Any]] = []
    ref = judged.reference if judged else None
    restored = judged.restored if judged else None
    for check in CHECKS:
        if checks.get(check) is not False:
            continue
        item: dict[str, Any] = {"check": check}
        fields = dict(IDENTITY)
        if check in fields:
            item["expected"] = getattr(ref, fields[check]) if ref else None
            item["found"] = getattr(restored, fields[check]) if restored else None
        elif check == "fresh_generation":
            earlier = sorted({e.generation for e in (ref, judged.incumbent if judged else None)
                              if e is not None})
            item["expected"] = "a generation other than " + " and ".join(earlier)
            item["found"] = restored.generation if restored else None
        elif check == "drained_admission":
            lost = judged.lost if judged else None
            item["expected"] = ("0 requests in flight, admission not open, before the incumbent "
                                "went away and by the request cutoff")
            item["found"] = (f"{lost} requests lost" if lost else
                             "in-flight did not reach 0 with admission not open in time")
        else:
            item["expected"] = "passed"
            item["found"] = "failed or not run before the window closed"
        out.append(item)
    return out
