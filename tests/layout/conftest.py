"""The `stack` fixture (real Prometheus and Alertmanager) for the layout end-to-end tests."""

from tests.e2e.procs import stack  # noqa: F401  (fixture)
