"""The one check of a histogram bucket's bound, for the engine's /metrics text (`le="..."`) and a
schema-3 snapshot histogram's bucket keys alike.

A bound is a finite number, or exactly `+Inf` (the last bucket, which equals the count). A NaN
bound orders nowhere, and any other spelling of infinity (`1e999`, `-Inf`, `Infinity`) would
take the `+Inf` bucket's place, or sort first: such a bucket is refused on both paths.
"""

from __future__ import annotations

import math
from typing import Final

PLUS_INF: Final = "+Inf"


def bucket_bound(raw: str) -> float | None:
    """The bound `raw` names; None when it is not a number, or not finite and not `+Inf`."""
    try:
        number = float(raw)
    except ValueError:
        return None
    if math.isfinite(number) or raw == PLUS_INF:
        return number
    return None
