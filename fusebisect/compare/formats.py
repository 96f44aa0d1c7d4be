"""Convert tensors between Ascend device layouts (5HD, fractal) and their original layouts.

:func:`to_original` undoes a private format and removes its padding; :func:`from_original` builds the device
layout (zero padded) from an original tensor. ``original_shape`` is always given in the layout named by
``target`` (the default target of each format is in :data:`DEFAULT_TARGET`). Group convolution weights
(FRACTAL_Z with ``sub_format`` = groups >= 2) follow GE's grouped layout: ``e`` groups share one fractal group,
``e = min(lcm(lcm(Cin, C0)/Cin, lcm(Cout_g, 16)/Cout_g), groups)`` (GE's ``TransShapeToFzWithGroups``).
"""

from __future__ import annotations

import math

import numpy as np

from fusebisect.compare.dumpfile import format_name, format_value
from fusebisect.errors import DumpFormatError

CUBE = 16  # fractal block size (Ni, and the N/row alignment)
DEFAULT_TARGET = {"NC1HWC0": "NCHW", "FRACTAL_Z": "NCHW", "FRACTAL_NZ": "ND", "NDC1HWC0": "NCDHW",
                  "C1HWNCoC0": "HWCN"}
TARGETS = {"NC1HWC0": ("NCHW", "NHWC", "HWCN"), "FRACTAL_Z": ("NCHW", "HWCN", "NHWC"),
           "FRACTAL_NZ": ("ND", "NCHW", "NHWC"), "NDC1HWC0": ("NCDHW", "NDHWC"), "C1HWNCoC0": ("HWCN", "NCHW")}
_LETTER_LAYOUTS = {"NCHW", "NHWC", "HWCN", "CHWN", "NCDHW", "NDHWC", "DHWCN", "DHWNC", "NC", "CN"}
_PLAIN = _LETTER_LAYOUTS | {"ND", "RESERVED", "NCL", "MD"}
PLAIN_LAYOUTS = frozenset(_PLAIN)   # host layouts: stored as their shape says, nothing to convert


def _name(fmt: int | str) -> str:
    name = format_name(fmt) if isinstance(fmt, int) else fmt.upper().removeprefix("FORMAT_")
    return "C1HWNCoC0" if name.upper() == "C1HWNCOC0" else name


def _permute(array: np.ndarray, src: str, dst: str) -> np.ndarray:
    """Transpose between letter layouts (NCHW -> NHWC ...); layout-free names (ND...) pass through."""
    if src == dst or src not in _LETTER_LAYOUTS or dst not in _LETTER_LAYOUTS:
        return array
    if sorted(src) != sorted(dst) or array.ndim != len(src):
        raise DumpFormatError(f"cannot permute a {array.ndim}-D {src} tensor to {dst}")
    return array.transpose([src.index(ch) for ch in dst])


def _in_layout(shape, layout: str, default: str) -> tuple[int, ...]:
    """Reorder ``shape`` (given in ``layout``) into ``default`` letter order."""
    return tuple(shape[layout.index(ch)] for ch in default)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _check_dims(array: np.ndarray, ndim: int, fmt: str) -> None:
    if array.ndim != ndim:
        raise DumpFormatError(f"{fmt} tensor must be {ndim}-D, got shape {list(array.shape)}")


def _group_params(cin: int, cout_g: int, groups: int, c0: int) -> tuple[int, int, int, int]:
    """(e_mult, cin_opt, cout_opt, g_opt) of GE's grouped FRACTAL_Z."""
    e_mult = min(math.lcm(math.lcm(cin, c0) // cin, math.lcm(cout_g, CUBE) // cout_g), groups)
    return e_mult, _ceil(e_mult * cin, c0) * c0, _ceil(e_mult * cout_g, CUBE) * CUBE, _ceil(groups, e_mult)


def origin_target(record) -> str | None:
    """The layout a dump record's device format converts back to, as its original op's format (the dump's
    ``original_op.format``, from ``_datadump_origin_format``) names it: 'NHWC' for a TensorFlow NC1HWC0 output.
    None when absent (or 0, proto3's unset), for FRACTAL_NZ (always ND), when it is not a layout that format converts
    to, or when the original shape does not have that layout's rank (then :data:`DEFAULT_TARGET` applies)."""
    value = getattr(record, "origin_format", None)
    fmt = getattr(record, "format_name", "")
    if not value or fmt == "FRACTAL_NZ":   # 0 is also proto3's "not set" (and NCHW, the default anyway); NZ: ND
        return None
    name = format_name(value)
    orig = getattr(record, "original_shape", None)
    if name not in TARGETS.get(fmt, ()) or not orig or len(orig) != len(name):
        return None   # a 2-D FC output of an NHWC graph stays with the default, which handles it
    return name


def record_to_original(record, array: np.ndarray, *, prefer: str | None = None) -> tuple[np.ndarray, str]:
    """``array`` (record ``record``'s tensor as stored, a format :data:`DEFAULT_TARGET` converts) with its device
    padding removed, and the layout it is in.

    The original shape is read in the layout the dump names for it (:func:`origin_target`), else in the format's
    default layout. A dump names none for inputs (the OpInput message has no origin format), and a TensorFlow
    graph's inputs are NHWC (weights HWCN): when the default layout does not fit the device shape, the format's
    other layouts of the original shape's rank are tried (``prefer``, a layout asked for, first), and the one
    that fits is used. Raises DumpFormatError when none fits, or when several do (which one the original is,
    the dump does not say: a guess would write wrong data as if converted).
    """
    name = record.format_name
    named = origin_target(record)
    orig = record.original_shape
    default = DEFAULT_TARGET.get(name, "ND")
    if named is not None or not orig or name not in TARGETS:
        layout = named or default   # (a format without conversion: to_original says so)
        return to_original(array, record.format, orig, target=layout, sub_format=record.sub_format), layout
    try:
        return to_original(array, record.format, orig, target=default, sub_format=record.sub_format), default
    except DumpFormatError as exc:
        first = exc
    others = [t for t in TARGETS[name] if len(t) == len(orig) and t != default]
    others.sort(key=lambda t: t != prefer)
    fits = []
    for layout in others:
        try:
            fits.append((to_original(array, record.format, orig, target=layout, sub_format=record.sub_format),
                         layout))
        except DumpFormatError:
            continue
    if len(fits) == 1:
        return fits[0]
    if fits:
        raise DumpFormatError(f"{name} shape {list(array.shape)} fits original {list(orig)} read as "
                              f"{' or '.join(layout for _, layout in fits)}, not as {default}: the dump names no "
                              "layout for it (an input), so which one is not known")
    raise first


def record_original(record, array: np.ndarray) -> np.ndarray | None:
    """``array`` (dump record ``record``'s tensor as stored) with its device layout's padding removed, in the
    layout :func:`origin_target` names, for statistics of the data itself; None when the format is a plain
    layout, the dump gives no original shape, or the tensor does not fit it."""
    if getattr(record, "format_name", "ND") in PLAIN_LAYOUTS or not record.original_shape:
        return None
    try:
        if record.format_name == "NC1HWC0_C04":   # NC1HWC0 with C0 = 4 (msaccucmp converts it nowhere: stats only)
            orig = tuple(int(d) for d in record.original_shape)
            origin = getattr(record, "origin_format", None)
            name = format_name(origin) if origin else "NCHW"
            return _from_5hd(array, orig, name if name in TARGETS["NC1HWC0"] and len(name) == len(orig) else "NCHW")
        return record_to_original(record, array)[0]
    except (DumpFormatError, TypeError, ValueError, KeyError):
        return None


def to_original(array: np.ndarray, fmt: int | str, original_shape, *, target: str | None = None,
                sub_format: int = 0) -> np.ndarray:
    """Return ``array`` (device layout ``fmt``) in layout ``target`` with padding removed.

    ``original_shape`` is the logical shape in ``target`` layout (needed for FRACTAL_Z; without it other formats
    keep their padding). ``target`` 'ND' means the format's default layout; FRACTAL_NZ treats every target as ND
    (rows and columns are the last two original dims). Plain formats (ND, NCHW, ...) are reshaped to ``original_shape`` and permuted if
    ``target`` names another letter layout. Raises DumpFormatError for an unsupported format or target, or
    shapes that do not fit.
    """
    name = _name(fmt)
    orig = tuple(int(d) for d in original_shape) if original_shape is not None else None
    try:
        if name in _PLAIN:
            tgt = (target or name).upper()
            out = array
            if tgt != name:
                out = _permute(out, name, tgt)
            if orig is not None and math.prod(orig) == out.size:
                out = out.reshape(orig)
            return out
        if name not in DEFAULT_TARGET:
            raise DumpFormatError(f"format {name} cannot be converted to an original layout")
        if orig == ():   # an original_shape field present but empty says nothing: as if absent
            orig = None
        tgt = (target or DEFAULT_TARGET[name]).upper()
        if tgt == "ND":  # "whatever the original shape says": the format's natural layout, reshaped
            tgt = DEFAULT_TARGET[name]
        if tgt not in TARGETS[name]:
            raise DumpFormatError(f"cannot convert {name} to {tgt} (supported: {', '.join(TARGETS[name])})")
        if name == "NC1HWC0":
            return _from_5hd(array, orig, tgt)
        if name == "FRACTAL_Z":
            return _from_fz(array, orig, tgt, sub_format)
        if name == "FRACTAL_NZ":
            return _from_nz(array, orig)
        if name == "NDC1HWC0":
            return _from_6hd(array, orig, tgt)
        return _from_c1hwncoc0(array, orig, tgt)
    except ValueError as exc:  # reshape/slice mismatch from inconsistent shapes
        raise DumpFormatError(f"cannot convert {name} shape {list(array.shape)} to {target or ''} "
                              f"{list(orig) if orig else ''}: {exc}") from None


def _from_5hd(a: np.ndarray, orig, tgt: str) -> np.ndarray:
    _check_dims(a, 5, "NC1HWC0")
    n, c1, h, w, c0 = a.shape
    nchw = a.transpose(0, 1, 4, 2, 3).reshape(n, c1 * c0, h, w)
    if orig is not None:
        if len(orig) == 2 and h == w == 1 and tgt == "NCHW":
            return nchw[:orig[0], :orig[1]].reshape(orig)
        if len(orig) != 4:
            raise DumpFormatError(f"NC1HWC0 shape {list(a.shape)} does not fit original {list(orig)}")
        on, oc, oh, ow = _in_layout(orig, tgt, "NCHW")
        if (oh, ow) != (h, w) or on > n or oc > c1 * c0:
            raise DumpFormatError(f"NC1HWC0 shape {list(a.shape)} does not fit original {tgt} {list(orig)}")
        nchw = nchw[:on, :oc]
    return _permute(nchw, "NCHW", tgt)


def _from_fz(a: np.ndarray, orig, tgt: str, groups: int) -> np.ndarray:
    _check_dims(a, 4, "FRACTAL_Z")
    if orig is None or len(orig) != 4:
        raise DumpFormatError(f"FRACTAL_Z to {tgt} needs the 4-D original shape, got {orig}")
    n, c, h, w = _in_layout(orig, tgt, "NCHW")
    rows, no, ni, c0 = a.shape
    if groups and groups >= 2:
        if n % groups:
            raise DumpFormatError(f"FRACTAL_Z: {n} output channels do not split into {groups} groups")
        cout_g = n // groups
        e_mult, cin_opt, cout_opt, g_opt = _group_params(c, cout_g, groups, c0)
        c1 = cin_opt // c0
        if rows != g_opt * c1 * h * w or no * ni != cout_opt:
            raise DumpFormatError(f"grouped FRACTAL_Z shape {list(a.shape)} does not fit original NCHW "
                                  f"{[n, c, h, w]} with {groups} groups")
        blocks = a.reshape(g_opt, c1, h, w, cout_opt, c0).transpose(0, 4, 1, 5, 2, 3)
        blocks = blocks.reshape(g_opt, cout_opt, cin_opt, h, w)
        out = np.empty((n, c, h, w), dtype=a.dtype)
        for g in range(groups):
            e = g % e_mult
            out[g * cout_g:(g + 1) * cout_g] = blocks[g // e_mult, e * cout_g:(e + 1) * cout_g,
                                                      e * c:(e + 1) * c]
        return _permute(out, "NCHW", tgt)
    c1 = rows // (h * w) if h * w else 0
    if c1 * h * w != rows or no * ni < n or c1 * c0 < c:
        raise DumpFormatError(f"FRACTAL_Z shape {list(a.shape)} does not fit original NCHW {[n, c, h, w]}")
    nchw = a.reshape(c1, h, w, no, ni, c0).transpose(3, 4, 0, 5, 1, 2).reshape(no * ni, c1 * c0, h, w)
    return _permute(nchw[:n, :c], "NCHW", tgt)


def _from_nz(a: np.ndarray, orig) -> np.ndarray:
    if a.ndim < 4:
        raise DumpFormatError(f"FRACTAL_NZ tensor must be at least 4-D, got shape {list(a.shape)}")
    *batch, c1, no, ni, c0 = a.shape
    b = math.prod(batch)
    nd = a.reshape(b, c1, no, ni, c0).transpose(0, 2, 3, 1, 4).reshape(b, no * ni, c1 * c0)
    if orig is None:
        return nd.reshape(*batch, no * ni, c1 * c0)
    logical = orig if len(orig) >= 2 else (1, *orig)
    rows, cols = logical[-2], logical[-1]
    if rows > no * ni or cols > c1 * c0 or math.prod(logical[:-2]) != b:
        raise DumpFormatError(f"FRACTAL_NZ shape {list(a.shape)} does not fit original {list(orig)}")
    return nd[:, :rows, :cols].reshape(orig)


def _from_6hd(a: np.ndarray, orig, tgt: str) -> np.ndarray:
    _check_dims(a, 6, "NDC1HWC0")
    n, d, c1, h, w, c0 = a.shape
    ncdhw = a.transpose(0, 2, 5, 1, 3, 4).reshape(n, c1 * c0, d, h, w)
    if orig is not None:
        if len(orig) != 5:
            raise DumpFormatError(f"NDC1HWC0 shape {list(a.shape)} does not fit original {list(orig)}")
        on, oc, od, oh, ow = _in_layout(orig, tgt, "NCDHW")
        if (od, oh, ow) != (d, h, w) or on > n or oc > c1 * c0:
            raise DumpFormatError(f"NDC1HWC0 shape {list(a.shape)} does not fit original {tgt} {list(orig)}")
        ncdhw = ncdhw[:on, :oc]
    return _permute(ncdhw, "NCDHW", tgt)


def _from_c1hwncoc0(a: np.ndarray, orig, tgt: str) -> np.ndarray:
    _check_dims(a, 6, "C1HWNCoC0")
    c1, h, w, n, co, c0 = a.shape
    if co != c0:
        raise DumpFormatError(f"C1HWNCoC0 shape {list(a.shape)} has Co {co} != C0 {c0}")
    idx = np.arange(c0)
    diag = a[:, :, :, :, idx, idx]  # (C1, H, W, N, C0): element c sits at Co == C0 == c % C0
    hwcn = diag.transpose(1, 2, 0, 4, 3).reshape(h, w, c1 * c0, n)
    if orig is not None:
        if len(orig) != 4:
            raise DumpFormatError(f"C1HWNCoC0 shape {list(a.shape)} does not fit original {list(orig)}")
        oh, ow, oc, on = _in_layout(orig, tgt, "HWCN")
        if (oh, ow, on) != (h, w, n) or oc > c1 * c0:
            raise DumpFormatError(f"C1HWNCoC0 shape {list(a.shape)} does not fit original {tgt} {list(orig)}")
        hwcn = hwcn[:, :, :oc]
    return _permute(hwcn, "HWCN", tgt)


def from_original(array: np.ndarray, fmt: int | str, *, source: str | None = None, c0: int = 16,
                  sub_format: int = 0, **_ignored) -> np.ndarray:
    """Return ``array`` (layout ``source``, default per format) in device layout ``fmt``, zero padded.

    ``c0`` is the channel block (16 for fp16/fp32 on most cores, 32 for int8); ``sub_format`` >= 2 builds a
    grouped FRACTAL_Z (``array`` is NCHW with N = all output channels, C = input channels per group). Plain
    formats return ``array`` permuted to ``fmt``. Raises DumpFormatError for an unsupported format or shape.
    """
    name = _name(fmt)
    a = np.asarray(array)
    if name in _PLAIN:
        return _permute(a, (source or name).upper(), name)
    if name not in DEFAULT_TARGET:
        raise DumpFormatError(f"format {name} cannot be built from an original layout")
    src = (source or DEFAULT_TARGET[name]).upper()
    if src not in TARGETS[name]:
        raise DumpFormatError(f"cannot build {name} from {src} (supported: {', '.join(TARGETS[name])})")
    if name == "NC1HWC0":
        n, c, h, w = _permute(a, src, "NCHW").shape
        x = _pad_axis(_permute(a, src, "NCHW"), 1, c0)
        return x.reshape(n, -1, c0, h, w).transpose(0, 1, 3, 4, 2).copy()
    if name == "FRACTAL_Z":
        x = _permute(a, src, "NCHW")
        n, c, h, w = x.shape
        if sub_format and sub_format >= 2:
            return _to_fz_groups(x, sub_format, c0)
        x = _pad_axis(_pad_axis(x, 0, CUBE), 1, c0)
        no, c1 = x.shape[0] // CUBE, x.shape[1] // c0
        return x.reshape(no, CUBE, c1, c0, h, w).transpose(2, 4, 5, 0, 1, 3).reshape(c1 * h * w, no, CUBE, c0)
    if name == "FRACTAL_NZ":
        if a.ndim < 1:
            raise DumpFormatError("FRACTAL_NZ needs at least a 1-D tensor")
        x = a.reshape(1, *a.shape) if a.ndim == 1 else a
        *batch, rows, cols = x.shape
        x = _pad_axis(_pad_axis(x.reshape(-1, rows, cols), 1, CUBE), 2, c0)
        b, no, c1 = x.shape[0], x.shape[1] // CUBE, x.shape[2] // c0
        return x.reshape(b, no, CUBE, c1, c0).transpose(0, 3, 1, 2, 4).reshape(*batch, c1, no, CUBE, c0)
    if name == "NDC1HWC0":
        x = _permute(a, src, "NCDHW")
        n, c, d, h, w = x.shape
        x = _pad_axis(x, 1, c0)
        return x.reshape(n, -1, c0, d, h, w).transpose(0, 3, 1, 4, 5, 2).copy()
    x = _pad_axis(_permute(a, src, "HWCN"), 2, c0)  # C1HWNCoC0
    h, w, cp, n = x.shape
    c1 = cp // c0
    out = np.zeros((c1, h, w, n, c0, c0), dtype=x.dtype)
    idx = np.arange(c0)
    out[:, :, :, :, idx, idx] = x.reshape(h, w, c1, c0, n).transpose(2, 0, 1, 4, 3)
    return out


def _pad_axis(x: np.ndarray, axis: int, multiple: int) -> np.ndarray:
    size = x.shape[axis]
    extra = _ceil(size, multiple) * multiple - size
    if extra == 0:
        return x
    pad = [(0, 0)] * x.ndim
    pad[axis] = (0, extra)
    return np.pad(x, pad)


def _to_fz_groups(x: np.ndarray, groups: int, c0: int) -> np.ndarray:
    n, c, h, w = x.shape
    if n % groups:
        raise DumpFormatError(f"FRACTAL_Z: {n} output channels do not split into {groups} groups")
    cout_g = n // groups
    e_mult, cin_opt, cout_opt, g_opt = _group_params(c, cout_g, groups, c0)
    blocks = np.zeros((g_opt, cout_opt, cin_opt, h, w), dtype=x.dtype)
    for g in range(groups):
        e = g % e_mult
        blocks[g // e_mult, e * cout_g:(e + 1) * cout_g, e * c:(e + 1) * c] = x[g * cout_g:(g + 1) * cout_g]
    c1 = cin_opt // c0
    out = blocks.reshape(g_opt, cout_opt, c1, c0, h, w).transpose(0, 2, 4, 5, 1, 3)
    return out.reshape(g_opt * c1 * h * w, cout_opt // CUBE, CUBE, c0)


__all__ = ["to_original", "from_original", "DEFAULT_TARGET", "TARGETS", "format_value"]
