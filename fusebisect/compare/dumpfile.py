"""Read and write one CANN dump file, whatever its encoding.

Encodings, detected by content (never by file name):

* ``binary`` (CANN's default): u64 header length, a ``toolkit.dumpdata.DumpData`` header whose tensor ``data``
  fields are empty, then the raw bytes of every input, output, buffer and workspace in that order.
  ``file size == 8 + header + sum(sizes)`` exactly.
* ``protobuf``: the whole file is one ``DumpData`` with each tensor's bytes inline.
* ``nano``: u64 header length, a TLV header starting with magic ``0x5A5A5A5A`` (dtypes numbered like
  ``ge::DataType``), then input and output bytes.
* ``npy``: a numpy file, presented as a dump with one output.

:func:`read_dump` parses only the header; tensor bytes are decoded when :meth:`TensorRecord.array` is called,
from the one read of a small file or, for larger files, from a memory map made then. :func:`write_dump` writes
binary, protobuf or nano files atomically.
"""

from __future__ import annotations

import mmap
import os
import re
import struct
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from fusebisect.compare import dtypes as _dt
from fusebisect.errors import DumpFormatError
from fusebisect.fsutil import atomic_write_bytes
from fusebisect.proto import dump_data_pb2 as _dd

NANO_MAGIC = 0x5A5A5A5A
_NANO_MAGIC_BYTES = struct.pack("<I", NANO_MAGIC)
_NPY_MAGIC = b"\x93NUMPY"
_U64 = struct.Struct("<Q")
_NANO_IN = struct.Struct("<iiiQQQI")  # data_type format address_type address offset size tlv_list_len
_NANO_OUT = struct.Struct("<iiiiiiQQQI")  # + original_index original_data_type original_format
_TL = struct.Struct("<II")
_GOLDEN_NAME = re.compile(r"^(?P<op>.+)\.(?P<idx>[0-9]+)\.(?P<ts>[0-9]+)\.npy$")
FORMAT_ND = 2
FORMAT_RESERVED = 40
ENCODINGS = ("binary", "protobuf", "nano", "npy")


@lru_cache(maxsize=256)
def format_name(fmt: int) -> str:
    """Return the name of proto format ``fmt`` without the ``FORMAT_`` prefix ('NC1HWC0'); 'format_<n>' if unknown."""
    try:
        return _dd.OutputFormat.Name(fmt)[len("FORMAT_"):]
    except ValueError:
        return f"format_{fmt}"


# the enum's own spellings are mixed case (FORMAT_C1HWNCoC0): names are matched upper-cased
_FORMAT_BY_NAME = {n.upper(): v for n, v in _dd.OutputFormat.items()}


def format_value(name: str | int) -> int:
    """Return the proto format number for ``name`` ('NC1HWC0', 'FORMAT_NZ'... or an int). Raises DumpFormatError."""
    if isinstance(name, int):
        return name
    key = name.upper()
    if not key.startswith("FORMAT_"):
        key = "FORMAT_" + key
    if key not in _FORMAT_BY_NAME:
        raise DumpFormatError(f"unknown tensor format {name!r}")
    return _FORMAT_BY_NAME[key]


@dataclass
class TensorRecord:
    """One tensor of a dump file: its description and a lazy view of its bytes."""

    kind: str  # 'input' | 'output' | 'buffer' | 'space'
    index: int
    dtype: int  # proto OutputDataType value (nano dtypes translated)
    format: int  # proto OutputFormat value
    shape: tuple[int, ...]
    original_shape: tuple[int, ...] | None
    size: int  # bytes in the file
    address: int = 0
    sub_format: int = 0
    original_op: tuple[str, int] | None = None  # outputs: (original op name, output index)
    origin_format: int | None = None  # outputs: the original op's format (_datadump_origin_format), e.g. NHWC
    # not dataclass fields (so asdict/JSON and equality see only the description): set by _record()
    _raw = None  # Callable[[], np.ndarray] giving the tensor's bytes
    _path = None  # the dump file, for error messages

    @property
    def dtype_name(self) -> str:
        """The numpy-style dtype name ('float16', 'bfloat16', 'hifloat8', ...)."""
        return _dt.dtype_name(self.dtype)

    @property
    def format_name(self) -> str:
        """The format name without prefix ('NC1HWC0', 'FRACTAL_NZ', 'ND')."""
        return format_name(self.format)

    def raw(self) -> np.ndarray:
        """Return the tensor's bytes as a read-only uint8 array (memory-mapped, no copy).

        Raises DumpFormatError if the file changed and the bytes are no longer there.
        """
        if self.size == 0 or self._raw is None:
            return np.zeros(0, dtype=np.uint8)
        return self._raw()

    def array(self) -> np.ndarray:
        """Return the tensor in device layout and shape, decoded on this call (a view where the dtype allows).

        bf16/fp8 come back as ml_dtypes arrays, hifloat8 as float32, uint1/int4 unpacked. An empty shape with
        more than one element's bytes is read as 1-D over them (uint1: 8 per byte, int4: 2 per byte). Raises DumpFormatError (naming the file, the tensor and
        the reason) for an unsupported dtype or missing bytes.
        """
        where = f"{self.kind} {self.index}"
        try:
            if not _dt.is_supported(self.dtype):
                raise DumpFormatError(f"unsupported data type {self.dtype_name} ({self.dtype})")
            shape = self.shape
            if not shape and self.size:   # msaccucmp: 1-D over the whole size (packed bits and nibbles too)
                count = (self.size * 8 if self.dtype == _dt.DT_UINT1 else self.size * 2
                         if self.dtype == _dt.DT_INT4 else self.size // _dt.numpy_dtype(self.dtype).itemsize)
                shape = () if count == 1 else (count,)
            return _dt.decode(self.raw(), self.dtype, shape)
        except DumpFormatError as exc:
            raise DumpFormatError(f"{where}: {exc.reason}", path=self._path) from None
        except (ValueError, TypeError, OverflowError, MemoryError, OSError) as exc:
            raise DumpFormatError(f"{where}: cannot decode {self.dtype_name} shape {list(self.shape)}: {exc}",
                                  path=self._path) from None


def _record(kind, index, dtype, fmt, shape, original_shape, size, address=0, sub_format=0, original_op=None,
            raw=None, path=None, origin_format=None) -> TensorRecord:
    if dtype == _dt.DT_UNDEFINED and size:
        # raw bytes of no known type: every byte counts, whatever the header's shape says (msaccucmp's
        # build_dump_tensor replaces the shape by [size])
        shape = (size,)
    rec = TensorRecord(kind, index, dtype, fmt, tuple(shape), original_shape, size, address, sub_format,
                       original_op, origin_format)
    rec._raw = raw
    rec._path = path
    return rec


@dataclass
class DumpFile:
    """One parsed dump file (header only; tensor bytes stay on disk until asked for)."""

    path: Path
    encoding: str  # 'binary' | 'protobuf' | 'nano' | 'npy'
    op_name: str
    version: str
    dump_time: int
    inputs: list[TensorRecord]
    outputs: list[TensorRecord]
    buffers: list[TensorRecord] = field(default_factory=list)
    spaces: list[TensorRecord] = field(default_factory=list)
    attrs: list[tuple[str, str]] = field(default_factory=list)  # op attributes (name, value); [] for nano/npy

    def tensors(self) -> list[TensorRecord]:
        """Return all records in file order: inputs, outputs, buffers, spaces."""
        return [*self.inputs, *self.outputs, *self.buffers, *self.spaces]


# ---------------------------------------------------------------------------------------------- reading

def _mapped(path: Path, offset: int, size: int) -> Callable[[], np.ndarray]:
    """A loader mapping only the pages that hold ``size`` bytes at ``offset``."""

    def load() -> np.ndarray:
        start = offset - offset % mmap.ALLOCATIONGRANULARITY
        try:
            with open(path, "rb") as handle:
                if os.fstat(handle.fileno()).st_size < offset + size:
                    raise DumpFormatError("file shrank since it was read")
                mm = mmap.mmap(handle.fileno(), offset + size - start, offset=start, **_MAP_ARGS)
        except (OSError, ValueError) as exc:
            raise DumpFormatError(f"cannot map file: {exc}") from None
        return np.frombuffer(mm, dtype=np.uint8, count=size, offset=offset - start)

    return load


# MAP_POPULATE was measured slower than faulting pages in on first touch (benchmarks/bench_dump_read.py)
_MAP_ARGS: dict = {"access": mmap.ACCESS_READ}


def _inline(data: bytes) -> Callable[[], np.ndarray]:
    return lambda: np.frombuffer(data, dtype=np.uint8)


def _name_fields(path: Path) -> tuple[str, int]:
    """(op_name, timestamp) from a ``{type}.{name}.{task}.{stream}.{ts}`` file name, best effort."""
    parts = path.name.split(".")
    if len(parts) >= 5 and parts[4].isdigit():
        return parts[1], int(parts[4])
    if len(parts) >= 4 and parts[3].isdigit():
        return parts[1], int(parts[3])
    return path.name, 0


# files up to this size are read with one read() (cheaper than mapping them); larger ones are mapped on demand.
# 16 MiB: with 4 MiB files (two ~2 MiB tensors) mapping cost 0.78x numpy.fromfile's throughput against 0.95x
# read whole (benchmarks/bench_dump_read.py); 64 MiB tensors stay mapped and read at 1.05-1.27x fromfile.
_READ_WHOLE_BYTES = 16 << 20


def _from_bytes(data: bytes, offset: int, size: int) -> Callable[[], np.ndarray]:
    """A loader giving ``size`` bytes at ``offset`` of ``data`` (read-only, no copy)."""
    return lambda: np.frombuffer(data, dtype=np.uint8, count=size, offset=offset)


def read_dump(path: str | os.PathLike[str]) -> DumpFile:
    """Parse the dump file at ``path`` (binary, protobuf, nano or npy, detected by content).

    Returns a :class:`DumpFile` whose tensors are decoded lazily. Raises DumpFormatError (one line naming the
    file and the reason) for an empty, truncated or malformed file, a size mismatch, or a file the system does
    not let us read (permission denied, a dangling link, deleted meanwhile): an unreadable dump either way.
    """
    path = path if isinstance(path, Path) else Path(path)
    from fusebisect.fsutil import not_regular

    if why := not_regular(path):
        raise DumpFormatError(why, path=path)
    try:
        return _read_dump(path)
    except OSError as exc:
        raise DumpFormatError(f"cannot read: {exc.strerror or exc}", path=path) from None


def _read_dump(path: Path) -> DumpFile:
    with open(path, "rb", buffering=0) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size == 0:
            raise DumpFormatError("empty file, not a dump", path=path)
        whole = None
        if size <= _READ_WHOLE_BYTES:
            whole = _read_exactly(handle, size)     # header and data in one read; the size is what was read
            size = len(whole)
            head = whole[:64]
        else:
            head = _read_exactly(handle, 64)
        if head.startswith(_NPY_MAGIC):
            return _read_npy(path, handle)
        if len(head) >= 12 and head[8:12] == _NANO_MAGIC_BYTES:
            header_len = _U64.unpack_from(head)[0]
            if 8 + header_len > size:
                raise DumpFormatError(f"nano header length {header_len} runs past the end of the file "
                                      f"({size} bytes)", path=path)
            if whole is not None:
                return _read_nano(path, whole[8:8 + header_len], size, whole)
            handle.seek(8)
            return _read_nano(path, _read_exactly(handle, header_len), size)
        binary_reason = None
        if len(head) >= 8:
            header_len = _U64.unpack_from(head)[0]
            if 8 + header_len <= size:
                if whole is not None:
                    header = whole[8:8 + header_len]
                else:
                    handle.seek(8)
                    header = _read_exactly(handle, header_len)
                msg = _dd.DumpData()
                try:
                    msg.ParseFromString(header)
                except Exception as exc:  # protobuf raises DecodeError or RuntimeError on garbage
                    binary_reason = f"header is not a DumpData message ({_short(exc)})"
                else:
                    if not (msg.op_name or msg.version or len(msg.input) or len(msg.output)):
                        # zero bytes, or garbage protobuf happens to accept: no op, no tensor
                        binary_reason = "header holds no op name, version or tensor"
                    elif not _has_inline_data(msg):
                        return _binary(path, msg, header_len, size, whole)
                    else:
                        binary_reason = "header carries tensor data"
            else:
                binary_reason = f"header length {header_len} runs past the end of the file ({size} bytes)"
        else:
            binary_reason = f"file has only {size} bytes, too short for a header length"
        if whole is None:
            handle.seek(0)
            whole = handle.readall()
    return _read_protobuf(path, whole, binary_reason)


def _read_exactly(handle, n: int) -> bytes:
    """Up to ``n`` bytes from the current position (an unbuffered read may return fewer per call)."""
    first = handle.read(n)
    if len(first) == n or not first:
        return first
    chunks = [first]
    n -= len(first)
    while n > 0:
        chunk = handle.read(n)
        if not chunk:
            break
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _short(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:120]


def _has_inline_data(msg) -> bool:
    return any(t.data for group in (msg.input, msg.output, msg.buffer, msg.space) for t in group)


def _dims(shape_msg) -> tuple[int, ...]:
    return tuple(int(d) for d in shape_msg.dim)


def _records_from_proto(msg, path: Path, sources: Callable[[object], Callable[[], np.ndarray] | None],
                        sizes: Callable[[object], int]):
    inputs, outputs, buffers, spaces = [], [], [], []
    for i, t in enumerate(msg.input):
        inputs.append(_record("input", i, int(t.data_type), int(t.format), _dims(t.shape),
                                   _dims(t.original_shape) if t.HasField("original_shape") else None,
                                   sizes(t), int(t.address), int(t.sub_format), None, sources(t), path))
    for i, t in enumerate(msg.output):
        orig = (t.original_op.name, int(t.original_op.output_index)) if t.HasField("original_op") else None
        outputs.append(_record("output", i, int(t.data_type), int(t.format), _dims(t.shape),
                                    _dims(t.original_shape) if t.HasField("original_shape") else None,
                                    sizes(t), int(t.address), int(t.sub_format), orig, sources(t), path,
                                    int(t.original_op.format) if orig is not None else None))
    for kind, group, out in (("buffer", msg.buffer, buffers), ("space", msg.space, spaces)):
        for i, t in enumerate(group):
            n = sizes(t)
            out.append(_record(kind, i, _dt.DT_UINT8, FORMAT_ND, (n,), None, n, raw=sources(t), path=path))
    return inputs, outputs, buffers, spaces


def _attrs(msg) -> list[tuple[str, str]]:
    return [(a.name, a.value) for a in msg.attr]


def _binary(path: Path, msg, header_len: int, size: int, whole: bytes | None = None) -> DumpFile:
    bases = []
    offset = 8 + header_len
    for group in (msg.input, msg.output, msg.buffer, msg.space):
        for t in group:
            bases.append((offset, int(t.size)))
            offset += int(t.size)
    if offset != size:
        diff = size - offset
        raise DumpFormatError(
            f"size mismatch: the file has {size} bytes but the header ({header_len} bytes) describes "
            f"{offset} (8 + header + tensor sizes): {abs(diff)} bytes {'too many' if diff > 0 else 'missing'}",
            path=path)
    it = iter(bases)  # records are built in the same order: inputs, outputs, buffers, spaces

    def source(_t):
        off, n = next(it)
        return _mapped(path, off, n) if whole is None else _from_bytes(whole, off, n)

    inputs, outputs, buffers, spaces = _records_from_proto(msg, path, source, lambda t: int(t.size))
    op_name = msg.op_name or _name_fields(path)[0]
    return DumpFile(path, "binary", op_name, msg.version, int(msg.dump_time), inputs, outputs, buffers, spaces,
                    _attrs(msg))


def _read_protobuf(path: Path, whole: bytes, binary_reason: str | None) -> DumpFile:
    msg = _dd.DumpData()
    try:
        msg.ParseFromString(whole)
    except Exception as exc:
        raise DumpFormatError(f"not a dump file: neither binary ({binary_reason}) nor protobuf "
                              f"({_short(exc)})", path=path) from None
    if not (msg.op_name or msg.version or len(msg.input) or len(msg.output)):
        raise DumpFormatError(f"not a dump file: neither binary ({binary_reason}) nor a protobuf DumpData "
                              "with content", path=path)
    for kind, group in (("input", msg.input), ("output", msg.output), ("buffer", msg.buffer),
                        ("space", msg.space)):
        for i, t in enumerate(group):
            if t.size and t.size != len(t.data):
                raise DumpFormatError(f"protobuf dump: {kind} {i} declares size {t.size} but holds "
                                      f"{len(t.data)} bytes", path=path)
    inputs, outputs, buffers, spaces = _records_from_proto(
        msg, path, lambda t: _inline(t.data), lambda t: len(t.data))
    op_name = msg.op_name or _name_fields(path)[0]
    return DumpFile(path, "protobuf", op_name, msg.version, int(msg.dump_time), inputs, outputs, buffers, spaces,
                    _attrs(msg))


def _read_nano(path: Path, header: bytes, size: int, whole: bytes | None = None) -> DumpFile:
    view = memoryview(header)
    try:
        magic, version = struct.unpack_from("<II", view, 0)
        pos = 8
        tag, _ = _TL.unpack_from(view, pos)
        in_descs: list = []
        if tag == 4:
            (count,) = struct.unpack_from("<I", view, pos + 8)
            pos += 12
            for _ in range(count):
                fields = _NANO_IN.unpack_from(view, pos)
                pos += _NANO_IN.size
                tlv, pos = _nano_tlnvs(view, pos, fields[-1])
                in_descs.append((fields, tlv))
            tag, _ = _TL.unpack_from(view, pos)
        if tag != 5:
            raise DumpFormatError(f"nano header: expected output tag 5 at byte {8 + pos}, found {tag}", path=path)
        (count,) = struct.unpack_from("<I", view, pos + 8)
        pos += 12
        out_descs = []
        for _ in range(count):
            fields = _NANO_OUT.unpack_from(view, pos)
            pos += _NANO_OUT.size
            tlv, pos = _nano_tlnvs(view, pos, fields[-1])
            out_descs.append((fields, tlv))
    except struct.error:
        raise DumpFormatError(f"nano header truncated: {len(header)} header bytes do not hold the described "
                              "tensor descriptions", path=path) from None
    except _NanoError as exc:
        raise DumpFormatError(f"nano header: {exc}", path=path) from None
    data_sizes = [f[5] for f, _ in in_descs] + [f[8] for f, _ in out_descs]
    expected = 8 + len(header) + sum(data_sizes)
    if expected != size:
        diff = size - expected
        raise DumpFormatError(
            f"size mismatch: the file has {size} bytes but the nano header ({len(header)} bytes) describes "
            f"{expected}: {abs(diff)} bytes {'too many' if diff > 0 else 'missing'}", path=path)
    offset = 8 + len(header)
    inputs, outputs = [], []
    for i, (f, tlv) in enumerate(in_descs):
        data_type, fmt, _atype, address, _off, nbytes, _ = f
        raw = _mapped(path, offset, nbytes) if whole is None else _from_bytes(whole, offset, nbytes)
        inputs.append(_record("input", i, _nano_dtype(data_type), fmt, tlv.get(0, ()), tlv.get(1),
                                   nbytes, address, 0, None, raw, path))
        offset += nbytes
    for i, (f, tlv) in enumerate(out_descs):
        data_type, fmt, _atype, orig_index, _odt, ofmt, address, _off, nbytes, _ = f
        orig = (tlv[2], orig_index) if 2 in tlv else None
        raw = _mapped(path, offset, nbytes) if whole is None else _from_bytes(whole, offset, nbytes)
        outputs.append(_record("output", i, _nano_dtype(data_type), fmt, tlv.get(0, ()), tlv.get(1),
                                    nbytes, address, 0, orig, raw, path, ofmt if orig is not None else None))
        offset += nbytes
    op_name, stamp = _name_fields(path)
    return DumpFile(path, "nano", op_name, str(version), stamp, inputs, outputs, [], [])


class _NanoError(Exception):
    pass


def _nano_dtype(value: int) -> int:
    """nano dtype -> proto dtype; unknown values are kept out of the proto range so array() names them."""
    proto = _dt.NANO_TO_PROTO.get(value)
    return proto if proto is not None else _dt.NANO_UNKNOWN_BASE + value


def _nano_tlnvs(view: memoryview, pos: int, length: int) -> tuple[dict, int]:
    end = pos + length
    if end > len(view):
        raise _NanoError(f"description list of {length} bytes at byte {8 + pos} runs past the header")
    values: dict = {}
    while pos < end:
        tag, n = _TL.unpack_from(view, pos)
        pos += 8
        if pos + n > end:
            raise _NanoError(f"TLV tag {tag} of {n} bytes at byte {8 + pos - 8} overruns its list")
        if tag in (0, 1):
            if n % 8:
                raise _NanoError(f"shape TLV of {n} bytes is not a multiple of 8")
            values[tag] = tuple(struct.unpack_from(f"<{n // 8}Q", view, pos))
        elif tag == 2:
            values[tag] = bytes(view[pos:pos + n]).decode("latin-1")
        pos += n
    return values, end


def _read_npy(path: Path, handle) -> DumpFile:
    handle.seek(0)
    try:
        major, _minor = np.lib.format.read_magic(handle)
        if major == 1:
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(handle)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(handle)
        offset = handle.tell()
    except Exception as exc:
        raise DumpFormatError(f"bad .npy header ({_short(exc)})", path=path) from None
    if dtype.hasobject:
        raise DumpFormatError(f".npy holds {dtype} (object) data, not a tensor", path=path)
    try:
        dt = _dt.proto_dtype_of(dtype)
    except DumpFormatError:
        raise DumpFormatError(f".npy dtype {dtype} has no dump data type", path=path) from None
    count = 1
    for d in shape:
        count *= d
    nbytes = count * dtype.itemsize
    size = os.fstat(handle.fileno()).st_size
    if offset + nbytes != size:
        diff = size - offset - nbytes
        raise DumpFormatError(f"size mismatch: .npy of shape {list(shape)} {dtype} needs {offset + nbytes} "
                              f"bytes, the file has {size}: {abs(diff)} bytes "
                              f"{'too many' if diff > 0 else 'missing'}", path=path)

    def load() -> np.ndarray:
        try:
            arr = np.load(path, mmap_mode="r")
        except (OSError, ValueError) as exc:
            raise DumpFormatError(f"cannot map .npy: {_short(exc)}") from None
        if fortran or not arr.dtype.isnative:
            arr = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("="))
        return arr.reshape(-1).view(np.uint8)

    match = _GOLDEN_NAME.match(path.name)
    op_name = match["op"] if match else path.name[:-4] if path.name.endswith(".npy") else path.name
    stamp = int(match["ts"]) if match else 0
    record = _record("output", 0, dt, FORMAT_ND, tuple(int(d) for d in shape), tuple(int(d) for d in shape),
                     nbytes, raw=load, path=path)
    return DumpFile(path, "npy", op_name, "2.0", stamp, [], [record], [], [])


# ---------------------------------------------------------------------------------------------- writing

@dataclass
class TensorSpec:
    """A tensor to write: data in device layout plus its description."""

    array: np.ndarray
    dtype: int | None = None  # proto OutputDataType; inferred from array.dtype if None
    format: int = FORMAT_ND
    original_shape: tuple[int, ...] | None = None
    original_op: tuple[str, int] | None = None  # outputs only
    address: int = 0
    sub_format: int = 0
    origin_format: int | str | None = None  # with original_op: the original op's format (default: the layout
                                            # the device format converts back to, ND as is)


def _origin_format(spec: TensorSpec) -> int:
    """The format value written as the original op's: given, else the device format's original layout."""
    if spec.origin_format is not None:
        return format_value(spec.origin_format)
    from fusebisect.compare.formats import DEFAULT_TARGET   # (formats imports this module)

    target = DEFAULT_TARGET.get(format_name(format_value(spec.format)))
    return format_value(target) if target else format_value(spec.format)


def _spec(item) -> TensorSpec:
    return item if isinstance(item, TensorSpec) else TensorSpec(np.asarray(item))


def _encode_spec(spec: TensorSpec) -> tuple[int, tuple[int, ...], bytes]:
    arr = np.asarray(spec.array)
    dt = spec.dtype if spec.dtype is not None else _dt.proto_dtype_of(arr.dtype)
    return dt, tuple(int(d) for d in arr.shape), _dt.encode(arr, dt)


def _raw_bytes(item) -> bytes:
    if isinstance(item, (bytes, bytearray, memoryview)):
        return bytes(item)
    arr = _spec(item).array
    return np.ascontiguousarray(arr).tobytes()


def dump_bytes(*, op_name: str, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec],
               encoding: str = "binary", dump_time: int = 0, buffers: Iterable = (),
               spaces: Iterable = (), attrs: Iterable[tuple[str, str]] = ()) -> bytes:
    """Return the bytes of a dump file in ``encoding`` ('binary', 'protobuf' or 'nano').

    Buffers, spaces (raw bytes or arrays) and op attributes (``(name, value)`` strings, e.g. the FFTS+ slice
    JSON) exist only in binary/protobuf. Raises DumpFormatError for an unknown encoding or a dtype or field
    the encoding cannot express.
    """
    ins = [(_spec(s),) + _encode_spec(_spec(s)) for s in inputs]
    outs = [(_spec(s),) + _encode_spec(_spec(s)) for s in outputs]
    bufs = [_raw_bytes(b) for b in buffers]
    sps = [_raw_bytes(s) for s in spaces]
    op_attrs = [(str(name), str(value)) for name, value in attrs]
    if encoding == "nano":
        if bufs or sps:
            raise DumpFormatError("the nano encoding has no buffers or workspaces")
        if op_attrs:
            raise DumpFormatError("the nano encoding has no op attributes")
        return _nano_bytes(ins, outs)
    if encoding not in ("binary", "protobuf"):
        raise DumpFormatError(f"unknown dump encoding {encoding!r} (use binary, protobuf or nano)")
    inline = encoding == "protobuf"
    msg = _dd.DumpData(version="1.0" if inline else "2.0", dump_time=dump_time, op_name=op_name)
    for spec, dt, shape, data in ins:
        t = msg.input.add(data_type=dt, format=spec.format, size=len(data), sub_format=spec.sub_format,
                          address=spec.address)
        t.shape.dim.extend(shape)
        if spec.original_shape is not None:
            t.original_shape.dim.extend(int(d) for d in spec.original_shape)
        if inline:
            t.data = data
    for spec, dt, shape, data in outs:
        t = msg.output.add(data_type=dt, format=spec.format, size=len(data), sub_format=spec.sub_format,
                           address=spec.address)
        t.shape.dim.extend(shape)
        if spec.original_shape is not None:
            t.original_shape.dim.extend(int(d) for d in spec.original_shape)
        if spec.original_op is not None:
            t.original_op.name = spec.original_op[0]
            t.original_op.output_index = int(spec.original_op[1])
            t.original_op.data_type = dt
            t.original_op.format = _origin_format(spec)
        if inline:
            t.data = data
    for data in bufs:
        b = msg.buffer.add(size=len(data))
        if inline:
            b.data = data
    for data in sps:
        s = msg.space.add(size=len(data))
        if inline:
            s.data = data
    for name, value in op_attrs:
        msg.attr.add(name=name, value=value)
    header = msg.SerializeToString()
    if inline:
        return header
    chunks = [_U64.pack(len(header)), header]
    chunks += [d for _, _, _, d in ins] + [d for _, _, _, d in outs] + bufs + sps
    return b"".join(chunks)


def _tlnv(tag: int, payload: bytes) -> bytes:
    return _TL.pack(tag, len(payload)) + payload


def _nano_shape(tag: int, dims) -> bytes:
    dims = tuple(int(d) for d in dims)
    return _tlnv(tag, struct.pack(f"<{len(dims)}Q", *dims))


def _nano_code(dt: int) -> int:
    code = _dt.PROTO_TO_NANO.get(dt)
    if code is None:
        raise DumpFormatError(f"data type {_dt.dtype_name(dt)} cannot be written in the nano encoding")
    return code


def _nano_bytes(ins, outs, version: int = 0) -> bytes:
    body = [struct.pack("<I", len(ins))]
    for spec, dt, shape, data in ins:
        tl = _nano_shape(0, shape)
        if spec.original_shape is not None:
            tl += _nano_shape(1, spec.original_shape)
        body.append(_NANO_IN.pack(_nano_code(dt), spec.format, 0, spec.address, 0, len(data), len(tl)) + tl)
    in_tlv = b"".join(body)
    body = [struct.pack("<I", len(outs))]
    for spec, dt, shape, data in outs:
        tl = _nano_shape(0, shape)
        if spec.original_shape is not None:
            tl += _nano_shape(1, spec.original_shape)
        orig_index = 0
        if spec.original_op is not None:
            name = spec.original_op[0].encode("ascii", "replace")
            tl += _tlnv(2, name)
            orig_index = int(spec.original_op[1])
        code = _nano_code(dt)
        body.append(_NANO_OUT.pack(code, spec.format, 0, orig_index, code, _origin_format(spec), spec.address, 0,
                                   len(data), len(tl)) + tl)
    out_tlv = b"".join(body)
    header = (struct.pack("<II", NANO_MAGIC, version & 0xFFFFFFFF) + _TL.pack(4, len(in_tlv)) + in_tlv
              + _TL.pack(5, len(out_tlv)) + out_tlv)
    chunks = [_U64.pack(len(header)), header] + [d for *_, d in ins] + [d for *_, d in outs]
    return b"".join(chunks)


def write_dump(path: str | os.PathLike[str], *, op_name: str, inputs: Sequence[TensorSpec],
               outputs: Sequence[TensorSpec], encoding: str = "binary", dump_time: int = 0,
               buffers: Iterable = (), spaces: Iterable = (), attrs: Iterable[tuple[str, str]] = ()) -> Path:
    """Write one dump file atomically in ``encoding`` ('binary', 'protobuf' or 'nano'); return its path.

    Nano files carry no op name, dump time or op attributes (readers take the first two from the file name).
    Raises DumpFormatError for an unknown encoding or an inexpressible dtype or field; OSError on I/O failure.
    """
    data = dump_bytes(op_name=op_name, inputs=inputs, outputs=outputs, encoding=encoding, dump_time=dump_time,
                      buffers=buffers, spaces=spaces, attrs=attrs)
    return atomic_write_bytes(path, data)
