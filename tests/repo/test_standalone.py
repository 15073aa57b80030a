"""The repository stands alone: nothing it tracks names a path outside it, and a clone with
nothing beside it collects the whole suite and passes the tests that read its fixtures."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import missing

ROOT = Path(__file__).resolve().parents[2]
SELF = Path(__file__).resolve().relative_to(ROOT).as_posix()

# Places that exist only on a developer's machine or in a team folder beside the checkout: a
# file naming one works there and nowhere else. (This file is skipped; its patterns and examples
# are written so that they do not name those places themselves: `[k]` matches only `k`.)
OUTSIDE = re.compile(
    r"\.\./share[d]\b"  # the team folder beside a checkout
    r"|\bshare[d]/fixtures\b"
    r"|\bCONTRAC[T]\.md\b"  # the team's interface notes; ours is docs/interface.md
    r"|(?<![\w.-])/wor[k]/"  # the development machine's work tree
    r"|(?<![\w.-])/home/[A-Za-z0-9_.-]+/"  # anybody's home directory
    r"|(?<![\w.-])/Users/[A-Za-z0-9_.-]+/"
    r"|(?<![\w.-])/roo[t]/"
    r"|\b[A-Za-z]:\\Users\\",
    re.IGNORECASE,
)
# A relative path that climbs: `../x`, `../../x`. In documents and configuration it is resolved
# against the file's own folder (markdown links, promtool's rule_files, compose volumes) and must
# stay inside the repository. Python code joins such paths to a base of its own
# (`FIXTURES / "../x"`), so Python files are held to the fixed patterns above only.
CLIMB = re.compile(r"(?<![\w./-])((?:\.\./)+[\w.-][\w./-]*)")


def tracked() -> dict[str, str]:
    """path -> text of every tracked text file (binary files cannot name a path we care about)."""
    if shutil.which("git") is None:
        missing("git not on PATH")
    done = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True,
                          check=False)
    if done.returncode != 0:
        pytest.skip("not a git checkout (an unpacked archive): no tracked files to check")
    out = {}
    for name in done.stdout.decode().split("\0"):
        path = ROOT / name
        if not name or name == SELF or not path.is_file():
            continue
        try:
            out[name] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
    return out


@pytest.mark.e2e
def test_no_tracked_file_names_a_path_outside_the_repository() -> None:
    files = tracked()
    assert "README.md" in files and "docs/interface.md" in files
    found = []
    for name, text in files.items():
        for number, line in enumerate(text.splitlines(), 1):
            found += [f"{name}:{number}: {m.group(0)!r}" for m in OUTSIDE.finditer(line)]
            for m in CLIMB.finditer(line) if not name.endswith(".py") else ():
                target = (ROOT / name).parent / m.group(1)
                if not target.resolve().is_relative_to(ROOT):
                    found.append(f"{name}:{number}: {m.group(1)!r} leaves the repository")
    assert not found, "tracked files name paths outside the repository:\n" + "\n".join(found)


# Lines naming outside places, spelled with placeholders (filled in below) for the reason above.
OUTSIDE_EXAMPLES = [
    "The fixed interface is `{up}/{team}/{notes}`.",
    "REAL = ROOT.parent / '{team}' / 'fixtures'  # {team}/fixtures/real",
    "see [the contract]({up}/{up}/{team}/contract.md)",
    "cat /{work}/{team}/x.prom",
    "python /{home}/alice/src/helios/bench/run",
    "open /{root}/notes.txt",
]
PLACES = {"up": "..", "team": "share" + "d", "notes": "CONTRAC" + "T.md", "work": "wor" + "k",
          "home": "hom" + "e", "root": "roo" + "t"}


@pytest.mark.parametrize("line", [example.format(**PLACES) for example in OUTSIDE_EXAMPLES])
def test_the_check_finds_outside_paths(line: str) -> None:
    """The patterns above catch what they are for (README.md sits at the root, docs/ below it)."""
    hits = bool(OUTSIDE.search(line)) or any(
        not (ROOT / "docs" / m.group(1)).resolve().is_relative_to(ROOT)
        for m in CLIMB.finditer(line))
    assert hits


@pytest.mark.parametrize("line", [
    "See [docs/interface.md](../interface.md) section 6.",  # docs/runbooks/ -> docs/
    "  - ../helios-alerts.yaml",
    "state under /var/lib/helios-exporter, logs under /tmp/helios-bench-XXXX/",
    "helios-exporter simulate --listen 127.0.0.1:8000",
    "tests/fixtures/real/sglang_production_metrics.prom",
])
def test_the_check_leaves_inside_paths_alone(line: str) -> None:
    assert not OUTSIDE.search(line)
    assert all((ROOT / "docs" / "runbooks" / m.group(1)).resolve().is_relative_to(ROOT)
               for m in CLIMB.finditer(line))


# Tests that read the real-engine fixtures and the example snapshot (golden expositions, the
# snapshot parser, the pass-through): what broke when the fixtures lived beside the repository.
IN_CLONE = ["tests/exporter/collectors/test_golden.py", "tests/exporter/snapshot/test_parse.py",
            "tests/exporter/sources/test_engine_metrics.py"]


@pytest.mark.e2e
def test_a_clone_with_nothing_beside_it_collects_and_passes(tmp_path: Path) -> None:
    """A clone of HEAD (committed files only) alone in an empty folder: the whole suite collects
    without one error, and the fixture-reading tests pass there."""
    if shutil.which("git") is None:
        missing("git not on PATH")
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=False)
    if head.returncode != 0:
        pytest.skip("not a git checkout (an unpacked archive)")
    clone = tmp_path / "alone" / "helios-exporter"
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(ROOT), str(clone)],
                   check=True, timeout=120)
    subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", head.stdout.strip()],
                   check=True, timeout=120)
    assert sorted(p.name for p in clone.parent.iterdir()) == ["helios-exporter"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HELIOS_"))}
    env["PYTHONPATH"] = str(clone)  # before the editable install's finder: the clone's code

    def pytest_in_clone(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0",
                               "-q", *args], cwd=clone, env=env, capture_output=True, text=True,
                              timeout=240, check=False)

    where = subprocess.run([sys.executable, "-c", "import exporter; print(exporter.__file__)"],
                           cwd=clone, env=env, capture_output=True, text=True, check=True)
    assert Path(where.stdout.strip()).is_relative_to(clone)
    collected = pytest_in_clone("--collect-only")
    report = collected.stdout[-3000:] + collected.stderr[-2000:]
    assert collected.returncode == 0, report
    assert not re.search(r"\berrors?\b", collected.stdout.splitlines()[-1]), report
    assert re.search(r"^\d+ tests collected", collected.stdout.splitlines()[-1]), report
    ran = pytest_in_clone(*IN_CLONE)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-2000:]
    assert re.search(r"\b\d+ passed\b", ran.stdout.splitlines()[-1])
