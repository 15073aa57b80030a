"""A runbook as the test reads it: its sections, its code blocks (dedented, with the deployment
a block is for), the PromQL queries and the `/status` fields its prose names."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from alerts.config import read_raw
from tests.conftest import ROOT

RUNBOOK_DIR = ROOT / "docs" / "runbooks"
SETUP_PAGE = RUNBOOK_DIR / "README.md"  # the set-up blocks every runbook links to
SETUP_LINK = "(README.md#set-up)"
SECTIONS = ("## Meaning", "## Set up", "## Check", "## Act", "## When it resolves", "## Escalate")
# The first line of a block that belongs to one deployment only.
# Longest first: "# Kubernetes with TLS" is not "# Kubernetes".
DEPLOYMENT_COMMENT = {"# Kubernetes with TLS": "kubernetes-tls", "# Kubernetes": "kubernetes",
                      "# Compose": "compose", "# Plain": "plain"}

_FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)[ \t]*$")


@dataclass(frozen=True)
class Block:
    lang: str
    text: str
    line: int          # of the opening fence, 1-based
    section: str       # the `## ` heading it is under
    deployment: str | None

    @property
    def where(self) -> str:
        return f"line {self.line} ({self.section})"


@dataclass(frozen=True)
class Runbook:
    path: Path
    text: str

    @property
    def name(self) -> str:
        return self.path.stem

    def headings(self) -> list[str]:
        return [ln.strip() for ln in self.text.splitlines() if ln.startswith("## ")]

    def blocks(self) -> list[Block]:
        out: list[Block] = []
        lines = self.text.splitlines()
        section = ""
        i = 0
        while i < len(lines):
            if lines[i].startswith("## "):
                section = lines[i][3:].strip()
            match = _FENCE.match(lines[i])
            if match is None:
                i += 1
                continue
            indent, start = len(match.group("indent")), i
            body: list[str] = []
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
                i += 1
            first = body[0] if body else ""
            deployment = next((d for prefix, d in DEPLOYMENT_COMMENT.items()
                               if first.startswith(prefix)), None)
            out.append(Block(match.group("lang"), "\n".join(body) + "\n", start + 1, section,
                             deployment))
            i += 1
        return out

    def shell_blocks(self) -> list[Block]:
        return [b for b in self.blocks() if b.lang in ("sh", "bash", "shell")]

    def set_up_text(self) -> str:
        """The text of the `## Set up` section."""
        return self.text.split("\n## Set up\n", 1)[-1].split("\n## ", 1)[0] \
            if "\n## Set up\n" in self.text else ""

    def setup_blocks(self) -> dict[str, Block]:
        """The Set up section's first block of each deployment: the one that sets the variables
        every later block uses; for a runbook whose Set up section links to the common page,
        the page's."""
        found: dict[str, Block] = {}
        for block in self.shell_blocks():
            if block.section == "Set up" and block.deployment is not None:
                found.setdefault(block.deployment, block)
        if not found and self.path != SETUP_PAGE and SETUP_LINK in self.set_up_text():
            return setup_page().setup_blocks()
        return found

    def command_blocks(self, deployment: str) -> list[Block]:
        """Every other shell block that a person on `deployment` runs."""
        setups = set(self.setup_blocks().values())
        return [b for b in self.shell_blocks()
                if b not in setups and b.deployment in (None, deployment)]

    def queries(self) -> list[tuple[Block, str]]:
        """PromQL of the `promql` blocks: one query per line, indented lines continue it."""
        out: list[tuple[Block, str]] = []
        for block in self.blocks():
            if block.lang != "promql":
                continue
            current: list[str] = []
            for line in block.text.splitlines():
                if line.startswith((" ", "\t")) and current:
                    current.append(line)
                    continue
                if current:
                    out.append((block, "\n".join(current)))
                current = [line] if line.strip() else []
            if current:
                out.append((block, "\n".join(current)))
        return out

    def prose(self) -> str:
        """The text outside code blocks."""
        return re.sub(r"^[ \t]*```.*?^[ \t]*```[ \t]*$", "", self.text, flags=re.S | re.M)


def setup_page() -> Runbook:
    """docs/runbooks/README.md: the Set up blocks of every deployment, and the blocks that show
    the sidecar's status, which every runbook links to."""
    return Runbook(SETUP_PAGE, SETUP_PAGE.read_text(encoding="utf-8"))


def runbooks() -> list[Runbook]:
    return [Runbook(p, p.read_text(encoding="utf-8")) for p in sorted(RUNBOOK_DIR.glob("*.md"))
            if not p.name.startswith(("_", "README"))]


def _config_keys(node: object, prefix: str = "") -> set[str]:
    if not isinstance(node, dict):
        return set()
    keys = set()
    for key, value in node.items():
        keys.add(prefix + str(key))
        keys |= _config_keys(value, f"{prefix}{key}.")
    return keys


def status_fields(prose: str, top_level: set[str]) -> set[str]:
    """`/status` fields the prose names in backticks as dotted paths (`restore.window.start`),
    recognised by their first key being a top-level key of `/status`; keys of
    alerts/config.yaml (`restore.outcome_notice`) are not fields."""
    config = _config_keys(read_raw(ROOT / "alerts" / "config.yaml"))
    fields = set()
    for token in re.findall(r"`([^`\s]+)`", prose):
        parts = token.split(".")
        if token in config:
            continue
        if len(parts) > 1 and parts[0] in top_level \
                and all(re.fullmatch(r"[a-z_]+(\[\])?", p) for p in parts):
            fields.add(token)
    return fields
