"""Post-restore checks: the restored engine against the incumbent, judged when a window closes.

The sidecar keeps the checks of the last judged window exported while a later window is open
and replaces them only when a window closes with a restored engine (an abort, or a window that
restored nothing, keeps them), so the alert stays until the restore it judged is replaced by a
verified one.
"""

from __future__ import annotations

from alerts.config import Config
from alerts.promql import Q, indent
from alerts.rules import Alert, Promise
from alerts.templates import T

GROUP = "helios-restore"

# What a failing post-restore check means (docs/interface.md, restore window), in the description.
CHECK_MEANINGS = {
    "image": "the restored engine runs a different image digest than the incumbent",
    "container": (
        "the retained container did not come back: the restored engine runs in a different "
        "container than the incumbent"
    ),
    "package": "the restored engine runs a different package than the incumbent",
    "checkpoint": "the restored engine serves a different checkpoint than the incumbent",
    "fresh_generation": (
        "the restored engine reports the incumbent's monitoring generation, not a fresh one"
    ),
    "drained_admission": (
        "the incumbent still had requests in flight when it went away or at the request "
        "cutoff: they were lost"
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
            for_="0m",
            promised=Promise("a post-restore check failed (label `check`)"),
            expr=(
                "(\n"
                + indent(f"{q.sel('helios_restore_check_ok')} == 0")
                + "\n)\nor\n(\n"
                + indent(
                    f"{q.seen('helios_restore_check_ok')} == 0\nunless {q.on}\n({q.sel('up')} == 1)"
                )
                + "\n)"
            ),
            summary=f"Post-restore check {{{{ $labels.check }}}} failed on {t.target}",
            description=(
                f"The post-restore check {{{{ $labels.check }}}} of the last judged restore "
                f"window on {t.target} failed: {check_text()}. The restore is not accepted "
                "until this is understood. The alert stays until a later window closes with the "
                "check passing (a verified restore); a window that is only opened, aborted or "
                "closed with nothing restored keeps it. While the sidecar cannot be scraped the "
                f"last seen result (memory {mem}) is used."
            ),
            meaning=(
                "a `helios_restore_check_ok{check}` of the last judged window is 0: the current "
                f"value while the sidecar is scraped (`up == 1`), otherwise the last seen value "
                f"(memory {mem}); also while a later window is open, until one closes with a "
                "restored engine passing the check"
            ),
        ),
    ]
