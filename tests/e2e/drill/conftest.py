import pytest

# The harness's asserts explain themselves like the tests' own.
pytest.register_assert_rewrite("tests.e2e.drill.harness")
