"""The strict-output gate of `compare`: request by request, pair by pair, both arms returned the
output length the corpus fixed and the same output hash (lab/compare/admission.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from lab.compare.matched import Lane
from lab.compare.verdicts import FAILS, HOLDS, NOT_EVALUATED, Gate

OTHER_OUTPUT: Final = "another output (output_sha256 differs)"
# Changes that may change the text itself (numerics, another checkpoint, speculative decoding):
# their outputs must keep the fixed length, and the semantic gate judges the text. An allocator
# change must not change a single output.
TEXT_MAY_CHANGE: Final = frozenset({"runtime", "quantization", "speculation"})


def strict_output(lanes: Sequence[Lane], change: str | None) -> Gate:
    """Request by request: the fixed output length always; the same output hash unless the
    declared change may change the text (TEXT_MAY_CHANGE), which the semantic gate judges."""
    compared = tokens = 0
    differ: list[str] = []
    texts: list[str] = []  # other output hashes under a change that may change them
    for row in lanes:
        for pair in row.pairs:
            for k, (bo, co) in enumerate(zip(pair.base.outputs, pair.cand.outputs, strict=False)):
                phase = pair.cand.chain[k]
                if bo is None or co is None:
                    return Gate("strict output", NOT_EVALUATED, f"no output hashes recorded for "
                                f"{pair.base.chain[k] if bo is None else phase} (a phase without "
                                "a probe record, or a record of an older probe)")
                if len(bo) != len(co):
                    differ.append(f"{phase}: {len(bo)} requests in the baseline, {len(co)} in "
                                  "the candidate")
                    continue
                for i, (b, c) in enumerate(zip(bo, co, strict=True)):
                    compared += 1
                    tokens += int(c.get("completion_tokens") or 0)
                    why = output_differs(b, c)
                    where = f"{phase} #{i} (body {str(c.get('sha256'))[:12]})"
                    if why == OTHER_OUTPUT and change in TEXT_MAY_CHANGE:
                        texts.append(where)
                    elif why:
                        differ.append(f"{where}: {why}")
    if differ:
        more = f" (and {len(differ) - 3} more)" if len(differ) > 3 else ""
        return Gate("strict output", FAILS, f"{len(differ)} of {compared} requests differ between "
                    f"the arms: {'; '.join(differ[:3])}{more}")
    if not compared:
        return Gate("strict output", NOT_EVALUATED, "no requests to compare")
    if texts:
        return Gate("strict output", HOLDS, f"{compared:,} requests (every pass of every pair): "
                    f"the fixed output length in both arms ({tokens:,} output tokens in each); "
                    f"{len(texts):,} output hashes differ (first: {texts[0]}), which a {change} "
                    "change may do: the semantic gate judges those outputs")
    return Gate("strict output", HOLDS, f"{compared:,} requests (every pass of every pair): the "
                f"same output hash and the fixed output length in both arms ({tokens:,} output "
                "tokens in each)")


def output_differs(b: Mapping[str, Any], c: Mapping[str, Any]) -> str | None:
    for label, o in (("baseline", b), ("candidate", c)):
        expected = o.get("expected_tokens")
        if expected is None:
            return f"the {label}'s body did not fix its output length"
        if o.get("completion_tokens") != expected:
            return (f"{label} completion_tokens {o.get('completion_tokens')}, the corpus fixed "
                    f"{expected}")
    if b.get("sha256") != c.get("sha256"):
        return "another body"
    if not b.get("output_sha256") or b.get("output_sha256") != c.get("output_sha256"):
        return OTHER_OUTPUT
    return None


