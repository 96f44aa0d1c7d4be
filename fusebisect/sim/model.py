"""The simulated training job's model: data, parameters, the framework graph of primitive ops, and its gradient.

Model: ``x -> MatMul+BiasAdd -> LayerNorm -> GELU (tanh form) -> layer-scale residual (gelu*ls + ln) -> Cast to
float16 -> MatMul (float16) -> Cast to float32 -> BiasAdd -> softmax cross-entropy``, written as primitive ops
the way a framework hands them to GE, so the fusion passes have real patterns to match.

The gradient is computed analytically in float32 from the forward tensors of the *compiled* graph (looked up by
original op name, recomputed with reference math when a fused kernel swallowed them), so a wrong fused kernel
changes what the model learns, as on a device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from fusebisect.sim.graph import Graph, Node

BATCH = 60
SAMPLES = 240
IN_DIM = 16
HIDDEN = 40
CLASSES = 4
LN_EPS = 1e-5
LEARNING_RATE = 0.1
PARAMS = ("fc1_weight", "fc1_bias", "ln_gamma", "ln_beta", "res_scale", "fc2_weight", "fc2_bias")
LOSS_OP = "ce_mean"
LOGP_OP = "ce_log"


@dataclass
class Dataset:
    """Synthetic classification data with very uneven row scales (what LayerNorm is there for)."""

    x: np.ndarray  # [SAMPLES, IN_DIM] float32
    labels: np.ndarray  # [SAMPLES] int

    def batch(self, step: int) -> tuple[np.ndarray, np.ndarray]:
        """The (x, one-hot) batch for ``step`` (batches cycle through the data set)."""
        n = SAMPLES // BATCH
        lo = (step % n) * BATCH
        y = self.labels[lo:lo + BATCH]
        onehot = np.zeros((BATCH, CLASSES), dtype=np.float32)
        onehot[np.arange(BATCH), y] = 1.0
        return self.x[lo:lo + BATCH], onehot


def make_data(seed: int, *, input_scale: float = 1.0) -> Dataset:
    """Data for ``seed``: labels from a random linear teacher on the direction of each row, rows scaled by a
    log-normal factor (median 15). ``input_scale`` multiplies everything (the overflow scenario)."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((SAMPLES, IN_DIM)).astype(np.float32)
    teacher = rng.standard_normal((IN_DIM, CLASSES)).astype(np.float32)
    labels = np.argmax(z @ teacher, axis=1)
    scale = np.exp(rng.normal(np.log(15.0), 0.9, size=(SAMPLES, 1))).astype(np.float32)
    return Dataset(x=(z * scale * np.float32(input_scale)).astype(np.float32), labels=labels)


def init_params(seed: int) -> dict[str, np.ndarray]:
    """Initial parameters for ``seed`` (float32)."""
    rng = np.random.default_rng(seed + 1)
    f = np.float32
    return {
        "fc1_weight": (rng.standard_normal((IN_DIM, HIDDEN)) / np.sqrt(IN_DIM)).astype(f),
        "fc1_bias": rng.normal(0.0, 8.0, HIDDEN).astype(f),
        "ln_gamma": np.ones(HIDDEN, dtype=f),
        "ln_beta": np.zeros(HIDDEN, dtype=f),
        "res_scale": np.linspace(0.1, 1.0, HIDDEN).astype(f),
        "fc2_weight": (rng.standard_normal((HIDDEN, CLASSES)) / np.sqrt(HIDDEN)).astype(f),
        "fc2_bias": np.zeros(CLASSES, dtype=f),
    }


def _const(name: str, value: float) -> Node:
    return Node(name, "Const", [], {"value": np.float32(value)}, "float32", ())


def build_graph(*, fc1_dtype: str = "float32") -> Graph:
    """The framework graph (what GE receives before any fusion). ``fc1_dtype`` float16 runs the first MatMul in
    float16 (mixed precision; the overflow scenario)."""
    B, D, H, C = BATCH, IN_DIM, HIDDEN, CLASSES
    n = Node
    nodes = [
        n("x", "Data", [], {}, "float32", (B, D)),
        n("labels", "Data", [], {}, "float32", (B, C)),
        n("fc1_weight", "Variable", [], {}, "float32", (D, H)),
        n("fc1_bias", "Variable", [], {}, "float32", (H,)),
        n("ln_gamma", "Variable", [], {}, "float32", (H,)),
        n("ln_beta", "Variable", [], {}, "float32", (H,)),
        n("res_scale", "Variable", [], {}, "float32", (H,)),
        n("fc2_weight", "Variable", [], {}, "float32", (H, C)),
        n("fc2_bias", "Variable", [], {}, "float32", (C,)),
        _const("ln_eps", LN_EPS),
        _const("gelu_c", 0.044715),
        _const("gelu_k", float(np.sqrt(2.0 / np.pi))),
        _const("one", 1.0),
        _const("half", 0.5),
    ]
    if fc1_dtype == "float16":
        nodes += [n("fc1_cast_x", "Cast", ["x"], {"dst_type": "float16"}, "float16", (B, D)),
                  n("fc1_cast_w", "Cast", ["fc1_weight"], {"dst_type": "float16"}, "float16", (D, H)),
                  n("fc1_MatMul", "MatMul", ["fc1_cast_x", "fc1_cast_w"], {}, "float16", (B, H))]
    else:
        nodes.append(n("fc1_MatMul", "MatMul", ["x", "fc1_weight"], {}, "float32", (B, H)))
    nodes += [
        n("fc1_BiasAdd", "BiasAdd", ["fc1_MatMul", "fc1_bias"], {}, "float32", (B, H)),
        n("ln_mean", "ReduceMean", ["fc1_BiasAdd"], {"axis": -1, "keep_dims": True}, "float32", (B, 1)),
        n("ln_sub", "Sub", ["fc1_BiasAdd", "ln_mean"], {}, "float32", (B, H)),
        n("ln_sq", "Mul", ["ln_sub", "ln_sub"], {}, "float32", (B, H)),
        n("ln_var", "ReduceMean", ["ln_sq"], {"axis": -1, "keep_dims": True}, "float32", (B, 1)),
        n("ln_add_eps", "Add", ["ln_var", "ln_eps"], {}, "float32", (B, 1)),
        n("ln_rsqrt", "Rsqrt", ["ln_add_eps"], {}, "float32", (B, 1)),
        n("ln_norm", "Mul", ["ln_sub", "ln_rsqrt"], {}, "float32", (B, H)),
        n("ln_scale", "Mul", ["ln_norm", "ln_gamma"], {}, "float32", (B, H)),
        n("ln_out", "Add", ["ln_scale", "ln_beta"], {}, "float32", (B, H)),
        n("gelu_sq", "Mul", ["ln_out", "ln_out"], {}, "float32", (B, H)),
        n("gelu_cube", "Mul", ["gelu_sq", "ln_out"], {}, "float32", (B, H)),
        n("gelu_mul_c", "Mul", ["gelu_cube", "gelu_c"], {}, "float32", (B, H)),
        n("gelu_inner", "Add", ["ln_out", "gelu_mul_c"], {}, "float32", (B, H)),
        n("gelu_mul_k", "Mul", ["gelu_inner", "gelu_k"], {}, "float32", (B, H)),
        n("gelu_tanh", "Tanh", ["gelu_mul_k"], {}, "float32", (B, H)),
        n("gelu_add1", "Add", ["gelu_tanh", "one"], {}, "float32", (B, H)),
        n("gelu_mul_x", "Mul", ["ln_out", "gelu_add1"], {}, "float32", (B, H)),
        n("gelu_out", "Mul", ["gelu_mul_x", "half"], {}, "float32", (B, H)),
        n("res_mul", "Mul", ["gelu_out", "res_scale"], {}, "float32", (B, H)),
        n("res_add", "Add", ["res_mul", "ln_out"], {}, "float32", (B, H)),
        n("fc2_cast_x", "Cast", ["res_add"], {"dst_type": "float16"}, "float16", (B, H)),
        n("fc2_cast_w", "Cast", ["fc2_weight"], {"dst_type": "float16"}, "float16", (H, C)),
        n("fc2_MatMul", "MatMul", ["fc2_cast_x", "fc2_cast_w"], {}, "float16", (B, C)),
        n("fc2_cast_out", "Cast", ["fc2_MatMul"], {"dst_type": "float32"}, "float32", (B, C)),
        n("fc2_BiasAdd", "BiasAdd", ["fc2_cast_out", "fc2_bias"], {}, "float32", (B, C)),
        n("sm_max", "ReduceMax", ["fc2_BiasAdd"], {"axis": -1, "keep_dims": True}, "float32", (B, 1)),
        n("sm_sub", "Sub", ["fc2_BiasAdd", "sm_max"], {}, "float32", (B, C)),
        n("sm_exp", "Exp", ["sm_sub"], {}, "float32", (B, C)),
        n("sm_sum", "ReduceSum", ["sm_exp"], {"axis": -1, "keep_dims": True}, "float32", (B, 1)),
        n("sm_div", "RealDiv", ["sm_exp", "sm_sum"], {}, "float32", (B, C)),
        n("ce_log", "Log", ["sm_div"], {}, "float32", (B, C)),
        n("ce_mul", "Mul", ["ce_log", "labels"], {}, "float32", (B, C)),
        n("ce_sum", "ReduceSum", ["ce_mul"], {"axis": -1, "keep_dims": False}, "float32", (B,)),
        n("ce_neg", "Neg", ["ce_sum"], {}, "float32", (B,)),
        n("ce_mean", "ReduceMean", ["ce_neg"], {"axis": 0, "keep_dims": False}, "float32", ()),
    ]
    return Graph("sim_train_graph", nodes)


def gradients(fetch: Callable[[str], np.ndarray], params: dict[str, np.ndarray], x: np.ndarray,
              onehot: np.ndarray) -> dict[str, np.ndarray]:
    """The float32 gradient of the mean cross-entropy, from forward tensors given by ``fetch(original op name)``.

    Returns one array per parameter name."""
    f32 = np.float32
    h1 = fetch("fc1_BiasAdd").astype(f32)
    ln = fetch("ln_out").astype(f32)
    g = fetch("gelu_out").astype(f32)
    r = fetch("res_add").astype(f32)
    logp = fetch(LOGP_OP).astype(f32)
    with np.errstate(over="ignore", invalid="ignore"):
        p = np.exp(logp)
    dlogits = (p - onehot) / f32(x.shape[0])
    grads = {"fc2_weight": r.T @ dlogits, "fc2_bias": dlogits.sum(axis=0)}
    dr = dlogits @ params["fc2_weight"].T
    grads["res_scale"] = (dr * g).sum(axis=0)
    dg = dr * params["res_scale"]
    u = GELU_K * (ln + GELU_C * ln ** 3)
    t = np.tanh(u)
    dgelu = 0.5 * (1.0 + t) + 0.5 * ln * (1.0 - t * t) * GELU_K * (1.0 + 3.0 * GELU_C * ln * ln)
    dln = dr + dg * dgelu
    mean = h1.mean(axis=-1, keepdims=True)
    d = h1 - mean
    rstd = 1.0 / np.sqrt((d * d).mean(axis=-1, keepdims=True) + f32(LN_EPS))
    xhat = d * rstd
    grads["ln_gamma"] = (dln * xhat).sum(axis=0)
    grads["ln_beta"] = dln.sum(axis=0)
    dxhat = dln * params["ln_gamma"]
    dh1 = rstd * (dxhat - dxhat.mean(axis=-1, keepdims=True) - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))
    grads["fc1_weight"] = x.T @ dh1
    grads["fc1_bias"] = dh1.sum(axis=0)
    return {k: v.astype(f32) for k, v in grads.items()}


GELU_K = np.float32(np.sqrt(2.0 / np.pi))
GELU_C = np.float32(0.044715)
