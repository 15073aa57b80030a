"""The on-call view of `/status`: the HTML page at `GET /` and `helios-exporter status`.

Both are pure functions of the `/status` dict and a time: `report.build` reads the dict (every
field optional, so an older or newer sidecar never breaks the view) into a `model.Report`, which
`html.render` and `text.render` lay out for a browser and a terminal.
"""
