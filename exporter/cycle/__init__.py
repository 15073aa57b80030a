"""The poll cycle: each cycle reads the sources, derives what the collectors render and publishes
it as one immutable view.

- loop.py: the poll loop (`PollLoop`), one cycle every interval;
- derive.py: pure derivations from consecutive snapshots (the engine picture);
- passthrough_totals.py: the engine's pass-through counters and histograms carried across cycles;
- pins.py, gpu_selection.py, geometry.py: the checks of each cycle's snapshot against the
  configuration, the GPUs and the records' layout (exporter/layout.py, a library of its own:
  docs/interface.md section 9);
- view.py: the `View` the collectors, /status and the status page read.
"""
