"""The Dockerfile's build and install steps repeated on this machine, without a Docker engine: a
wheel from exactly the files the Dockerfile copies, installed into a fresh virtualenv without pip,
started the way the image starts it, probed with the image's HEALTHCHECK command (hadolint, the
image's shape and the build context: test_dockerfile.py)."""

from __future__ import annotations

import contextlib
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

from tests.deploy.dockerfile import Instruction, copies, healthcheck_argv
from tests.process_guard import process_fixture
from tools.harness import free_port
from tools.pki import CA, write_web_config

from .conftest import ROOT

# ---- the Dockerfile's build and install steps, without Docker ------------------------------------


def _stage_sources(dockerfile: list[Instruction], context: set[str], dest_root: Path) -> None:
    """Lay out WORKDIR as the build stage's COPY instructions would."""
    for sources, dest in copies(dockerfile):
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
    # every module of the four packages, subpackages included
    sources = {p.relative_to(ROOT).as_posix() for pkg in ("commands", "exporter", "lab", "simulator")
               for p in (ROOT / pkg).rglob("*.py") if "__pycache__" not in p.parts}
    assert sources <= names, sorted(sources - names)
    assert not {n for n in names if n.startswith(("tests/", "deploy/", "alerts/", "dashboards/"))}
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    text = zipfile.ZipFile(installed.wheel).read(entry_points).decode()
    assert re.search(r"^helios-exporter = commands\.cli:main$", text, re.M), text


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
