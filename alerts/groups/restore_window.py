"""The restore window's own lifecycle as info alerts: open, closed, forgotten.

`HeliosRestoreWindowOpen` is the inhibition source for HeliosExporterDown. The two notices say
how a restore page resolved. Alertmanager sends a resolved alert with the annotations of its last
firing evaluation, which cannot know how it resolved; so the evidence travels as another alert in
the same notification group (deploy/alertmanager groups a target's restore alerts together):

- `HeliosRestoreWindowClosed{outcome}` fires for `restore.outcome_notice` after a window closed
  (or was aborted), but only when that close ended or accompanied a restore page: the window was
  open past its restore deadline, or past its request cutoff with incumbent requests in flight,
  or a post-restore check was failing. A clean restore raises no notice, so the page receiver is
  never notified of good news alone.
- `HeliosRestoreWindowForgotten` fires for `restore.outcome_notice` once Prometheus's memory of a
  window it last saw open past its restore deadline runs out: the breach pages resolved because
  nothing was scraped for `window_memory`, not because the window closed.
"""

from __future__ import annotations

from alerts.config import Config
from alerts.groups import restore_memory
from alerts.groups.restore_deadlines import INCUMBENT_INFLIGHT
from alerts.promql import STEP, Q, chain, duration, join
from alerts.rules import Alert, Record
from alerts.templates import T

GROUP = "helios-restore"
OPEN_GROUP = "helios-restore-window"

END = "helios_restore_last_window_end_timestamp_seconds"
RESTORED = "helios_restore_last_window_restored"
# The notices' severity. Not `info`: kube-prometheus-stack's default Alertmanager configuration
# mutes every `severity=info` alert of a namespace while its InfoInhibitor fires (no warning or
# critical alert firing there), which is the moment a breach resolves; a notice must arrive with
# that resolve (deploy/kube-prometheus-stack/README.md).
NOTICE = "notice"
OUTCOME_PHRASES = {
    "in_time": "closed in time",
    "late": "closed late",
    "aborted": "was aborted",
    "unobserved": "was restored while the sidecar was down (outcome unobserved), found",
}


def outcome_phrase() -> str:
    return (
        "".join(
            f'{{{{ {"if" if i == 0 else "else if"} eq $labels.outcome "{o}" }}}}{phrase}'
            for i, (o, phrase) in enumerate(OUTCOME_PHRASES.items())
        )
        + "{{ else }}closed ({{ $labels.outcome }}){{ end }}"
    )


def if_nothing_restored(c: Config, text: str) -> str:
    """`text` when the last window (not aborted) closed with nothing restored: the incumbent's own
    incarnation admitted again, so no check was judged (the sidecar exports `RESTORED` 0)."""
    t = T(c)
    return (
        '{{ if ne $labels.outcome "aborted" }}'
        + t.when(f"last_over_time({RESTORED}{{{{TARGET}}}}[{c.outcome_notice}]) == 0", text)
        + "{{ end }}"
    )


def paged_at_close(c: Config) -> str:
    """Targets whose last close ended or accompanied a restore page (see the module docstring)."""
    q = Q(c)
    notice = str(c.outcome_notice)
    end = q.last(END, notice)
    past_restore = f"{end}\n> {q.on}\n{q.deadline_last('restore')}"
    past_cutoff = join(
        f"{end}\n> {q.on}\n"
        + q.deadline_last("request_cutoff"),
        f"{q.seen(INCUMBENT_INFLIGHT)} > 0",
        op=f"and {q.on}",
    )
    # The remembered deadlines and in-flight count belong to this window only if Prometheus saw
    # this window open: its remembered start is the closed window's start (within
    # SAME_TIME_TOLERANCE: the two are stored copies of one float, not always bit-equal).
    seen_open = q.same_time(
        q.last("helios_restore_last_window_start_timestamp_seconds", notice),
        q.seen("helios_restore_window_start_timestamp_seconds"),
    )
    check_failing = f"min_over_time({q.sel('helios_restore_check_ok')}[{notice}]) == 0"
    return chain(
        chain(join(past_restore, past_cutoff, op="or"), (f"and {q.on}", seen_open)),
        ("or", check_failing),
    )


def records(c: Config) -> list[Record]:
    """The restore memory, in groups of its own before the alerts (restore_memory.py)."""
    return restore_memory.records(c)


def alerts(c: Config) -> list[Alert]:
    q, t = Q(c), T(c)
    mem = str(c.window_memory)
    notice = str(c.outcome_notice)
    # The memory runs out 0 to 5 minutes after window_memory (alerts/groups/restore_memory.py);
    # reading what was seen in the notice plus one step before it began keeps the notice firing
    # for at least `notice` once it has.
    seen_span = duration(c.outcome_notice.seconds + STEP.seconds)
    notice_lasts = f"{notice} to {seen_span}"
    return [
        Alert(
            name="HeliosRestoreWindowOpen",
            # Explains no resolve and needs no notice beside it: evaluated beside the pages.
            group=OPEN_GROUP,
            severity="info",
            for_="0m",
            expr=join(
                q.seen("helios_restore_window_start_timestamp_seconds"),
                q.window_open_last(),
                op=f"and {q.on}",
            ),
            summary=f"Restore window open on {t.target} (planned outage)",
            description=(
                f"A restore window was open on {t.target} as of {t.now()}, since "
                f"{{{{ $value | humanizeTimestamp }}}}: request cutoff "
                f"{t.deadline_at('request_cutoff')}, restore deadline {t.deadline_at('restore')}. "
                "Not routed; inhibits HeliosExporterDown for this target while the window is "
                f"open (as last seen, memory {mem})."
            ),
            meaning=(
                "last seen window state is open (value: window start), also past its deadlines; "
                f"memory {mem}. Extra to the interface: the inhibition source for "
                "HeliosExporterDown"
            ),
        ),
        Alert(
            name="HeliosRestoreWindowClosed",
            group=GROUP,
            severity=NOTICE,
            for_="0m",
            expr=chain(
                f"{q.last(END, notice)} > time() - {c.outcome_notice.seconds}",
                (
                    f"* {q.on} group_left (outcome)",
                    f"{q.last('helios_restore_last_window_outcome', notice)} == 1",
                ),
                (f"and {q.on}", paged_at_close(c)),
            ),
            # One notice per window: Prometheus re-sends a firing alert whose annotations
            # changed only every resend delay (1m), so a second close within the notice's life
            # would reach Alertmanager with the first window's times, and a resolve would be
            # explained by the wrong window. A label of its own makes it a new alert at once.
            labels=(("window_end", "{{ $value | humanizeTimestamp }}"),),
            summary=(
                f"Restore window on {t.target} {outcome_phrase()} at "
                "{{ $value | humanizeTimestamp }}"
                + if_nothing_restored(c, ", nothing restored")
            ),
            description=(
                f"The restore window on {t.target} (opened "
                + t.last_ts("helios_restore_last_window_start_timestamp_seconds", lookback=notice,
                            missing="at a time nobody saw: the sidecar was down")
                + f") {outcome_phrase()} at {{{{ $value | humanizeTimestamp }}}}. "
                + if_nothing_restored(
                    c, "Nothing was restored: the engine that answered was the incumbent's own "
                    "incarnation (the same generation: it never restarted), so no post-restore "
                    "check was judged and earlier results stand. ")
                + "Requests of the incumbent lost at the cutoff or when it went away: "
                + t.value(
                    f"last_over_time(helios_restore_last_window_lost_requests{{{{TARGET}}}}[{notice}])",
                    "humanize",
                )
                + ". Restore pages of this target that resolved together with this notice "
                f"resolved because this window ended. The notice lasts {notice}."
            ),
            meaning=(
                f"for {notice} after a window closed or was aborted (labels `outcome` and "
                "`window_end`: one notice per window; value: its end; it says so when nothing "
                "was restored, `helios_restore_last_window_restored` 0), when that close ended or "
                "accompanied a restore page: the window was seen "
                "open past its restore deadline, or past its request cutoff with incumbent "
                "requests in flight, or a post-restore check was failing. Extra to the interface: "
                "says how the restore pages resolved"
            ),
        ),
        Alert(
            name="HeliosRestoreWindowForgotten",
            group=GROUP,
            severity=NOTICE,
            for_="0m",
            expr=chain(
                # Seen in the `seen_span` before the memory began, and no longer remembered:
                # what last_over_time(...[memory + seen_span]) would read, without reading the
                # memory's samples again.
                q.last_before("helios_restore_window_start_timestamp_seconds", seen_span),
                (f"and {q.on}", f"{q.last_before('helios_restore_window_open', seen_span)} == 1"),
                (f"unless {q.on}", q.seen("helios_restore_window_open")),
                (
                    f"and {q.on}",
                    q.last_before("helios_restore_deadline_timestamp_seconds", seen_span,
                                  bound="restore") + " < time()",
                ),
            ),
            summary=f"Prometheus no longer remembers the open restore window on {t.target}",
            description=(
                f"Prometheus's last scrape of the sidecar on {t.target} is more than {mem} "
                "(window_memory) old and showed the window opened "
                "{{ $value | humanizeTimestamp }} still open past its restore deadline "
                + t.last_ts(
                    "helios_restore_deadline_timestamp_seconds", ',bound="restore"',
                    lookback=seen_span, offset=mem,
                )
                + ". The memory ran out while the sidecar was unreachable, so the restore pages "
                "of this target resolved without the window closing: whether and when the "
                f"restore finished is unknown until the sidecar answers. Sidecar: "
                f"{t.scrape_state()}. The notice lasts {notice_lasts}."
            ),
            meaning=(
                f"for {notice_lasts} after the last scrape of a window that was open past its "
                f"restore deadline became older than `window_memory` ({mem}, to {mem} + {STEP}: "
                "the memory's last step): the breach pages resolved from lack of data. Extra to "
                "the interface: says how the restore pages resolved"
            ),
        ),
    ]
