"""Post-restore checks: the restored engine against the incumbent, judged when a window closes."""

from __future__ import annotations

from alerts.config import Config
from alerts.promql import Q, indent, join
from alerts.rules import Alert
from alerts.templates import T

GROUP = "helios-restore"
NAMES = ("HeliosRestoreCheckFailed",)

# What a failing post-restore check means (docs/interface.md, restore window), in the description.
CHECK_MEANINGS = {
    "image": "the restored engine runs a different image digest than the incumbent",
    "container": (
        "the retained container did not come back: the restored engine runs in a different "
        "container than the incumbent"
    ),
    "fresh_generation": (
        "the restored engine reports the incumbent's monitoring generation, not a fresh one"
    ),
    "drained_admission": (
        "in-flight requests did not reach 0 with admission closed before the engine went away "
        "or before the request cutoff"
    ),
    "preflight_direct": "the direct preflight completion against the engine failed",
    "preflight_routed": "the preflight completion through the router failed",
}


def check_text() -> str:
    """A template that explains `$labels.check`."""
    return (
        "".join(
            f'{{{{ {"if" if i == 0 else "else if"} eq $labels.check "{check}" }}}}{meaning}'
            for i, (check, meaning) in enumerate(CHECK_MEANINGS.items())
        )
        + "{{ else }}see the runbook{{ end }}"
    )


def alerts(c: Config) -> list[Alert]:
    q, t = Q(c), T(c)
    mem = str(c.window_memory)
    return [
        Alert(
            name="HeliosRestoreCheckFailed",
            group=GROUP,
            severity="critical",
            expr=join(
                "(\n"
                + indent(f"{q.sel('helios_restore_check_ok')} == 0")
                + "\n)\nor\n(\n"
                + indent(
                    f"{q.last('helios_restore_check_ok')} == 0\nunless {q.on}\n({q.sel('up')} == 1)"
                )
                + "\n)",
                q.window_open_last(),
                op=f"unless {q.on}",
            ),
            summary=f"Post-restore check {{{{ $labels.check }}}} failed on {t.target}",
            description=(
                f"The post-restore check {{{{ $labels.check }}}} failed on {t.target}: "
                f"{check_text()}. The restore is not accepted until this is understood. "
                f"While the sidecar cannot be scraped the last seen result (memory {mem}) is "
                f"used; the alert clears when the next window opens."
            ),
            meaning=(
                "a `helios_restore_check_ok{check}` is 0: the current value while the sidecar "
                f"is scraped (`up == 1`), otherwise the last seen value (memory {mem}); never "
                "while the last seen window state is open"
            ),
        ),
    ]
