"""The simulated training job: compile the model graph under the switch file, train it, write CANN's artifacts.

:func:`run` is what ``python -m fusebisect.sim train`` and ``fusebisect sim train`` execute.
"""

from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass, field
from typing import TextIO

import numpy as np

from fusebisect.errors import UsageError
from fusebisect.rules.catalog import default_catalog
from fusebisect.rules.switchfile import effective_state, parse_switch_file
from fusebisect.sim import model, writers
from fusebisect.sim.compiler import Compiled, compile_graph, enabled_rules
from fusebisect.sim.graph import Graph, Node, execute
from fusebisect.sim.kernels import run_kernel
from fusebisect.sim.options import SimOptions
from fusebisect.sim.passes import PASSES

RULES = [p.name for p in PASSES]
OVERFLOW_WEIGHT_SCALE = 2000.0
FLAKY_DRIFT = 0.1


@dataclass
class RunResult:
    """What one simulated run produced (for tests and callers that run it in-process)."""

    exit_code: int
    losses: list[float] = field(default_factory=list)  # losses as printed
    compiled: Compiled | None = None
    active_faults: frozenset[str] = frozenset()
    perturbed: bool = False
    overflow_steps: list[int] = field(default_factory=list)


def active_faults(groups: list[tuple[str, ...]], fired: set[str]) -> frozenset[str]:
    """The rules whose faulty kernels are in effect: single rules always (they only matter where their kernel
    runs), groups only when every member fired in this compile."""
    active: set[str] = set()
    for group in groups:
        if len(group) == 1 or all(r in fired for r in group):
            active.update(group)
    return frozenset(active)


def _check_rules(opts: SimOptions) -> None:
    for group in opts.faulty:
        for rule in group:
            if rule not in RULES:
                raise UsageError(f"--faulty: {rule!r} is not a simulated rule (simulated: {', '.join(RULES)})")
    for rule, _state in opts.crash_when:
        if rule not in RULES:
            raise UsageError(f"--crash-when: {rule!r} is not a simulated rule (simulated: {', '.join(RULES)})")


class _Fetcher:
    """Forward tensors by original op name: from the compiled graph when one of its outputs stands for that op,
    else recomputed with the reference kernels of the framework graph."""

    def __init__(self, ref: dict[str, Node], compiled: Graph, values: dict[str, np.ndarray],
                 feeds: dict[str, np.ndarray]) -> None:
        self.ref = ref
        self.values = values
        self.feeds = feeds
        self.by_origin = {n.origin(): n.name for n in compiled.nodes}
        self.cache: dict[str, np.ndarray] = {}

    def __call__(self, name: str) -> np.ndarray:
        if name in self.cache:
            return self.cache[name]
        if name in self.by_origin:
            value = self.values[self.by_origin[name]]
        elif name in self.feeds:
            value = self.feeds[name]
        else:
            node = self.ref[name]
            if node.type == "Const":
                value = node.attrs["value"]
            else:
                with np.errstate(all="ignore"):
                    value = run_kernel(node, [self(i) for i in node.inputs], frozenset())
        self.cache[name] = value
        return value


def _non_finite_first(node: Node, args: list[np.ndarray], out: np.ndarray) -> bool:
    return (node.type not in ("Data",) and all(np.all(np.isfinite(a)) for a in args)
            and not np.all(np.isfinite(out)))


def run(opts: SimOptions, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> RunResult:
    """Run the simulated job described by ``opts``; print ``step N loss X`` lines to ``stdout``.

    Returns a RunResult whose ``exit_code`` is 0, or 1 for a simulated compile failure (``--crash-when``, or a
    switch file CANN's JSON parser rejects: comments, trailing commas, raw control characters).
    Raises UsageError for unknown simulated rules and SwitchFileError for an unreadable switch file.
    """
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    _check_rules(opts)
    catalog = default_catalog()
    config = parse_switch_file(opts.switch_file) if opts.switch_file is not None else None
    if config is not None and config.lenient:
        # FE reads a file that is not strict JSON as the old line format, whose first line then fails: the
        # engine's init fails and so does the compile (what fusebisect reads leniently, CANN does not)
        print(f"[ERROR] FE(simulated): [GraphOpt][Init][VerifyAndParserCustomFile] Failed to read this file"
              f"[{opts.switch_file}] by old format: it is not valid JSON ({config.lenient[0]}); "
              f"`fusebisect cfg check` shows why", file=err)
        return RunResult(exit_code=1)
    enabled = enabled_rules(config, catalog)

    for rule, state in opts.crash_when:
        kind = next((p.kind for p in PASSES if p.name == rule), None)
        on = effective_state(rule, config, catalog, kind=kind)
        if on == (state == "on"):
            print(f"[ERROR] GE(simulated): compile failed: EZ9999: no kernel can be selected for the graph "
                  f"when {rule} is {state} (simulated --crash-when)", file=err)
            return RunResult(exit_code=1)

    framework = model.build_graph(fc1_dtype="float16" if opts.overflow else "float32")
    compiled = compile_graph(framework, enabled)
    writers.write_fusion_result(opts.work_path, compiled)
    if opts.graph_dump:
        writers.write_graphs(opts, framework, compiled)

    faults = active_faults(opts.faulty, compiled.fired())
    flaky_rng = random.Random(opts.seed if opts.seed is not None else time.time_ns())
    perturbed = opts.flaky > 0 and flaky_rng.random() < opts.flaky
    data = model.make_data(opts.data_seed)
    init = model.init_params(opts.data_seed)
    if opts.overflow:
        init["fc1_weight"] = init["fc1_weight"] * np.float32(OVERFLOW_WEIGHT_SCALE)
    params = init
    ref_nodes = {n.name: n for n in framework.nodes}
    result = RunResult(exit_code=0, compiled=compiled, active_faults=faults, perturbed=perturbed)
    dumper = writers.DumpSession(opts, compiled.graph, framework) if (opts.dump_path or opts.dump_golden) else None
    if opts.overflow and (opts.dump_steps or opts.dump_golden is not None):
        # CANN's overflow detection (dump_debug) replaces the data dump: only overflowing ops are dumped
        print("warning: --overflow dumps only the overflowing ops and their Opdebug records"
              + (" (of the --dump-step steps that overflow): no data dump of every op is written" if opts.dump_steps
                 else "") + ("; --dump-golden is not written" if opts.dump_golden is not None else ""), file=err)
    elif opts.dump_golden is not None and len(opts.dump_steps) > 1:
        print(f"warning: --dump-golden with {len(opts.dump_steps)} dump steps writes every step's golden .npy into "
              f"{opts.dump_golden}: compare takes the newest of each (--iteration earliest the earliest); dump one "
              "step for a golden directory of that step alone", file=err)
    late = [s for s in opts.dump_steps if s >= opts.steps]
    if late:
        print(f"warning: --dump-step {', '.join(map(str, late[:5]))}: the run has only {opts.steps} steps "
              f"(0 to {opts.steps - 1}); nothing is dumped for {'them' if len(late) > 1 else 'it'}", file=err)
    losses = _train(opts, compiled.graph, ref_nodes, params, data, faults, dumper, result, err)
    if perturbed and faults:
        # a perturbed run of a faulty job shows what a clean job would have printed
        losses = _train(opts, compiled.graph, ref_nodes, init, data, frozenset(), None, RunResult(0), err)
    elif perturbed:
        losses = [v * (1.0 + FLAKY_DRIFT * (i + 1) / opts.steps) for i, v in enumerate(losses)]
    for step, value in enumerate(losses):
        print(f"step {step} loss {value:.6f}", file=out)
    out.flush()
    result.losses = losses
    return result


def _train(opts: SimOptions, graph: Graph, ref_nodes: dict[str, Node], init: dict[str, np.ndarray],
           data: model.Dataset, faults: frozenset[str], dumper, result: RunResult, err: TextIO) -> list[float]:
    """SGD on ``graph`` from parameters ``init``; returns the loss of each step (dumps through ``dumper``)."""
    params = dict(init)
    loss_node = next(n.name for n in graph.nodes if n.origin() == model.LOSS_OP)
    losses: list[float] = []
    for step in range(opts.steps):
        x, onehot = data.batch(step)
        feeds = {"x": x, "labels": onehot, **params}
        recorder = dumper.recorder(step) if dumper is not None and step in dumper.steps else None
        overflowed: list = []

        def observe(node, args, value, _rec=recorder, _ovf=overflowed):
            if _rec is not None:
                _rec(node, args, value)
            if opts.overflow and _non_finite_first(node, args, value):
                _ovf.append((node, list(args), value))

        with np.errstate(all="ignore"):
            values = execute(graph, feeds, run_kernel, faults, observe)
        losses.append(float(values[loss_node]))
        if overflowed:
            result.overflow_steps.append(step)
            if dumper is not None:
                dumper.overflow(step, overflowed)
        if recorder is not None:
            dumper.finish_step(step, feeds)
        fetch = _Fetcher(ref_nodes, graph, values, feeds)
        with np.errstate(all="ignore"):
            grads = model.gradients(fetch, params, x, onehot)
        if all(np.all(np.isfinite(g)) for g in grads.values()):
            for k, g in grads.items():
                params[k] = (params[k] - np.float32(model.LEARNING_RATE) * g).astype(np.float32)
        else:
            print(f"step {step}: non-finite gradients (overflow), update skipped", file=err)
    return losses
