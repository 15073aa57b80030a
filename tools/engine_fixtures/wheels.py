"""The pinned wheels: download without dependencies, check, extract."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".whl"


@dataclass(frozen=True)
class Wheel:
    """One wheel file, named and hashed as PyPI serves it."""

    project: str
    version: str
    filename: str
    sha256: str
    size: int
    python_version: str
    platform: str

    def path(self, cache: Path = CACHE) -> Path:
        return cache / self.filename


SGLANG = Wheel(
    project="sglang",
    version="0.5.23",
    filename="sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl",
    sha256="00b3cd5b265ac76c64185fbb6b95424f324ddd9f428d0306b77bc9db9d859937",
    size=39063923,
    python_version="3.11",
    platform="manylinux_2_34_x86_64",
)
VLLM = Wheel(
    project="vllm",
    version="0.33.0",
    filename="vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl",
    sha256="4b6bdec4ab269990bf70d45a3c1e94c3760a27064513760193b26d6f0da883aa",
    size=336361138,
    python_version="3.11",
    platform="manylinux_2_28_x86_64",
)
LMCACHE = Wheel(
    project="lmcache",
    version="0.5.6",
    filename="lmcache-0.5.6-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
    sha256="14530ff72b96056e894c9b8dc70c10d019e7802799bbfde9cec298700b799194",
    size=17659257,
    python_version="3.11",
    platform="manylinux_2_28_x86_64",
)
# SGLang's metric collector imports msgspec (a pure serialisation library,
# no GPU): its own wheel, pinned like the engines'.
MSGSPEC = Wheel(
    project="msgspec",
    version="0.23.0",
    filename=(
        "msgspec-0.23.0-cp311-cp311-manylinux2014_x86_64"
        ".manylinux_2_17_x86_64.manylinux_2_28_x86_64.whl"
    ),
    sha256="2e514e5b2a23e376f545f4962834b7312d9400705627c53330116b46daddfbe3",
    size=232334,
    python_version="3.11",
    platform="manylinux_2_17_x86_64",
)


class WheelError(RuntimeError):
    """A wheel is missing, or its bytes are not the pinned ones."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download(wheel: Wheel, cache: Path = CACHE) -> Path:
    """The wheel's path in the cache, fetched with pip when absent."""
    path = wheel.path(cache)
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable, "-m", "pip", "download", "--no-deps",
                "--only-binary", ":all:", "--python-version", wheel.python_version,
                "--platform", wheel.platform, "-d", str(cache),
                f"{wheel.project}=={wheel.version}",
            ],
            check=True,
        )
    if not path.exists():
        raise WheelError(f"pip did not fetch {wheel.filename}")
    return verify(wheel, path)


def verify(wheel: Wheel, path: Path) -> Path:
    actual = sha256_of(path)
    if actual != wheel.sha256:
        raise WheelError(
            f"{path.name}: sha256 {actual}, pinned {wheel.sha256}"
        )
    return path


def extract(
    wheel: Wheel, members: tuple[str, ...], cache: Path = CACHE, suffix: str = ""
) -> Path:
    """The folder holding the wheel's files under the given prefixes (and
    with the given ending: ".py" leaves a wheel's compiled kernels packed)."""
    path = download(wheel, cache)
    target = cache / "extracted" / wheel.filename.removesuffix(".whl")
    stamp = target / ".sha256"
    key = wheel.sha256 + repr(members) + suffix
    if stamp.exists() and stamp.read_text() == key:
        return target
    with zipfile.ZipFile(path) as archive:
        for name in archive.namelist():
            if name.startswith(members) and name.endswith(suffix):
                archive.extract(name, target)
    stamp.write_text(key)
    return target
