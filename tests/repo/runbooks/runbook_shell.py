"""Run a runbook's shell blocks as a person would paste them (bash, after the deployment's Set up
block), with the remote commands replaced by tests/repo/runbooks/shim.py, and return what they did."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import ROOT

SHIM = Path(__file__).resolve().parent / "shim.py"
# Commands that reach what a test machine does not have; everything else runs for real (jq,
# date, head, grep, ...).
SHIMMED = ("kubectl", "docker", "curl", "amtool", "cat", "helios-exporter", "nvidia-smi",
           "dmesg", "ssh", "sudo", "systemctl", "journalctl", "openssl")
_DUMP = "--- runbook variables ---"


@dataclass(frozen=True)
class Call:
    name: str
    argv: list[str]
    cwd: str
    env: dict[str, str] = field(default_factory=dict)   # its HELIOS_EXPORTER_* variables


@dataclass(frozen=True)
class Ran:
    script: str
    returncode: int
    stdout: str
    stderr: str
    calls: list[Call]
    variables: dict[str, str]   # with dump: NAME -> value of each variable the script set
    declared: str = ""          # the same as `declare -p` lines, a prelude for later scripts

    def problems(self) -> list[str]:
        """What a shell says when a pasted block is broken."""
        signs = ("syntax error", "unbound variable", "command not found", "No such file",
                 "unexpected EOF", "bad substitution")
        return [line for line in self.stderr.splitlines() if any(s in line for s in signs)]


class Shell:
    """A bin folder of shims and a scratch folder; `run` pastes a script into bash."""

    def __init__(self, tmp: Path, real: tuple[str, ...] = (), cwd: Path = ROOT) -> None:
        """`real`: shimmed commands to run for real instead (amtool against a real
        Alertmanager). `cwd`: where the blocks run (the repository root, as the Compose block
        says; a scratch folder where real commands write files)."""
        self.tmp = tmp
        self.cwd = cwd
        self.bin = tmp / "bin"
        self.bin.mkdir(parents=True, exist_ok=True)
        for name in set(SHIMMED) - set(real):
            wrapper = self.bin / name
            wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -I -S "{SHIM}" {name} "$@"\n')
            wrapper.chmod(0o755)
        for tool in ("bash", "jq"):
            if shutil.which(tool) is None:
                raise RuntimeError(f"{tool} is needed to run the runbooks' blocks")
        self.count = 0

    def run(self, script: str, config: dict[str, Any], prelude: str = "",
            dump: bool = False) -> Ran:
        """`prelude` (variables a Set up block left, as `declare -p` lines) then `script`, in
        `bash -u` (an unset variable is an error, as a typo would be). With `dump`, the run
        also reports the variables the script set (`Ran.variables`, `Ran.declared`)."""
        self.count += 1
        log = self.tmp / f"calls-{self.count}.jsonl"
        config_file = self.tmp / f"config-{self.count}.json"
        config_file.write_text(json.dumps(config), encoding="utf-8")
        full = prelude + script
        if dump:
            full = "__before=\" $(compgen -v | tr '\\n' ' ')\"\n" + full + f"\necho '{_DUMP}'\n" + (
                'for __v in $(compgen -v); do case "$__before " in *" $__v "*) ;; '
                '__*) ;; *) declare -p "$__v";; esac; done\n')
        # The venv's bin after the shims: a `helios-exporter` run for real is the project's.
        env = {"PATH": f"{self.bin}:{Path(sys.executable).parent}:/usr/bin:/bin",
               "HOME": str(self.tmp), "USER": "oncall", "LANG": "C.UTF-8", "RUNBOOK_SHIM_LOG": str(log),
               "RUNBOOK_SHIM_CONFIG": str(config_file)}
        result = subprocess.run(["bash", "--noprofile", "--norc", "-u", "-c", full], cwd=self.cwd,
                                env=env, capture_output=True, text=True, timeout=60, check=False)
        calls = [Call(**json.loads(line)) for line in log.read_text().splitlines()] \
            if log.exists() else []
        stdout, _, dumped = result.stdout.partition(_DUMP + "\n")
        declared = [line for line in dumped.splitlines() if line.startswith("declare ")]
        variables = {}
        for line in declared:
            match = re.fullmatch(r'declare -\S* (\w+)="(.*)"', line)
            if match:
                variables[match.group(1)] = match.group(2)
        return Ran(full, result.returncode, stdout, result.stderr, calls, variables,
                   "".join(line + "\n" for line in declared))
