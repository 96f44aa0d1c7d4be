"""Hand the trial's fusion switch file to each Ascend front end.

``fusebisect run`` sets ``FUSEBISECT_SWITCH_FILE`` for every trial. Call one of these functions in your training
or conversion script; each is a no-op (returns its input unchanged, or an empty result) when the variable is
unset, so the script runs unchanged outside fusebisect. None of them imports a framework.

TensorFlow 1.x session config (``NpuOptimizer``)::

    from fusebisect.integrations import apply_tf1_session_config
    config = tf.ConfigProto()
    custom_op = config.graph_options.rewrite_options.custom_optimizers.add()
    custom_op.name = "NpuOptimizer"
    apply_tf1_session_config(custom_op)          # or apply_tf1_session_config(config): finds NpuOptimizer

TensorFlow 1.x Estimator (``NPURunConfig``)::

    from fusebisect.integrations import npu_run_config_kwargs
    run_config = NPURunConfig(model_dir=..., **npu_run_config_kwargs())

TensorFlow 2.x (``npu_device``)::

    import npu_device as npu
    from fusebisect.integrations import apply_tf2_global_options
    apply_tf2_global_options(npu.global_options())
    npu.open().as_default()

PyTorch graph mode (torchair, max-autotune)::

    import torchair
    from fusebisect.integrations import apply_torchair_config
    config = apply_torchair_config(torchair.CompilerConfig())
    backend = torchair.get_npu_backend(compiler_config=config)

MindSpore (GE backend, jit_level O2, MindSpore >= 2.3)::

    import mindspore as ms
    from fusebisect.integrations import mindspore_ascend_config
    ms.set_context(ascend_config=mindspore_ascend_config({"precision_mode": "must_keep_origin_dtype"}))

ATC (offline model conversion)::

    import subprocess
    from fusebisect.integrations import atc_args
    subprocess.run(["atc", "--model=net.onnx", "--framework=5", "--output=net", *atc_args()], check=True)

or in a shell: ``atc ... ${FUSEBISECT_SWITCH_FILE:+--fusion_switch_file=$FUSEBISECT_SWITCH_FILE}``.
"""

from __future__ import annotations

import copy
import os
from typing import Any, Mapping

ENV_VAR = "FUSEBISECT_SWITCH_FILE"
GE_OPTION = "ge.fusionSwitchFile"


def switch_file(environ: Mapping[str, str] | None = None) -> str | None:
    """The absolute path in ``FUSEBISECT_SWITCH_FILE``, or None when it is unset or empty."""
    value = (os.environ if environ is None else environ).get(ENV_VAR, "")
    return os.path.abspath(value) if value else None


def _npu_optimizer(config: Any) -> Any:
    """The NpuOptimizer custom optimizer of a tf.ConfigProto, added if missing; a custom_op is returned as is."""
    if hasattr(config, "parameter_map"):
        return config
    optimizers = config.graph_options.rewrite_options.custom_optimizers
    for opt in optimizers:
        if getattr(opt, "name", None) == "NpuOptimizer":
            return opt
    opt = optimizers.add()
    opt.name = "NpuOptimizer"
    return opt


def apply_tf1_session_config(config: Any, environ: Mapping[str, str] | None = None) -> Any:
    """Set ``parameter_map["fusion_switch_file"].s`` (bytes) on the NpuOptimizer.

    ``config`` is the ``custom_op`` (has ``parameter_map``) or a whole ``tf.ConfigProto`` (its NpuOptimizer is
    found, or added). Returns ``config``. No-op when the variable is unset.
    """
    path = switch_file(environ)
    if path is None:
        return config
    _npu_optimizer(config).parameter_map["fusion_switch_file"].s = path.encode("utf-8")
    return config


def npu_run_config_kwargs(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Keyword arguments for ``NPURunConfig(**kwargs)``: ``{"fusion_switch_file": path}``, or ``{}`` when unset."""
    path = switch_file(environ)
    return {"fusion_switch_file": path} if path else {}


def apply_tf2_global_options(options: Any, environ: Mapping[str, str] | None = None) -> Any:
    """Set ``options.fusion_switch_file`` on ``npu_device.global_options()`` (call before ``npu.open()``).

    Returns ``options``. No-op when the variable is unset.
    """
    path = switch_file(environ)
    if path is not None:
        options.fusion_switch_file = path
    return options


def apply_torchair_config(config: Any, environ: Mapping[str, str] | None = None) -> Any:
    """Set ``config.fusion_config.fusion_switch_file`` on a ``torchair.CompilerConfig`` (→ ``ge.fusionSwitchFile``).

    Returns ``config``. No-op when the variable is unset.
    """
    path = switch_file(environ)
    if path is not None:
        config.fusion_config.fusion_switch_file = path
    return config


def mindspore_ascend_config(ascend_config: Mapping[str, Any] | None = None,
                            environ: Mapping[str, str] | None = None) -> dict:
    """A copy of ``ascend_config`` with ``{"ge_options": {"global": {"ge.fusionSwitchFile": path}}}`` merged in.

    Existing ``ge_options`` entries are kept. Returns a new dict (the input is not modified); unchanged copy when
    the variable is unset. Raises TypeError if ``ge_options`` or its ``global`` entry is not a mapping.
    """
    result = copy.deepcopy(dict(ascend_config or {}))
    path = switch_file(environ)
    if path is None:
        return result
    ge_options = result.setdefault("ge_options", {})
    if not isinstance(ge_options, dict):
        raise TypeError("ascend_config['ge_options'] must be a dict")
    global_opts = ge_options.setdefault("global", {})
    if not isinstance(global_opts, dict):
        raise TypeError("ascend_config['ge_options']['global'] must be a dict")
    global_opts[GE_OPTION] = path
    return result


def atc_args(environ: Mapping[str, str] | None = None) -> list[str]:
    """``["--fusion_switch_file=<path>"]`` to append to an ATC/AOE argv list, or ``[]`` when unset."""
    path = switch_file(environ)
    return [f"--fusion_switch_file={path}"] if path else []
