"""SEG-Y in and out of Python (vds.from_segy, vds.to_segy), checked against segyio.

Files are written here by segyio in several sample formats, byte orders and
trace orders, imported, and compared value by value and header by header
with what segyio reads (and with the file's raw bytes); files written by
to_segy are read back by segyio.
"""

import base64
import os
import struct

import numpy as np
import pytest
import segyio

import vds

FORMATS = {1: "f4", 2: "i4", 3: "i2", 5: "f4", 6: "f8", 8: "i1"}
ILINES, XLINES, NS = [10, 11, 12, 13], [100, 102, 104], 25


def values(fmt, shape, rng):
    kind = np.dtype(FORMATS[fmt])
    if kind.kind == "f":
        return (rng.standard_normal(shape) * 1000).astype(kind)
    info = np.iinfo(kind)
    return rng.integers(info.min, info.max, size=shape, dtype=kind, endpoint=True)


def write(path, fmt, traces, ns=NS, endian="big", ext_headers=0, hdt=2000, dt=2000, delrt=40):
    """A SEG-Y file by segyio: ``traces`` is a list of (inline, crossline, offset, samples) in file order;
    ``hdt`` and ``dt`` the sample interval in the binary and the trace headers, ``delrt`` the delay."""
    spec = segyio.spec()
    spec.iline, spec.xline = 189, 193
    spec.format, spec.samples, spec.tracecount, spec.endian, spec.ext_headers = fmt, list(range(ns)), len(traces), endian, ext_headers
    with segyio.create(str(path), spec) as f:
        for k in range(ext_headers):
            f.text[k + 1] = ("C 1 extended textual header %d" % (k + 1)).ljust(3200)
        f.bin.update(hdt=hdt, dto=hdt, hns=ns, format=fmt, mfeet=1)
        for t, (il, xl, off, data) in enumerate(traces):
            f.header[t] = {
                segyio.su.tracl: t + 1, segyio.su.cdp: xl, segyio.su.offset: off, segyio.su.ns: ns, segyio.su.dt: dt,
                segyio.su.delrt: delrt, segyio.su.scalco: -10, segyio.su.cdpx: (1000 + 25 * il + 3 * xl) * 10,
                segyio.su.cdpy: (2000 + 4 * il + 12 * xl) * 10, segyio.su.iline: il, segyio.su.xline: xl,
            }
            f.trace[t] = data


def segyio_grid(path, ndim=3, endian="big"):
    """What segyio reads, placed by inline and crossline (and offset): values, raw trace headers, live traces."""
    with segyio.open(str(path), ignore_geometry=True, endian=endian) as f:
        ils = sorted(set(f.attributes(segyio.su.iline)[:]))
        xls = sorted(set(f.attributes(segyio.su.xline)[:]))
        offs = sorted(set(f.attributes(segyio.su.offset)[:]))
        lead = (len(ils), len(xls)) + ((len(offs),) if ndim == 4 else ())
        vol = np.zeros(lead + (len(f.samples),), dtype=f.dtype)
        live = np.zeros(lead, bool)
        cells = []
        for t in range(f.tracecount):
            h = f.header[t]
            cell = (ils.index(h[segyio.su.iline]), xls.index(h[segyio.su.xline]))
            if ndim == 4:
                cell += (offs.index(h[segyio.su.offset]),)
            vol[cell] = f.trace[t]
            live[cell] = True
            cells.append(cell)
        return vol, live, cells, (ils, xls, offs, list(f.samples))


def raw_headers(path, ns, size, ext=0):
    """The 240 bytes of every trace header, straight from the file."""
    data = open(path, "rb").read()
    first = 3600 + 3200 * ext
    n = (len(data) - first) // (240 + ns * size)
    return [data[first + t * (240 + ns * size):first + t * (240 + ns * size) + 240] for t in range(n)]


@pytest.mark.parametrize("fmt,endian", [(1, "big"), (5, "big"), (2, "big"), (3, "little"), (6, "little"), (8, "big")])
def test_from_segy_matches_segyio(tmp_path, rng, fmt, endian):
    vol = values(fmt, (len(ILINES), len(XLINES), NS), rng)
    traces = [(il, xl, 0, vol[a, b]) for a, il in enumerate(ILINES) for b, xl in enumerate(XLINES)]
    order = rng.permutation(len(traces))
    path = tmp_path / "f.sgy"
    write(path, fmt, [traces[k] for k in order], endian=endian)
    out = vds.from_segy(path, tmp_path / "f.vds")
    expected, live, cells, (ils, xls, _, samples) = segyio_grid(path, endian=endian)
    assert live.all()
    with vds.open(out) as ds:
        amp = ds["amplitude"]
        assert amp.dims == ("inline", "crossline", "sample")
        assert amp.dtype == expected.dtype
        np.testing.assert_array_equal(amp[...], expected)
        np.testing.assert_array_equal(amp[...], vol)
        np.testing.assert_array_equal(ds.axes["inline"].values, ils)
        np.testing.assert_array_equal(ds.axes["crossline"].values, xls)
        np.testing.assert_allclose(ds.axes["sample"].values, samples)
        heads = ds["segy_trace_header"][...]
        size = np.dtype(FORMATS[fmt]).itemsize
        for t, raw in enumerate(raw_headers(path, NS, size)):
            assert heads[cells[t]].tobytes() == raw
        data = open(path, "rb").read()
        import base64

        segy = ds.attrs["segy"]
        assert base64.b64decode(segy["binary_raw"]) == data[3200:3600]
        assert base64.b64decode(segy["textual_raw"]) == data[:3200]
        assert (segy["byte_order"], segy["format"], segy["sorting"]) == (endian, fmt, "unsorted")
        survey = ds.attrs["survey_coordinate_system"]
        # CDP X/Y as segyio reads them, with the scalar (-10) applied.
        np.testing.assert_allclose(survey["origin"], [1000 + 25 * 10 + 3 * 100, 2000 + 4 * 10 + 12 * 100])
        np.testing.assert_allclose(survey["inline_spacing"], [25, 4])
        np.testing.assert_allclose(survey["crossline_spacing"], [3, 12])
        # In blocks of one 2 x 2 column of chunks, two at a time in flight (one
        # read while the other is written): the same samples and headers.
        small = vds.from_segy(path, tmp_path / "small.vds", chunks=[2, 2, 8], buffer_size=2 * 4 * (NS * size + 240))
        with vds.open(small) as again:
            np.testing.assert_array_equal(again["amplitude"][...], vol)
            np.testing.assert_array_equal(again["segy_trace_header"][...], heads)


@pytest.mark.parametrize("hdt,dt,source", [(0, 4000, "trace header"), (0, 0, "assumed"), (3000, 3000, "binary header")])
def test_the_sample_axis_is_the_one_segyio_reads(tmp_path, rng, hdt, dt, source):
    """The binary header's interval, else the first trace header's, else 4 ms (segyio's fallback)."""
    vol = values(5, (len(ILINES), len(XLINES), NS), rng)
    path = tmp_path / "f.sgy"
    write(path, 5, [(il, xl, 0, vol[a, b]) for a, il in enumerate(ILINES) for b, xl in enumerate(XLINES)], hdt=hdt, dt=dt, delrt=100)
    out = vds.from_segy(path, tmp_path / "f.vds")
    with segyio.open(str(path), ignore_geometry=True) as f:
        samples = np.asarray(f.samples)
    with vds.open(out) as ds:
        np.testing.assert_allclose(ds.axes["sample"].values, samples)
        assert samples[1] - samples[0] == (hdt or dt or 4000) / 1000
        segy = ds.attrs["segy"]
        assert (segy["sample_interval"], segy["sample_interval_from"]) == (hdt or dt or 4000, source)
        np.testing.assert_array_equal(ds["amplitude"][...], vol)
    # The headers as they were, interval fields included.
    vds.to_segy(out, tmp_path / "back.sgy")
    assert (tmp_path / "back.sgy").read_bytes() == path.read_bytes()


def test_sorted_file_round_trips_byte_for_byte(tmp_path, rng):
    for fmt, endian, ext in [(1, "big", 0), (3, "little", 0), (5, "big", 2)]:
        vol = values(fmt, (len(ILINES), len(XLINES), NS), rng)
        path = tmp_path / f"sorted{fmt}.sgy"
        write(path, fmt, [(il, xl, 0, vol[a, b]) for a, il in enumerate(ILINES) for b, xl in enumerate(XLINES)],
              endian=endian, ext_headers=ext)
        mid = vds.from_segy(path, tmp_path / f"sorted{fmt}.vds", chunks=[2, 2, 8], buffer_size=1)
        assert vds.to_segy(mid, tmp_path / f"back{fmt}.sgy", buffer_size=1) == "amplitude"
        assert (tmp_path / f"back{fmt}.sgy").read_bytes() == path.read_bytes()


def test_default_chunks_leave_little_padding(tmp_path, rng):
    """At most 64 along each axis, evened out: 70 inlines make 2 chunks of 35 and 130 samples 3 of
    44 (chunks of 64 would leave the last ones 6 and 2 long, and an uncompressed container would
    store 2.7 times the samples)."""
    vol = values(5, (70, 2, 130), rng)
    path = tmp_path / "wide.sgy"
    write(path, 5, [(1 + a, 10 + b, 0, vol[a, b]) for a in range(70) for b in range(2)], ns=130)
    out = vds.from_segy(path, tmp_path / "wide.vds", codec=None)
    with vds.open(out) as ds:
        assert ds["amplitude"].chunks == (35, 2, 44)
        assert ds["segy_trace_header"].chunks == (35, 2, 240)
        np.testing.assert_array_equal(ds["amplitude"][...], vol)
    cubes = vds.from_segy(path, tmp_path / "cubes.vds", codec=None, chunks=[64, 2, 64])  # as before
    assert os.path.getsize(out) < 0.7 * os.path.getsize(cubes), (os.path.getsize(out), os.path.getsize(cubes))


def test_crossline_sorted_missing_traces_and_offsets(tmp_path, rng):
    vol = values(5, (len(ILINES), len(XLINES), NS), rng)
    by_crossline = [(il, xl, 0, vol[a, b]) for b, xl in enumerate(XLINES) for a, il in enumerate(ILINES)]
    path = tmp_path / "holes.sgy"
    write(path, 5, [t for k, t in enumerate(by_crossline) if k not in (1, 6)])
    expected, live, _, _ = segyio_grid(path)
    with vds.open(vds.from_segy(path, tmp_path / "holes.vds")) as ds:
        amp = ds["amplitude"]
        assert ds.attrs["segy"]["sorting"] == "crossline"
        np.testing.assert_array_equal(amp.mask[...].all(axis=-1), ~live)
        np.testing.assert_array_equal(amp[...][live], expected[live])
        # In blocks of one 2 x 2 column of chunks, two in flight: the same mask and samples.
        small = vds.from_segy(path, tmp_path / "holes-small.vds", chunks=[2, 2, 8], buffer_size=2 * 4 * (NS * 4 + 240))
        with vds.open(small) as again:
            np.testing.assert_array_equal(again["amplitude"].mask[...], amp.mask[...])
            np.testing.assert_array_equal(again["amplitude"][...], amp[...])
            np.testing.assert_array_equal(again["segy_trace_header"][...], ds["segy_trace_header"][...])
    # Written back in crossline order, without the missing traces: segyio reads the same file.
    vds.to_segy(tmp_path / "holes.vds", tmp_path / "holes2.sgy")
    assert (tmp_path / "holes2.sgy").read_bytes() == path.read_bytes()
    # Pre-stack: found from repeated inline/crossline pairs, or asked for.
    pre = values(5, (2, 3, 4, NS), rng)
    path = tmp_path / "pre.sgy"
    write(path, 5, [(10 + a, 20 + b, 100 * (c + 1), pre[a, b, c]) for a in range(2) for b in range(3) for c in range(4)])
    expected, live, _, (_, _, offs, _) = segyio_grid(path, ndim=4)
    for kwargs in ({}, {"prestack": True}):
        with vds.open(vds.from_segy(path, tmp_path / "pre.vds", overwrite=True, **kwargs)) as ds:
            assert ds["amplitude"].dims == ("inline", "crossline", "offset", "sample")
            np.testing.assert_array_equal(ds.axes["offset"].values, offs)
            np.testing.assert_array_equal(ds["amplitude"][...], expected)
    # A 2-D line, whatever its inline numbers.
    line = values(3, (7, NS), rng)
    path = tmp_path / "line.sgy"
    write(path, 3, [(1, 500 + k, 0, line[k]) for k in range(7)])
    with vds.open(vds.from_segy(path, tmp_path / "line.vds", two_d=True)) as ds:
        assert ds["amplitude"].dims == ("cdp", "sample")
        with segyio.open(str(path), ignore_geometry=True) as f:
            np.testing.assert_array_equal(ds["amplitude"][...], f.trace.raw[:])


def test_keys_read_at_the_bytes_asked_for(tmp_path, rng):
    """Inline, crossline and offset where a survey keeps them elsewhere: inline at byte 9 and crossline at 21
    (rev 0's field record and CDP), offset at 197 (the shot point field), byte 37 left 0."""
    pre = values(5, (2, 3, 4, NS), rng)
    path = tmp_path / "keys.sgy"
    spec = segyio.spec()
    spec.iline, spec.xline, spec.format, spec.samples, spec.tracecount = 9, 21, 5, list(range(NS)), pre[..., 0].size
    with segyio.create(str(path), spec) as f:
        f.bin.update(hdt=2000, hns=NS, format=5)
        for t, (a, b, c) in enumerate(np.ndindex(*pre.shape[:3])):
            f.header[t] = {segyio.su.fldr: 10 + a, segyio.su.cdp: 20 + b, segyio.TraceField.ShotPoint: 100 * (c + 1),
                           segyio.su.ns: NS}
            f.trace[t] = pre[a, b, c]
    out = vds.from_segy(path, tmp_path / "keys.vds", inline_byte=9, crossline_byte=21, offset_byte=197, prestack=True)
    with vds.open(out) as ds:
        assert ds["amplitude"].dims == ("inline", "crossline", "offset", "sample")
        np.testing.assert_array_equal(ds.axes["inline"].values, [10, 11])
        np.testing.assert_array_equal(ds.axes["crossline"].values, [20, 21, 22])
        np.testing.assert_array_equal(ds.axes["offset"].values, [100, 200, 300, 400])
        np.testing.assert_array_equal(ds["amplitude"][...], pre)
        assert (ds.attrs["segy"]["inline_byte"], ds.attrs["segy"]["crossline_byte"], ds.attrs["segy"]["offset_byte"]) == (9, 21, 197)
    # Written back with the keys where they were: segyio reads the same file.
    vds.to_segy(out, tmp_path / "keys2.sgy")
    assert (tmp_path / "keys2.sgy").read_bytes() == path.read_bytes()


def test_options_reach_the_container(tmp_path, rng):
    vol = values(5, (len(ILINES), len(XLINES), NS), rng)
    path = tmp_path / "o.sgy"
    write(path, 5, [(il, xl, 0, vol[a, b]) for a, il in enumerate(ILINES) for b, xl in enumerate(XLINES)])
    out = vds.from_segy(path, tmp_path / "o.vds", chunks=[2, 3, 5], codec=("zstd", 3), lods=2,
                        partitionings=[[1, 3, 25]])
    with vds.open(out) as ds:
        amp = ds["amplitude"]
        assert amp.chunks == (2, 3, 5) and ds["segy_trace_header"].chunks == (2, 3, 240)
        assert amp.codec["id"] == "zstd" and amp.codec["level"] == 3
        assert amp.levels == 2 and amp.partitionings[1:] == [(1, 3, 25)]
        np.testing.assert_array_equal(amp[...], vol)
    # Header bytes: rev 0's positions read other numbers (here cdp at 21 = crossline).
    out = vds.from_segy(path, tmp_path / "rev0.vds", inline_byte=189, crossline_byte=21)
    with vds.open(out) as ds:
        np.testing.assert_array_equal(ds.axes["crossline"].values, XLINES)
        assert ds.attrs["segy"]["crossline_byte"] == 21


def test_any_volume_exports_as_segy_segyio_reads(tmp_path, rng):
    vol = rng.standard_normal((3, 5, 40)).astype(np.float32)
    path = tmp_path / "np.vds"
    axes = [{"name": "inline", "size": 3, "first": 7.0, "last": 9.0}, {"name": "crossline", "size": 5, "first": 50.0, "last": 58.0},
            {"name": "time", "size": 40, "unit": "ms", "first": 0.0, "last": 156.0}]
    with vds.create(path, axes, {"v": {"dtype": "float32", "dims": ["inline", "crossline", "time"]},
                                 "q": {"dtype": "int16", "dims": ["inline", "crossline", "time"]}}) as ds:
        ds["v"][...] = vol
        ds["q"][...] = (vol * 1000).astype(np.int16)
    with pytest.raises(vds.InvalidArgumentError, match="name the one to export"):
        vds.to_segy(path, tmp_path / "x.sgy")
    for var, fmt, dtype, code in [("v", None, np.float32, 5), ("v", 1, np.float32, 1), ("q", None, np.int16, 3)]:
        out = tmp_path / f"{var}{fmt}.sgy"
        vds.to_segy(path, out, var, segy_format=fmt)
        with segyio.open(str(out), iline=189, xline=193) as f:
            assert f.bin[segyio.BinField.Format] == code
            np.testing.assert_array_equal(f.ilines, [7, 8, 9])
            np.testing.assert_array_equal(f.xlines, [50, 52, 54, 56, 58])
            np.testing.assert_allclose(f.samples, np.arange(40) * 4.0)
            cube = segyio.tools.cube(f)
            expected = vol if var == "v" else (vol * 1000).astype(np.int16)
            if code == 1:
                # IBM floats keep 24 bits of mantissa as IEEE does, but with a hex exponent: within 2^-21.
                np.testing.assert_allclose(cube, expected, rtol=2.0 ** -20)
            else:
                np.testing.assert_array_equal(cube, expected.astype(dtype))
    with pytest.raises(vds.InvalidArgumentError, match="is int16; SEG-Y format 5 holds float32"):
        vds.to_segy(path, tmp_path / "q5.sgy", "q", segy_format=5)
    assert not (tmp_path / "q5.sgy").exists()


def test_openvds_volume_goes_back_to_the_same_segy(tmp_path, rng):
    """SEG-Y to a container, to OpenVDS, back to a container and out as SEG-Y: the same bytes."""
    vol = values(1, (len(ILINES), len(XLINES), NS), rng)
    by_inline = [(il, xl, 0, vol[a, b]) for a, il in enumerate(ILINES) for b, xl in enumerate(XLINES)]
    by_crossline = [(il, xl, 0, vol[a, b]) for b, xl in enumerate(XLINES) for a, il in enumerate(ILINES)]
    pre = values(1, (2, 3, 4, NS), rng)
    gathers = [(10 + a, 20 + b, 100 * (c + 1), pre[a, b, c]) for a in range(2) for b in range(3) for c in range(4)]
    # A regular survey, one sorted by crossline with traces missing (a mask, then OpenVDS's Trace
    # channel), and pre-stack gathers with a trace missing (four dimensions in OpenVDS).
    for name, traces in [("full", by_inline), ("holes", [t for k, t in enumerate(by_crossline) if k not in (1, 6, 7)]),
                         ("gathers", [t for k, t in enumerate(gathers) if k != 5])]:
        path = tmp_path / f"{name}.sgy"
        write(path, 1, traces)
        a = vds.from_segy(path, tmp_path / f"{name}-a.vds")
        o = vds.to_openvds(a, str(tmp_path / f"{name}.ovds"))
        b = vds.from_openvds(o, tmp_path / f"{name}-b.vds")
        vds.to_segy(b, tmp_path / f"{name}-back.sgy")
        assert (tmp_path / f"{name}-back.sgy").read_bytes() == path.read_bytes(), name


def test_bad_input_raises(tmp_path, rng):
    vol = values(5, (2, 3, NS), rng)
    path = tmp_path / "ok.sgy"
    write(path, 5, [(il, xl, 0, vol[a, b]) for a, il in enumerate([1, 2]) for b, xl in enumerate([1, 2, 3])])
    good = path.read_bytes()
    with pytest.raises(vds.NotFoundError):
        vds.from_segy(tmp_path / "missing.sgy", tmp_path / "x.vds")
    (tmp_path / "cut.sgy").write_bytes(good[:-7])
    with pytest.raises(vds.CorruptFileError, match="trace 6") as e:
        vds.from_segy(tmp_path / "cut.sgy", tmp_path / "x.vds")
    trace_bytes = 240 + NS * 4
    assert e.value.offset == 3600 + 5 * trace_bytes and e.value.object == "SEG-Y trace 6"
    (tmp_path / "short.sgy").write_bytes(good[:3000])
    with pytest.raises(vds.CorruptFileError, match="3600"):
        vds.from_segy(tmp_path / "short.sgy", tmp_path / "x.vds")
    dup = bytearray(good)
    dup[3600 + trace_bytes + 192:3600 + trace_bytes + 196] = struct.pack(">i", 1)
    (tmp_path / "dup.sgy").write_bytes(bytes(dup))
    with pytest.raises(vds.InvalidArgumentError, match="duplicate trace"):
        vds.from_segy(tmp_path / "dup.sgy", tmp_path / "x.vds")
    with pytest.raises(vds.InvalidArgumentError):
        vds.from_segy(path, tmp_path / "x.vds", inline_byte=239)
    with pytest.raises(vds.InvalidArgumentError):
        vds.from_segy(path, tmp_path / "x.vds", inline_byte=0)
    with pytest.raises(vds.InvalidArgumentError, match="chunk"):
        vds.from_segy(path, tmp_path / "x.vds", chunks=[2, 2])
    assert not (tmp_path / "x.vds").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")] == []
    out = vds.from_segy(path, tmp_path / "ok.vds")
    with pytest.raises(vds.AlreadyExistsError):
        vds.from_segy(path, out)
    with pytest.raises(vds.AlreadyExistsError):
        vds.to_segy(out, path)
    with pytest.raises(vds.InvalidArgumentError, match="not a SEG-Y sample format"):
        vds.to_segy(out, tmp_path / "y.sgy", segy_format=13)
    with pytest.raises(vds.InvalidArgumentError, match="format 4"):
        vds.to_segy(out, tmp_path / "y.sgy", segy_format=4)
    assert not (tmp_path / "y.sgy").exists()
    with pytest.raises(vds.InvalidArgumentError, match="no variable named"):
        vds.to_segy(out, tmp_path / "y.sgy", "nope")
    with pytest.raises(vds.NotFoundError):
        vds.to_segy(tmp_path / "nothing.vds", tmp_path / "y.sgy")


def test_more_than_65535_samples_use_the_rev2_extended_count(tmp_path, rng):
    """Traces longer than a trace header's 16-bit count: rev 2 with the extended count in the binary
    header (bytes 3269-3272), which segyio reads."""
    ns = 70_001
    vol = rng.standard_normal((2, 3, ns)).astype(np.float32)
    path = tmp_path / "long.vds"
    axes = [("inline", 2), ("crossline", 3), {"name": "time", "size": ns, "unit": "ms", "first": 0.0, "last": 0.5 * (ns - 1)}]
    with vds.create(path, axes, {"v": {"dtype": "float32", "dims": ["inline", "crossline", "time"]}}) as ds:
        ds["v"][...] = vol
    vds.to_segy(path, tmp_path / "long.sgy")
    with segyio.open(str(tmp_path / "long.sgy"), iline=189, xline=193) as f:
        assert f.bin[segyio.BinField.Samples] == 0 and f.bin[segyio.BinField.ExtSamples] == ns
        assert f.bin[segyio.BinField.SEGYRevision] == 2 << 8 or f.bin[segyio.BinField.SEGYRevision] == 2
        assert len(f.samples) == ns
        np.testing.assert_array_equal(segyio.tools.cube(f), vol)
    with vds.open(vds.from_segy(tmp_path / "long.sgy", tmp_path / "back.vds")) as ds:
        np.testing.assert_array_equal(ds["amplitude"][...], vol)
        np.testing.assert_allclose(ds.axes["sample"].values[[0, -1]], [0.0, 0.5 * (ns - 1)])


def rev2_with_extensions(path, rng, endian="big", ns=30, variable=False, count=2):
    """A rev 2.1 file whose traces carry two trace header extensions (Trace Header Extension 1, then a
    proprietary one), laid out byte by byte as the standard says (segyio writes none): CDP X/Y only
    in Extension 1's doubles (bytes 161-176), its count of extensions (157-158) ``count`` and, for
    ``variable`` lengths, the sample count only in its bytes 137-140, with the first trace 5 samples
    short and the second saying 0 (so the binary header's count, 2 short, rules). Returns the samples in grid order, each trace's 720 header bytes, and the grid's world
    origin and spacings."""
    e = ">" if endian == "big" else "<"
    ils, xls = [5, 6, 7], [20, 22, 24, 26]
    vol = rng.standard_normal((len(ils), len(xls), ns)).astype(np.float32)
    binary = bytearray(400)
    struct.pack_into(e + "h", binary, 16, 4000)
    struct.pack_into(e + "H", binary, 20, ns - 2 if variable else ns)
    struct.pack_into(e + "h", binary, 24, 5)
    struct.pack_into(e + "I", binary, 96, 0x01020304)
    binary[300:302] = bytes([2, 1])
    struct.pack_into(e + "h", binary, 302, 0 if variable else 1)
    struct.pack_into(e + "i", binary, 306, 2)
    origin, il_step, xl_step = (431000.25, 6348000.5), (25.0, 4.0), (1.5, 6.0)  # per inline / crossline number
    parts = [b"C 1 SEG-Y rev 2.1 with trace header extensions".ljust(3200), bytes(binary)]
    headers = np.zeros((len(ils), len(xls), 720), np.uint8)
    for a, il in enumerate(ils):
        for b, xl in enumerate(xls):
            n = {(0, 0): ns - 5, (0, 1): ns - 2}.get((a, b), ns) if variable else ns
            said = 0 if variable and (a, b) == (0, 1) else n
            std = bytearray(240)
            struct.pack_into(e + "i", std, 188, il)
            struct.pack_into(e + "i", std, 192, xl)
            struct.pack_into(e + "H", std, 114, 0 if variable else n)
            struct.pack_into(e + "h", std, 116, 4000)
            std[232:240] = b"SEG00000"
            ext1 = bytearray(240)
            struct.pack_into(e + "I", ext1, 136, said)
            struct.pack_into(e + "H", ext1, 156, count)
            struct.pack_into(e + "d", ext1, 160, origin[0] + (il - ils[0]) * il_step[0] + (xl - xls[0]) * xl_step[0])
            struct.pack_into(e + "d", ext1, 168, origin[1] + (il - ils[0]) * il_step[1] + (xl - xls[0]) * xl_step[1])
            ext1[232:240] = b"SEG00001"
            ext2 = bytearray(rng.integers(0, 256, 240, dtype=np.uint8).tobytes())
            ext2[232:240] = b"ACME0001"
            head = bytes(std + ext1 + ext2)
            headers[a, b] = np.frombuffer(head, np.uint8)
            if n < ns:
                vol[a, b, n:] = 0
            parts += [head, vol[a, b, :n].astype(e + "f4").tobytes()]
    path.write_bytes(b"".join(parts))
    return vol, headers, (origin, il_step, xl_step)


@pytest.mark.parametrize("endian,variable", [("big", False), ("little", False), ("big", True)])
def test_rev2_trace_header_extensions_are_kept_and_written_back(tmp_path, rng, endian, variable):
    """Trace header extensions ride with each trace's standard header in segy_trace_header, Extension 1 gives
    the world coordinates (and a variable-length trace's sample count), and export writes the file back byte for
    byte."""
    path = tmp_path / "ext.sgy"
    vol, headers, (origin, il_step, xl_step) = rev2_with_extensions(path, rng, endian, variable=variable)
    out = vds.from_segy(path, tmp_path / "ext.vds")
    with vds.open(out) as ds:
        np.testing.assert_array_equal(ds["amplitude"][...], vol)
        assert ds["segy_trace_header"].shape == (3, 4, 720)
        np.testing.assert_array_equal(ds["segy_trace_header"][...], headers)
        survey = ds.attrs["survey_coordinate_system"]
        np.testing.assert_allclose(survey["origin"], origin)
        np.testing.assert_allclose(survey["inline_spacing"], il_step)
        np.testing.assert_allclose(survey["crossline_spacing"], xl_step)
    vds.to_segy(out, tmp_path / "back.sgy")
    assert (tmp_path / "back.sgy").read_bytes() == path.read_bytes()


def test_rev2_trace_header_extensions_that_disagree_are_refused(tmp_path, rng):
    path = tmp_path / "odd.sgy"
    # Named: the first trace, and the byte of its Extension 1 that says 3 (variable-length traces
    # are checked as the file opens, fixed-length ones as their geometry is read).
    for variable in (False, True):
        rev2_with_extensions(path, rng, count=3, variable=variable)
        with pytest.raises(vds.UnsupportedError, match=f"trace 1 \\(byte {3600 + 240 + 156}\\).* 3 trace header extensions.*"
                                                       "says every trace has 2"):
            vds.from_segy(path, tmp_path / "x.vds")
    rev2_with_extensions(path, rng, count=3)
    # A negative count, and more extensions than the file could hold, are malformed; more than 64 are not read.
    data = bytearray(path.read_bytes())
    for count, error in ((-1, vds.CorruptFileError), (60, vds.CorruptFileError), (65, vds.UnsupportedError)):
        data[3506:3510] = struct.pack(">i", count)
        path.write_bytes(bytes(data))
        with pytest.raises(error, match="trace header"):
            vds.from_segy(path, tmp_path / "x.vds")
    assert not (tmp_path / "x.vds").exists()
    # Extensions kept beside a binary header that says rev 1 cannot be written: refused, not a broken file.
    path = tmp_path / "ok.sgy"
    rev2_with_extensions(path, rng)
    out = vds.from_segy(path, tmp_path / "ok.vds")
    with vds.open(out, "r+") as ds:
        segy = dict(ds.attrs["segy"])
        binary = bytearray(base64.b64decode(segy["binary_raw"]))
        binary[300:302] = bytes([1, 0])
        segy["binary_raw"] = base64.b64encode(bytes(binary)).decode()
        ds.attrs["segy"] = segy
    with pytest.raises(vds.InvalidArgumentError, match="from rev 2 on"):
        vds.to_segy(out, tmp_path / "bad.sgy")
    assert not (tmp_path / "bad.sgy").exists()
    # Kept headers that are not whole 240-byte headers are refused too, not replaced by made-up ones.
    with vds.open(vds.from_segy(path, tmp_path / "ok2.vds")) as ds:
        segy, amplitude = dict(ds.attrs["segy"]), ds["amplitude"][...]
    odd = tmp_path / "odd.vds"
    axes = [("inline", 3), ("crossline", 4), ("sample", 30), ("header", 250)]
    with vds.create(odd, axes, {"amplitude": {"dtype": "float32", "dims": ["inline", "crossline", "sample"]},
                                "segy_trace_header": {"dtype": "uint8", "dims": ["inline", "crossline", "header"]}},
                    attrs={"segy": segy}) as ds:
        ds["amplitude"][...] = amplitude
    with pytest.raises(vds.InvalidArgumentError, match="not whole 240-byte headers"):
        vds.to_segy(odd, tmp_path / "bad.sgy")
    assert not (tmp_path / "bad.sgy").exists()


def big_segy(path, rng, ni=120, nx=120, ns=500):
    """A sorted post-stack file of ni x nx traces of ns IEEE floats, written with NumPy (quicker than segyio for
    tens of MB); the values are returned in grid order."""
    values = rng.standard_normal((ni, nx, ns)).astype(np.float32)
    binary = np.zeros(400, np.uint8)
    binary[16:18] = np.frombuffer(np.array(4000, ">i2").tobytes(), np.uint8)
    binary[20:22] = np.frombuffer(np.array(ns, ">u2").tobytes(), np.uint8)
    binary[24:26] = np.frombuffer(np.array(5, ">i2").tobytes(), np.uint8)
    heads = np.zeros((ni * nx, 240), np.uint8)
    il, xl = np.meshgrid(np.arange(1, ni + 1), np.arange(1, nx + 1), indexing="ij")
    heads[:, 188:192] = il.reshape(-1).astype(">i4").view(np.uint8).reshape(-1, 4)
    heads[:, 192:196] = xl.reshape(-1).astype(">i4").view(np.uint8).reshape(-1, 4)
    heads[:, 114:116] = np.frombuffer(np.array(ns, ">u2").tobytes(), np.uint8)
    traces = np.concatenate([heads, values.reshape(-1, ns).astype(">f4").view(np.uint8)], axis=1)
    with open(path, "wb") as f:
        f.write(b"\x40" * 3200)
        f.write(binary.tobytes())
        f.write(traces.tobytes())
    return values


def test_conversions_release_the_gil(tmp_path, rng):
    """While a conversion runs in one thread, this thread keeps running Python: it sees the conversion's
    temporary output (which exists only inside the call) at several sizes. A conversion holding the GIL
    throughout would let it run only before the call or after it, when there is no temporary file."""
    import threading

    values = big_segy(tmp_path / "big.sgy", rng)
    for name, dst, run in [
            ("from_segy", "big.vds", lambda: vds.from_segy(tmp_path / "big.sgy", tmp_path / "big.vds", codec=("deflate", 6))),
            ("to_segy", "big2.sgy", lambda: vds.to_segy(tmp_path / "big.vds", tmp_path / "big2.sgy"))]:
        worker = threading.Thread(target=run)
        worker.start()
        sizes = set()
        while worker.is_alive():
            for part in tmp_path.glob(f".{dst}.*.part"):
                try:
                    sizes.add(part.stat().st_size)
                except FileNotFoundError:  # renamed between the listing and the stat
                    pass
        worker.join()
        assert len(sizes) >= 2, f"{name}: Python ran while the temporary output had sizes {sorted(sizes)} only"
        assert not list(tmp_path.glob("*.part")) and (tmp_path / dst).exists()
    with vds.open(tmp_path / "big.vds") as ds:
        np.testing.assert_array_equal(ds["amplitude"][...], values)
    assert (tmp_path / "big2.sgy").read_bytes() == (tmp_path / "big.sgy").read_bytes()


def test_ctrl_c_stops_a_conversion_and_leaves_nothing(tmp_path, rng):
    """SIGINT during from_segy (in a child process) raises KeyboardInterrupt and leaves no container."""
    import signal
    import subprocess
    import sys
    import time

    big_segy(tmp_path / "big.sgy", rng, ni=200, nx=200)
    script = ("import sys, vds\nprint('go', flush=True)\n"
              "try:\n    vds.from_segy(sys.argv[1], sys.argv[2], codec=('deflate', 9))\n"
              "except KeyboardInterrupt as e:\n    print('interrupted', e, flush=True)\n    sys.exit(3)\n")
    child = subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "big.sgy"), str(tmp_path / "big.vds")],
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "go"
    time.sleep(0.3)
    child.send_signal(signal.SIGINT)
    out, _ = child.communicate(timeout=120)
    assert child.returncode == 3, out
    assert "big.vds was not written" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.sgy"]
