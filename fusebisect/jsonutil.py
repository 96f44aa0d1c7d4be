"""Plain JSON values from the objects fusebisect reports (numpy scalars, paths, sets, dataclasses)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import PurePath
from typing import Any

_PLAIN = (str, int, type(None))     # returned as they are (bool is an int)


def to_jsonable(obj: Any) -> Any:
    """Convert numpy scalars, paths, sets and dataclasses into plain JSON values (NaN/Inf become null)."""
    if isinstance(obj, _PLAIN):
        return obj
    if isinstance(obj, float):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        items = sorted(obj) if isinstance(obj, (set, frozenset)) else obj
        return [to_jsonable(v) for v in items]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return to_jsonable(dataclasses.asdict(obj))
    if isinstance(obj, PurePath):
        return str(obj)
    if type(obj).__module__ == "numpy":
        import numpy as np

        if isinstance(obj, np.generic):
            return to_jsonable(obj.item())
    return obj
