"""The report as one self-contained HTML page (`GET /`).

No external assets: the style and the countdown script are inline, and the response's
Content-Security-Policy allows exactly those two (by hash) and nothing else, so the page cannot
load or send anything, even if a value from the engine slipped through unescaped (none does:
every value goes through `html.escape`). Readable with scripts off: every time left and every age
is rendered on the server and the page refreshes itself; the script only keeps them ticking
between refreshes. One column, tables that stack into label/value lines on a narrow screen.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from html import escape
from typing import Any, Final

from exporter.oncall import report
from exporter.oncall.model import (
    At,
    Block,
    Cell,
    Code,
    Fields,
    Link,
    Para,
    Piece,
    Report,
    Since,
    Steps,
    Table,
    Until,
    Word,
    iso,
    since,
    spaced,
    until,
    utc,
)

REFRESH_SECONDS: Final = 10
LONG_CODE: Final = 24  # characters
TITLE: Final = "Helios restore status"

STYLE: Final = """
:root{color-scheme:light dark;--bg:#fff;--fg:#111;--muted:#444;--line:#bbb;--link:#0645ad;
--code:#f2f2f2}
@media (prefers-color-scheme:dark){:root{--bg:#121212;--fg:#eee;--muted:#c8c8c8;--line:#555;
--link:#9cc3ff;--code:#262626}}
*{box-sizing:border-box}
body{margin:0 auto;max-width:62rem;padding:.75rem;background:var(--bg);color:var(--fg);
font:1rem/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif}
h1{font-size:1.45rem;margin:.2rem 0}
h2{font-size:1.15rem;margin:1.6rem 0 .4rem;border-bottom:1px solid var(--line)}
a{color:var(--link)}
code{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:.92em;background:var(--code);
padding:0 .2em;border-radius:3px}
code.long{overflow-wrap:anywhere}code:not(.long){white-space:nowrap}time,[data-until],[data-since]{white-space:nowrap}[data-until]{font-weight:700}
.meta,footer{color:var(--muted);font-size:.92rem}
nav ul{list-style:none;padding:0;margin:.4rem 0;display:flex;flex-wrap:wrap;gap:.2rem .9rem}
.w{display:inline-block;padding:0 .35em;border-radius:3px;font-weight:700;letter-spacing:.02em}
.w-bad{background:#b00020;color:#fff}.w-good{background:#1b5e20;color:#fff}
.w-warn{background:#ffd23f;color:#000}
.w-neutral{font-weight:600;border:1px solid var(--line);padding:0 .3em}
.summary{border-left:.5rem solid #d6d6d6;padding:.1rem .8rem;margin:.8rem 0}
.summary h2{border:0;margin-top:.5rem}.summary ul{padding-left:1.1rem;margin:.3rem 0 .6rem}
.summary li{margin:.25rem 0}.tone-bad{border-color:#b00020}.tone-good{border-color:#1b5e20}
.tone-warn{border-color:#e0a800}
table{border-collapse:collapse;width:100%;margin:.3rem 0 .8rem}
caption{text-align:left;color:var(--muted);font-size:.92rem;padding:.2rem 0}
th,td{text-align:left;vertical-align:top;padding:.3rem .5rem;border-bottom:1px solid var(--line)}
thead th{border-bottom:2px solid var(--line)}
.fields th{width:13rem;font-weight:600}
@media (max-width:40rem){
body{padding:.5rem}.fields th{width:auto}
.records thead{position:absolute;left:-9999px}
.records tr,.records th,.records td{display:block;border:0;padding:.1rem .2rem}
.records tr{border-bottom:1px solid var(--line);padding:.3rem 0}
.records tbody th{font-weight:700}
.records td[data-label]::before{content:attr(data-label) ": ";color:var(--muted)}
.records td.empty{display:none}
.fields tr{display:block;border-bottom:1px solid var(--line);padding:.25rem 0}
.fields th,.fields td{display:block;border:0;padding:.05rem .2rem}}
"""

SCRIPT: Final = """
(function () {
  "use strict";
  var t0 = performance.now();
  function dur(s) {
    s = Math.floor(Math.abs(s));
    var d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600);
    var m = Math.floor(s % 3600 / 60), x = s % 60;
    if (d) { return d + " d " + h + " h"; }
    if (h) { return h + " h " + m + " min " + x + " s"; }
    if (m) { return m + " min " + x + " s"; }
    return x + " s";
  }
  function tick() {
    var e = (performance.now() - t0) / 1000, i, v;
    var left = document.querySelectorAll("[data-until]");
    for (i = 0; i < left.length; i++) {
      v = parseFloat(left[i].getAttribute("data-until")) - e;
      left[i].textContent = v >= 0 ? "in " + dur(v) : "passed " + dur(v) + " ago";
    }
    var ago = document.querySelectorAll("[data-since]");
    for (i = 0; i < ago.length; i++) {
      v = parseFloat(ago[i].getAttribute("data-since")) + e;
      ago[i].textContent = dur(Math.max(0, v)) + " ago";
    }
  }
  setInterval(tick, 1000);
})();
"""


def _hash(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


# Nothing but the inline style and script above; `data:` only for the empty favicon (which keeps
# the browser from asking the sidecar for /favicon.ico).
CSP: Final = (f"default-src 'none'; style-src {_hash(STYLE)}; script-src {_hash(SCRIPT)}; "
              "img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
HEADERS: Final = {
    "Content-Security-Policy": CSP,
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def page(status: Mapping[str, Any], now: float) -> str:
    """The page for this `/status` dict at `now` (the sidecar's clock)."""
    return render(report.build(status, now))


def render(rep: Report) -> str:
    word = rep.headline
    nav = "".join(f'<li><a href="#{s.id}">{escape(s.title)}</a></li>' for s in rep.sections)
    summary = "".join(f"<li>{_cell(line)}</li>" for line in rep.summary)
    engine = f"Engine {_piece(Code(rep.engine_url))} · " if rep.engine_url else ""
    sections = "".join(
        f'<section id="{s.id}" aria-labelledby="{s.id}-h"><h2 id="{s.id}-h">{escape(s.title)}'
        f"</h2>{''.join(_block(b) for b in s.blocks)}</section>" for s in rep.sections)
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta http-equiv="refresh" content="{REFRESH_SECONDS}">'
        '<meta name="color-scheme" content="light dark"><meta name="robots" content="noindex">'
        '<link rel="icon" href="data:,">'
        f"<title>{escape(word)} · {TITLE}</title><style>{STYLE}</style></head>\n<body>"
        f"<header><h1>{TITLE}</h1>"
        f'<p class="meta">{engine}as of {_piece(At(rep.as_of))} ({_piece(Since(0.0))}) · '
        f'refreshes every {REFRESH_SECONDS} s · raw data: <a href="status">/status</a></p>'
        f'<nav aria-label="Sections"><ul>{nav}</ul></nav></header>\n<main>'
        f'<section id="summary" class="summary tone-{rep.tone}" aria-labelledby="summary-h">'
        f'<h2 id="summary-h">Summary: {_piece(Word(word, rep.tone))}</h2><ul>{summary}</ul>'
        f"</section>\n{sections}</main>\n"
        "<footer><p>All times are UTC. Times left and ages are as of the last refresh; with "
        "scripts on they keep counting between refreshes.</p></footer>"
        f"<script>{SCRIPT}</script></body></html>\n"
    )


def _piece(piece: Piece) -> str:
    if isinstance(piece, str):
        return escape(piece)
    if isinstance(piece, Word):
        return f'<strong class="w w-{piece.tone}">{escape(piece.text)}</strong>'
    if isinstance(piece, At):
        machine = iso(piece.epoch)
        if machine is None:
            return escape(utc(piece.epoch))
        return f'<time datetime="{machine}">{escape(utc(piece.epoch))}</time>'
    if isinstance(piece, Until):
        return f'<span data-until="{piece.seconds:.3f}">{escape(until(piece.seconds))}</span>'
    if isinstance(piece, Since):
        return f'<span data-since="{piece.seconds:.3f}">{escape(since(piece.seconds))}</span>'
    if isinstance(piece, Code):
        # Digests and long ids may break anywhere; short names (sources, checks) stay whole.
        long = ' class="long"' if len(piece.text) > LONG_CODE else ""
        return f"<code{long}>{escape(piece.text)}</code>"
    if isinstance(piece, Link):
        # Only links within the sidecar: a relative path or an anchor, never another host.
        if ":" in piece.href or piece.href.startswith("//"):
            return escape(piece.text)
        return f'<a href="{escape(piece.href)}">{escape(piece.text)}</a>'
    raise TypeError(piece)


def _cell(cell: Cell) -> str:
    return "".join(sep + _piece(p) for sep, p in spaced(cell))


def _block(block: Block) -> str:
    if isinstance(block, Para):
        return f"<p>{_cell(block.cell)}</p>"
    if isinstance(block, Steps):
        return "<ol>" + "".join(f"<li>{_cell(c)}</li>" for c in block.items) + "</ol>"
    if isinstance(block, Fields):
        rows = "".join(f'<tr><th scope="row">{escape(label)}</th><td>{_cell(value)}</td></tr>'
                       for label, value in block.rows)
        return f'<table class="fields"><tbody>{rows}</tbody></table>'
    return _table(block)


def _table(table: Table) -> str:
    if not table.rows:
        return f"<p>{escape(table.caption)}: {escape(table.empty)}</p>"
    head = "".join(f'<th scope="col">{escape(c)}</th>' for c in table.columns)
    body = "".join(
        f'<tr><th scope="row">{_cell(row[0])}</th>'
        + "".join(f'<td data-label="{escape(col)}">{_cell(cell)}</td>' if spaced(cell) else
                  '<td class="empty"></td>'
                  for col, cell in zip(table.columns[1:], row[1:], strict=False))
        + "</tr>" for row in table.rows)
    return (f'<table class="records"><caption>{escape(table.caption)}</caption>'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
