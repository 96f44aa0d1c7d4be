"""Dump data types: proto ``OutputDataType`` numbers to names, numpy storage dtypes, and decoders.

Every dtype CANN dumps is described here once: its storage dtype in the file, its element count to byte count
rule (packed UINT1/INT4 hold 8/2 elements per byte), and how the raw little-endian bytes become a numpy array.
The nano encoding numbers dtypes like GE's ``ge::DataType``; :data:`NANO_TO_PROTO` translates them.
"""

from __future__ import annotations

import numpy as np
import ml_dtypes

from fusebisect.errors import DumpFormatError
from fusebisect.proto import dump_data_pb2 as _dd

# proto OutputDataType values used by the code (names as in dump_data.proto)
DT_UNDEFINED = 0
DT_FLOAT = 1
DT_FLOAT16 = 2
DT_INT8 = 3
DT_UINT8 = 4
DT_INT16 = 5
DT_UINT16 = 6
DT_INT32 = 7
DT_INT64 = 8
DT_UINT32 = 9
DT_UINT64 = 10
DT_BOOL = 11
DT_DOUBLE = 12
DT_COMPLEX64 = 16
DT_COMPLEX128 = 17
DT_RESOURCE = 23
DT_BF16 = 27
DT_INT4 = 28
DT_UINT1 = 29
DT_HIFLOAT8 = 33
DT_FLOAT8_E5M2 = 34
DT_FLOAT8_E4M3FN = 35

# proto value -> (numpy-style name, storage dtype in the file)
_STORAGE: dict[int, tuple[str, np.dtype]] = {
    DT_UNDEFINED: ("undefined", np.dtype("int8")),  # msaccucmp reads it as raw int8 bytes
    DT_FLOAT: ("float32", np.dtype("<f4")),
    DT_FLOAT16: ("float16", np.dtype("<f2")),
    DT_DOUBLE: ("float64", np.dtype("<f8")),
    DT_BF16: ("bfloat16", np.dtype(ml_dtypes.bfloat16)),
    DT_FLOAT8_E4M3FN: ("float8_e4m3fn", np.dtype(ml_dtypes.float8_e4m3fn)),
    DT_FLOAT8_E5M2: ("float8_e5m2", np.dtype(ml_dtypes.float8_e5m2)),
    DT_HIFLOAT8: ("hifloat8", np.dtype("uint8")),
    DT_INT8: ("int8", np.dtype("int8")),
    DT_UINT8: ("uint8", np.dtype("uint8")),
    DT_INT16: ("int16", np.dtype("<i2")),
    DT_UINT16: ("uint16", np.dtype("<u2")),
    DT_INT32: ("int32", np.dtype("<i4")),
    DT_UINT32: ("uint32", np.dtype("<u4")),
    DT_INT64: ("int64", np.dtype("<i8")),
    DT_UINT64: ("uint64", np.dtype("<u8")),
    DT_BOOL: ("bool", np.dtype("bool")),
    DT_COMPLEX64: ("complex64", np.dtype("<c8")),
    DT_COMPLEX128: ("complex128", np.dtype("<c16")),
    DT_RESOURCE: ("resource", np.dtype("<i8")),  # a handle; msaccucmp reads it as int64
    DT_UINT1: ("uint1", np.dtype("uint8")),
    DT_INT4: ("int4", np.dtype("uint8")),
}

# nano (ge::DataType) value -> proto OutputDataType value
NANO_TO_PROTO: dict[int, int] = {
    0: DT_FLOAT, 1: DT_FLOAT16, 2: DT_INT8, 3: DT_INT32, 4: DT_UINT8, 6: DT_INT16, 7: DT_UINT16, 8: DT_UINT32,
    9: DT_INT64, 10: DT_UINT64, 11: DT_DOUBLE, 12: DT_BOOL, 16: DT_COMPLEX64, 17: DT_COMPLEX128,
    23: DT_RESOURCE, 27: DT_BF16, 28: DT_UNDEFINED, 29: DT_INT4, 30: DT_UINT1,
}
PROTO_TO_NANO: dict[int, int] = {proto: nano for nano, proto in NANO_TO_PROTO.items()}
NANO_UNKNOWN_BASE = 1000  # a nano dtype with no proto equivalent n is recorded as NANO_UNKNOWN_BASE + n

_PACKED = {DT_UINT1: 8, DT_INT4: 2}  # elements per byte


def dtype_name(dt: int) -> str:
    """Return the numpy-style name of proto dtype ``dt`` ('float32', 'bfloat16', 'int4', ...).

    Known but undecodable dtypes get their proto name in lower case without ``DT_`` ('float8_e8m0', 'qint8');
    untranslatable nano dtypes ``'nano_dtype_<n>'``; other values ``'dtype_<n>'``. Never raises.
    """
    if dt in _STORAGE:
        return _STORAGE[dt][0]
    if dt >= NANO_UNKNOWN_BASE:
        return f"nano_dtype_{dt - NANO_UNKNOWN_BASE}"
    try:
        return _dd.OutputDataType.Name(dt)[3:].lower()
    except ValueError:
        return f"dtype_{dt}"


def numpy_dtype(dt: int) -> np.dtype:
    """Return the storage dtype of proto dtype ``dt`` in a dump file (uint8 for packed/hifloat8 bytes).

    Raises DumpFormatError naming the dtype if fusebisect cannot decode it.
    """
    try:
        return _STORAGE[dt][1]
    except KeyError:
        raise DumpFormatError(f"unsupported data type {dtype_name(dt)} ({dt})") from None


def is_supported(dt: int) -> bool:
    """Return True if tensors of proto dtype ``dt`` can be decoded."""
    return dt in _STORAGE


def nbytes_for(dt: int, count: int) -> int:
    """Return the bytes ``count`` elements of ``dt`` occupy in a dump (packed types round up).

    Raises DumpFormatError for an unsupported dtype.
    """
    per = _PACKED.get(dt)
    if per is not None:
        return -(-count // per)
    return count * numpy_dtype(dt).itemsize


def proto_dtype_of(dtype: np.dtype) -> int:
    """Return the proto dtype that stores numpy ``dtype`` as is (float32 -> DT_FLOAT, bfloat16 -> DT_BF16...).

    Raises DumpFormatError if the numpy dtype has no dump equivalent.
    """
    dtype = np.dtype(dtype)
    for dt, (name, storage) in _STORAGE.items():
        if dt in (DT_HIFLOAT8, DT_UINT1, DT_INT4, DT_UNDEFINED, DT_RESOURCE):
            continue
        if storage == dtype.newbyteorder("<") or (storage.kind == dtype.kind == "V" and storage == dtype):
            return dt
    raise DumpFormatError(f"numpy dtype {dtype} has no dump data type")


# ---------------------------------------------------------------------------------------------- hifloat8

def _hifloat8_table() -> np.ndarray:
    """All 256 HiFloat8 codes decoded to float32 (Ascend HiF8: sign, prefix-coded dot field, exponent, mantissa).

    The dot field gives the exponent width D: '11'->4, '10'->3, '01'->2, '001'->1, '0001'->0, '0000' denormal.
    A D-bit exponent is sign-magnitude with an implicit leading one: +-(2**(D-1) + magnitude); the mantissa takes
    the remaining bits with an implicit 1. Denormals are 2**(m-23). 0x00 is zero, 0x80 NaN, 0x6F/0xEF +-Inf.
    """
    table = np.empty(256, dtype=np.float32)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        bits = code & 0x7F
        if bits & 0x60 == 0x60:
            width, rest = 4, 5
        elif bits & 0x60 == 0x40:
            width, rest = 3, 5
        elif bits & 0x60 == 0x20:
            width, rest = 2, 5
        elif bits & 0x70 == 0x10:
            width, rest = 1, 4
        elif bits & 0x78 == 0x08:
            width, rest = 0, 3
        else:
            width, rest = -1, 3
        mant_bits = rest - max(width, 0)
        mant = bits & ((1 << mant_bits) - 1)
        if width == -1:
            value = 0.0 if mant == 0 else 2.0 ** (mant - 23)
        else:
            exp = 0
            if width > 0:
                field = (bits >> mant_bits) & ((1 << width) - 1)
                magnitude = (1 << (width - 1)) + (field & ((1 << (width - 1)) - 1))
                exp = -magnitude if field >> (width - 1) else magnitude
            value = 2.0 ** exp * (1.0 + mant / (1 << mant_bits))
        table[code] = sign * value
    table[0x80] = np.nan
    table[0x6F] = np.inf
    table[0xEF] = -np.inf
    return table


HIFLOAT8_TABLE = _hifloat8_table()


def hifloat8_to_float32(codes: np.ndarray) -> np.ndarray:
    """Return float32 values of uint8 HiFloat8 ``codes`` (table lookup, same shape). Never raises."""
    return HIFLOAT8_TABLE[np.asarray(codes, dtype=np.uint8)]


_HIF8_ORDER = np.argsort(HIFLOAT8_TABLE, kind="stable")
_HIF8_FINITE = _HIF8_ORDER[np.isfinite(HIFLOAT8_TABLE[_HIF8_ORDER])]


def float32_to_hifloat8(values: np.ndarray) -> np.ndarray:
    """Return the uint8 HiFloat8 code nearest to each value (NaN -> 0x80, beyond +-32768 -> +-Inf)."""
    values = np.asarray(values, dtype=np.float32)
    finite_vals = HIFLOAT8_TABLE[_HIF8_FINITE]
    pos = np.clip(np.searchsorted(finite_vals, values), 1, len(finite_vals) - 1)
    lo, hi = finite_vals[pos - 1], finite_vals[pos]
    pick = np.where(np.abs(values - lo) <= np.abs(hi - values), pos - 1, pos)
    codes = _HIF8_FINITE[pick].astype(np.uint8)
    codes = np.where(values > 32768.0, 0x6F, codes)
    codes = np.where(values < -32768.0, 0xEF, codes)
    codes = np.where(np.isnan(values), 0x80, codes)
    return codes.astype(np.uint8)


# ---------------------------------------------------------------------------------------------- decoding

def decode(raw: np.ndarray, dt: int, shape: tuple[int, ...]) -> np.ndarray:
    """Turn ``raw`` uint8 bytes of one tensor into an array of ``shape`` (views where the dtype allows).

    bf16/fp8 become ml_dtypes views, hifloat8 float32, uint1 bit-unpacked uint8 (MSB first), int4 int8 (low
    nibble first, sign-extended). Bytes beyond what the shape needs are ignored. Raises DumpFormatError for an
    unsupported dtype or too few bytes (the message says how many are missing).
    """
    storage = numpy_dtype(dt)
    count = 1
    for dim in shape:
        count *= int(dim)
    need = nbytes_for(dt, count)
    if raw.size < need:
        raise DumpFormatError(f"{dtype_name(dt)} tensor of shape {list(shape)} needs {need} bytes, "
                              f"the file holds {raw.size} ({need - raw.size} missing)")
    raw = raw[:need]
    if dt == DT_UINT1:
        return np.unpackbits(raw, count=count).reshape(shape)
    if dt == DT_INT4:
        pairs = np.empty((need, 2), dtype=np.int8)
        signed = raw.view(np.int8)
        pairs[:, 0] = np.left_shift(signed, 4) >> 4
        pairs[:, 1] = signed >> 4
        return pairs.reshape(-1)[:count].reshape(shape)
    if dt == DT_HIFLOAT8:
        return hifloat8_to_float32(raw).reshape(shape)
    return raw.view(storage).reshape(shape)


def encode(array: np.ndarray, dt: int) -> bytes:
    """Return the dump bytes of ``array`` stored as proto dtype ``dt`` (packing uint1/int4, hifloat8 codes).

    For hifloat8 a uint8 array is taken as codes, anything else is rounded to the nearest code. A dtype
    fusebisect cannot decode is written only from a uint8 array of its raw bytes; otherwise DumpFormatError.
    """
    flat = np.ascontiguousarray(array).reshape(-1)
    if not is_supported(dt) and flat.dtype == np.uint8:
        return flat.tobytes()
    storage = numpy_dtype(dt)
    if dt == DT_UINT1:
        return np.packbits(flat.astype(np.uint8) & 1).tobytes()
    if dt == DT_INT4:
        nib = (flat.astype(np.int8) & 0x0F).astype(np.uint8)
        if nib.size % 2:
            nib = np.concatenate([nib, np.zeros(1, np.uint8)])
        return (nib[0::2] | (nib[1::2] << 4)).tobytes()
    if dt == DT_HIFLOAT8:
        codes = flat if flat.dtype == np.uint8 else float32_to_hifloat8(flat)
        return codes.tobytes()
    if flat.dtype != storage:
        flat = flat.astype(storage)
    return flat.tobytes()
