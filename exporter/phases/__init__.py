"""The sidecar's half of the experiment phase API (docs/interface.md section 7): the phase book
(book.py) and its routes (routes.py), the counters a phase captures at each edge (capture.py) and
the deltas between two captures (deltas.py). The client side (the `phase`, `evidence`, `probe`,
`compare` and `observer-cost` commands) is the lab's (lab/)."""
