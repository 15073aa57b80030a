"""docs/interface.md keeps up with the code: every option, log format and command is named there."""

from __future__ import annotations

import pytest

from commands import cli
from exporter import config as cfg
from exporter import logs
from tests.conftest import ROOT

DOC = (ROOT / "docs" / "interface.md").read_text()


@pytest.mark.parametrize("flag", [opt.flag for opt in cfg.OPTIONS])
def test_every_serve_option_is_in_the_interface(flag: str) -> None:
    assert f"`{flag} " in DOC or f"`{flag}`" in DOC, f"{flag} is missing from docs/interface.md"


def test_every_log_format_and_level_is_in_the_interface() -> None:
    for value in (*logs.FORMATS, *logs.LEVELS):
        assert f"`{value}`" in DOC


def test_every_command_is_in_the_interface() -> None:
    for command in cli.commands():
        assert f"`helios-exporter {command}" in DOC, command
    assert "`helios-exporter --version`" in DOC


def test_readme_links_the_interface() -> None:
    assert "(docs/interface.md)" in (ROOT / "README.md").read_text()


@pytest.mark.parametrize("command", ["phase", "evidence", "probe", "compare"])
def test_every_experiment_option_is_in_the_interface(command: str) -> None:
    section = DOC.split("\n## 7.")[1].split("\n## ")[0]  # with its subsections
    for flag in (o.flag for o in cli.commands()[command].options if not o.positional):
        assert f"{flag} " in section or f"{flag}`" in section or f"{flag}]" in section, \
            f"{command} {flag} is missing from docs/interface.md section 7"
