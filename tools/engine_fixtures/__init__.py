"""Engine fixtures rendered by the engines' own metric code.

Each pinned engine version has a renderer that downloads the engine's wheel
(no dependencies), imports the modules that define its Prometheus families,
stubs only what needs a GPU or a running server, drives them through a
scenario and writes the exposition the engine's own registry produces, with
a sidecar that records the wheel and a list of the families defined.
Run ``python -m tools.engine_fixtures --help``.
"""
