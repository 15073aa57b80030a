"""The lab beside the sidecar: the client-side commands of `helios-exporter` that run on an
operator's terminal, never inside `serve`: the experiment commands (phase, evidence, probe,
compare and its gates, observer-cost), the terminal status view, geometry's command and the
demo. It imports the sidecar package (`exporter`) and the simulator; `exporter` imports neither
(tests/repo/test_imports.py)."""
