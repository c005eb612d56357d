"""OpenVDS volumes to containers and back (vds.from_openvds, vds.to_openvds), checked against openvds.

Volumes are written here with the openvds package (OpenVDS+), converted, and
every value, axis and metadata item compared with what openvds reads, both
ways and through round trips. The openvds package is a test dependency
(.ci/deps.sh installs it); where it is missing, this module installs it into
the running environment (the version .ci/deps.sh pins): these tests never skip.
"""

import base64
import importlib
import json
import subprocess
import sys
import warnings

import numpy as np
import pytest

try:
    import openvds
except ImportError:
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "openvds==3.4.9"])
    importlib.invalidate_caches()
    import openvds

import vds

LD = openvds.VolumeDataLayoutDescriptor
CD = openvds.VolumeDataChannelDescriptor
FORMAT_DTYPE = {"Format_U8": np.uint8, "Format_U16": np.uint16, "Format_U32": np.uint32, "Format_U64": np.uint64,
                "Format_R32": np.float32, "Format_R64": np.float64}


def ovds_create(path, axes, channels, data, metadata=(), brick="BrickSize_32", margin=(0, 0)):
    """Writes an OpenVDS volume with openvds's page accessors: ``axes`` as (samples, name, unit, min, max),
    dimension 0 first; ``data[k]`` the values of channel k as a NumPy array in C order of the reversed
    dimensions (per-trace channels: trace dimensions reversed, then the values of a trace; channels of
    several components: one more axis, last, of the components); bricks with ``margin`` (negative,
    positive), each page written whole, margins included."""
    layout = LD(getattr(LD.BrickSize, brick), margin[0], margin[1], 4, LD.LODLevels.LODLevels_None, LD.Options.Options_None)
    md = openvds.MetadataContainer()
    for category, name, kind, value in metadata:
        getattr(md, "setMetadata" + kind)(category, name, value)
    handle = openvds.create(path, "", layout, [openvds.VolumeDataAxisDescriptor(*a) for a in axes], channels, md)
    manager = openvds.getAccessManager(handle)
    ndim = len(axes)
    group = openvds.DimensionsND.Dimensions_012 if ndim >= 3 else openvds.DimensionsND.Dimensions_01
    for c, values in enumerate(data):
        accessor = manager.createVolumeDataPageAccessor(group, 0, c, 8, openvds.VolumeDataPageAccessor.AccessMode.AccessMode_Create)
        for chunk in range(accessor.getChunkCount()):
            page = accessor.createPage(chunk)
            lo, hi = page.getMinMax()
            buf = np.array(page.getWritableBuffer(), copy=False)
            if buf.dtype.names:  # several components: the fields of each record
                buf = buf.view(buf.dtype[0])
            if channels[c].getMapping() == openvds.VolumeDataMapping.PerTrace:
                box = tuple(slice(a, b) for a, b in zip(reversed(lo[1:ndim]), reversed(hi[1:ndim])))
                block = values[box].reshape(buf.shape)
            else:
                box = tuple(slice(a, b) for a, b in zip(reversed(lo[:ndim]), reversed(hi[:ndim])))
                block = values[box]
            # The page's rows may be padded (its strides say so): assign through its shape.
            buf[...] = block.reshape(buf.shape)
            page.release()
        accessor.commit()
    manager.flush()
    openvds.close(handle)


def ovds_read(path, channel):
    """A whole channel as openvds reads it, in C order of the reversed dimensions (as libvds stores it)."""
    handle = openvds.open(path, "")
    try:
        layout = openvds.getLayout(handle)
        ndim = layout.getDimensionality()
        cd = layout.getChannelDescriptor(channel)
        sizes = [layout.getDimensionNumSamples(d) for d in range(ndim)]
        hi = list(sizes)
        if cd.getMapping() == openvds.VolumeDataMapping.PerTrace:
            hi[0] = cd.getMappedValueCount()
        fmt = cd.getFormat()
        comps = int(cd.getComponents().name.split("_")[1])
        manager = openvds.getAccessManager(handle)
        group = openvds.DimensionsND.Dimensions_012 if ndim >= 3 else openvds.DimensionsND.Dimensions_01
        data = manager.requestVolumeSubset((0,) * ndim, tuple(hi), dimensionsND=group, channel=channel, format=fmt).data
        shape = tuple(reversed(hi))
        if hi[0] == 1 and cd.getMapping() == openvds.VolumeDataMapping.PerTrace:
            shape = shape[:-1]
        if comps > 1:
            shape += (comps,)
        return np.array(data[: int(np.prod(shape))]).reshape(shape)
    finally:
        openvds.close(handle)


def ovds_describe(path):
    """Axes, channels and metadata of a volume as openvds reports them."""
    handle = openvds.open(path, "")
    try:
        layout = openvds.getLayout(handle)
        axes = [(a.getNumSamples(), a.getName(), a.getUnit(), a.getCoordinateMin(), a.getCoordinateMax())
                for a in (layout.getAxisDescriptor(d) for d in range(layout.getDimensionality()))]
        channels = []
        for c in range(layout.getChannelCount()):
            cd = layout.getChannelDescriptor(c)
            channels.append({"name": cd.getName(), "format": cd.getFormat().name, "mapping": cd.getMapping().name,
                             "count": cd.getMappedValueCount(), "unit": cd.getUnit(),
                             "range": (cd.getValueRangeMin(), cd.getValueRangeMax()),
                             "no_value": cd.getNoValue() if cd.isUseNoValue() else None, "discrete": cd.isDiscrete(),
                             "components": cd.getComponents().name})
        metadata = {}
        for k in layout.getMetadataKeys():
            v = getattr(layout, "getMetadata" + k.type.name)(k.category, k.name)
            if k.type.name == "BLOB":
                v = bytes(np.array(v, copy=False, dtype=np.uint8))
            metadata[(k.category, k.name)] = v
        descriptor = layout.getLayoutDescriptor()
        return {"axes": axes, "channels": channels, "metadata": metadata, "brick": descriptor.getBrickSize().name,
                "margin": (descriptor.getNegativeMargin(), descriptor.getPositiveMargin())}
    finally:
        openvds.close(handle)


@pytest.fixture
def seismic(tmp_path, rng):
    """A post-stack volume as OpenVDS's SEG-Y importer writes one: Amplitude, Trace, SEGYTraceHeader,
    an R64 channel with a no-value, SEG-Y and survey metadata; 45 samples x 40 crosslines x 30 inlines
    in bricks of 32, so every axis but one is cut."""
    ns, nx, ni = 45, 40, 30
    amplitude = rng.standard_normal((ni, nx, ns)).astype(np.float32)
    live = (rng.random((ni, nx)) > 0.1).astype(np.uint8)
    headers = rng.integers(0, 256, (ni, nx, 240), dtype=np.uint8)
    velocity = rng.uniform(1500, 4500, (ni, nx, ns))
    velocity[3, 4] = -999.25
    channels = [
        CD(CD.Format.Format_R32, CD.Components.Components_1, "Amplitude", "", -4.0, 4.0),
        CD(CD.Format.Format_U8, CD.Components.Components_1, "Trace", "", 0.0, 1.0, openvds.VolumeDataMapping.PerTrace,
           CD.Flags.DiscreteData),
        CD(CD.Format.Format_U8, CD.Components.Components_1, "SEGYTraceHeader", "", 0.0, 255.0,
           openvds.VolumeDataMapping.PerTrace, 240, openvds.operator_bor(CD.Flags.DiscreteData, CD.Flags.NoLossyCompressionUseZip),
           1.0, 0.0),
        CD(CD.Format.Format_R64, CD.Components.Components_1, "Velocity", "m/s", 1500.0, 4500.0, -999.25),
    ]
    text = bytes(rng.integers(64, 128, 3200, dtype=np.uint8))
    # A binary header as a SEG-Y importer keeps it: interval, sample count, format 1 (IBM float),
    # and arbitrary bytes in the unassigned range 3261-3500 that must survive.
    binary = bytearray(400)
    binary[16:18], binary[20:22], binary[24:26] = (4000).to_bytes(2, "big"), ns.to_bytes(2, "big"), (1).to_bytes(2, "big")
    binary[60:300] = rng.integers(0, 256, 240, dtype=np.uint8).tobytes()
    binary = bytes(binary)
    metadata = [
        ("SEGY", "TextHeader", "BLOB", np.frombuffer(text, np.uint8)),
        ("SEGY", "BinaryHeader", "BLOB", np.frombuffer(binary, np.uint8)),
        ("SEGY", "Endianness", "Int", 0),
        ("SEGY", "DataSampleFormatCode", "Int", 1),
        ("SurveyCoordinateSystem", "Origin", "DoubleVector2", (431000.5, 6348000.25)),
        ("SurveyCoordinateSystem", "InlineSpacing", "DoubleVector2", (3.125, 12.5)),
        ("SurveyCoordinateSystem", "CrosslineSpacing", "DoubleVector2", (-12.5, 3.125)),
        ("SurveyCoordinateSystem", "Unit", "String", "m"),
        ("Survey", "Epoch", "Int", 2021),
        ("Survey", "Gain", "Float", 1.5),
        ("Survey", "Shift", "IntVector3", (1, -2, 3)),
        ("Survey", "Centre", "DoubleVector3", (1.5, 2.5, -3.5)),
    ]
    axes = [(ns, "Sample", "ms", 0.0, 4.0 * (ns - 1)), (nx, "Crossline", "unitless", 2000.0, 2000.0 + nx - 1),
            (ni, "Inline", "unitless", 1000.0, 1000.0 + 2 * (ni - 1))]
    path = str(tmp_path / "seismic.ovds")
    ovds_create(path, axes, channels, [amplitude, live, headers, velocity], metadata)
    return path, {"Amplitude": amplitude, "Trace": live, "SEGYTraceHeader": headers, "Velocity": velocity}


def test_from_openvds_keeps_every_channel_axis_and_metadata(seismic, tmp_path):
    seismic, arrays = seismic
    out = vds.from_openvds(seismic, tmp_path / "seismic.vds")
    ref = ovds_describe(seismic)
    with vds.open(out) as ds:
        # Axes: OpenVDS dimension 0 (Sample) is the last axis here.
        for (n, name, unit, lo, hi), axis in zip(reversed(ref["axes"]), list(ds.axes.values())[:3]):
            assert (axis.name, axis.size, axis.unit) == (name, n, unit)
            assert axis.first == pytest.approx(lo) and axis.last == pytest.approx(hi)
        assert list(ds) == [c["name"] for c in ref["channels"]]
        for c, info in enumerate(ref["channels"]):
            var = ds[info["name"]]
            expected = ovds_read(seismic, c)
            assert var.dtype == expected.dtype
            np.testing.assert_array_equal(var[...], expected)
            np.testing.assert_array_equal(var[...], arrays[info["name"]])
            assert var.unit == info["unit"]
            assert tuple(var.attrs["openvds"]["value_range"]) == pytest.approx(info["range"])
            assert var.attrs["openvds"]["mapping"] == info["mapping"]
        assert ds["Amplitude"].dims == ("Inline", "Crossline", "Sample")
        assert ds["Amplitude"].chunks == (30, 32, 32)
        assert ds["SEGYTraceHeader"].dims == ("Inline", "Crossline", "header")
        assert ds["Trace"].dims == ("Inline", "Crossline")
        assert ds["Velocity"].no_value == -999.25
        assert ds["Velocity"].no_value == ref["channels"][3]["no_value"]
        assert ds["Amplitude"].no_value is None
        # Traces the Trace channel marks dead are missing; their values are kept beneath the mask.
        np.testing.assert_array_equal(ds["Amplitude"].mask[...], np.broadcast_to((arrays["Trace"] == 0)[..., None], (30, 40, 45)))
        # Every metadata item, typed.
        kept = {(m["category"], m["name"]): m for m in ds.attrs["openvds"]["metadata"]}
        # The SEG-Y headers' bytes are kept once, in the segy attribute (checked below).
        assert set(kept) | {("SEGY", "TextHeader"), ("SEGY", "BinaryHeader")} == set(ref["metadata"])
        for key, value in ref["metadata"].items():
            if key not in kept:
                continue
            m = kept[key]
            if m["type"] == "BLOB":
                assert base64.b64decode(m["value"]) == value
            elif isinstance(value, tuple):
                assert tuple(m["value"]) == pytest.approx(value)
            else:
                assert m["value"] == pytest.approx(value) if isinstance(value, float) else m["value"] == value
        assert ds.attrs["openvds"]["layout"]["brick_size"] == 32
        # The SEG-Y and survey attributes of vds import, from the metadata.
        segy = ds.attrs["segy"]
        assert base64.b64decode(segy["textual_raw"]) == ref["metadata"][("SEGY", "TextHeader")]
        assert base64.b64decode(segy["binary_raw"]) == ref["metadata"][("SEGY", "BinaryHeader")]
        assert (segy["byte_order"], segy["format"], segy["variable"], segy["trace_headers"]) == \
            ("big", 1, "Amplitude", "SEGYTraceHeader")
        binary = ref["metadata"][("SEGY", "BinaryHeader")]
        assert segy["revision"] == f"{binary[300]}.{binary[301]}"
        assert segy["sample_interval"] == int.from_bytes(binary[16:18], "big", signed=True)
        # Live traces, as OpenVDS's Trace channel marks them.
        assert segy["traces"] == int(arrays["Trace"].sum()) and segy["missing_traces"] == int((arrays["Trace"] == 0).sum())
        assert (segy["inlines"], segy["crosslines"], segy["samples"]) == ([1000, 1058, 2], [2000, 2039, 1], 45)
        assert segy["textual_headers"][0].splitlines()[0] == ref["metadata"][("SEGY", "TextHeader")][:80].decode().rstrip()
        survey = ds.attrs["survey_coordinate_system"]
        origin, il, xl = (np.array(ref["metadata"][("SurveyCoordinateSystem", k)]) for k in
                          ("Origin", "InlineSpacing", "CrosslineSpacing"))
        # OpenVDS's origin is at inline 0, crossline 0; the attribute's at the first ones.
        np.testing.assert_allclose(survey["origin"], origin + 1000.0 * il + 2000.0 * xl)
        np.testing.assert_allclose(survey["inline_spacing"], il)
        assert (survey["first_inline"], survey["first_crossline"], survey["unit"]) == (1000.0, 2000.0, "m")


def test_segy_export_of_a_converted_volume_keeps_its_headers(seismic, tmp_path):
    """vds.to_segy on a container from OpenVDS writes the live traces (the Trace channel's), in
    inline order, each with its SEGYTraceHeader bytes and the kept binary header: segyio reads them."""
    import segyio

    seismic, arrays = seismic
    out = vds.from_openvds(seismic, tmp_path / "s.vds")
    vds.to_segy(out, tmp_path / "s.sgy")
    ref = ovds_describe(seismic)["metadata"]
    data = (tmp_path / "s.sgy").read_bytes()
    assert data[:3200] == ref[("SEGY", "TextHeader")] and data[3200:3600] == ref[("SEGY", "BinaryHeader")]
    live = arrays["Trace"] != 0
    with segyio.open(str(tmp_path / "s.sgy"), ignore_geometry=True) as f:
        assert f.tracecount == int(live.sum()) and len(f.samples) == 45
        heads = arrays["SEGYTraceHeader"][live]
        expected = arrays["Amplitude"][live]
        for t in range(f.tracecount):
            assert f.header[t].buf == heads[t].tobytes()
        # Written as IBM floats (the kept format 1): within IBM's precision.
        np.testing.assert_allclose(f.trace.raw[:], expected, rtol=2.0 ** -20)


def test_round_trip_through_libvds_gives_the_same_volume(seismic, tmp_path):
    seismic, arrays = seismic
    mid = vds.from_openvds(seismic, tmp_path / "mid.vds")
    back = vds.to_openvds(mid, str(tmp_path / "back.ovds"))
    a, b = ovds_describe(seismic), ovds_describe(back)
    assert b["axes"] == a["axes"]
    assert b["brick"] == a["brick"]
    for ca, cb in zip(a["channels"], b["channels"]):
        assert cb == ca or (cb["range"] == pytest.approx(ca["range"]) and {**cb, "range": 0} == {**ca, "range": 0})
    assert len(b["channels"]) == len(a["channels"])
    for key, value in a["metadata"].items():
        assert b["metadata"][key] == (pytest.approx(value) if isinstance(value, (float, tuple)) else value), key
    for c in range(len(a["channels"])):
        np.testing.assert_array_equal(ovds_read(back, c), ovds_read(seismic, c))
        np.testing.assert_array_equal(ovds_read(back, c), arrays[a["channels"][c]["name"]])


def test_a_channel_range_holds_finite_values_only_without_the_no_value(tmp_path, rng):
    """The value range a channel gets, read in blocks of one chunk (four planes): blocks holding a
    NaN, the no-value or an infinity (blocks 0, 1 and 2) leave those out, a clean one (3) counts whole."""
    from vds._openvds import _value_range

    ref = rng.standard_normal((16, 16, 16)) * 100
    ref[0, 0, 0], ref[5, 1, 1], ref[9, 3, 2] = np.nan, -999.25, np.inf
    spec = {"dtype": "float64", "dims": ["x", "y", "z"], "chunks": [4, 16, 16]}
    variables = {"v": {**spec, "no_value": -999.25}, "w": spec}
    with vds.create(tmp_path / "r.vds", [("x", 16), ("y", 16), ("z", 16)], variables) as ds:
        ds["v"][...] = ref
        ds["w"][...] = ref
    finite = np.isfinite(ref)
    with vds.open(tmp_path / "r.vds") as ds:
        keep = finite & (ref != -999.25)
        assert _value_range(ds["v"], 4 * 16 * 16 * 8) == (ref[keep].min(), ref[keep].max())
        assert _value_range(ds["w"], 4 * 16 * 16 * 8) == (ref[finite].min(), ref[finite].max()) == (-999.25, ref[finite].max())


def test_to_openvds_from_numpy_values(tmp_path, rng):
    """A container made from NumPy arrays, of every dtype a channel takes or is widened to."""
    shape = (21, 34, 70)
    arrays = {name: (rng.standard_normal(shape) * 1000).astype(name) if name.startswith("f")
              else rng.integers(np.iinfo(name).min, np.iinfo(name).max, shape, dtype=name, endpoint=True)
              for name in ["float32", "float64", "int8", "int16", "int32", "uint8", "uint16", "uint32", "uint64"]}
    arrays["int64"] = rng.integers(-2**53, 2**53, shape, dtype=np.int64, endpoint=True)
    flags = rng.random(shape) > 0.5
    path = tmp_path / "numpy.vds"
    axes = [{"name": "x", "size": 21, "unit": "m", "first": 10.0, "last": 30.0}, ("y", 34),
            {"name": "z", "size": 70, "unit": "ms", "first": 0.0, "last": 276.0}]
    variables = {n: {"dtype": n, "dims": ["x", "y", "z"], "chunks": [8, 16, 32]} for n in arrays}
    variables["flags"] = {"dtype": "bool", "dims": ["x", "y", "z"]}
    # A no-value, where the survey has none: the channel's no-value, left out of its value range.
    gaps = arrays["float32"].copy()
    gaps[flags] = -999.25
    variables["gaps"] = {"dtype": "float32", "dims": ["x", "y", "z"], "no_value": -999.25}
    with vds.create(path, axes, variables, attrs={"survey": "synthetic", "n": 3}) as ds:
        for n, a in arrays.items():
            ds[n][...] = a
        ds["flags"][...] = flags
        ds["gaps"][...] = gaps
        ds["int16"].attrs["scale"] = 0.5
    out = vds.to_openvds(path, str(tmp_path / "numpy.ovds"), brick_size=32, buffer_size=64 << 10, compression="zip")
    ref = ovds_describe(out)
    assert ref["axes"][0] == (70, "z", "ms", 0.0, 276.0)
    assert ref["axes"][2] == (21, "x", "m", 10.0, 30.0)
    names = [c["name"] for c in ref["channels"]]
    assert names == list(arrays) + ["flags", "gaps"]
    assert [c["no_value"] for c in ref["channels"]] == [None] * (len(names) - 1) + [-999.25]
    for c, name in enumerate(names):
        values = ovds_read(out, c)
        expected = {"flags": flags, "gaps": gaps}.get(name, arrays.get(name))
        # Signed integers are widened to floats, exactly; the rest keep their type.
        np.testing.assert_array_equal(values, expected.astype(values.dtype))
        if name == "gaps":
            expected = arrays["float32"][~flags]  # the range of the values, not the no-value
        lo, hi = ref["channels"][c]["range"]
        assert (lo, hi) == pytest.approx((float(expected.min()), float(expected.max())), rel=1e-6)
    # And back: dtypes and attributes return.
    back = vds.from_openvds(out, tmp_path / "back.vds", buffer_size=64 << 10)
    with vds.open(back) as ds:
        assert ds.attrs["survey"] == "synthetic" and ds.attrs["n"] == 3
        assert ds["int16"].attrs["scale"] == 0.5
        for n, a in arrays.items():
            assert ds[n].dtype == a.dtype
            np.testing.assert_array_equal(ds[n][...], a)
        np.testing.assert_array_equal(ds["flags"][...], flags)
        assert ds["gaps"].no_value == -999.25
        np.testing.assert_array_equal(ds["gaps"][...], gaps)
    # int64 beyond 2^53 has no exact OpenVDS format: refused, not rounded.
    with vds.open(path, "r+") as ds:
        ds["int64"][0, 0, 0] = 2**53 + 1
    with pytest.raises(vds.UnsupportedError, match="int64"):
        vds.to_openvds(path, str(tmp_path / "big.ovds"))
    assert not (tmp_path / "big.ovds").exists()


def test_segy_import_layout_becomes_openvds_seismic(tmp_path, rng):
    """A container laid out as vds import writes one (trace headers, a mask for missing traces, the
    segy and survey attributes) becomes the channels and metadata OpenVDS's own importer writes."""
    ni, nx, ns = 12, 9, 50
    amp = rng.standard_normal((ni, nx, ns)).astype(np.float32)
    heads = rng.integers(0, 256, (ni, nx, 240), dtype=np.uint8)
    missing = np.zeros((ni, nx, ns), bool)
    missing[2, 3] = True
    missing[7, :4] = True
    text, binary = bytes(rng.integers(0, 256, 3200, dtype=np.uint8)), bytes(rng.integers(0, 256, 400, dtype=np.uint8))
    survey = {"origin": [5000.0, 7000.0], "inline_spacing": [0.0, 25.0], "crossline_spacing": [12.5, 0.0],
              "first_inline": 100, "first_crossline": 20, "unit": "m", "misfit": 0.0}
    path = tmp_path / "imported.vds"
    axes = [{"name": "inline", "size": ni, "first": 100.0, "last": 100.0 + ni - 1},
            {"name": "crossline", "size": nx, "first": 20.0, "last": 20.0 + nx - 1},
            {"name": "sample", "size": ns, "unit": "ms", "first": 0.0, "last": 2.0 * (ns - 1)}, ("header", 240)]
    variables = {"amplitude": {"dtype": "float32", "dims": ["inline", "crossline", "sample"], "mask": True},
                 "segy_trace_header": {"dtype": "uint8", "dims": ["inline", "crossline", "header"]}}
    attrs = {"segy": {"textual_raw": base64.b64encode(text).decode(), "binary_raw": base64.b64encode(binary).decode(),
                      "byte_order": "big", "format": 1, "variable": "amplitude", "trace_headers": "segy_trace_header"},
             "survey_coordinate_system": survey}
    with vds.create(path, axes, variables, attrs) as ds:
        ds["amplitude"].write(..., amp, missing=missing)
        ds["segy_trace_header"][...] = heads
    out = vds.to_openvds(path, str(tmp_path / "imported.ovds"))
    ref = ovds_describe(out)
    assert [(c["name"], c["mapping"], c["count"]) for c in ref["channels"]] == \
        [("amplitude", "Direct", 1), ("segy_trace_header", "PerTrace", 240), ("Trace", "PerTrace", 1)]
    values = ovds_read(out, 0)
    np.testing.assert_array_equal(values[~missing], amp[~missing])
    np.testing.assert_array_equal(ovds_read(out, 1), heads)
    np.testing.assert_array_equal(ovds_read(out, 2), (~missing.all(axis=-1)).astype(np.uint8))
    md = ref["metadata"]
    assert md[("SEGY", "TextHeader")] == text and md[("SEGY", "BinaryHeader")] == binary
    assert (md[("SEGY", "Endianness")], md[("SEGY", "DataSampleFormatCode")]) == (0, 1)
    # OpenVDS puts the origin at inline 0, crossline 0.
    expected = np.array(survey["origin"]) - 100 * np.array(survey["inline_spacing"]) - 20 * np.array(survey["crossline_spacing"])
    np.testing.assert_allclose(md[("SurveyCoordinateSystem", "Origin")], expected)
    assert md[("SurveyCoordinateSystem", "InlineSpacing")] == (0.0, 25.0)
    assert md[("SurveyCoordinateSystem", "Unit")] == "m"
    # The world coordinates of a grid point agree between the two conventions.
    with vds.open(vds.from_openvds(out, tmp_path / "again.vds")) as ds:
        np.testing.assert_allclose(ds.attrs["survey_coordinate_system"]["origin"], survey["origin"])
        assert ds.attrs["segy"]["variable"] == "amplitude"
        np.testing.assert_array_equal(ds["segy_trace_header"][...], heads)


def test_quantized_channels_stay_integers_with_the_same_values(tmp_path, rng):
    """A U8 channel with a scale and offset (floats stored as integers) becomes a quantized variable:
    the stored integers are the channel's and the values are those openvds computes from them."""
    shape = (20, 30, 40)
    raw8 = rng.integers(0, 256, shape, dtype=np.uint8)
    raw16 = rng.integers(0, 65536, shape, dtype=np.uint16)
    channels = [CD(CD.Format.Format_U8, CD.Components.Components_1, "Q8", "", -10.0, 117.5, openvds.VolumeDataMapping.Direct,
                   1, CD.Flags.Default, 0.5, -10.0),
                CD(CD.Format.Format_U16, CD.Components.Components_1, "Q16", "", 0.0, 6553.5, openvds.VolumeDataMapping.Direct,
                   1, CD.Flags.Default, 0.1, 0.0)]
    axes = [(40, "Sample", "ms", 0.0, 156.0), (30, "Crossline", "", 1.0, 30.0), (20, "Inline", "", 1.0, 20.0)]
    path = str(tmp_path / "q.ovds")
    ovds_create(path, axes, channels, [raw8, raw16])
    out = vds.from_openvds(path, tmp_path / "q.vds")
    handle = openvds.open(path, "")
    manager = openvds.getAccessManager(handle)
    as_floats = [np.array(manager.requestVolumeSubset((0, 0, 0), (40, 30, 20), channel=c,
                                                      format=openvds.VolumeDataFormat.Format_R32).data).reshape(shape)
                 for c in range(2)]
    openvds.close(handle)
    with vds.open(out) as ds:
        for k, (name, raw, storage) in enumerate([("Q8", raw8, "uint8"), ("Q16", raw16, "uint16")]):
            var = ds[name]
            assert var.dtype == np.float32 and var.quantization["storage"] == storage
            np.testing.assert_array_equal(var.stored[...], raw)
            np.testing.assert_allclose(var[...], as_floats[k], rtol=1e-6, atol=1e-4)
    back = vds.to_openvds(out, str(tmp_path / "back.ovds"))
    ref = ovds_describe(back)
    assert [c["format"] for c in ref["channels"]] == ["Format_U8", "Format_U16"]
    np.testing.assert_array_equal(ovds_read(back, 0), raw8)
    np.testing.assert_array_equal(ovds_read(back, 1), raw16)
    handle = openvds.open(str(tmp_path / "back.ovds"), "")
    layout = openvds.getLayout(handle)
    assert [(layout.getChannelIntegerScale(c), layout.getChannelIntegerOffset(c)) for c in range(2)] == \
        [pytest.approx((0.5, -10.0)), pytest.approx((0.1, 0.0))]
    openvds.close(handle)


def test_levels_of_detail_follow_the_volume(tmp_path, rng):
    """A volume with 2 levels of detail gives variables with levels 0 to 2, computed by libvds from level 0
    (pair averages, checked with NumPy), and goes back to OpenVDS with 2 levels openvds reads."""
    values = rng.standard_normal((20, 32, 40)).astype(np.float32)
    layout = LD(LD.BrickSize.BrickSize_32, 0, 0, 4, LD.LODLevels.LODLevels_2, LD.Options.Options_None)
    axes = [openvds.VolumeDataAxisDescriptor(40, "Sample", "ms", 0.0, 156.0), openvds.VolumeDataAxisDescriptor(32, "Crossline", "", 1.0, 32.0),
            openvds.VolumeDataAxisDescriptor(20, "Inline", "", 1.0, 20.0)]
    channels = [CD(CD.Format.Format_R32, CD.Components.Components_1, "Amplitude", "", -4.0, 4.0)]
    path = str(tmp_path / "lod.ovds")
    handle = openvds.create(path, "", layout, axes, channels, openvds.MetadataContainer())
    manager = openvds.getAccessManager(handle)
    accessor = manager.createVolumeDataPageAccessor(openvds.DimensionsND.Dimensions_012, 0, 0, 8,
                                                   openvds.VolumeDataPageAccessor.AccessMode.AccessMode_Create)
    for chunk in range(accessor.getChunkCount()):
        page = accessor.createPage(chunk)
        lo, hi = page.getMinMax()
        np.array(page.getWritableBuffer(), copy=False)[...] = values[lo[2]:hi[2], lo[1]:hi[1], lo[0]:hi[0]]
        page.release()
    accessor.commit()
    manager.flush()
    openvds.close(handle)
    out = vds.from_openvds(path, tmp_path / "lod.vds")
    with vds.open(out) as ds:
        amp = ds["Amplitude"]
        assert amp.levels == 3
        np.testing.assert_array_equal(amp[...], values)
        half = values.reshape(10, 2, 16, 2, 20, 2).mean(axis=(1, 3, 5))
        np.testing.assert_allclose(amp.lod(1)[...], half, rtol=1e-5, atol=1e-6)
        assert amp.lod(2).shape == (5, 8, 10)
    back = vds.to_openvds(out, str(tmp_path / "back.ovds"))
    handle = openvds.open(back, "")
    assert openvds.getLayout(handle).getLayoutDescriptor().getLODLevels().name == "LODLevels_2"
    manager = openvds.getAccessManager(handle)
    request = manager.requestVolumeSubset((0, 0, 0), (20, 16, 10), lod=1, channel=0)
    assert request.waitForCompletion()
    openvds.close(handle)
    np.testing.assert_array_equal(ovds_read(back, 0), values)
    # A container's own levels of detail ask OpenVDS for as many.
    made = tmp_path / "made.vds"
    with vds.create(made, [("i", 20), ("j", 32), ("k", 40)],
                    {"v": {"dtype": "float32", "dims": ["i", "j", "k"], "lods": 2, "lod_axes": ["i", "j", "k"]}}) as ds:
        ds["v"][...] = values
    handle = openvds.open(vds.to_openvds(made, str(tmp_path / "made.ovds")), "")
    assert openvds.getLayout(handle).getLayoutDescriptor().getLODLevels().name == "LODLevels_1"
    openvds.close(handle)


def test_two_dimensional_volume(tmp_path, rng):
    values = rng.standard_normal((37, 300)).astype(np.float32)
    path = str(tmp_path / "line.ovds")
    ch = [CD(CD.Format.Format_R32, CD.Components.Components_1, "Amplitude", "", -3.0, 3.0)]
    ovds_create(path, [(300, "Sample", "ms", 0.0, 598.0), (37, "CDP", "", 1.0, 37.0)], ch, [values])
    out = vds.from_openvds(path, tmp_path / "line.vds")
    with vds.open(out) as ds:
        assert ds["Amplitude"].dims == ("CDP", "Sample")
        np.testing.assert_array_equal(ds["Amplitude"][...], ovds_read(path, 0))
        np.testing.assert_array_equal(ds["Amplitude"][...], values)
    back = vds.to_openvds(out, str(tmp_path / "back.ovds"))
    np.testing.assert_array_equal(ovds_read(back, 0), values)


def test_small_buffers_stream_the_same_values(seismic, tmp_path):
    """Blocks of one brick or less give the same container as one block."""
    seismic, _ = seismic
    whole = vds.from_openvds(seismic, tmp_path / "whole.vds", buffer_size=1 << 30)
    small = vds.from_openvds(seismic, tmp_path / "small.vds", buffer_size=1)
    with vds.open(whole) as a, vds.open(small) as b:
        for name in a:
            np.testing.assert_array_equal(a[name][...], b[name][...])


def test_errors_are_exceptions(seismic, tmp_path):
    seismic, _ = seismic
    with pytest.raises(vds.NotFoundError):
        vds.from_openvds(tmp_path / "missing.ovds", tmp_path / "x.vds")
    junk = tmp_path / "junk.ovds"
    junk.write_bytes(b"not a volume" * 100)
    with pytest.raises(vds.InvalidArgumentError, match="junk.ovds"):
        vds.from_openvds(junk, tmp_path / "x.vds")
    assert not (tmp_path / "x.vds").exists()
    out = vds.from_openvds(seismic, tmp_path / "s.vds")
    with pytest.raises(vds.AlreadyExistsError):
        vds.from_openvds(seismic, out)
    vds.from_openvds(seismic, out, overwrite=True)
    with pytest.raises(vds.AlreadyExistsError):
        vds.to_openvds(out, seismic)
    with pytest.raises(vds.InvalidArgumentError, match="brick_size"):
        vds.to_openvds(out, str(tmp_path / "b.ovds"), brick_size=100)
    with pytest.raises(vds.InvalidArgumentError, match="compression"):
        vds.to_openvds(out, str(tmp_path / "b.ovds"), compression="lzma")
    with pytest.raises(vds.InvalidArgumentError, match="no variable named"):
        vds.to_openvds(out, str(tmp_path / "b.ovds"), variables=["nope"])
    # A variable on other axes is left out with a warning, or refused when asked for.
    odd = tmp_path / "odd.vds"
    with vds.create(odd, [("a", 4), ("b", 5), ("c", 6)], {"v": {"dtype": "float32", "dims": ["a", "b", "c"]},
                                                          "w": {"dtype": "float32", "dims": ["c", "a"]}}) as ds:
        ds["v"][...] = 1.0
    with pytest.warns(UserWarning, match="'w'"):
        vds.to_openvds(odd, str(tmp_path / "odd.ovds"))
    with pytest.raises(vds.InvalidArgumentError, match="fits no OpenVDS channel"):
        vds.to_openvds(odd, str(tmp_path / "odd2.ovds"), variables=["v", "w"])
    assert not (tmp_path / "odd2.ovds").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(ovds_read(vds.to_openvds(odd, str(tmp_path / "odd3.ovds"), variables=["v"]), 0),
                                      np.ones((4, 5, 6), np.float32))
    assert json.loads(json.dumps(ovds_describe(str(tmp_path / "odd3.ovds"))["axes"])) == [[6, "c", "", 0.0, 5.0],
                                                                                          [5, "b", "", 0.0, 4.0],
                                                                                          [4, "a", "", 0.0, 3.0]]


def test_four_dimensional_prestack_volume(tmp_path, rng):
    """Gathers: (Sample, Offset, Crossline, Inline) in OpenVDS, [Inline, Crossline, Offset, Sample] here."""
    ns, no, nx, ni = 40, 5, 6, 7
    amplitude = rng.standard_normal((ni, nx, no, ns)).astype(np.float32)
    headers = rng.integers(0, 256, (ni, nx, no, 240), dtype=np.uint8)
    channels = [CD(CD.Format.Format_R32, CD.Components.Components_1, "Amplitude", "", -4.0, 4.0),
                CD(CD.Format.Format_U8, CD.Components.Components_1, "SEGYTraceHeader", "", 0.0, 255.0,
                   openvds.VolumeDataMapping.PerTrace, 240, CD.Flags.DiscreteData, 1.0, 0.0)]
    axes = [(ns, "Sample", "ms", 0.0, 4.0 * (ns - 1)), (no, "Offset", "m", 100.0, 500.0), (nx, "Crossline", "", 1.0, 6.0),
            (ni, "Inline", "", 1.0, 7.0)]
    path = str(tmp_path / "gathers.ovds")
    ovds_create(path, axes, channels, [amplitude, headers])
    out = vds.from_openvds(path, tmp_path / "gathers.vds")
    with vds.open(out) as ds:
        assert ds["Amplitude"].dims == ("Inline", "Crossline", "Offset", "Sample")
        assert ds["SEGYTraceHeader"].dims == ("Inline", "Crossline", "Offset", "header")
        np.testing.assert_array_equal(ds["Amplitude"][...], ovds_read(path, 0))
        np.testing.assert_array_equal(ds["Amplitude"][...], amplitude)
        np.testing.assert_array_equal(ds["SEGYTraceHeader"][...], headers)
    back = vds.to_openvds(out, str(tmp_path / "back.ovds"))
    assert ovds_describe(back)["axes"] == ovds_describe(path)["axes"]
    np.testing.assert_array_equal(ovds_read(back, 0), amplitude)
    np.testing.assert_array_equal(ovds_read(back, 1), headers)


def test_wavelet_compressed_volume_reads_as_openvds_decodes_it(tmp_path, rng):
    """A lossy (wavelet) volume: the container holds exactly the values openvds decodes."""
    shape = (40, 36, 50)
    smooth = np.cumsum(rng.standard_normal(shape), axis=-1).astype(np.float32)
    layout = LD(LD.BrickSize.BrickSize_32, 0, 0, 4, LD.LODLevels.LODLevels_None, LD.Options.Options_None)
    axes = [openvds.VolumeDataAxisDescriptor(50, "Sample", "ms", 0.0, 196.0), openvds.VolumeDataAxisDescriptor(36, "Crossline", "", 1.0, 36.0),
            openvds.VolumeDataAxisDescriptor(40, "Inline", "", 1.0, 40.0)]
    channels = [CD(CD.Format.Format_R32, CD.Components.Components_1, "Amplitude", "", float(smooth.min()), float(smooth.max()))]
    path = str(tmp_path / "wavelet.ovds")
    handle = openvds.create(path, "", layout, axes, channels, openvds.MetadataContainer(), openvds.CompressionMethod.Wavelet, 4.0)
    manager = openvds.getAccessManager(handle)
    accessor = manager.createVolumeDataPageAccessor(openvds.DimensionsND.Dimensions_012, 0, 0, 8,
                                                   openvds.VolumeDataPageAccessor.AccessMode.AccessMode_Create)
    for chunk in range(accessor.getChunkCount()):
        page = accessor.createPage(chunk)
        lo, hi = page.getMinMax()
        buf = np.array(page.getWritableBuffer(), copy=False)
        buf[...] = smooth[lo[2]:hi[2], lo[1]:hi[1], lo[0]:hi[0]]
        page.release()
    accessor.commit()
    manager.flush()
    openvds.close(handle)
    decoded = ovds_read(path, 0)
    assert not np.array_equal(decoded, smooth)  # lossy indeed
    out = vds.from_openvds(path, tmp_path / "wavelet.vds")
    with vds.open(out) as ds:
        np.testing.assert_array_equal(ds["Amplitude"][...], decoded)
        assert ds.attrs["openvds"]["compression"]["method"] == "Wavelet"


def test_margins_are_carried_both_ways(tmp_path, rng):
    """An OpenVDS brick of 32 with margins (4, 4) becomes a 24-sample chunk with the margin (4, 4), the same
    bricks; back, the margin and brick size return; a libvds variable with a margin gives its volume one."""
    path = str(tmp_path / "m.vds")
    axes = [(70, "Sample", "ms", 0.0, 138.0), (40, "Crossline", "", 1.0, 40.0), (10, "Inline", "", 1.0, 10.0)]
    amplitude = rng.standard_normal((10, 40, 70)).astype(np.float32)
    live = (rng.random((10, 40)) > 0.1).astype(np.uint8)
    channels = [CD(CD.Format.Format_R32, CD.Components.Components_1, "Amplitude", "", -4.0, 4.0),
                CD(CD.Format.Format_U8, CD.Components.Components_1, "Trace", "", 0.0, 1.0, openvds.VolumeDataMapping.PerTrace,
                   1, CD.Flags.DiscreteData, 1.0, 0.0)]
    ovds_create(path, axes, channels, [amplitude, live], margin=(4, 4))
    assert ovds_describe(path)["margin"] == (4, 4)
    np.testing.assert_array_equal(ovds_read(path, 0), amplitude)

    converted = tmp_path / "m.lvds"
    vds.from_openvds(path, converted)
    with vds.open(converted) as ds:
        amp = ds["Amplitude"]
        assert amp.margin == (4, 4) and amp.chunks == (10, 24, 24), (amp.margin, amp.chunks)
        assert ds["Trace"].margin == (0, 0)
        np.testing.assert_array_equal(amp.read(), amplitude)
        np.testing.assert_array_equal(ds["Trace"][...], live)
        assert ds.attrs["openvds"]["layout"]["negative_margin"] == 4

    back = str(tmp_path / "back.vds")
    vds.to_openvds(converted, back)
    described = ovds_describe(back)
    assert described["margin"] == (4, 4) and described["brick"] == "BrickSize_32", described
    np.testing.assert_array_equal(ovds_read(back, 0), amplitude)

    # A container written by libvds: chunks of 28 with a margin of (2, 2) are OpenVDS bricks of 32.
    made = tmp_path / "made.lvds"
    values = rng.standard_normal((30, 40, 50)).astype(np.float32)
    with vds.create(made, [("i", 30), ("j", 40), ("k", 50)],
                    {"v": {"dtype": "float32", "dims": ["i", "j", "k"], "chunks": [28, 28, 28], "margin": [2, 2]}}) as ds:
        ds["v"][...] = values
    made_ovds = str(tmp_path / "made.vds")
    vds.to_openvds(made, made_ovds)
    described = ovds_describe(made_ovds)
    assert described["margin"] == (2, 2) and described["brick"] == "BrickSize_32", described
    np.testing.assert_array_equal(ovds_read(made_ovds, 0), values)


def test_channels_of_several_components_convert_both_ways(tmp_path, rng):
    """Vectors per sample (Components_2 and _4, direct and per trace) become variables with an axis of
    components, last, and channels of as many components again; a libvds variable with such an axis
    becomes one."""
    ns, nx, ni = 40, 36, 9
    amplitude = rng.standard_normal((ni, nx, ns)).astype(np.float32)
    dip = rng.standard_normal((ni, nx, ns, 2)).astype(np.float32)
    normal = rng.standard_normal((ni, nx, ns, 4))
    picks = rng.integers(0, 60000, (ni, nx, 3, 4), dtype=np.uint16)
    channels = [
        CD(CD.Format.Format_R32, CD.Components.Components_1, "Amplitude", "", -4.0, 4.0),
        CD(CD.Format.Format_R32, CD.Components.Components_2, "Dip", "deg", -4.0, 4.0),
        CD(CD.Format.Format_R64, CD.Components.Components_4, "Normal", "", -4.0, 4.0, -999.0),
        CD(CD.Format.Format_U16, CD.Components.Components_4, "Picks", "", 0.0, 60000.0, openvds.VolumeDataMapping.PerTrace,
           3, CD.Flags.DiscreteData, 1.0, 0.0),
    ]
    axes = [(ns, "Sample", "ms", 0.0, 4.0 * (ns - 1)), (nx, "Crossline", "", 1.0, float(nx)), (ni, "Inline", "", 1.0, float(ni))]
    path = str(tmp_path / "vectors.ovds")
    ovds_create(path, axes, channels, [amplitude, dip, normal, picks])
    for c, values in enumerate([amplitude, dip, normal, picks]):
        np.testing.assert_array_equal(ovds_read(path, c), values)

    out = vds.from_openvds(path, tmp_path / "vectors.vds", buffer_size=40 * 36 * 4 * 8)
    with vds.open(out) as ds:
        assert ds["Dip"].dims == ("Inline", "Crossline", "Sample", "Dip_components")
        assert ds["Normal"].dims == ("Inline", "Crossline", "Sample", "Normal_components")
        assert ds["Picks"].dims == ("Inline", "Crossline", "Picks_values", "Picks_components")
        assert ds["Dip"].attrs["openvds"]["components"] == 2 and "components" not in ds["Amplitude"].attrs["openvds"]
        assert ds["Normal"].dtype == np.float64 and ds["Normal"].no_value == -999.0
        assert ds["Picks"].dtype == np.uint16
        np.testing.assert_array_equal(ds["Amplitude"][...], amplitude)
        np.testing.assert_array_equal(ds["Dip"][...], dip)
        np.testing.assert_array_equal(ds["Normal"][...], normal)
        np.testing.assert_array_equal(ds["Picks"][...], picks)
        assert ds["Dip"].chunks == (9, 32, 32, 2)

    back = vds.to_openvds(out, str(tmp_path / "back.ovds"))
    described = {ch["name"]: ch for ch in ovds_describe(back)["channels"]}
    assert [described[n]["components"] for n in ("Amplitude", "Dip", "Normal", "Picks")] == \
        ["Components_1", "Components_2", "Components_4", "Components_4"]
    assert described["Picks"]["mapping"] == "PerTrace" and described["Picks"]["count"] == 3
    assert described["Normal"]["no_value"] == -999.0
    for c, name in enumerate(ch["name"] for ch in ovds_describe(back)["channels"]):
        np.testing.assert_array_equal(ovds_read(back, c), {"Amplitude": amplitude, "Dip": dip, "Normal": normal,
                                                           "Picks": picks}[name])

    # Written by libvds: a trailing axis of 2 samples beside the primary's axes is a channel of 2 components.
    made = tmp_path / "made.lvds"
    wind = rng.standard_normal((6, 7, 8, 2)).astype(np.float32)
    with vds.create(made, [("y", 6), ("x", 7), ("t", 8), ("uv", 2)],
                    {"speed": {"dtype": "float32", "dims": ["y", "x", "t"]},
                     "wind": {"dtype": "float32", "dims": ["y", "x", "t", "uv"]}}) as ds:
        ds["speed"][...] = np.hypot(wind[..., 0], wind[..., 1])
        ds["wind"][...] = wind
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        made_ovds = vds.to_openvds(made, str(tmp_path / "made.ovds"), variables=["speed", "wind"])
    assert [ch["components"] for ch in ovds_describe(made_ovds)["channels"]] == ["Components_1", "Components_2"]
    np.testing.assert_array_equal(ovds_read(made_ovds, 1), wind)
    # Unasked, the primary is the variable with the most axes that is not such a vector.
    guessed = vds.to_openvds(made, str(tmp_path / "guessed.ovds"))
    assert [(ch["name"], ch["components"]) for ch in ovds_describe(guessed)["channels"]] == \
        [("speed", "Components_1"), ("wind", "Components_2")]
    assert [a[1] for a in ovds_describe(guessed)["axes"]] == ["t", "x", "y"]
