"""docs/adding-a-metric.md as a program: its numbered steps (a file each, and the blocks that
edit or create it), the number of files it says the change takes, and the commands under "Then".

The page's convention, read here literally: a `diff` block's unmarked lines occur once in the
file, and the lines marked `+` are added where they stand (`-` lines are removed); any other
block is the whole of a new file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

DOC = "docs/adding-a-metric.md"
# "1. **The schema source**, `exporter/snapshot/source.py`..." at the start of a line.
_STEP = re.compile(r"^(?P<number>\d+)\. \*\*(?P<title>[^*]+)\*\*, `(?P<path>[^`]+)`")
_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<lang>[\w-]*) *$")
_COUNT = re.compile(r"^That is (?P<count>\w+) files\.$", re.M)
_GENERATED = re.compile(r"`scripts/generate`, which\s+rewrites (?P<count>\w+) more\.")
WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
         "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
         "eighteen", "nineteen", "twenty")


class DocError(AssertionError):
    """The page cannot be followed as written (a block that does not apply, a missing part)."""


@dataclass(frozen=True)
class Block:
    lang: str
    text: str
    line: int  # of the opening fence, 1-based


@dataclass(frozen=True)
class Step:
    number: int
    title: str
    path: str
    blocks: tuple[Block, ...]

    @property
    def creates(self) -> bool:
        return any(b.lang != "diff" for b in self.blocks)

    def added(self) -> str:
        """Every line the step adds, joined (what it writes into its file)."""
        return "\n".join(line[1:] for b in self.blocks if b.lang == "diff"
                         for line in b.text.splitlines() if line.startswith("+")) + \
            "".join(b.text for b in self.blocks if b.lang != "diff")


def blocks(lines: list[str], first: int = 0) -> list[Block]:
    """The fenced blocks of `lines` (a fence may be indented, as in a list item, and longer
    than three backticks so that it can hold a block of its own), dedented by the opening
    fence's indentation."""
    out: list[Block] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        indent, fence = len(match.group("indent")), match.group("fence")
        body: list[str] = []
        j = i + 1
        while j < len(lines) and lines[j].strip() != fence:
            if lines[j][:indent].strip():
                raise DocError(f"{DOC}:{first + j + 1}: a block's line left of its fence")
            body.append(lines[j][indent:])
            j += 1
        if j == len(lines):
            raise DocError(f"{DOC}:{first + i + 1}: a block that is never closed")
        out.append(Block(match.group("lang"), "".join(f"{b}\n" for b in body), first + i + 1))
        i = j + 1
    return out


def steps(text: str) -> list[Step]:
    """The numbered steps under "## By hand", in order."""
    lines = text.splitlines()
    try:
        start = lines.index("## By hand")
        end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("## "))
    except (ValueError, StopIteration):
        raise DocError(f"{DOC}: no '## By hand' section followed by another") from None
    heads = [(i, m) for i in range(start, end) if (m := _STEP.match(lines[i]))]
    out = []
    for k, (i, match) in enumerate(heads):
        stop = heads[k + 1][0] if k + 1 < len(heads) else end
        found = blocks(lines[i:stop], first=i)
        if not found:
            raise DocError(f"{DOC}:{i + 1}: step {match['number']} shows no block")
        out.append(Step(int(match["number"]), match["title"], match["path"], tuple(found)))
    if [s.number for s in out] != list(range(1, len(out) + 1)):
        raise DocError(f"{DOC}: steps not numbered 1..n: {[s.number for s in out]}")
    return out


def _number(word: str) -> int:
    return int(word) if word.isdigit() else WORDS.index(word)


def stated_count(text: str) -> int:
    """The number of files the page says the change takes by hand ("That is ten files.")."""
    match = _COUNT.search(text)
    if match is None:
        raise DocError(f"{DOC}: no 'That is N files.' line")
    return _number(match["count"])


def stated_generated(text: str) -> int:
    """The number of files the page says `scripts/generate` rewrites besides them."""
    match = _GENERATED.search(text)
    if match is None:
        raise DocError(f"{DOC}: no '`scripts/generate`, which rewrites N more.'")
    return _number(match["count"])


def commands(text: str) -> list[str]:
    """The commands of the `sh` block under "## Then", one per logical line (continuations
    joined, comments dropped)."""
    lines = text.splitlines()
    if "## Then" not in lines:
        raise DocError(f"{DOC}: no '## Then' section")
    start = lines.index("## Then")
    sh = [b for b in blocks(lines[start:], first=start) if b.lang == "sh"]
    if not sh:
        raise DocError(f"{DOC}: no sh block under '## Then'")
    out: list[str] = []
    pending = ""
    for raw in sh[0].text.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", raw).strip()
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        line = (pending + line).strip()
        pending = ""
        if line:
            out.append(line)
    return out


def hunk(block: Block) -> tuple[str, str]:
    """A diff block as (the text it finds, the text it leaves)."""
    old, new = [], []
    for line in block.text.splitlines():
        mark, rest = (line[:1], line[1:]) if line else (" ", "")
        if mark not in " +-":
            raise DocError(f"{DOC}:{block.line}: a diff line that is not ' ', '+' or '-': {line!r}")
        if mark != "+":
            old.append(rest)
        if mark != "-":
            new.append(rest)
    if not any(old):
        raise DocError(f"{DOC}:{block.line}: a diff block without a line to find")
    return "".join(f"{x}\n" for x in old), "".join(f"{x}\n" for x in new)


def apply(step: Step, root: Path) -> None:
    """Make the step's edit under `root`, exactly as its blocks say."""
    path = root / step.path
    if step.creates:
        if len(step.blocks) != 1:
            raise DocError(f"{DOC}: step {step.number}: a new file is one block")
        if path.exists():
            raise DocError(f"{DOC}: step {step.number}: {step.path} exists already")
        path.write_text(step.blocks[0].text, encoding="utf-8")
        return
    if not path.is_file():
        raise DocError(f"{DOC}: step {step.number}: {step.path} is not a file")
    text = path.read_text(encoding="utf-8")
    for block in step.blocks:
        old, new = hunk(block)
        # Whole lines only: the text found starts at a line's start.
        at = [m.start() for m in re.finditer(re.escape(old), text)
              if m.start() == 0 or text[m.start() - 1] == "\n"]
        if len(at) != 1:
            raise DocError(f"{DOC}:{block.line}: step {step.number}'s lines occur {len(at)} "
                           f"times in {step.path}, not once:\n{old}")
        text = text[:at[0]] + new + text[at[0] + len(old):]
    path.write_text(text, encoding="utf-8")
