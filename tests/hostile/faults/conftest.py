from tests.e2e.procs import stack  # noqa: F401  (fixture)
