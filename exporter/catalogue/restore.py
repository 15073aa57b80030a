"""Families of the restore collector: the restore window, its deadlines and its judgement
(docs/interface.md section 6)."""

from __future__ import annotations

from exporter.catalogue.model import Family, Promise, Rows
from exporter.restore.checks import CHECKS
from exporter.restore.keeper import EVENT_RESULTS
from exporter.restore.model import CAUSES, EVENT_KINDS, OUTCOMES, PHASES

RESTORE = Promise("4.3")
LATER = Promise("4.3", 2)
NEXT = Promise("4.3", 3)
R = "restore"

FAMILIES: Rows = (
    Family("helios_restore_window_open", "gauge", (), "", help="1 while a restore window is "
           "open (drain, event or engine unreachable).", collector=R, promised=RESTORE,
           source="always: 1 while a window is open, else 0; *(v3)* absent while the state "
           "file cannot be read (`helios_restore_window_unknown`)"),
    Family("helios_restore_window_unknown", "gauge", (), "", help="1 while the restore state "
           "file cannot be read: whether a window is open on file, and its deadlines, are "
           "unknown (events are answered 503, the file is never written over).", collector=R,
           promised=NEXT, source="always: 1 while the state file on disk cannot be read (held), "
           "else 0; meanwhile the window, phase, check and last-window series are absent, so "
           "Prometheus's memory keeps the window it saw last"),
    Family("helios_restore_phase", "gauge", ("phase",), "", help="Restore state machine phase, "
           "one-hot.", collector=R, labels_doc=f"phase={'|'.join(PHASES)}",
           source="always, one-hot: the restore state machine's phase; absent while the state file "
           "cannot be read"),
    Family("helios_restore_window_start_timestamp_seconds", "gauge", (), "unix seconds",
           help="Start of the open restore window (unix seconds).", collector=R,
           promised=RESTORE, source="while a window is open"),
    Family("helios_restore_deadline_timestamp_seconds", "gauge", ("bound",), "unix seconds",
           help="Deadlines of the open window: start + request cutoff, start + restore bound "
           "(unix seconds).", collector=R, promised=RESTORE,
           labels_doc="bound=request_cutoff|restore", source="while a window is open"),
    Family("helios_restore_window_cause", "gauge", ("cause",), "", help="What opened the "
           "window, one-hot.", collector=R, labels_doc=f"cause={'|'.join(CAUSES)}",
           source="while a window is open, one-hot"),
    Family("helios_restore_incumbent_inflight_requests", "gauge", (), "requests",
           help="Snapshot admission.inflight_requests of the incumbent as last seen while it was "
           "up; 0 once it went away or another generation answered (the restored engine's "
           "requests never count).", collector=R, promised=LATER,
           source="while a window is open: the incumbent's in-flight requests as last seen while "
           "it was up, 0 once it went away or was replaced (section 6.2)"),
    Family("helios_restore_check_ok", "gauge", ("check",), "", help="Post-restore checks of "
           "the last closed window: 1 passed, 0 failed; a check whose inputs were unknown is "
           "absent.", collector=R, promised=RESTORE,
           labels_doc=f"check={'|'.join(CHECKS)} (`package`, `checkpoint` are v2)",
           source="after a window closed, kept while the next one is open and after an abort; "
           "the checks whose inputs were known (section 6.4)"),
    Family("helios_restore_last_window_duration_seconds", "gauge", (), "seconds",
           help="Duration of the last closed or aborted restore window.", collector=R,
           source="after the first window ended; absent for a restore nobody watched"),
    Family("helios_restore_last_window_start_timestamp_seconds", "gauge", (), "unix seconds",
           help="Start of the last window (unix seconds); absent for a restore that happened "
           "while the sidecar was down.", collector=R, promised=LATER,
           source="after the first window ended; absent for a restore nobody watched"),
    Family("helios_restore_last_window_end_timestamp_seconds", "gauge", (), "unix seconds",
           help="Time of record of the last window's end (unix seconds): the observation or "
           "event that closed it, the abort, or the first look at a restore nobody watched.",
           collector=R, promised=LATER,
           source="after the first window ended: its time of record (section 6.5)"),
    Family("helios_restore_last_window_outcome", "gauge", ("outcome",), "", help="Outcome of "
           "the last window, one-hot: in_time, late, aborted, or unobserved (the evidence proves "
           "neither in_time nor late).", collector=R, promised=RESTORE,
           labels_doc=f"outcome={'|'.join(OUTCOMES)} (`unobserved` is v2)",
           source="one-hot, after the first window ended: section 6.5"),
    Family("helios_restore_last_window_restored", "gauge", (), "", help="1 when the last "
           "window closed with a restored engine, whose checks were judged; 0 when nothing was "
           "restored (the incumbent's own incarnation admitted again: it never restarted, the "
           "checks before stand) or it was aborted.", collector=R, promised=LATER,
           source="after the first window ended: 1 when it closed with a restored engine, whose "
           "checks were judged; 0 when nothing was restored (section 6.3) or it was aborted"),
    Family("helios_restore_last_window_lost_requests", "gauge", (), "requests",
           help="Incumbent requests in flight when it went away or past the request cutoff, in "
           "the last window.", collector=R, promised=LATER,
           source="after the first window ended, when known: the incumbent's requests lost "
           "(section 6.2)"),
    Family("helios_engine_unplanned_restarts_total", "counter", (), "restarts",
           help="New engine incarnations (another generation, container or start) that no "
           "restore window saw coming: seen while none was open, or found at the sidecar's "
           "start.", collector=R, promised=Promise("4.2", 2),
           source="from the first poll: new engine incarnations that no restore window saw "
           "coming (section 6.8)"),
    Family("helios_restore_state_write_errors_total", "counter", (), "writes",
           help="Failed writes of the restore state file (disk full, read-only...).",
           collector=R, source="a failed write is retried every cycle"),
    Family("helios_restore_state_corrupt_total", "counter", (), "files",
           help="State files found unusable at start and moved aside.", collector=R,
           source="at start: an unusable state file is moved aside"),
    Family("helios_restore_state_read_errors_total", "counter", (), "files",
           help="State files that could not be read (I/O error, or not a regular file: held, "
                "never written over).",
           collector=R, source="at start and at each poll while held: a state file that cannot "
                               "be read is never overwritten"),
    Family("helios_restore_events_total", "counter", ("event", "result"), "events",
           help="Events received on POST /restore/events by event and result.", collector=R,
           labels_doc=f"event={'|'.join(EVENT_KINDS)}, result={'|'.join(EVENT_RESULTS)}",
           source="the events API, every event and result from the start"),
)
