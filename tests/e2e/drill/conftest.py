import pytest

# The harness's and the stories' asserts explain themselves like the tests' own.
pytest.register_assert_rewrite("tests.e2e.drill.harness", "tests.e2e.drill.common",
                               "tests.e2e.drill.restored", "tests.e2e.drill.down")
