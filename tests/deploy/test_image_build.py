"""The Dockerfile built for real (scripts/image, podman) and run as a deployment runs it: non-root,
read-only root, every capability dropped, no new privileges; the sidecar and the simulated engine
in two containers sharing one network namespace (the engine on its loopback, as in a Kubernetes
pod), /metrics,
/healthz and /readyz answering from outside, the image's HEALTHCHECK passing, `--version` the
package's. Where podman cannot run, the tests say so and skip.

The base is Debian 12's python3 built by mmdebstrap (`scripts/image --debian-base`, made once and
kept), because Docker Hub's python image cannot be pulled on the test machines; set
HELIOS_IMAGE_BASE to build on another base instead.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.helpers import missing, promtool_check_metrics
from tools.harness import free_port

from .conftest import ROOT

pytestmark = pytest.mark.e2e

VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
# The size the image may grow to before this fails: it is about 250 MB on the Debian base.
MAX_BYTES = 350 * 1000 * 1000


def podman_argv() -> list[str]:
    podman = shutil.which("podman")
    if podman is None:
        missing("podman not installed (Debian package podman)")
    info = subprocess.run([podman, "info"], capture_output=True, text=True, timeout=60, check=False)
    if info.returncode != 0:
        reason = (info.stderr.strip().splitlines() or ["podman info failed"])[-1]
        pytest.skip(f"podman cannot run here ({reason}): the image is not built or run")
    argv = [podman]
    return argv


# crun, podman's default runtime, fails on cgroup v1 hosts; runc needs limits every kernel grants.
LIMITS = ["--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"]


def runtime() -> list[str]:
    runc = shutil.which("runc")
    return ["--runtime", runc] if runc else []


@dataclass(frozen=True)
class Image:
    podman: list[str]
    name: str
    build_seconds: float

    def run(self, *args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([*self.podman, *runtime(), *args], capture_output=True, text=True,
                                timeout=timeout, check=False)
        if check and result.returncode != 0:
            pytest.fail(f"podman {' '.join(args)}:\n{result.stdout}{result.stderr}")
        return result


@pytest.fixture(scope="module")
def image() -> Image:
    podman = podman_argv()
    base = os.environ.get("HELIOS_IMAGE_BASE")
    started = time.monotonic()
    result = subprocess.run([str(ROOT / "scripts/image"),
                             *(["--base", base] if base else ["--debian-base"])],
                            capture_output=True, text=True, timeout=900, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    name = result.stdout.strip().splitlines()[-1]  # the image's name, printed last
    assert name == f"localhost/helios-exporter:{VERSION}", result.stdout
    return Image(podman, name, time.monotonic() - started)


def test_image_shape(image: Image) -> None:
    fmt = "{{.Size}} {{.Architecture}} {{.Config.User}} {{.Config.WorkingDir}}"
    size, arch, user, workdir = image.run("image", "inspect", "--format", fmt, image.name).stdout.split()
    print(f"\nimage {image.name}: {int(size) / 1e6:.0f} MB, {arch}, built in {image.build_seconds:.0f} s")
    assert user == "10001:10001" and workdir == "/var/lib/helios-exporter"
    assert arch in ("amd64", "arm64")
    assert int(size) < MAX_BYTES, f"{int(size) / 1e6:.0f} MB"
    health = image.run("image", "inspect", "--format", "{{json .Config.Healthcheck.Test}}",
                       image.name).stdout.strip()
    assert health == '["CMD","/opt/helios-exporter/bin/python","-m","exporter.healthcheck"]', health
    label = image.run("image", "inspect", "--format",
                      '{{index .Labels "org.opencontainers.image.version"}}', image.name).stdout.strip()
    assert label == VERSION
    # Nothing but the exporter in the virtualenv: no pip to install more at run time.
    listing = image.run("run", "--rm", *LIMITS, "--entrypoint", "ls", image.name,
                        "/opt/helios-exporter/bin").stdout.split()
    assert "helios-exporter" in listing and not [n for n in listing if n.startswith("pip")], listing


def test_version_is_the_packages(image: Image) -> None:
    out = image.run("run", "--rm", *LIMITS, image.name, "--version").stdout.strip()
    assert out.startswith(f"helios-exporter {VERSION} (Python 3."), out


@dataclass(frozen=True)
class Pod:
    name: str
    url: str


@pytest.fixture(scope="module")
def pod(image: Image) -> Iterator[Pod]:
    name = f"helios-image-test-{secrets.token_hex(3)}"
    port = free_port()
    limits = LIMITS
    hardening = ["--read-only", "--cap-drop=ALL", "--security-opt=no-new-privileges"]
    try:
        # The engine's container owns the network namespace (and the published port), the
        # sidecar's joins it: a pod without podman's pause image.
        image.run("run", "-d", "--name", f"{name}-engine", "--publish", f"127.0.0.1:{port}:19400",
                  *limits, *hardening,
                  image.name, "simulate", "--listen", "127.0.0.1:8000", "--scenario", "steady")
        image.run("run", "-d", "--network", f"container:{name}-engine", "--name", f"{name}-sidecar",
                  *limits, *hardening,
                  # A fresh named volume takes the image's ownership of the state directory.
                  "--volume", f"{name}-state:/var/lib/helios-exporter",
                  "-e", "HELIOS_EXPORTER_ENGINE_URL=http://127.0.0.1:8000",
                  "-e", "HELIOS_EXPORTER_LISTEN=0.0.0.0:19400",
                  image.name, "serve", "--no-nvml")
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(url + "/readyz", timeout=3).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                logs = image.run("logs", f"{name}-sidecar", check=False)
                pytest.fail(f"the sidecar never got ready:\n{logs.stdout[-3000:]}{logs.stderr[-3000:]}")
            time.sleep(0.5)
        yield Pod(name, url)
    finally:
        for container in (f"{name}-sidecar", f"{name}-engine"):
            image.run("rm", "--force", "--volumes", "--time", "5", container, check=False,
                      timeout=120)
        image.run("volume", "rm", "--force", f"{name}-state", check=False)


def test_serves_against_the_simulator_in_another_container(pod: Pod) -> None:
    assert httpx.get(pod.url + "/healthz", timeout=5).status_code == 200
    assert httpx.get(pod.url + "/readyz", timeout=5).status_code == 200
    # Read from the engine in the other container (its first poll may follow readiness).
    deadline = time.monotonic() + 60
    while True:
        metrics = httpx.get(pod.url + "/metrics", timeout=10)
        assert metrics.status_code == 200
        if "helios_engine_up 1.0" in metrics.text or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    text = metrics.text
    assert "helios_engine_up 1.0" in text, text[:2000]
    assert f'version="{VERSION}"' in text and "helios_exporter_build_info" in text
    promtool_check_metrics(metrics.content)


def test_hardened_as_deployed(image: Image, pod: Pod) -> None:
    sidecar = f"{pod.name}-sidecar"
    assert image.run("exec", sidecar, "id", "-u").stdout.strip() == "10001"
    denied = image.run("exec", sidecar, "touch", "/opt/helios-exporter/x", check=False)
    assert denied.returncode != 0 and "Read-only file system" in denied.stderr, denied
    status = image.run("exec", sidecar, "cat", "/proc/1/status").stdout
    caps = {line.split(":")[0]: line.split()[1] for line in status.splitlines() if line.startswith("Cap")}
    assert caps["CapEff"] == caps["CapPrm"] == caps["CapBnd"] == "0000000000000000", caps
    assert "NoNewPrivs:\t1" in status
    inspect = image.run("inspect", "--format", "{{.HostConfig.ReadonlyRootfs}}", sidecar).stdout
    assert inspect.strip() == "true"
    # The image's own HEALTHCHECK, run by podman inside the container.
    health = image.run("healthcheck", "run", sidecar, check=False)
    assert health.returncode == 0, health.stdout + health.stderr
