"""The poll cycle: each cycle reads the sources, derives what the collectors render and publishes
it as one immutable view.

- loop.py: the poll loop (`PollLoop`), one cycle every interval;
- derive.py: pure derivations from consecutive snapshots (the engine picture);
- passthrough_totals.py: the engine's pass-through counters and histograms carried across cycles;
- pins.py, gpu_selection.py, geometry.py (with layout.py, the records' arithmetic): the checks of
  each cycle's snapshot against the configuration, the GPUs and the layout;
- view.py: the `View` the collectors, /status and the status page read.
"""
