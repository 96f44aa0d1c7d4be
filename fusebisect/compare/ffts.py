"""FFTS+ thread dumps: which files make one op, in which order, and the one dump msaccucmp compares for them.

On Ascend 910B, FFTS+ (auto or manual thread slicing) dumps one op as several files, one per thread slice.
msaccucmp puts them back together; this module does what it does, rule for rule:

* **Which files are FFTS+** (``DumpInfo._check_task_type``): a name of more than five dot-fields whose
  fourth-from-last field is ``4`` (task type FFTSPLUS). It is manual mode when the name holds ``_lxslice``,
  automatic mode otherwise. An op whose files are FFTS+ is read as a :class:`ThreadGroup`.
* **Which op a file belongs to** (``handle_op_name``): a trailing ``_lxsliceN`` and everything up to
  ``sgt_graph_N_`` are removed from the op name, so the threads of one op share a name. With a graph
  (msaccucmp ``-f``) every ``_lxsliceN`` is removed instead. A name that still holds ``_lxslice`` is skipped.
  msaccucmp's ``-ffts`` keeps the names as they are (``direct``).
* **Order** (``sort_dump_file_list``): by the timestamp field, then by thread id (the second-to-last field) in
  automatic mode, or by the last character of the op name field (the slice number) in manual mode.
* **Merge** (``FFTSParser.parse_ffts``): the first file's op attribute is the slice JSON (``slice_instance_num``,
  ``threadMode``, ``outputCutList``, ``output_tensor_slice``). Output *i* is cut along the first axis whose
  ``outputCutList[i]`` entry is not 1; the threads' outputs are concatenated along it (automatic mode first
  reshapes thread *k*'s output to ``higher - lower`` of ``output_tensor_slice[k]``); an output without a cut
  axis is the first file's. Inputs are the first file's. When no output has a cut axis, the file with the
  greatest timestamp field is compared instead. A file count other than ``slice_instance_num`` is reported.

Merging is lazy: :meth:`ThreadGroup.read` parses the headers and checks the shapes; the bytes of a merged
output are put together when its :meth:`~fusebisect.compare.dumpfile.TensorRecord.array` is called.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fusebisect.compare import dtypes as _dt
from fusebisect.compare.dumpfile import DumpFile, TensorRecord, _record, read_dump
from fusebisect.errors import DumpFormatError

NORMAL = "normal"
AUTO = "auto"
MANUAL = "manual"
FFTS_TASK_TYPE = "4"                    # TASK_TYPE_MAP["FFTSPLUS"]
PLAIN_NAME_FIELDS = 5                   # op_type.op_name.task_id.stream_id.timestamp
TIMESTAMP_DIGITS = 16
_LXSLICE_FIELD = "_lxslice"
_SGT_FIELD = "_sgt_graph"
_LXSLICE = re.compile(r"lxslice[0-9]+")
_LXSLICE_ANYWHERE = re.compile(r"_lxslice[0-9]+")
_SGT = re.compile(r"sgt_graph_[0-9]+")
# msaccucmp's sort keys for fields it cannot read (ConstManager.INVALID_TIMESTAMP / INVALID_SLICE_X)
_INVALID_TIMESTAMP = 0
_INVALID_SLICE = 3


def name_fields(name) -> list[str]:
    """The dot-separated fields of a parsed dump file name (:class:`~fusebisect.compare.tree.DumpName`)."""
    fields = [name.op_type, name.op_name, str(name.task_id)]
    if name.stream_id is not None:
        fields.append(str(name.stream_id))
    fields.append(str(name.timestamp))
    fields.extend(str(value) for value in name.extra)
    return fields


def task_mode(name) -> str:
    """Returns 'auto' or 'manual' for an FFTS+ dump file name, else 'normal' (msaccucmp's task mode)."""
    fields = name_fields(name)
    if len(fields) <= PLAIN_NAME_FIELDS or fields[-4] != FFTS_TASK_TYPE:
        return NORMAL
    return MANUAL if _LXSLICE_FIELD in ".".join(fields) else AUTO


def strip_slices(name: str) -> str:
    """``name`` without any ``_lxsliceN`` field (what msaccucmp does to graph names and merged ops)."""
    return _LXSLICE_ANYWHERE.sub("", name) if _LXSLICE_FIELD in name else name


def op_key(op_name: str, *, graph: bool = False, direct: bool = False) -> str | None:
    """The op name a dump file is filed under (msaccucmp's ``handle_op_name``), or None when msaccucmp skips
    the file (a ``_lxslice`` field left in the name). ``graph``: a fusion-rule graph is given (every
    ``_lxsliceN`` is removed); ``direct``: msaccucmp ``-ffts`` (names kept as they are). Never raises."""
    if direct:
        return op_name
    name = op_name
    if graph and _LXSLICE_FIELD in name:
        name = strip_slices(name)
    elif _LXSLICE_FIELD in name or _SGT_FIELD in name:
        if _LXSLICE_FIELD in name:
            first = _LXSLICE.search(name)
            if first is not None and first.end() == len(name):
                name = name[:first.start() - 1]
        if _SGT_FIELD in name:
            matches = list(_SGT.finditer(name))
            if matches and matches[-1].end() != len(name):
                name = name[matches[-1].end() + 1:]
    return None if _LXSLICE_FIELD in name else name


def _timestamp_key(fields: list[str]) -> int:
    stamp = fields[4] if len(fields) > 4 else ""
    return int(stamp) if len(stamp) == TIMESTAMP_DIGITS and stamp.isdigit() else _INVALID_TIMESTAMP


def _thread_key(fields: list[str], mode: str) -> int:
    if mode == AUTO:
        return int(fields[-2]) if fields[-2].isdigit() else 0
    last = fields[1][-1:]
    return int(last) if last.isdigit() else _INVALID_SLICE


def thread_order(entries: list, mode: str) -> list:
    """The entries of one FFTS+ op in msaccucmp's order: by timestamp field, then (stable) by thread id
    ('auto') or slice number ('manual'). Returns a new list; never raises."""
    ordered = sorted(entries, key=lambda e: _timestamp_key(name_fields(e.name)))
    return sorted(ordered, key=lambda e: _thread_key(name_fields(e.name), mode))


@dataclass
class SliceInfo:
    """The FFTS+ slice JSON of a dump (its first op attribute)."""

    thread_num: object                   # slice_instance_num (None if absent)
    thread_mode: object                  # threadMode: true = automatic slicing (None if absent)
    cut_axes: list[list[int]]            # per output: the axes whose outputCutList value is not 1
    output_slices: object                # output_tensor_slice: [thread][output][axis] {"lower", "higher"}
    input_slices: object = None          # input_tensor_slice: [thread][input][axis] {"lower", "higher"}


def slice_info(dump: DumpFile) -> SliceInfo | None:
    """Returns the slice JSON of ``dump``'s first op attribute, or None if it has no attributes.

    Raises DumpFormatError (naming the file) if the attribute is not a JSON object or outputCutList is not a
    list of lists."""
    if not dump.attrs:
        return None
    name, value = dump.attrs[0]
    try:
        attr = json.loads(value)
    except ValueError as exc:
        raise DumpFormatError(f"op attribute {name!r} is not the FFTS+ slice JSON ({exc})", path=dump.path) from None
    if not isinstance(attr, dict):
        raise DumpFormatError(f"op attribute {name!r} is not a JSON object", path=dump.path)
    cut_list = attr.get("outputCutList") or []
    if not isinstance(cut_list, list) or not all(isinstance(item, list) for item in cut_list):
        raise DumpFormatError(f"outputCutList in op attribute {name!r} is not a list of lists", path=dump.path)
    cut_axes = [[axis for axis, value in enumerate(item) if value != 1] for item in cut_list]
    return SliceInfo(attr.get("slice_instance_num"), attr.get("threadMode"), cut_axes,
                     attr.get("output_tensor_slice"), attr.get("input_tensor_slice"))


def is_ffts_dump(dump: DumpFile) -> bool:
    """True when msaccucmp counts ``dump``'s tensors as FFTS+ ones: its slice JSON has a threadMode. Never
    raises (an attribute that is not the slice JSON means no)."""
    try:
        info = slice_info(dump)
    except DumpFormatError:
        return False
    return info is not None and info.thread_mode is not None


@dataclass
class ThreadRead:
    """What reading a :class:`ThreadGroup` gave."""

    dump: DumpFile
    merged: bool = False                 # outputs concatenated from several files
    files_match: bool = True             # False: msaccucmp flags a thread-count mismatch on this dump
    ffts: bool = False                   # msaccucmp treats the tensors as FFTS+ ones
    notes: list[str] = field(default_factory=list)


@dataclass
class ThreadGroup:
    """The dump files of one FFTS+ op (one per thread slice) in msaccucmp's order, read as one dump."""

    op_name: str                         # the name the threads share (slice fields removed)
    mode: str                            # 'auto' | 'manual' (from the file names)
    entries: list                        # DumpEntry, thread_order()

    @property
    def path(self) -> Path:
        """The first thread file (messages name it)."""
        return self.entries[0].path

    @property
    def op_type(self) -> str:
        return self.entries[0].op_type

    @property
    def timestamp(self) -> int:
        """The timestamp of the last thread file (msaccucmp orders ops by it)."""
        return self.entries[-1].timestamp

    def _where(self) -> str:
        return f"FFTS+ op {self.op_name} in {self.entries[0].path.parent}"

    def read(self) -> ThreadRead:
        """Reads the threads as msaccucmp does: one file as is, several merged (or the newest one when no cut
        axis is known). Returns a :class:`ThreadRead` whose notes say what a person should know.

        Raises DumpFormatError (naming the file and the reason) for an unreadable thread file, a missing or
        malformed slice JSON, or thread outputs that cannot be put together."""
        dumps = [read_dump(entry.path) for entry in self.entries]
        base = dumps[0]
        if len(dumps) == 1:                 # that file, as it is; a note when it is one of several slices
            try:
                info = slice_info(base)
            except DumpFormatError:
                info = None
            notes = []
            if (info is not None and isinstance(info.thread_num, int) and info.thread_num != 1
                    and _LXSLICE_FIELD not in self.op_name):       # not a slice compared on its own (-ffts)
                notes.append(f"{self._where()}: 1 thread dump file but slice_instance_num is {info.thread_num}; "
                             "compared as it is")
            return ThreadRead(base, ffts=info is not None and info.thread_mode is not None, notes=notes)
        info = slice_info(base)
        if info is None:
            raise DumpFormatError(f"FFTS+ thread file of {self.op_name} has no op attribute (the slice JSON)",
                                  path=base.path)
        notes = []
        mismatch = len(dumps) != info.thread_num
        if mismatch:
            expected = "missing" if info.thread_num is None else info.thread_num
            notes.append(f"{self._where()}: {len(dumps)} thread dump files but slice_instance_num is {expected}")
        if not info.cut_axes or all(not axes for axes in info.cut_axes):
            by_time = sorted(zip(dumps, self.entries), key=lambda pair: name_fields(pair[1].name)[4])
            dump, entry = by_time[-1]
            notes.append(f"{self._where()}: no cut axis in outputCutList, so the threads are not merged; "
                         f"compared {entry.path.name}, the file with the greatest timestamp, as msaccucmp does")
            return ThreadRead(dump, files_match=not (mismatch and dump is base), ffts=is_ffts_dump(dump),
                              notes=notes)
        merged = _merge(self, dumps, info)
        return ThreadRead(merged, merged=True, files_match=not mismatch, ffts=True, notes=notes)


def _slice_shapes(dump: DumpFile, slices, thread: int, kind: str) -> list[tuple[int, ...]]:
    """Thread ``thread``'s tensor shapes (higher - lower per axis) from the slice JSON's ``{kind}_tensor_slice``
    (msaccucmp's ``calculate_auto_mode_shape``). Raises DumpFormatError when that entry is missing or malformed."""
    if not isinstance(slices, list) or thread >= len(slices) or not isinstance(slices[thread], list):
        raise DumpFormatError(f"automatic-mode FFTS+ thread {thread} has no {kind}_tensor_slice entry in its "
                              "slice JSON", path=dump.path)
    try:
        return [tuple(int(dim["higher"]) - int(dim["lower"]) for dim in tensor) for tensor in slices[thread]]
    except (KeyError, TypeError, ValueError):
        raise DumpFormatError(f"{kind}_tensor_slice[{thread}] of the slice JSON is not lists of "
                              "{lower, higher}", path=dump.path) from None


def _auto_shapes(dump: DumpFile, thread: int) -> list[tuple[int, ...]]:
    """Thread ``thread``'s output shapes from ``dump``'s own output_tensor_slice."""
    info = slice_info(dump)
    return _slice_shapes(dump, info.output_slices if info is not None else None, thread, "output")


def thread_shapes(dump: DumpFile, thread: int) -> dict[tuple[str, int], tuple[int, ...]]:
    """The shapes msaccucmp's ``convert`` gives an automatic-mode FFTS+ thread dump's tensors, keyed by
    (kind, index) (``calculate_auto_mode_shape`` over input_tensor_slice / output_tensor_slice for this
    thread; an empty list gives no shapes); {} for any other dump. Raises DumpFormatError, as msaccucmp fails
    the file, when the slice JSON does not give one shape per tensor."""
    info = slice_info(dump)
    if info is None or not info.thread_mode:
        return {}
    shapes: dict[tuple[str, int], tuple[int, ...]] = {}
    for kind, tensors, slices in (("input", dump.inputs, info.input_slices),
                                  ("output", dump.outputs, info.output_slices)):
        if not tensors:
            continue
        listed = _slice_shapes(dump, slices, thread, kind) if slices else []
        if len(listed) != len(tensors):
            raise DumpFormatError(f"automatic-mode FFTS+ dump: its slice JSON gives {len(listed)} {kind} "
                                  f"shape(s) for {len(tensors)} {kind}(s) of thread {thread}", path=dump.path)
        shapes.update({(kind, i): shape for i, shape in enumerate(listed)})
    return shapes


def _count(shape) -> int:
    total = 1
    for dim in shape:
        total *= int(dim)
    return total


def _elements(record: TensorRecord, itemsize: int) -> int:
    """How many elements msaccucmp reads from ``record``: its bytes, cut to its own shape."""
    available = record.size // itemsize
    return min(available, _count(record.shape)) if record.shape else available


def _thread_part(record: TensorRecord, shape: tuple[int, ...], itemsize: int):
    """A loader of ``record``'s elements as a uint8 array of shape ``(*shape, itemsize)``."""

    def load() -> np.ndarray:
        raw = record.raw()[:_count(shape) * itemsize]
        return raw.reshape(*shape, itemsize)

    return load


def _merge(group: ThreadGroup, dumps: list[DumpFile], info: SliceInfo) -> DumpFile:
    """One dump with the threads' outputs concatenated along their cut axes (lazily) and the first inputs."""
    base = dumps[0]
    automatic = bool(info.thread_mode)
    threads: list[list[tuple[TensorRecord, tuple[int, ...]]]] = []
    for index, dump in enumerate(dumps):
        shapes = _auto_shapes(dump, index) if automatic else None
        outs = []
        for k, record in enumerate(dump.outputs):
            if record.dtype in (_dt.DT_UINT1, _dt.DT_INT4):
                raise DumpFormatError(f"output {k}: FFTS+ threads of packed {record.dtype_name} data cannot be "
                                      "merged", path=dump.path)
            itemsize = _dt.numpy_dtype(record.dtype).itemsize
            if automatic:
                if k >= len(shapes):
                    raise DumpFormatError(f"output {k}: output_tensor_slice[{index}] describes only "
                                          f"{len(shapes)} outputs", path=dump.path)
                shape = shapes[k]
            else:
                shape = record.shape if record.shape or not record.size else (record.size,)
            if _elements(record, itemsize) != _count(shape):
                raise DumpFormatError(f"output {k}: {_elements(record, itemsize)} elements do not fit the thread "
                                      f"shape {list(shape)}", path=dump.path)
            outs.append((record, shape))
        threads.append(outs)
    counts = {len(outs) for outs in threads}
    if len(counts) != 1:
        raise DumpFormatError(f"FFTS+ thread files of {group.op_name} hold different numbers of outputs "
                              f"({', '.join(str(len(o)) for o in threads)})", path=base.path)
    if len(info.cut_axes) > len(base.outputs):
        raise DumpFormatError(f"outputCutList describes {len(info.cut_axes)} outputs, the file holds "
                              f"{len(base.outputs)}", path=base.path)
    outputs = []
    for k, axes in enumerate(info.cut_axes):
        first, shape = threads[0][k]
        itemsize = _dt.numpy_dtype(first.dtype).itemsize
        if axes:
            parts = [outs[k] for outs in threads]
            shape = _joined_shape(group, base.path, k, axes[0], [s for _, s in parts])
            loaders = [_thread_part(record, s, itemsize) for record, s in parts]
            raw = _concatenated(loaders, axes[0])
        else:
            raw = _flattened(_thread_part(first, shape, itemsize))
        outputs.append(_merged_record(first, k, shape, _count(shape) * itemsize, raw))
    return DumpFile(base.path, base.encoding, strip_slices(base.op_name), base.version,
                    base.dump_time, list(base.inputs), outputs, [], [], [])


def _joined_shape(group: ThreadGroup, path: Path, k: int, axis: int, shapes: list[tuple[int, ...]]):
    """The shape of output ``k``'s threads joined along ``axis``; DumpFormatError if they do not fit."""
    first = shapes[0]
    if axis >= len(first):
        raise DumpFormatError(f"output {k}: cut axis {axis} is beyond the thread shape {list(first)}", path=path)
    for shape in shapes[1:]:
        if len(shape) != len(first) or any(a != b for i, (a, b) in enumerate(zip(shape, first)) if i != axis):
            raise DumpFormatError(f"output {k} of {group.op_name}: thread shapes {list(first)} and {list(shape)} "
                                  f"cannot be joined along axis {axis}", path=path)
    return tuple(sum(s[axis] for s in shapes) if i == axis else d for i, d in enumerate(first))


def _concatenated(loaders, axis: int):
    return lambda: np.concatenate([load() for load in loaders], axis=axis).reshape(-1)


def _flattened(loader):
    return lambda: loader().reshape(-1)


def _merged_record(first: TensorRecord, index: int, shape: tuple[int, ...], size: int, raw) -> TensorRecord:
    """msaccucmp's merged tensor: dtype, format, address and original shape of the first thread's output."""
    return _record("output", index, first.dtype, first.format, shape, first.original_shape, size, first.address,
                   0, first.original_op, raw, first._path)
