"""The kernels of the simulated device: what each op type computes, and how each faulty fused kernel goes wrong.

A kernel is ``kernel(node, inputs, faults) -> ndarray``. ``faults`` holds the names of the faulty rules that
contributed to ``node``; a kernel only reacts to the faults it knows about (a LayerNorm kernel ignores a fault of
MulSquareFusionPass even when a Square it absorbed came from that pass, because the fused kernel is new code).

The faults are realistic device-kernel bugs, each small enough not to crash anything:

* MatMulBiasAddFusionPass: the fused MatMul drops its bias.
* MatmulCastFusionPass: the K tail (K % 16 elements) is accumulated twice by the fp32-output MatMul.
* MulSquareFusionPass: Square is evaluated in float16 and saturates at 65504.
* LayerNormFusionPass: one-pass variance E[x^2]-E[x]^2 accumulated in float16, which saturates for large rows.
* GeluFusionPass: the odd-symmetry shortcut is applied to the tanh argument too (uses |x|), so negative inputs
  pass almost unchanged instead of being squashed.
* MulAddFusionPass: the per-channel scale is broadcast from its first element (a wrong broadcast).
* SoftmaxFusionPass: the max is taken per class (axis 0) instead of per row, so the shift does not cancel.
* LogSoftmaxFusionPass: the row max is subtracted inside the log-sum-exp but not added back (missing term).
* SoftmaxSmallOpFusionPass: the small-op kernel leaves the last (tail) lane out of the row sum.
* AReduceSumFusionPass: ReduceSumD starts at element 1 (off-by-one start offset).
* AReduceMeanFusionPass: ReduceMeanD divides by the axis length padded to the 16-element block.
* TbeEltwiseFusionPass: the fused kernel computes its first op in place, so later ops that read the same
  input see the overwritten buffer.
* TbeReduceElemwiseFusionPass: the fused reduce skips the last element of the reduced axis (tail bug).
* AutoSingleReduceFusionPass: the auto-fused mean divides by n-1.
"""

from __future__ import annotations

import numpy as np

from fusebisect.sim.graph import Node

F16 = np.float16
F32 = np.float32
GELU_K = np.float32(np.sqrt(2.0 / np.pi))
GELU_C = np.float32(0.044715)


def _axis(node: Node) -> int:
    return int(node.attrs.get("axis", -1))


def _keep(node: Node) -> bool:
    return bool(node.attrs.get("keep_dims", True))


def _out(node: Node, value: np.ndarray) -> np.ndarray:
    return np.asarray(value).astype(node.dtype, copy=False)


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.matmul(a.astype(F32, copy=False), b.astype(F32, copy=False))


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float, faulty: bool) -> np.ndarray:
    x = x.astype(F32, copy=False)
    if faulty:
        n = x.shape[-1]
        x16 = x.astype(F16)
        with np.errstate(over="ignore", invalid="ignore"):
            s1 = np.sum(x16, axis=-1, keepdims=True, dtype=F16)
            s2 = np.sum(x16 * x16, axis=-1, keepdims=True, dtype=F16)
            mean = (s1 / F16(n)).astype(F32)
            var = (s2 / F16(n)).astype(F32) - mean * mean
            rstd = 1.0 / np.sqrt(np.maximum(var, 0) + eps)
        return (x - mean) * rstd * gamma + beta
    mean = x.mean(axis=-1, keepdims=True)
    d = x - mean
    var = (d * d).mean(axis=-1, keepdims=True)
    return d / np.sqrt(var + F32(eps)) * gamma + beta


def _gelu(x: np.ndarray, faulty: bool) -> np.ndarray:
    x = x.astype(F32, copy=False)
    if faulty:
        a = np.abs(x)
        return 0.5 * x * (1.0 + np.tanh(GELU_K * (a + GELU_C * a * a * a)))
    return 0.5 * x * (1.0 + np.tanh(GELU_K * (x + GELU_C * x * x * x)))


def _shifted(x: np.ndarray, faults: frozenset[str]) -> tuple[np.ndarray, np.ndarray]:
    """x minus the softmax shift; returns (shifted, row max actually used)."""
    x = x.astype(F32, copy=False)
    if "SoftmaxFusionPass" in faults:
        m = np.broadcast_to(x.max(axis=0, keepdims=True), x.shape)
    else:
        m = np.broadcast_to(x.max(axis=-1, keepdims=True), x.shape)
    return x - m, m


def _row_sums(e: np.ndarray, faults: frozenset[str]) -> np.ndarray:
    s = e.sum(axis=-1, keepdims=True)
    if "SoftmaxSmallOpFusionPass" in faults:
        return s - e[..., -1:]
    return s


def _softmax(x: np.ndarray, faults: frozenset[str]) -> np.ndarray:
    z, _ = _shifted(x, faults)
    e = np.exp(z)
    return e / _row_sums(e, faults)


def _log_softmax(x: np.ndarray, faults: frozenset[str]) -> np.ndarray:
    z, m = _shifted(x, faults)
    lse = np.log(_row_sums(np.exp(z), faults))
    if "LogSoftmaxFusionPass" in faults:
        return x.astype(F32) - lse
    return z - lse


def _reduce_sum(x: np.ndarray, axis: int, keep: bool, faults: frozenset[str]) -> np.ndarray:
    if "AReduceSumFusionPass" in faults:
        x = np.take(x, np.arange(1, x.shape[axis]), axis=axis)
    return x.sum(axis=axis, keepdims=keep)


def _reduce_mean(x: np.ndarray, axis: int, keep: bool, faults: frozenset[str]) -> np.ndarray:
    if "AReduceMeanFusionPass" in faults:
        n = x.shape[axis]
        padded = -(-n // 16) * 16
        return x.sum(axis=axis, keepdims=keep) / F32(padded)
    return x.mean(axis=axis, keepdims=keep)


def run_kernel(node: Node, args: list[np.ndarray], faults: frozenset[str]) -> np.ndarray:
    """Compute ``node``'s output from its inputs with the faults that apply to it. Raises KeyError for an unknown
    op type (a bug in the simulator, not a user error)."""
    t = node.type
    if node.members:
        return _run_ub(node, args, faults)
    if t == "MatMul":
        return _out(node, _matmul(args[0], args[1]))
    if t == "MatMulV2":
        out = _matmul(args[0], args[1])
        if "MatmulCastFusionPass" in faults:
            k = args[0].shape[-1]
            tail = k % 16
            if tail:
                out = out + _matmul(args[0][..., k - tail:], args[1][k - tail:, ...])
        if node.attrs.get("has_bias") and "MatMulBiasAddFusionPass" not in faults:
            out = out + args[2].astype(F32)
        return _out(node, out)
    if t in ("BiasAdd", "Add"):
        return _out(node, args[0] + args[1])
    if t == "Sub":
        return _out(node, args[0] - args[1])
    if t == "Mul":
        return _out(node, args[0] * args[1])
    if t == "Square":
        if "MulSquareFusionPass" in faults:
            with np.errstate(over="ignore"):
                return _out(node, np.square(args[0].astype(F16)))
        return _out(node, np.square(args[0]))
    if t == "RealDiv":
        return _out(node, args[0] / args[1])
    if t == "Rsqrt":
        return _out(node, 1.0 / np.sqrt(args[0]))
    if t == "Tanh":
        return _out(node, np.tanh(args[0]))
    if t == "Exp":
        return _out(node, np.exp(args[0]))
    if t == "Log":
        with np.errstate(divide="ignore"):
            return _out(node, np.log(args[0]))
    if t == "Neg":
        return _out(node, -args[0])
    if t == "Cast":
        with np.errstate(over="ignore"):
            return _out(node, args[0])
    if t == "ReduceMax":
        return _out(node, args[0].max(axis=_axis(node), keepdims=_keep(node)))
    if t in ("ReduceSum", "ReduceSumD"):
        f = faults if t == "ReduceSumD" else frozenset()
        return _out(node, _reduce_sum(args[0], _axis(node), _keep(node), f))
    if t in ("ReduceMean", "ReduceMeanD"):
        f = faults if t == "ReduceMeanD" else frozenset()
        return _out(node, _reduce_mean(args[0], _axis(node), _keep(node), f))
    if t == "LayerNorm":
        return _out(node, _layer_norm(args[0], args[1], args[2], node.attrs["eps"],
                                      "LayerNormFusionPass" in faults))
    if t == "Gelu":
        return _out(node, _gelu(args[0], "GeluFusionPass" in faults))
    if t == "FusedMulAdd":
        scale = args[1]
        if "MulAddFusionPass" in faults:
            scale = np.full_like(scale, scale.reshape(-1)[0])
        return _out(node, args[0] * scale + args[2])
    if t == "SoftmaxV2":
        return _out(node, _softmax(args[0], faults))
    if t == "LogSoftmaxV2":
        return _out(node, _log_softmax(args[0], faults))
    raise KeyError(f"no kernel for op type {t}")


def _run_ub(node: Node, args: list[np.ndarray], faults: frozenset[str]) -> np.ndarray:
    """A UB-fused kernel: its member ops run back to back on on-chip buffers."""
    local: dict[str, np.ndarray] = dict(zip(node.inputs, args))
    ub = node.ub_pass_name or ""
    ub_faulty = ub in faults
    out = None
    for i, m in enumerate(node.members):
        margs = [local[s] for s in m.inputs]
        mfaults = faults & frozenset(m.all_passes())
        if ub_faulty and ub == "TbeReduceElemwiseFusionPass" and m.type in ("ReduceSumD", "ReduceSum"):
            margs = [np.take(margs[0], np.arange(margs[0].shape[_axis(m)] - 1), axis=_axis(m))]
        out = run_kernel(m, margs, mfaults)
        if ub_faulty and ub == "AutoSingleReduceFusionPass" and m.type in ("ReduceMeanD", "ReduceMean"):
            n = margs[0].shape[_axis(m)]
            out = _out(m, out * (F32(n) / F32(max(n - 1, 1))))
        local[m.name] = out
        if ub_faulty and ub == "TbeEltwiseFusionPass" and i == 0 and m.inputs:
            local[m.inputs[0]] = out  # computed in place over its input buffer
    assert out is not None
    return _out(node, out)
