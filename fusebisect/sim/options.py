"""Options of the simulated training job: command-line flags, with ``FUSEBISECT_SIM_*`` and CANN environment
variables as fallbacks (flags win)."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path

from fusebisect.errors import UsageError

ENCODINGS = ("binary", "protobuf", "nano")
LAYOUTS = ("old", "new")

DESCRIPTION = """\
SIMULATOR for demos and tests: a deterministic numpy stand-in for a training job on CANN. It is not an Ascend
job and runs no NPU code. It trains a small MLP (LayerNorm, GELU, softmax cross-entropy) whose graph goes
through 14 simulated fusion passes named after real CANN rules, honours fusion_switch.cfg with CANN's precedence,
and writes fusion_result.json, GE graph dumps and data dumps in CANN's formats. Faults make chosen fused kernels
subtly wrong so fusebisect has something to find.

Environment: FUSEBISECT_SIM_STEPS, _FAULTY, _FLAKY, _SEED, _CRASH_WHEN, _OVERFLOW, _DUMP_STEP, _DUMP_ENCODING,
_DUMP_GOLDEN, _OPDEBUG_LAYOUT (prefix FUSEBISECT_SIM); FUSEBISECT_SWITCH_FILE, FUSEBISECT_DUMP_DIR,
ASCEND_WORK_PATH, DUMP_GE_GRAPH, DUMP_GRAPH_PATH, DUMP_GRAPH_LEVEL. Flags win over the environment.
"""

EPILOG = """\
examples:
  python -m fusebisect.sim train --faulty LayerNormFusionPass
  python -m fusebisect.sim train --faulty "GeluFusionPass+MulAddFusionPass" --fusion-switch-file off.cfg
  python -m fusebisect.sim train --dump-step 0 --dump-path dump --dump-golden golden --dump-encoding nano
"""


@dataclass
class SimOptions:
    """Everything that decides what one simulated run does."""

    steps: int = 20  # SGD steps
    faulty: list[tuple[str, ...]] = field(default_factory=list)  # each group: one rule, or rules faulty together
    flaky: float = 0.0  # probability that this run's printed loss is perturbed
    seed: int | None = None  # data/initialisation seed (0 if None) and flaky draw seed (time if None)
    crash_when: list[tuple[str, str]] = field(default_factory=list)  # (rule, 'on'|'off') that fails compilation
    overflow: bool = False  # run the first MatMul in float16 with weights that overflow it
    dump_steps: list[int] = field(default_factory=list)  # steps to dump
    dump_path: Path | None = None
    dump_encoding: str = "binary"
    dump_golden: Path | None = None
    opdebug_layout: str = "new"
    switch_file: Path | None = None
    work_path: Path | None = None  # where fusion_result.json goes (ASCEND_WORK_PATH, else cwd)
    graph_dump: int = 0  # DUMP_GE_GRAPH level (0: no graph dumps)
    graph_path: Path | None = None  # DUMP_GRAPH_PATH (else cwd)
    graph_level: str = "2"  # DUMP_GRAPH_LEVEL

    @property
    def data_seed(self) -> int:
        """Seed of the data and initial weights."""
        return 0 if self.seed is None else self.seed


def _env(env: dict, name: str) -> str | None:
    value = env.get(name)
    return value if value not in (None, "") else None


def parse_faulty(text: str) -> list[tuple[str, ...]]:
    """``"A,B+C"`` -> ``[("A",), ("B", "C")]``. Raises UsageError for empty names."""
    groups: list[tuple[str, ...]] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        names = tuple(p.strip() for p in part.split("+"))
        if any(not n for n in names):
            raise UsageError(f"--faulty: empty rule name in {part!r}")
        groups.append(names)
    return groups


def parse_crash_when(text: str) -> list[tuple[str, str]]:
    """``"A=off,B=on"`` -> ``[("A","off"), ("B","on")]``. Raises UsageError for malformed entries."""
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        rule, sep, state = part.partition("=")
        if not sep or state.strip() not in ("on", "off") or not rule.strip():
            raise UsageError(f"--crash-when: expected RULE=off or RULE=on, got {part!r}")
        out.append((rule.strip(), state.strip()))
    return out


def parse_steps(text: str, flag: str) -> list[int]:
    """``"0,5|10-12"`` -> ``[0, 5, 10, 11, 12]`` (CANN's dump_step: steps separated by ``|``, a range as
    ``A-B``). Raises UsageError for anything else."""
    out: list[int] = []
    for part in text.replace("|", ",").split(","):
        part = part.strip()
        if not part:
            continue
        first, dash, last = part.partition("-")
        try:
            low, high = int(first), int(last) if dash else int(first)
        except ValueError:
            raise UsageError(f"{flag}: expected step numbers or ranges (0|3-5|10), got {part!r}") from None
        if low < 0 or high < low:
            raise UsageError(f"{flag}: steps are >= 0 and a range goes up (A-B, A <= B), got {part!r}")
        if high - low > 1_000_000:
            raise UsageError(f"{flag}: the range {part!r} holds more than a million steps")
        out.extend(range(low, high + 1))
    return sorted(set(out))


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        """A bad flag or value: one line (the usage is under --help), exit 2."""
        self.exit(2, f"fusebisect.sim: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m fusebisect.sim train``."""
    p = _Parser(prog="python -m fusebisect.sim train", description=DESCRIPTION, epilog=EPILOG,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, help="training steps (default 20)")
    p.add_argument("--faulty", metavar="R[,R|A+B]",
                   help="rules whose fused kernels are wrong; A+B: wrong only when both fire")
    p.add_argument("--flaky", type=float, metavar="P", help="probability that this run's loss is perturbed")
    p.add_argument("--seed", type=int, help="seed of data, weights and the flaky draw (default: 0; draw: time)")
    p.add_argument("--crash-when", metavar="RULE=off", help="fail to compile when RULE is effectively off")
    p.add_argument("--overflow", action="store_true", default=None,
                   help="a float16 MatMul overflows; writes Opdebug records with the overflowing op's dump")
    p.add_argument("--dump-step", metavar="N[,N]", help="steps whose op tensors are dumped")
    p.add_argument("--dump-path", type=Path, help="dump root (else FUSEBISECT_DUMP_DIR)")
    p.add_argument("--dump-encoding", choices=ENCODINGS, help="dump file encoding (default binary)")
    p.add_argument("--dump-golden", type=Path, metavar="DIR",
                   help="also write the unfused graph's tensors as golden {op}.{idx}.{ts}.npy")
    p.add_argument("--opdebug-layout", choices=LAYOUTS, help="Opdebug record layout (default new)")
    p.add_argument("--fusion-switch-file", type=Path, metavar="F", help="fusion_switch.cfg (else "
                   "FUSEBISECT_SWITCH_FILE)")
    return p


def resolve(argv: list[str], env: dict | None = None) -> SimOptions:
    """Parse ``argv`` (after ``train``) with ``env`` fallbacks. Raises UsageError for bad values; argparse exits
    with code 2 for unknown flags."""
    env = dict(os.environ if env is None else env)
    a = build_parser().parse_args(argv)
    o = SimOptions()
    pre = "FUSEBISECT_SIM_"

    def pick(flag_value, name):
        return flag_value if flag_value is not None else _env(env, pre + name)

    try:
        steps = pick(a.steps, "STEPS")
        o.steps = int(steps) if steps is not None else 20
        flaky = pick(a.flaky, "FLAKY")
        o.flaky = float(flaky) if flaky is not None else 0.0
        seed = pick(a.seed, "SEED")
        o.seed = int(seed) if seed is not None else None
    except ValueError as exc:
        raise UsageError(f"bad numeric option: {exc}") from None
    if o.steps < 1:
        raise UsageError(f"--steps must be >= 1, got {o.steps}")
    if not 0.0 <= o.flaky <= 1.0:
        raise UsageError(f"--flaky must be a probability in [0, 1], got {o.flaky}")
    if o.seed is not None and o.seed < 0:   # numpy's generators take non-negative seeds only
        raise UsageError(f"--seed must be >= 0, got {o.seed}")
    faulty = pick(a.faulty, "FAULTY")
    o.faulty = parse_faulty(faulty) if faulty else []
    crash = pick(a.crash_when, "CRASH_WHEN")
    o.crash_when = parse_crash_when(crash) if crash else []
    overflow = a.overflow if a.overflow else _env(env, pre + "OVERFLOW")
    o.overflow = overflow is True or (isinstance(overflow, str) and
                                      overflow.strip().lower() not in ("", "0", "false", "no", "off"))
    steps_text = pick(a.dump_step, "DUMP_STEP")
    o.dump_steps = parse_steps(steps_text, "--dump-step") if steps_text else []
    dump_path = a.dump_path or _env(env, pre + "DUMP_PATH") or _env(env, "FUSEBISECT_DUMP_DIR")
    o.dump_path = Path(dump_path) if dump_path else None
    o.dump_encoding = pick(a.dump_encoding, "DUMP_ENCODING") or "binary"
    if o.dump_encoding not in ENCODINGS:
        raise UsageError(f"--dump-encoding must be one of {', '.join(ENCODINGS)}, got {o.dump_encoding!r}")
    golden = pick(a.dump_golden, "DUMP_GOLDEN")
    o.dump_golden = Path(golden) if golden else None
    o.opdebug_layout = pick(a.opdebug_layout, "OPDEBUG_LAYOUT") or "new"
    if o.opdebug_layout not in LAYOUTS:
        raise UsageError(f"--opdebug-layout must be old or new, got {o.opdebug_layout!r}")
    switch = a.fusion_switch_file or _env(env, "FUSEBISECT_SWITCH_FILE")
    o.switch_file = Path(switch) if switch else None
    work = _env(env, "ASCEND_WORK_PATH")
    o.work_path = Path(work) if work else None
    level = _env(env, "DUMP_GE_GRAPH")
    # 1 with weights, 2 without, 3 "nodes only" (written here as 2: what the search reads is the same)
    if level and level.strip() not in ("1", "2", "3"):
        raise UsageError(f"DUMP_GE_GRAPH must be 1, 2 or 3, got {level!r}")
    o.graph_dump = int(level) if level else 0
    gpath = _env(env, "DUMP_GRAPH_PATH")
    o.graph_path = Path(gpath) if gpath else None
    o.graph_level = _env(env, "DUMP_GRAPH_LEVEL") or "2"
    if o.dump_steps and o.dump_path is None:
        raise UsageError("--dump-step needs --dump-path or FUSEBISECT_DUMP_DIR")
    return o
