"""Evaluates tensor pairs with the real msaccucmp AlgorithmManager (run with msaccucmp's folder on sys.path).

Usage: python msaccucmp_metrics.py PAIRS.npz OUT.json. PAIRS.npz holds my_<i>, golden_<i> (bf16 stored as uint16
with a ``bf16_<i>`` marker) and shape_<i>. Writes [{"values": [...], "messages": [...]}, ...] in pair order.
"""
import json
import sys

import numpy as np


def main() -> None:
    from algorithm_manager.algorithm_manager import AlgorithmManager
    from cmp_utils import utils

    manager = AlgorithmManager("", "all", "")
    data = np.load(sys.argv[1])
    count = int(data["count"])
    out = []
    for i in range(count):
        my, golden = data[f"my_{i}"], data[f"golden_{i}"]
        if f"bf16my_{i}" in data:
            import ml_dtypes
            my = my.view(ml_dtypes.bfloat16)
        if f"bf16golden_{i}" in data:
            import ml_dtypes
            golden = golden.view(ml_dtypes.bfloat16)
        shape = [int(v) for v in data[f"shape_{i}"]]
        try:
            values, messages = manager.compare(my.flatten(), golden.flatten(), {
                "my_output_dump_file": "my", "ground_truth_dump_file": "golden",
                "shape_type": utils.get_shape_type(shape)})
        except Exception as exc:  # size mismatch raises CompareError
            values, messages = None, [str(exc)]
        out.append({"values": values, "messages": messages})
    with open(sys.argv[2], "w") as handle:
        json.dump(out, handle)


if __name__ == "__main__":
    main()
