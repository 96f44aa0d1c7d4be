"""Format conversion: round trips through the inverse transforms, and agreement with msaccucmp's converters."""

from __future__ import annotations

import importlib
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fusebisect.compare.formats import from_original, to_original
from fusebisect.errors import DumpFormatError

dim = st.integers(1, 9)
c0s = st.sampled_from([8, 16, 32])
SETTINGS = settings(max_examples=60, deadline=None)


def _arr(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@SETTINGS
@given(n=dim, c=st.integers(1, 40), h=dim, w=dim, c0=c0s, target=st.sampled_from(["NCHW", "NHWC", "HWCN"]))
def test_nc1hwc0_round_trip(n, c, h, w, c0, target):
    x = _arr((n, c, h, w))
    device = from_original(x, "NC1HWC0", c0=c0)
    assert device.shape == (n, -(-c // c0), h, w, c0)
    assert np.all(device[:, -1, :, :, c - (device.shape[1] - 1) * c0:] == 0)  # channel padding is zero
    want = x.transpose([ "NCHW".index(ch) for ch in target])
    np.testing.assert_array_equal(to_original(device, 3, want.shape, target=target), want)
    np.testing.assert_array_equal(from_original(want, "NC1HWC0", source=target, c0=c0), device)


@SETTINGS
@given(n=st.integers(1, 40), c=st.integers(1, 40), h=dim, w=dim, c0=c0s, target=st.sampled_from(["NCHW", "HWCN"]))
def test_fractal_z_round_trip(n, c, h, w, c0, target):
    x = _arr((n, c, h, w))
    device = from_original(x, "FRACTAL_Z", c0=c0)
    assert device.shape == (-(-c // c0) * h * w, -(-n // 16), 16, c0)
    want = x.transpose(["NCHW".index(ch) for ch in target])
    np.testing.assert_array_equal(to_original(device, "FRACTAL_Z", want.shape, target=target), want)


@SETTINGS
@given(groups=st.integers(2, 8), cout_g=st.integers(1, 20), cin=st.integers(1, 20), h=dim, w=dim, c0=c0s)
def test_grouped_fractal_z_round_trip(groups, cout_g, cin, h, w, c0):
    x = _arr((groups * cout_g, cin, h, w))
    device = from_original(x, "FRACTAL_Z", sub_format=groups, c0=c0)
    np.testing.assert_array_equal(to_original(device, 4, x.shape, sub_format=groups), x)
    assert np.count_nonzero(device) == np.count_nonzero(x)  # every value placed once, the rest padding


@SETTINGS
@given(batch=st.lists(st.integers(1, 4), max_size=2), rows=st.integers(1, 40), cols=st.integers(1, 40), c0=c0s)
def test_fractal_nz_round_trip(batch, rows, cols, c0):
    x = _arr((*batch, rows, cols))
    device = from_original(x, "FRACTAL_NZ", c0=c0)
    assert device.shape == (*batch, -(-cols // c0), -(-rows // 16), 16, c0)
    np.testing.assert_array_equal(to_original(device, 29, x.shape), x)


@SETTINGS
@given(n=dim, c=st.integers(1, 40), d=st.integers(1, 4), h=dim, w=dim, target=st.sampled_from(["NCDHW", "NDHWC"]))
def test_ndc1hwc0_round_trip(n, c, d, h, w, target):
    x = _arr((n, c, d, h, w))
    device = from_original(x, "NDC1HWC0")
    assert device.shape == (n, d, -(-c // 16), h, w, 16)
    want = x.transpose(["NCDHW".index(ch) for ch in target])
    np.testing.assert_array_equal(to_original(device, "NDC1HWC0", want.shape, target=target), want)


@SETTINGS
@given(h=dim, w=dim, c=st.integers(1, 40), n=dim)
def test_c1hwncoc0_round_trip(h, w, c, n):
    x = _arr((h, w, c, n))
    device = from_original(x, "C1HWNCoC0")
    assert device.shape == (-(-c // 16), h, w, n, 16, 16)
    np.testing.assert_array_equal(to_original(device, 25, x.shape), x)
    np.testing.assert_array_equal(to_original(device, 25, (n, c, h, w), target="NCHW"), x.transpose(3, 2, 0, 1))


def test_plain_formats_pass_through_reshaped():
    x = np.arange(24, dtype=np.float32)
    np.testing.assert_array_equal(to_original(x, "ND", (2, 3, 4)), x.reshape(2, 3, 4))
    y = x.reshape(1, 2, 3, 4)
    np.testing.assert_array_equal(to_original(y, "NCHW", None, target="NHWC"), y.transpose(0, 2, 3, 1))


def test_errors_name_the_problem():
    with pytest.raises(DumpFormatError, match="FRACTAL_Z to NCHW needs the 4-D original shape"):
        to_original(np.zeros((1, 1, 16, 16)), "FRACTAL_Z", None)
    with pytest.raises(DumpFormatError, match="format FRACTAL_Z_3D cannot be converted"):
        to_original(np.zeros((1,)), 33, None)
    with pytest.raises(DumpFormatError, match="does not fit"):
        to_original(np.zeros((1, 1, 2, 2, 16)), 3, (1, 3, 5, 5))
    with pytest.raises(DumpFormatError, match="cannot convert NC1HWC0 to NDHWC"):
        to_original(np.zeros((1, 1, 2, 2, 16)), 3, None, target="NDHWC")


def test_nd_target_uses_the_natural_layout():
    x = _arr((3, 20))
    device = from_original(x.reshape(3, 20, 1, 1), "NC1HWC0")
    np.testing.assert_array_equal(to_original(device, "NC1HWC0", (3, 20), target="ND"), x)
    y = _arr((2, 3, 17, 5))
    np.testing.assert_array_equal(to_original(from_original(y, "FRACTAL_NZ"), 29, y.shape, target="NCHW"), y)


# ---------------------------------------------------------------- cross-check with msaccucmp's own converters

@pytest.fixture()
def msaccucmp_converters(msaccucmp, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(msaccucmp.script).parent))
    return lambda name: importlib.import_module(f"format_manager.builtin_format_convert.convert_{name}").convert


@pytest.mark.msaccucmp
def test_agrees_with_msaccucmp_converters(msaccucmp_converters):
    x = _arr((3, 20, 2, 3))
    fz = from_original(x, "FRACTAL_Z")
    np.testing.assert_array_equal(
        to_original(fz, 4, x.shape), msaccucmp_converters("FRACTAL_Z_to_NCHW")(fz.shape, x.shape, fz.reshape(-1)))
    hd = from_original(x, "NC1HWC0")
    ref = msaccucmp_converters("NC1HWC0_to_NCHW")(hd.shape, x.shape, hd.reshape(-1))
    np.testing.assert_array_equal(to_original(hd, 3, x.shape), np.asarray(ref)[:, :20])
    y = _arr((2, 17, 35))
    nz = from_original(y, "FRACTAL_NZ")
    np.testing.assert_array_equal(to_original(nz, 29, y.shape),
                                  msaccucmp_converters("FRACTAL_NZ_to_ND")(nz.shape, y.shape, nz.reshape(-1)))


@pytest.mark.msaccucmp
@pytest.mark.parametrize("groups,cout_g,cin", [(3, 5, 4), (4, 2, 8), (4, 8, 4), (8, 4, 2)])
def test_grouped_fractal_z_matches_msaccucmp_hwcn_builder(msaccucmp_converters, groups, cout_g, cin):
    # (4, 2, 8) and the others: lcm(lcm(Cin, C0)/Cin, lcm(Cout_g, 16)/Cout_g) is not the smaller of the two
    h, w = 2, 3
    hwcn = _arr((h, w, cin, groups * cout_g), seed=3)
    theirs = msaccucmp_converters("HWCN_to_FRACTAL_Z")(list(hwcn.shape), None, hwcn, groups)
    ours = from_original(hwcn, "FRACTAL_Z", source="HWCN", sub_format=groups)
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(to_original(theirs, 4, hwcn.shape, target="HWCN", sub_format=groups), hwcn)


def _ge_hwcn_to_fz_groups(hwcn: np.ndarray, groups: int, cube_k: int = 16) -> np.ndarray:
    """GE's TransFormatHwcnToFzWithGroups, element by element (graph/.../format_transfer_fractal_z.cc)."""
    h_dim, w_dim, c_dim, n_dim = hwcn.shape
    cin, cout = c_dim, n_dim // groups
    e_mult = min(math.lcm(math.lcm(cin, cube_k) // cin, math.lcm(cout, 16) // cout), groups)
    cin_opt = -(-e_mult * cin // cube_k) * cube_k
    cout_opt = -(-e_mult * cout // 16) * 16
    c1_dim, g_dim = cin_opt // cube_k, -(-groups // e_mult)
    dst = np.zeros(g_dim * c1_dim * h_dim * w_dim * cout_opt * cube_k, hwcn.dtype)
    for g in range(groups):
        for c in range(c_dim):
            for hh in range(h_dim):
                for ww in range(w_dim):
                    for n in range(cout):
                        e_val = g % e_mult
                        dst_ci, dst_co = e_val * cin + c, e_val * cout + n
                        dst[(g // e_mult) * c1_dim * h_dim * w_dim * cout_opt * cube_k
                            + (dst_ci // cube_k) * h_dim * w_dim * cout_opt * cube_k
                            + hh * w_dim * cout_opt * cube_k + ww * cout_opt * cube_k
                            + dst_co * cube_k + dst_ci % cube_k] = hwcn[hh, ww, c, g * cout + n]
    return dst.reshape(g_dim * c1_dim * h_dim * w_dim, cout_opt // 16, 16, cube_k)


@pytest.mark.parametrize("groups,cout_g,cin", [(3, 5, 4), (4, 2, 8), (4, 8, 4), (8, 4, 2), (2, 16, 3)])
def test_grouped_fractal_z_is_ges_layout(groups, cout_g, cin):
    hwcn = _arr((2, 3, cin, groups * cout_g), seed=5)
    ge = _ge_hwcn_to_fz_groups(hwcn, groups)
    np.testing.assert_array_equal(from_original(hwcn, "FRACTAL_Z", source="HWCN", sub_format=groups), ge)
    np.testing.assert_array_equal(to_original(ge, 4, hwcn.shape, target="HWCN", sub_format=groups), hwcn)
