"""Plain JSON values from the objects fusebisect reports (numpy scalars, paths, sets, dataclasses)."""

from __future__ import annotations

from typing import Any


def to_jsonable(obj: Any) -> Any:
    """Convert numpy scalars, paths, sets and dataclasses into plain JSON values (NaN/Inf become null)."""
    import dataclasses
    import math
    from pathlib import PurePath

    import numpy as np

    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return to_jsonable(dataclasses.asdict(obj))
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        items = sorted(obj) if isinstance(obj, (set, frozenset)) else obj
        return [to_jsonable(v) for v in items]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, PurePath):
        return str(obj)
    return obj
