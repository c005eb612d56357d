"""SEG-Y files for tool/tests/segy.rs, written by segyio, and the checks of
what libvds made of them, read back with segyio and NumPy.

    python segy_cases.py make DIR      writes DIR/<case>.sgy and DIR/<case>.expect.npz
    python segy_cases.py check DIR     compares DIR/<case>.*.npy (exported by vds) with them

Each case's expected volume, mask and trace headers come from segyio's own
reading of the file (f.header, f.trace), placed in the grid by inline and
crossline, so the comparison is with segyio, not with this script's intent.
"""
import json, struct, sys, os
import numpy as np
import segyio

FORMATS = {1: "f4", 2: "i4", 3: "i2", 5: "f4", 6: "f8", 8: "i1", 9: "i8", 10: "u4", 11: "u2", 12: "u8", 16: "u1"}


def values(fmt, shape, rng):
    kind = np.dtype(FORMATS[fmt])
    if kind.kind == "f":
        v = rng.standard_normal(shape) * 1000
        # Extremes IBM and IEEE both hold, and exact zeros.
        v.flat[::17] = 0.0
        v.flat[5::23] = 3.0e37
        v.flat[7::29] = -1.5e-30
        return v.astype(kind)
    info = np.iinfo(kind)
    return rng.integers(info.min, info.max, size=shape, dtype=kind, endpoint=True)


def write(path, fmt, endian, traces, ns, ext_headers=0, offsets=False):
    """traces: list of (inline, crossline, offset, samples) in file order."""
    spec = segyio.spec()
    spec.iline, spec.xline = 189, 193
    spec.format = fmt
    spec.samples = list(range(ns))
    spec.tracecount = len(traces)
    spec.endian = endian
    spec.ext_headers = ext_headers
    with segyio.create(path, spec) as f:
        for k in range(ext_headers):
            f.text[k + 1] = ("C 1 extended textual header %d of %d" % (k + 1, ext_headers)).ljust(3200)
        f.bin.update(hdt=2000, dto=2000, hns=ns, format=fmt, mfeet=1)
        for t, (il, xl, off, data) in enumerate(traces):
            f.header[t] = {
                segyio.su.tracl: t + 1, segyio.su.tracr: t + 1, segyio.su.cdp: xl, segyio.su.offset: off,
                segyio.su.ns: ns, segyio.su.dt: 2000, segyio.su.delrt: 40,
                segyio.su.scalco: -10, segyio.su.cdpx: int((1000 + 25 * il + 3 * xl) * 10), segyio.su.cdpy: int((2000 + 4 * il + 12.5 * xl) * 10),
                segyio.su.iline: il, segyio.su.xline: xl,
            }
            f.trace[t] = data


def grid_cases(rng):
    cases = {}
    il, xl, ns = [10, 11, 12], [100, 102, 104, 106], 9
    for fmt in FORMATS:
        for endian in ("big", "little"):
            vol = values(fmt, (3, 4, ns), rng)
            tr = [(i, x, 0, vol[a, b]) for a, i in enumerate(il) for b, x in enumerate(xl)]
            cases["fmt%d-%s" % (fmt, endian)] = (fmt, endian, tr, ns, {})
    vol = values(1, (3, 4, ns), rng)
    bycross = [(i, x, 0, vol[a, b]) for b, x in enumerate(xl) for a, i in enumerate(il)]
    cases["crossline-sorted"] = (1, "big", bycross, ns, {})
    order = rng.permutation(len(bycross))
    cases["unsorted-missing"] = (5, "big", [bycross[k] for k in order if k not in (2, 7)], ns, {})
    cases["extended-text"] = (5, "big", bycross[::-1][::-1], ns, {"ext_headers": 2})
    pre = values(5, (2, 3, 4, ns), rng)
    cases["prestack"] = (5, "big", [(10 + a, 20 + b, 100 * (c + 1), pre[a, b, c]) for a in range(2) for b in range(3) for c in range(4)], ns, {})
    line = values(3, (7, ns), rng)
    cases["2d"] = (3, "big", [(1, 500 + k, 0, line[k]) for k in range(7)], ns, {})
    return cases


def make(d):
    rng = np.random.default_rng(18)
    for name, (fmt, endian, tr, ns, opts) in grid_cases(rng).items():
        write(os.path.join(d, name + ".sgy"), fmt, endian, tr, ns, **opts)
    print(len(grid_cases(np.random.default_rng(18))))


def field_sizes():
    pos = sorted(int(f) for f in segyio.TraceField.enums())
    return {p: (pos[k + 1] - p if k + 1 < len(pos) else 8) for k, p in enumerate(pos)}


def check(d):
    sizes = field_sizes()
    n = 0
    for name in sorted(json.load(open(os.path.join(d, "cases.json")))):
        endian = "little" if name.endswith("little") else "big"
        e = "<" if endian == "little" else ">"
        info = json.load(open(os.path.join(d, name + ".info.json")))
        axes = [a["name"] for a in info["axes"]]
        vol = np.load(os.path.join(d, name + ".amp.npy"))
        heads = np.load(os.path.join(d, name + ".head.npy"))
        mask = np.load(os.path.join(d, name + ".mask.npy")) if os.path.exists(os.path.join(d, name + ".mask.npy")) else None
        seg = info["attributes"]["segy"]
        with segyio.open(os.path.join(d, name + ".sgy"), ignore_geometry=True, endian=endian) as f:
            assert vol.dtype == f.dtype.newbyteorder("="), (name, vol.dtype, f.dtype)
            # Textual headers, as segyio decodes them.
            texts = [segyio.tools.wrap(f.text[k].decode("latin-1")) for k in range(1 + f.ext_headers)]
            assert len(seg["textual_headers"]) == len(texts), name
            # libvds decodes EBCDIC as code page 037, segyio with the POSIX
            # dd table; they differ only for a few symbols (| ! [ ] ^ and
            # the like), so those are compared as '?'.
            plain = lambda text: ["".join(c if c.isalnum() or c in " .,:-()" else "?" for c in l.rstrip()) for l in text.splitlines()]
            for got, want in zip(seg["textual_headers"], texts):
                assert plain(got) == plain(want)[: len(plain(got))], (name, got[:200], want[:200])
            # Binary header fields by name.
            b = seg["binary_header"]
            assert b["samples"] == f.bin[segyio.su.hns] and b["sample_interval"] == f.bin[segyio.su.hdt], name
            assert b["format"] == f.bin[segyio.su.format] and b["extended_textual_headers"] == f.ext_headers, name
            seen = np.zeros(vol.shape[:-1], dtype=bool)
            il0, xl0 = seg["inlines"][0], seg["crosslines"][0]
            ilstep, xlstep = seg["inlines"][2], seg["crosslines"][2]
            for t in range(f.tracecount):
                h = f.header[t]
                il, xl, off = h[segyio.su.iline], h[segyio.su.xline], h[segyio.su.offset]
                if axes[0] == "cdp":
                    cell = ((xl - xl0) // xlstep,)
                else:
                    cell = ((il - il0) // ilstep, (xl - xl0) // xlstep)
                if "offset" in axes:
                    cell += ((off - seg["offsets"][0]) // seg["offsets"][2],)
                seen[cell] = True
                want = f.trace[t]
                got = vol[cell]
                assert np.array_equal(got, want, equal_nan=True), (name, t, got[:4], want[:4])
                raw = heads[cell].tobytes()
                for pos, value in h.items():
                    size = sizes[int(pos)]
                    if size not in (2, 4):
                        continue
                    code = {2: "h", 4: "i"}[size]
                    mine = struct.unpack(e + code, raw[int(pos) - 1:int(pos) - 1 + size])[0]
                    assert mine == value or (size == 2 and mine & 0xFFFF == value & 0xFFFF), (name, t, pos, mine, value)
                n += 1
            if mask is not None:
                assert np.array_equal(mask[..., 0], ~seen), (name, mask[..., 0], seen)
                assert np.all(vol[~seen] == 0) and np.all(heads[~seen] == 0), name
            else:
                assert seen.all(), name
    print("checked", n)


def readback(d):
    """Files libvds exported: segyio reads them, values as the .npy says."""
    n = 0
    for name in sorted(json.load(open(os.path.join(d, "exports.json")))):
        want = np.load(os.path.join(d, name + ".npy"))
        with segyio.open(os.path.join(d, name + ".sgy"), ignore_geometry=want.ndim < 3) as f:
            if want.ndim == 4:
                got = segyio.tools.cube(f)
                assert list(f.offsets) == [1, 2], f.offsets
            elif want.ndim == 3:
                got = segyio.tools.cube(f)
                assert list(f.ilines) == list(range(5, 5 + 2 * want.shape[0], 2)), f.ilines
            else:
                got = f.trace.raw[:].reshape(want.shape)
            assert np.array_equal(got, want), (name, got.ravel()[:5], want.ravel()[:5])
            assert list(f.samples[:2]) == [100.0, 104.0], f.samples[:2]
            n += 1
    print("read", n)


if __name__ == "__main__":
    {"make": make, "check": check, "readback": readback}[sys.argv[1]](sys.argv[2])
