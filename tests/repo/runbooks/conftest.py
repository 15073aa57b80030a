"""Fixtures of the runbook tests, built once per session: the shims, the deployments' facts,
a real /status, and each distinct Set up block run once per deployment."""

from __future__ import annotations

import shutil

import pytest

from tests.deploy.conftest import KUBE
from tests.process_guard import process_fixture
from tests.repo.runbooks.deployments import Deployment, compose, kubernetes, plain
from tests.repo.runbooks.runbook_check import Sample, SetUps, make_sample
from tests.repo.runbooks.runbook_shell import Shell


@process_fixture(scope="session")
def shell(tmp_path_factory: pytest.TempPathFactory) -> Shell:
    return Shell(tmp_path_factory.mktemp("shell"))


@process_fixture(scope="session")
def deployments(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Deployment]:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool not installed (Debian package prometheus): scripts/bootstrap")
    return {"kubernetes": kubernetes(tmp_path_factory.mktemp("kube"), promtool),
            "kubernetes-tls": kubernetes(tmp_path_factory.mktemp("kube-tls"), promtool,
                                         KUBE.parent / "kubernetes-tls"),
            "compose": compose(), "plain": plain()}


@process_fixture(scope="session")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Sample:
    return make_sample(tmp_path_factory.mktemp("status"))


@process_fixture(scope="session")
def setups(shell: Shell, deployments: dict[str, Deployment], sample: Sample) -> SetUps:
    return SetUps(shell, deployments, sample)
