"""Build the fake libnvidia-ml.so.1 (tools/fake_nvml.c) and write its GPU table.

Used by the tests (tests/exporter/sources/conftest.py) and by bench/nvml_poll.py. The library reads the
key=value file named by $FAKE_NVML_CONFIG at call time; `FakeConfig.write` replaces it atomically
(rename), which the library notices by inode/mtime.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import site
import subprocess
import sysconfig
from dataclasses import dataclass
from pathlib import Path

SOURCE = Path(__file__).resolve().with_name("fake_nvml.c")
SONAME = "libnvidia-ml.so.1"


def find_header() -> Path | None:
    """nvml.h from the nvidia-nvml-dev wheel (any CUDA major), else a system CUDA install."""
    roots = {Path(p) for p in (*site.getsitepackages(), sysconfig.get_paths()["purelib"])}
    for root in sorted(roots):
        for found in sorted((root / "nvidia").glob("**/include/nvml.h")):
            return found
    for candidate in (Path("/usr/include/nvml.h"), Path("/usr/local/cuda/include/nvml.h")):
        if candidate.is_file():
            return candidate
    return None


def find_compiler() -> str | None:
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")


def build(out_dir: Path, *, old_driver: bool = False, header: Path | None = None,
          compiler: str | None = None) -> Path:
    """Compile the fake into out_dir/libnvidia-ml.so.1 and return its path."""
    header = header or find_header()
    compiler = compiler or find_compiler()
    if header is None or compiler is None:
        raise RuntimeError("building the fake NVML needs nvml.h (nvidia-nvml-dev) and a C compiler")
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / SONAME
    cmd = [compiler, "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-I", str(header.parent),
           "-o", str(target), str(SOURCE), "-lpthread"]
    if old_driver:
        cmd.insert(1, "-DFAKE_OLD_DRIVER")
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return target


@dataclass(frozen=True)
class FakeLibs:
    full: Path  # current driver API
    old: Path  # lacks nvmlDeviceGetTemperatureV, ...ClocksEventReasons, ...TotalEnergyConsumption
    config_path: Path


class FakeConfig:
    """The fake's GPU table; `write()` replaces the whole file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._serial = 0

    def write(self, count: int = 2, gpus: dict[int, dict[str, object]] | None = None,
              **settings: object) -> None:
        lines = [f"count={count}"]
        lines += [f"{key}={value}" for key, value in settings.items()]
        for index, values in (gpus or {}).items():
            lines += [f"gpu{index}.{key}={value}" for key, value in values.items()]
        self._serial += 1
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.{self._serial}")
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
        tmp.replace(self.path)


def init_calls(library: Path) -> int:
    """How often the fake's nvmlInit ran (a test hook exported by fake_nvml.c)."""
    fn = ctypes.CDLL(str(library)).fake_nvml_init_calls
    fn.restype = ctypes.c_ulong
    return int(fn())
