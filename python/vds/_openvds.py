"""OpenVDS volumes to and from libvds containers, through the ``openvds`` package (OpenVDS+).

The ``openvds`` wheel is an optional dependency: nothing here imports it until
:func:`from_openvds` or :func:`to_openvds` runs. Both stream in blocks of
whole bricks of at most ``buffer_size`` bytes, so memory stays bounded
whatever the volume's size.

How the two models meet:

- **Axes.** OpenVDS counts dimension 0 as the fastest (Sample); libvds
  stores C order, slowest axis first. A volume with dimensions
  (Sample, Crossline, Inline) becomes axes (Inline, Crossline, Sample), with
  names, units and first and last coordinates kept, and the other way round.
- **Channels.** Every channel becomes a variable of the same name. A
  channel mapped directly spans every axis. A per-trace channel (such as
  ``SEGYTraceHeader``, 240 bytes per trace, or ``Trace``, 1 per trace) spans
  the trace axes plus, when it has more than one value per trace, an axis of
  its own (``header`` for ``SEGYTraceHeader``, as ``vds import`` names it,
  else ``<channel>_values``). Where a ``Trace`` channel says a trace is dead
  (0), the first channel gets a missing-value mask, its values kept beneath.
  Formats map to dtypes (1Bit to bool, U8 to uint8, R32 to float32, ...;
  1Bit read as U8 values, never as packed bits), except that a U8 or U16
  channel with an integer scale and offset (floats stored as integers, no
  no-value) becomes a quantized float32 variable over the same integers,
  ``min = offset`` and ``max = offset + scale * qmax``, and a quantized
  variable becomes such a channel again; a channel's no-value
  becomes the variable's no-value; its value range, integer scale and offset, flags and mapping go
  to the variable's ``openvds`` attribute, so that :func:`to_openvds` writes
  the same channel back.
- **Layout and metadata.** The level-0 brick layer (``Dimensions_012LOD0``)
  is copied; its brick size becomes the chunk shape. The layout descriptor
  (brick size, margins, levels of detail, 2-D multiplier), the compression
  method and every metadata item (typed; BLOBs as base64) go to the
  dataset's ``openvds`` attribute. SEG-Y metadata (``SEGY`` TextHeader,
  BinaryHeader, Endianness, DataSampleFormatCode) also becomes the ``segy``
  attribute (which then holds the two headers' bytes instead of the list) and the SurveyCoordinateSystem the ``survey_coordinate_system``
  attribute, as ``vds import`` writes them, so ``vds info`` shows the
  geometry and ``vds export`` writes SEG-Y with the original headers.
- **Back to OpenVDS.** The channels are the variables that fit one layout:
  a primary variable (the ``segy`` attribute's, the first channel of an
  ``openvds`` attribute, else the one with the most axes), the variables on
  the same axes, and per-trace variables on its leading axes. Signed
  integers are written as R32 (int8, int16) or R64 (int32, int64) and bools
  as U8, and the dtypes and attributes are kept in metadata (category
  ``LibVDS``) so that :func:`from_openvds` restores them; a missing-value
  mask becomes a ``Trace`` channel (1 where a trace holds a value).
- **Levels of detail** are declared alike (OpenVDS LODLevels_N, libvds
  N + 1 levels), never copied: each library computes its own from level 0.
- **Margins** of a 3-D volume are carried both ways: an OpenVDS brick of
  size B with margins (a, b) becomes a libvds chunk of B - a - b samples
  with the margin (a, b), so that the stored bricks are the same, and a
  3-D variable's margin becomes the volume's (its bricks its chunks with
  their margins, when that is an OpenVDS brick size).
- **Components.** A channel of 2 or 4 components (a vector per sample)
  becomes a variable with one more axis, last, named ``<channel>_components``
  (the channel's ``openvds`` attribute says ``"components"``); back, such a
  variable (or any variable on the primary's axes plus one of 2 or 4
  samples) becomes a channel of that many components. A margin spans every
  axis of a libvds variable, so such a variable has none (its values are
  the same).
- **Not carried:** 2-D tile layers, margins of 2-D and 4-D to 6-D volumes
  (their values convert, without margins).
"""

from __future__ import annotations

import base64
import json
import math
import os
import warnings
from typing import Any, Iterator, Sequence

import numpy as np

from .errors import AlreadyExistsError, InvalidArgumentError, NotFoundError, UnsupportedError, VdsError

#: The default size of the blocks a conversion reads and writes at a time.
DEFAULT_BUFFER_SIZE = 64 << 20

_FORMATS = {  # OpenVDS format name -> NumPy dtype of a libvds variable
    "Format_1Bit": "bool", "Format_U8": "uint8", "Format_U16": "uint16", "Format_U32": "uint32",
    "Format_U64": "uint64", "Format_R32": "float32", "Format_R64": "float64",
}
_FORMAT_OF = {  # libvds dtype -> OpenVDS format (signed integers widened to floats that hold them)
    "bool": "Format_U8", "uint8": "Format_U8", "uint16": "Format_U16", "uint32": "Format_U32", "uint64": "Format_U64",
    "float32": "Format_R32", "float64": "Format_R64", "int8": "Format_R32", "int16": "Format_R32",
    "int32": "Format_R64", "int64": "Format_R64",
}
# The dimension groups of the level-0 brick layer, by dimensionality.
_BRICK_GROUP = {1: "Dimensions_01", 2: "Dimensions_01"}
_BRICK_SIZES = {32: "BrickSize_32", 64: "BrickSize_64", 128: "BrickSize_128", 256: "BrickSize_256",
                512: "BrickSize_512", 1024: "BrickSize_1024", 2048: "BrickSize_2048", 4096: "BrickSize_4096"}
_COMPRESSION = {"none": "None", "zip": "Zip", "rle": "RLE"}
_SEGY_SAMPLE_DTYPES = {1: "float32", 2: "int32", 3: "int16", 5: "float32", 6: "float64", 8: "int8", 9: "int64",
                       10: "uint32", 11: "uint16", 12: "uint64", 16: "uint8"}


def _openvds():
    try:
        import openvds
    except ImportError as e:
        raise UnsupportedError(f"OpenVDS conversion needs the openvds package (pip install openvds): {e}") from None
    return openvds


def _blocks(shape: Sequence[int], chunk: Sequence[int], itemsize: int, budget: int) -> Iterator[tuple[list[int], list[int]]]:
    """Boxes (start, count) of whole chunks covering ``shape`` in C order, each at most ``budget``
    bytes where one chunk allows: the trailing axes are taken whole first, then the next one in
    multiples of its chunk, so that a block is as long a run as the budget allows."""
    n = len(shape)
    block = [min(c, s) if s else 1 for c, s in zip(chunk, shape)]
    for k in range(n - 1, -1, -1):
        others = math.prod(block[:k]) * math.prod(block[k + 1:]) * itemsize
        fit = max(1, budget // max(1, others)) // max(1, block[k]) * block[k]
        if fit >= shape[k]:
            block[k] = max(1, shape[k])
            continue
        block[k] = max(block[k], fit)
        break
    if any(s == 0 for s in shape):
        return
    grid = [range(0, s, b) for s, b in zip(shape, block)]
    for start in np.ndindex(*[len(g) for g in grid]):
        s = [grid[k][i] for k, i in enumerate(start)]
        yield s, [min(block[k], shape[k] - s[k]) for k in range(n)]


def _metadata_value(container: Any, key: Any) -> Any:
    """A metadata item's value as JSON (vectors as lists, BLOBs as base64)."""
    kind = key.type.name
    get = getattr(container, "getMetadata" + kind)
    value = get(key.category, key.name)
    if kind == "BLOB":
        return base64.b64encode(bytes(np.array(value, copy=False, dtype=np.uint8))).decode()
    if isinstance(value, (tuple, list)):
        return list(value)
    return value


def _metadata_bytes(container: Any, category: str, name: str) -> bytes | None:
    if not container.isMetadataBLOBAvailable(category, name):
        return None
    return bytes(np.array(container.getMetadataBLOB(category, name), copy=False, dtype=np.uint8))


def _check_destination(dst: str, overwrite: bool) -> None:
    if os.path.lexists(dst) and not overwrite:
        raise AlreadyExistsError(f"{dst} exists (pass overwrite=True to replace it)")


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


# --- OpenVDS to libvds ----------------------------------------------------------------------------


def from_openvds(src: str | os.PathLike[str], dst: str | os.PathLike[str], *, codec: Any = "zstd", overwrite: bool = False,
                 sync: bool = True, buffer_size: int = DEFAULT_BUFFER_SIZE) -> str:
    """Converts the OpenVDS volume ``src`` (a file path or any URL openvds opens) into a new container ``dst``.

    Every channel becomes a variable (per-trace channels such as
    ``SEGYTraceHeader`` on the trace axes; a channel of 2 or 4 components
    with an axis of them, last; dead traces of the ``Trace``
    channel missing in the first channel's mask), the axes are reversed into C order
    (OpenVDS (Sample, Crossline, Inline) becomes (Inline, Crossline, Sample))
    with names, units and coordinates, the level-0 bricks are copied and the
    brick size becomes the chunk shape. No-values become the variables'
    no-values; value ranges, the layout, compression and every metadata item
    go to the ``openvds`` attributes; SEG-Y headers and the survey coordinate
    system also to the ``segy`` and ``survey_coordinate_system`` attributes
    that ``vds export`` and ``vds info`` use.

    ``codec``: the variables' codec, as in :func:`vds.create`. The copy
    reads and writes blocks of whole bricks of at most ``buffer_size`` bytes.
    Needs the ``openvds`` package. Returns ``dst``.

    Raises :class:`NotFoundError` when ``src`` does not exist,
    :class:`InvalidArgumentError` when openvds cannot open it,
    :class:`UnsupportedError` for a channel format libvds has no dtype for, and
    :class:`AlreadyExistsError` when ``dst`` exists and ``overwrite`` is
    false. A failed conversion removes ``dst``.
    """
    from . import create

    ovds = _openvds()
    src_s, dst_s = os.fspath(src), os.fspath(dst)
    _check_destination(dst_s, overwrite)
    if "://" not in src_s and not os.path.exists(src_s):
        raise NotFoundError(f"{src_s}: no such file")
    try:
        handle = ovds.open(src_s, "")
    except RuntimeError as e:
        raise InvalidArgumentError(f"{src_s}: openvds cannot open it as an OpenVDS volume: {e}") from None
    try:
        layout = ovds.getLayout(handle)
        ndim = layout.getDimensionality()
        oaxes = [layout.getAxisDescriptor(d) for d in range(ndim)]
        axes = [{"name": a.getName(), "size": a.getNumSamples(), "unit": a.getUnit(), "first": a.getCoordinateMin(),
                 "last": a.getCoordinateMax()} for a in reversed(oaxes)]
        trace_dims = [a["name"] for a in axes[:-1]]
        metadata = [{"category": k.category, "name": k.name, "type": k.type.name, "value": _metadata_value(layout, k)}
                    for k in layout.getMetadataKeys()]
        saved = _libvds_metadata(layout)
        descriptor = layout.getLayoutDescriptor()
        brick = int(descriptor.getBrickSize().name.split("_")[1])
        # A brick layer of a 2-D volume has bricks larger by the 2-D multiplier.
        edge = brick * descriptor.getBrickSizeMultiplier2D() if ndim == 2 else brick
        lod_levels = 0 if descriptor.getLODLevels().name == "LODLevels_None" else int(descriptor.getLODLevels().name.split("_")[1])
        # Margins: an OpenVDS brick of a 3-D volume holds its core (the brick size less both margins)
        # and its neighbours' samples around it, as a libvds chunk with a margin does around its
        # chunk shape, so that the bricks stay the same.
        margin = (descriptor.getNegativeMargin(), descriptor.getPositiveMargin())
        if ndim != 3 or margin == (0, 0) or max(margin) > 64 or brick - sum(margin) < 1:
            margin = (0, 0)
        variables: dict[str, dict[str, Any]] = {}
        channels = []
        for c in range(layout.getChannelCount()):
            cd = layout.getChannelDescriptor(c)
            name = cd.getName()
            comps = int(cd.getComponents().name.split("_")[1])
            fmt = cd.getFormat().name
            if fmt not in _FORMATS:
                raise UnsupportedError(f"{src_s}: channel {name!r} has format {fmt}")
            per_trace = cd.getMapping().name == "PerTrace"
            count = cd.getMappedValueCount() if per_trace else 1
            grid = list(trace_dims) if per_trace else [a["name"] for a in axes[:ndim]]
            dims = list(grid)
            if count > 1:
                extra = "header" if name == "SEGYTraceHeader" else f"{name}_values"
                axes.append({"name": extra, "size": count})
                dims.append(extra)
            # A channel of 2 or 4 components (a vector per sample, interleaved) gets an axis of its own, last.
            component_axis = f"{name}_components" if comps > 1 else None
            if component_axis:
                axes.append({"name": component_axis, "size": comps})
                dims.append(component_axis)
            info = {
                "format": fmt, "mapping": cd.getMapping().name, "mapped_value_count": count,
                "value_range": [cd.getValueRangeMin(), cd.getValueRangeMax()], "unit": cd.getUnit(),
                "integer_scale": cd.getIntegerScale(), "integer_offset": cd.getIntegerOffset(),
                "discrete": cd.isDiscrete(), "renderable": cd.isRenderable(),
                "allow_lossy_compression": cd.isAllowLossyCompression(),
                "use_zip_for_lossless_compression": cd.isUseZipForLosslessCompression(),
            }
            if comps > 1:
                info["components"] = comps
            dtype = _FORMATS[fmt]
            kept = saved.get("variables", {}).get(name, {})
            attrs = dict(kept.get("attrs", {}))
            attrs["openvds"] = info
            # A U8 or U16 channel with a scale and offset holds floats as integers: a quantized
            # variable, whose stored integers are the channel's and whose values the same
            # min + q * step (its no-value, if any, would need a value beyond the range: kept as integers).
            scale, offset = cd.getIntegerScale(), cd.getIntegerOffset()
            quantized = (fmt in ("Format_U8", "Format_U16") and not per_trace and comps == 1 and not cd.isDiscrete()
                         and not cd.isUseNoValue() and (scale, offset) != (1.0, 0.0) and scale > 0
                         and kept.get("dtype", "float32") == "float32")
            spec: dict[str, Any] = {
                "dtype": "float32" if quantized else kept.get("dtype", dtype), "dims": dims, "unit": cd.getUnit(),
                "codec": codec, "attrs": attrs,
                "chunks": [min(edge if per_trace else edge - sum(margin), a["size"]) for a in axes if a["name"] in grid]
                + ([count] if count > 1 else []) + ([comps] if comps > 1 else []),
            }
            # A margin spans every axis of a variable: a channel of components keeps its values, not the margin.
            if margin != (0, 0) and not per_trace and comps == 1:
                spec["margin"] = list(margin)
            if quantized:
                qmax = 255 if fmt == "Format_U8" else 65535
                spec["quantization"] = (dtype, offset, offset + scale * qmax)
            # Levels of detail: as many as the volume declares, computed by libvds from level 0
            # (averages, or the nearest sample for discrete and integer channels), halving every
            # axis but one OpenVDS keeps at full resolution.
            if lod_levels and not per_trace:
                full = (axes[ndim - 1 - descriptor.getFullResolutionDimension()]["name"]
                        if descriptor.isForceFullResolutionDimension() else None)
                spec["lods"] = lod_levels + 1
                spec["lod_axes"] = [d for d in grid if d != full]
                exact = cd.isDiscrete() or (np.dtype(spec["dtype"]).kind in "biu" and not quantized)
                spec["lod_method"] = "nearest" if exact else "average"
            if cd.isUseNoValue():
                spec["no_value"] = np.array(cd.getNoValue()).astype(spec["dtype"])
            if "fill_value" in kept:
                spec["fill_value"] = kept["fill_value"]
            variables[name] = spec
            channels.append((c, name, fmt, per_trace, count, quantized, comps))
        # OpenVDS marks the traces a survey lacks with 0 in its Trace channel: the first channel
        # gets a missing-value mask there (its values are kept beneath), so that vds export and
        # to_segy leave those traces out. The Trace channel is copied first, to read it from.
        live = next((ch for ch in channels if ch[1] == "Trace" and ch[3] and ch[4] == 1 and ch[6] == 1), None)
        masked = channels[0][1] if live is not None and ndim > 1 and not channels[0][3] and channels[0][6] == 1 else None
        if masked is not None:
            variables[masked]["mask"] = True
            channels.sort(key=lambda ch: ch is not live)
        attrs = dict(saved.get("attrs", {}))
        attrs["openvds"] = {
            "layout": {"brick_size": brick, "negative_margin": descriptor.getNegativeMargin(),
                       "positive_margin": descriptor.getPositiveMargin(),
                       "brick_size_multiplier_2d": descriptor.getBrickSizeMultiplier2D(),
                       "lod_levels": descriptor.getLODLevels().name, "options": int(descriptor.getOptions()),
                       "full_resolution_dimension": descriptor.getFullResolutionDimension()},
            "compression": {"method": ovds.getCompressionMethod(handle).name,
                            "tolerance": ovds.getCompressionTolerance(handle)},
            "metadata": [m for m in metadata if m["category"] != "LibVDS"],
        }
        derived = {k: v for k, v in _segy_attributes(layout, channels, variables, axes, ndim).items() if k not in attrs}
        attrs.update(derived)
        # The SEG-Y headers are kept once, in the segy attribute (where vds export and vds info
        # look), not a second time as base64 in the metadata list; to_openvds puts them back.
        segy = attrs.get("segy") if isinstance(attrs.get("segy"), dict) else {}
        raw = {"TextHeader": segy.get("textual_raw"), "BinaryHeader": segy.get("binary_raw")}
        attrs["openvds"]["metadata"] = [
            m for m in attrs["openvds"]["metadata"]
            if not (m["category"] == "SEGY" and m["type"] == "BLOB" and isinstance(raw.get(m["name"]), str)
                    and base64.b64decode(raw[m["name"]]).startswith(base64.b64decode(m["value"])))
        ]
        try:
            with create(dst_s, axes, variables, attrs, overwrite=overwrite, sync=sync) as out:
                manager = ovds.getAccessManager(handle)
                for c, name, fmt, per_trace, count, quantized, comps in channels:
                    mask_from = out["Trace"] if name == masked else None
                    target = out[name].stored if quantized else out[name]
                    _copy_channel_in(ovds, manager, target, c, fmt, per_trace, count, comps, ndim, buffer_size, src_s,
                                     mask_from)
                if "segy" in derived and "Trace" in out and out["Trace"].ndim == ndim - 1:
                    # OpenVDS marks live traces in its Trace channel: count them, block by block.
                    live = _count_nonzero(out["Trace"], buffer_size)
                    out.attrs["segy"] = {**derived["segy"], "traces": live,
                                         "missing_traces": derived["segy"]["traces"] - live}
        except BaseException:
            _remove(dst_s)
            raise
    finally:
        ovds.close(handle)
    return dst_s


def _libvds_metadata(layout: Any) -> dict[str, Any]:
    """What :func:`to_openvds` kept of a container that OpenVDS cannot say: attributes and dtypes."""
    if layout.isMetadataStringAvailable("LibVDS", "Container"):
        try:
            return json.loads(layout.getMetadataString("LibVDS", "Container"))
        except ValueError:
            return {}
    return {}


def _copy_channel_in(ovds, manager, var, channel, fmt, per_trace, count, comps, ndim, budget, src, live=None) -> None:
    """Copies one channel's level-0 bricks into ``var``, block by block; with ``live`` (the Trace
    variable), the traces where it is 0 are marked missing. The values of a channel of ``comps``
    components come interleaved, the components fastest: the variable's last axis."""
    read_format = getattr(ovds.VolumeDataFormat, "Format_U8" if fmt == "Format_1Bit" else fmt)
    group = getattr(ovds.DimensionsND, _BRICK_GROUP.get(ndim, "Dimensions_012"))
    dtype = np.dtype(_FORMATS["Format_U8" if fmt == "Format_1Bit" else fmt])
    # A quantized variable is written through its stored integers (``var.stored``).
    stored = not hasattr(var, "chunks")
    base = var._var if stored else var
    shape = list(base.shape)
    lead = len(shape) - (count > 1) - (comps > 1)  # axes of the grid (trace axes for per-trace channels)
    for start, box in _blocks(shape, list(base.chunks), dtype.itemsize, budget):
        # OpenVDS dimension 0 is the variable's last axis: the samples, or a per-trace channel's values.
        if per_trace:
            lo = [0] + list(reversed(start[:lead]))
            hi = [count] + [s + n for s, n in zip(reversed(start[:lead]), reversed(box[:lead]))]
        else:
            lo = list(reversed(start[:lead]))
            hi = [s + n for s, n in zip(lo, reversed(box[:lead]))]
        request = manager.requestVolumeSubset(tuple(lo), tuple(hi), dimensionsND=group, lod=0, channel=channel, format=read_format)
        if not request.waitForCompletion():
            raise VdsError(f"{src}: reading channel {base.name!r} at {lo}..{hi} failed: {request.errorMessage}")
        data = np.asarray(request.data_out)[: math.prod(box)].reshape(box)
        # Values come as the channel's format; a dtype kept by to_openvds holds them exactly.
        data = data != 0 if var.dtype == np.bool_ else data.astype(var.dtype, copy=False)
        key = tuple(slice(s, s + n) for s, n in zip(start, box))
        if live is None or stored:
            var[key] = data
        else:
            dead = live[key[:-1]] == 0
            var.write(key, data, missing=np.broadcast_to(dead[..., None], data.shape))


def _count_nonzero(var, budget) -> int:
    n = 0
    for start, box in _blocks(list(var.shape), list(var.chunks), var.dtype.itemsize, budget):
        n += int(np.count_nonzero(var[tuple(slice(a, a + b) for a, b in zip(start, box))]))
    return n


def _number(x: float) -> float | int:
    """A coordinate as an integer when it is one (line numbers), else as it is."""
    return int(x) if float(x).is_integer() else x


def _line(axis: dict[str, Any]) -> list[float | int] | None:
    """[first, last, step] of a line-number axis, as ``vds import`` keeps them, when they are integers."""
    n, first, last = axis["size"], axis["first"], axis["last"]
    step = (last - first) / (n - 1) if n > 1 else 1
    if not all(float(v).is_integer() for v in (first, last, step)):
        return None
    return [int(first), int(last), int(step)]


def _segy_text(text: bytes) -> tuple[str, str]:
    """The textual header as lines of text, and its encoding: ASCII when it reads as printable ASCII, else EBCDIC."""
    ascii_like = sum(32 <= b < 127 for b in text) > 0.9 * len(text)
    decoded = text.decode("ascii", "replace") if ascii_like else text.decode("cp037", "replace")
    lines = [decoded[k:k + 80].rstrip() for k in range(0, len(decoded), 80)]
    return "\n".join(lines).rstrip(), "ascii" if ascii_like else "ebcdic"


def _segy_attributes(layout, channels, variables, axes, ndim) -> dict[str, Any]:
    """The ``segy`` and ``survey_coordinate_system`` attributes of ``vds import`` from SEG-Y metadata."""
    out: dict[str, Any] = {}
    primary = min(channels)[1] if channels else None  # the first channel (the list may be reordered)
    text, binary = _metadata_bytes(layout, "SEGY", "TextHeader"), _metadata_bytes(layout, "SEGY", "BinaryHeader")
    names = {c[1] for c in channels}
    if text is not None and binary is not None and len(binary) == 400 and "SEGYTraceHeader" in names and ndim in (2, 3, 4):
        endian = layout.getMetadataInt("SEGY", "Endianness") if layout.isMetadataIntAvailable("SEGY", "Endianness") else 0
        code = (layout.getMetadataInt("SEGY", "DataSampleFormatCode")
                if layout.isMetadataIntAvailable("SEGY", "DataSampleFormatCode") else 5)
        # The samples are kept as the channel has them (OpenVDS holds IBM floats as R32): the
        # format written back is the file's when it holds that type, else one that does.
        dtype = np.dtype(variables[primary]["dtype"]).name
        if _SEGY_SAMPLE_DTYPES.get(code) != dtype:
            code = next((k for k, d in _SEGY_SAMPLE_DTYPES.items() if d == dtype and k != 1), code)
        order = "little" if endian == 1 else "big"
        sample = axes[ndim - 1]
        interval = int.from_bytes(binary[16:18], order, signed=True)
        if interval <= 0 and sample["size"] > 1:
            interval = (sample["last"] - sample["first"]) / (sample["size"] - 1) * (1e6 if sample.get("unit") == "s" else 1000.0)
        cells = math.prod(a["size"] for a in axes[:ndim - 1])
        lines, encoding = _segy_text(text)
        out["segy"] = {
            "revision": f"{binary[300]}.{binary[301]}",
            "byte_order": order,
            "format": code,
            "textual_encoding": encoding,
            "textual_headers": [lines],
            "textual_raw": base64.b64encode(text).decode(),
            "binary_raw": base64.b64encode(binary).decode(),
            "samples": sample["size"],
            "sample_interval": _number(float(interval)),
            "delay": _number(float(sample["first"])),
            "traces": cells,
            "missing_traces": 0,
            "sorting": "inline",
            "two_d": ndim == 2,
            "variable_length": False,
            # OpenVDS does not record the key bytes: these are the standard's.
            "inline_byte": 189,
            "crossline_byte": 193,
            "offset_byte": 37 if ndim == 4 else None,
            "inlines": None if ndim == 2 else _line(axes[0]),
            "crosslines": _line(axes[0] if ndim == 2 else axes[1]),
            "offsets": _line(axes[2]) if ndim == 4 else None,
            "variable": primary,
            "trace_headers": "SEGYTraceHeader",
            "source": "openvds",
        }
    cat = "SurveyCoordinateSystem"
    if ndim >= 3 and all(layout.isMetadataDoubleVector2Available(cat, k) for k in ("Origin", "InlineSpacing", "CrosslineSpacing")):
        origin = layout.getMetadataDoubleVector2(cat, "Origin")
        il, xl = layout.getMetadataDoubleVector2(cat, "InlineSpacing"), layout.getMetadataDoubleVector2(cat, "CrosslineSpacing")
        # OpenVDS's origin is at inline 0, crossline 0; vds import's at the first inline and crossline.
        i0, x0 = axes[0]["first"], axes[1]["first"]
        out["survey_coordinate_system"] = {
            "origin": [origin[0] + i0 * il[0] + x0 * xl[0], origin[1] + i0 * il[1] + x0 * xl[1]],
            "inline_spacing": list(il), "crossline_spacing": list(xl), "first_inline": _number(i0),
            "first_crossline": _number(x0),
            "unit": _unit_name(layout.getMetadataString(cat, "Unit") if layout.isMetadataStringAvailable(cat, "Unit") else ""),
        }
    return out


def _unit_name(unit: str) -> str:
    return {"m": "m", "ft": "ft", "usft": "ft"}.get(unit, unit)


# --- libvds to OpenVDS ----------------------------------------------------------------------------


def to_openvds(src: str | os.PathLike[str], dst: str | os.PathLike[str], *, variables: Sequence[str] | None = None,
               brick_size: int | None = None, compression: str = "none", overwrite: bool = False,
               buffer_size: int = DEFAULT_BUFFER_SIZE) -> str:
    """Converts the container ``src`` into the OpenVDS volume ``dst`` (a file path).

    The channels are the variables that fit one OpenVDS layout: the primary
    variable (the first of ``variables``; else the one ``vds import`` or
    :func:`from_openvds` made; else the one with the most axes), the
    variables on the same axes, and per-trace variables on its leading axes
    (with one more axis for several values per trace, as the SEG-Y trace
    headers); a variable with one more axis, of 2 or 4 samples, last, is a
    channel of that many components. Other variables are left out with a warning, or refused when
    named in ``variables``. Axes are reversed (the last becomes OpenVDS
    dimension 0), a missing-value mask becomes a ``Trace`` channel, and
    ``segy`` and ``survey_coordinate_system`` attributes become SEGY and
    SurveyCoordinateSystem metadata. Signed integers are stored as R32
    (int8, int16) or R64 (int32, int64) and bools as U8; their dtypes and
    the attributes are kept in the ``LibVDS`` metadata, so
    :func:`from_openvds` gives them back.

    ``brick_size``: 32 to 4096 (default: the one :func:`from_openvds`
    kept, else 64); ``compression``: ``"none"``, ``"zip"`` or ``"rle"``
    (lossless). Value ranges not kept from OpenVDS are computed in a first
    pass. The copy goes brick by brick, reading blocks of at most
    ``buffer_size`` bytes. Needs the ``openvds`` package. Returns ``dst``.

    Raises :class:`AlreadyExistsError` when ``dst`` exists and ``overwrite``
    is false, :class:`InvalidArgumentError` for a variable that fits no
    channel, :class:`UnsupportedError` for fewer than 2 or more than 6 axes
    or int64 values beyond 2^53 (which R64 would round).
    A failed conversion removes ``dst``.
    """
    from . import open as open_

    ovds = _openvds()
    src_s, dst_s = os.fspath(src), os.fspath(dst)
    _check_destination(dst_s, overwrite)
    if compression not in _COMPRESSION:
        raise InvalidArgumentError(f"compression {compression!r}: expected one of {sorted(_COMPRESSION)}")
    with open_(src_s) as ds:
        kept = ds.attrs.get("openvds") if isinstance(ds.attrs.get("openvds"), dict) else {}
        plan = _channel_plan(ds, variables, src_s)
        primary = ds[plan[0][0]]
        pdims = list(primary.dims)
        ndim = len(pdims)
        if not 2 <= ndim <= 6:
            raise UnsupportedError(f"{src_s}: {primary.name!r} has {ndim} axes; OpenVDS volumes have 2 to 6")
        layout_kept = kept.get("layout", {})
        # A 3-D primary variable's margin becomes the volume's, its chunks with their margins the
        # bricks (when that is an OpenVDS brick size and no other was asked for or kept).
        margin = primary.margin if ndim == 3 else (0, 0)
        # (Along axes shorter than a chunk, the chunk is the axis.)
        bricks = {c + sum(margin) for c, n in zip(primary.chunks, primary.shape) if c < n}
        default = min(bricks) if margin != (0, 0) and len(bricks) == 1 and min(bricks) in _BRICK_SIZES else 64
        brick = int(brick_size or layout_kept.get("brick_size", default))
        if brick not in _BRICK_SIZES:
            raise InvalidArgumentError(f"brick_size {brick}: OpenVDS bricks are {sorted(_BRICK_SIZES)} samples")
        if brick <= sum(margin):
            margin = (0, 0)
        LD = ovds.VolumeDataLayoutDescriptor
        # Levels of detail as kept from OpenVDS, else as many as the primary variable has
        # (OpenVDS computes its own from level 0).
        lods = layout_kept.get("lod_levels", f"LODLevels_{min(primary.levels - 1, 12)}" if primary.levels > 1 else "LODLevels_None")
        # Each page, margins included, is written from one box of the container.
        descriptor = LD(getattr(LD.BrickSize, _BRICK_SIZES[brick]), margin[0], margin[1],
                        int(layout_kept.get("brick_size_multiplier_2d", 4)),
                        getattr(LD.LODLevels, lods if hasattr(LD.LODLevels, lods) else "LODLevels_None"),
                        LD.Options.Options_None, int(layout_kept.get("full_resolution_dimension", 0)))
        oaxes = [ovds.VolumeDataAxisDescriptor(ds.axes[d].size, d, ds.axes[d].unit, float(ds.axes[d].first),
                                               float(ds.axes[d].last)) for d in reversed(pdims)]
        channels = [_channel_descriptor(ovds, ds, name, kind, count, comps, budget=buffer_size)
                    for name, kind, count, comps in plan]
        metadata = _metadata_out(ovds, ds, kept, plan, pdims)
        method = getattr(ovds.CompressionMethod, _COMPRESSION[compression])
        try:
            handle = ovds.create(dst_s, "", descriptor, oaxes, channels, metadata, method, 0.0)
        except RuntimeError as e:
            raise InvalidArgumentError(f"{dst_s}: openvds cannot create the volume: {e}") from None
        try:
            manager = ovds.getAccessManager(handle)
            for c, (name, kind, count, comps) in enumerate(plan):
                _copy_channel_out(ovds, manager, ds, c, plan[0][0] if kind == "mask" else name, kind, count, comps, ndim)
            manager.flush()
        except BaseException:
            ovds.close(handle)
            _remove(dst_s)
            raise
        ovds.close(handle)
    return dst_s


def _channel_plan(ds, names, src) -> list[tuple[str, str, int, int]]:
    """(variable, "direct" | "trace" | "mask", values per trace, components) of every channel, the primary first.

    A variable with one axis more than a channel would have, of 2 or 4 samples, is a channel of that
    many components (OpenVDS's Components_2 and Components_4); a per-trace variable's last axis is
    its components only when :func:`from_openvds` said so (its ``openvds`` attribute), else its
    values per trace."""
    attrs = ds.attrs
    segy = attrs.get("segy") if isinstance(attrs.get("segy"), dict) else {}
    if names is not None:
        names = list(names)
        for n in names:
            if n not in ds:
                raise InvalidArgumentError(f"{src}: no variable named {n!r} (variables: {list(ds)})")
        if not names:
            raise InvalidArgumentError("variables: name at least one variable")
        primary = names[0]
    elif segy.get("variable") in ds:
        primary = segy["variable"]
    else:
        firsts = [n for n in ds if isinstance(ds[n].attrs.get("openvds"), dict)
                  and ds[n].attrs["openvds"].get("mapping") == "Direct"]
        # The one with the most axes, not counting a vector's (a variable on another's axes plus one of 2 or 4).
        axes_of = {tuple(ds[n].dims) for n in ds}

        def vector(n):
            return ds[n].ndim > 1 and ds[n].shape[-1] in (2, 4) and tuple(ds[n].dims[:-1]) in axes_of

        primary = firsts[0] if firsts else max(ds, key=lambda n: (not vector(n), ds[n].ndim, -list(ds).index(n)), default=None)
    if primary is None:
        raise InvalidArgumentError(f"{src} holds no variables")
    pdims = tuple(ds[primary].dims)
    plan: list[tuple[str, str, int, int]] = [(primary, "direct", 1, 1)]
    skipped = []
    for n in names[1:] if names is not None else [n for n in ds if n != primary]:
        v = ds[n]
        dims = tuple(v.dims)
        info = v.attrs.get("openvds") if isinstance(v.attrs.get("openvds"), dict) else {}
        # Components as from_openvds kept them, else those a trailing axis of 2 or 4 makes.
        said = info.get("components") if info.get("components") in (2, 4) and v.shape[-1:] == (info.get("components"),) else None
        last = v.shape[-1] if v.ndim and v.shape[-1] in (2, 4) else None
        if dims == pdims:
            plan.append((n, "direct", 1, 1))
        elif dims == pdims[:-1]:
            plan.append((n, "trace", 1, 1))
        elif len(dims) == len(pdims) and dims[:-1] == pdims[:-1]:
            plan.append((n, "trace", 1, said) if said else (n, "trace", v.shape[-1], 1))
        elif last and dims[:-1] == pdims:
            plan.append((n, "direct", 1, last))
        elif said and len(dims) == len(pdims) + 1 and dims[:-2] == pdims[:-1]:
            plan.append((n, "trace", v.shape[-2], said))
        elif names is not None:
            raise InvalidArgumentError(f"{src}: variable {n!r} on axes {dims} fits no OpenVDS channel beside {primary!r} on "
                                       f"{pdims}: a channel spans the same axes, or the leading ones (per trace)")
        else:
            skipped.append(n)
    if skipped:
        warnings.warn(f"{src}: variables {skipped} fit no OpenVDS channel beside {primary!r} on {pdims} and are not converted",
                      stacklevel=3)
    if ds[primary].has_mask and "Trace" not in ds and len(pdims) > 1:
        plan.append(("Trace", "mask", 1, 1))
    return plan


def _value_range(var, budget) -> tuple[Any, Any]:
    """The variable's smallest and largest finite values, read block by block (0, 1 when it has none)."""
    lo, hi = math.inf, -math.inf
    no_value = var.no_value
    data = keep = None
    for start, box in _blocks(list(var.shape), list(var.chunks), var.dtype.itemsize, budget):
        data = keep = None  # the last block goes before the next is read: both at once would double the peak
        data = var[tuple(slice(s, s + n) for s, n in zip(start, box))]
        if data.dtype == np.bool_:
            data = data.astype(np.uint8)
        if data.size == 0:
            continue
        # Python numbers (integers stay exact, for the int64 check of the caller).
        low, high = data.min().item(), data.max().item()
        if math.isfinite(low) and math.isfinite(high) and (no_value is None or not (data == no_value).any()):
            # Every value counts: no copy of the block is made.
            lo, hi = min(lo, low), max(hi, high)
            continue
        keep = np.isfinite(data) if data.dtype.kind == "f" else np.ones(data.shape, bool)
        if no_value is not None:
            keep &= data != no_value
        if keep.any():
            lo, hi = min(lo, data[keep].min().item()), max(hi, data[keep].max().item())
    if lo > hi:
        return 0.0, 1.0
    return (lo, hi) if lo < hi else (lo, lo + 1)


def _channel_descriptor(ovds, ds, name, kind, count, comps, budget):
    C = ovds.VolumeDataChannelDescriptor
    Flags = C.Flags
    if kind == "mask":
        return C(ovds.VolumeDataFormat.Format_U8, ovds.VolumeDataComponents.Components_1, "Trace", "", 0.0, 1.0,
                 ovds.VolumeDataMapping.PerTrace, Flags.DiscreteData)
    var = ds[name]
    info = var.attrs.get("openvds") if isinstance(var.attrs.get("openvds"), dict) else {}
    fmt = _FORMAT_OF[var.dtype.name]
    if info.get("format") in _FORMATS and _FORMATS[info["format"]] == var.dtype.name:
        fmt = info["format"]
    q = var.quantization
    if q is not None:
        # The stored integers become a U8 or U16 channel whose scale and offset give the same values.
        fmt = "Format_U8" if q["storage"] == "uint8" else "Format_U16"
        qmax = 255 if fmt == "Format_U8" else 65535
        info = {**info, "integer_scale": (q["max"] - q["min"]) / qmax, "integer_offset": q["min"],
                "value_range": info.get("value_range", [q["min"], q["max"]])}
    if "value_range" in info:
        lo, hi = (float(x) for x in info["value_range"])
    else:
        lo, hi = _value_range(var, budget)
        if var.dtype == np.int64 and max(abs(lo), abs(hi)) > 2**53:
            raise UnsupportedError(f"variable {name!r}: int64 values up to {max(abs(lo), abs(hi))} do not fit OpenVDS's "
                                   "R64 exactly (at most 2^53)")
        lo, hi = float(lo), float(hi)
    flags = Flags.Default
    default_discrete = var.dtype.kind in "biu" and kind == "trace"
    for on, flag in ((info.get("discrete", default_discrete), Flags.DiscreteData),
                     (not info.get("renderable", True), Flags.NotRenderable),
                     (not info.get("allow_lossy_compression", True) and not info.get("use_zip_for_lossless_compression", False),
                      Flags.NoLossyCompression),
                     (info.get("use_zip_for_lossless_compression", False), Flags.NoLossyCompressionUseZip)):
        if on:
            flags = flag if flags == Flags.Default else ovds.operator_bor(flags, flag)
    mapping = ovds.VolumeDataMapping.PerTrace if kind == "trace" else ovds.VolumeDataMapping.Direct
    no_value = var.no_value
    head = (getattr(ovds.VolumeDataFormat, fmt), getattr(ovds.VolumeDataComponents, f"Components_{comps}"), name, var.unit,
            lo, hi, mapping,
            int(count), flags)
    scale = (float(info.get("integer_scale", 1.0)), float(info.get("integer_offset", 0.0)))
    if no_value is not None:
        return C(*head, float(no_value), *scale)
    return C(*head, *scale)


def _metadata_out(ovds, ds, kept, plan, pdims):
    """The volume's metadata: what an ``openvds`` attribute kept, SEG-Y headers and the survey's
    coordinate system from ``vds import``'s attributes, and what libvds needs back (category LibVDS)."""
    md = ovds.MetadataContainer()
    have = set()

    def put(category, name, kind, value):
        if (category, name) in have:
            return
        have.add((category, name))
        setter = getattr(md, "setMetadata" + kind)
        if kind == "BLOB":
            setter(category, name, np.frombuffer(base64.b64decode(value), np.uint8))
        elif kind.startswith("Int"):
            setter(category, name, tuple(int(x) for x in value) if isinstance(value, list) else int(value))
        elif kind.startswith(("Float", "Double")):
            setter(category, name, tuple(float(x) for x in value) if isinstance(value, list) else float(value))
        else:
            setter(category, name, str(value))

    for m in kept.get("metadata", []):
        try:
            put(m["category"], m["name"], m["type"], m["value"])
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise InvalidArgumentError(f"the openvds attribute's metadata item {m!r} is damaged: {e}") from None
    attrs = dict(ds.attrs)
    segy = attrs.get("segy") if isinstance(attrs.get("segy"), dict) else None
    if segy and isinstance(segy.get("textual_raw"), str) and isinstance(segy.get("binary_raw"), str):
        text = base64.b64decode(segy["textual_raw"])[:3200]
        put("SEGY", "TextHeader", "BLOB", base64.b64encode(text).decode())
        put("SEGY", "BinaryHeader", "BLOB", segy["binary_raw"])
        put("SEGY", "Endianness", "Int", 1 if segy.get("byte_order") == "little" else 0)
        put("SEGY", "DataSampleFormatCode", "Int", int(segy.get("format", 5)))
    survey = attrs.get("survey_coordinate_system")
    if isinstance(survey, dict) and len(pdims) >= 3:
        try:
            il, xl = [float(x) for x in survey["inline_spacing"]], [float(x) for x in survey["crossline_spacing"]]
            i0 = float(survey.get("first_inline", ds.axes[pdims[0]].first))
            x0 = float(survey.get("first_crossline", ds.axes[pdims[1]].first))
            origin = [float(survey["origin"][k]) - i0 * il[k] - x0 * xl[k] for k in (0, 1)]
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise InvalidArgumentError(f"the survey_coordinate_system attribute is damaged: {e}") from None
        put("SurveyCoordinateSystem", "Origin", "DoubleVector2", origin)
        put("SurveyCoordinateSystem", "InlineSpacing", "DoubleVector2", il)
        put("SurveyCoordinateSystem", "CrosslineSpacing", "DoubleVector2", xl)
        if survey.get("unit"):
            put("SurveyCoordinateSystem", "Unit", "String", survey["unit"])
    # What OpenVDS has no place for: the container's own attributes and the variables' dtypes.
    attrs.pop("openvds", None)
    container = {"attrs": attrs, "variables": {}}
    for name, kind, _, _ in plan:
        if kind == "mask":
            continue
        v = ds[name]
        vattrs = dict(v.attrs)
        vattrs.pop("openvds", None)
        container["variables"][name] = {"dtype": v.dtype.name, "attrs": vattrs, "fill_value": v.fill_value.item()}
    put("LibVDS", "Container", "String", json.dumps(container, allow_nan=True))
    return md


def _copy_channel_out(ovds, manager, ds, channel, name, kind, count, comps, ndim) -> None:
    """Writes one channel, brick by brick, from the container (the components of a channel of
    several from the variable's last axis)."""
    group = getattr(ovds.DimensionsND, _BRICK_GROUP.get(ndim, "Dimensions_012"))
    mode = ovds.VolumeDataPageAccessor.AccessMode.AccessMode_Create
    accessor = manager.createVolumeDataPageAccessor(group, 0, channel, 8, mode)
    var = ds[name]  # for the Trace channel made from a mask, the primary variable
    for chunk in range(accessor.getChunkCount()):
        page = accessor.createPage(chunk)
        lo, hi = page.getMinMax()
        buf = np.array(page.getWritableBuffer(), copy=False)
        if kind == "direct":
            box = tuple(slice(a, b) for a, b in zip(reversed(lo[:ndim]), reversed(hi[:ndim])))
            box += (slice(None),) * (comps > 1)
            data = var.stored[box] if var.quantization is not None else var[box]
        else:
            trace_box = tuple(slice(a, b) for a, b in zip(reversed(lo[1:ndim]), reversed(hi[1:ndim])))
            if kind == "mask":
                # A trace is live when any of its samples holds a value.
                data = (~var.mask[trace_box + (slice(None),)].all(axis=-1)).astype(np.uint8)
            else:
                data = var[trace_box + (slice(None),) * (var.ndim - (ndim - 1))]
            data = data.reshape(data.shape[: ndim - 1] + (count,) + ((comps,) if comps > 1 else ()))
        if data.dtype == np.bool_:
            data = data.astype(np.uint8)
        if buf.dtype.names:
            # Components are the fields of a page's records: seen as the values, a page row holds
            # each sample's components in turn.
            buf = buf.view(buf.dtype[0])
        # A page's rows may be padded (its strides say so): assign through its shape, never a reshape.
        buf[...] = data.reshape(buf.shape)
        page.release()
    accessor.commit()
