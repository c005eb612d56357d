"""Error-bounded lossy compression: libvds's bounded codec against zfp
(zfpy, fixed-accuracy mode), SZ3 (pysz, absolute error bound) and
OpenVDS+'s wavelet compression (the openvds wheel), on the same arrays at
the same absolute tolerances, in one run.

    sh .ci/deps.sh                                  # once: target/pyenv with the vds package
    python3 bench/lossy.py --setup                  # once: zfpy and pysz into target/pyenv
    python3 bench/lossy.py [--quick] [--runs 3] [--dir DIR]
    python3 bench/lossy.py --blocks [--quick] [--runs 3]   # libvds: whole chunks or blocks

Data: the native benchmark's smooth 512^3 float32 volume (suite b;
--quick: 256^3), a seismic-like 256 x 256 x 512 float32 volume
(--quick: 128 x 128 x 256): dipping, folded reflectors with a fault,
convolved with a 30 Hz Ricker wavelet along time, plus band-limited noise
(-30 dB), as real post-stack amplitudes look; and a third, half as wide
and from another seed, as field data arrive: written by segyio as SEG-Y
of IBM floats and imported with vds.from_segy. Tolerances are fractions of
each array's value range (1e-2, 1e-3, 1e-4), given to every codec as the
same absolute bound.

zfp's accuracy mode stays well inside its tolerance, so each table also
has zfp at the loosest power-of-two multiple of the tolerance whose
maximum error still meets the bound: the comparison at the same maximum
error. The wavelet's tolerance is a parameter of its own (in percent of
the value range, by OpenVDS's documentation, and not a bound), so it gets
the same treatment: the loosest tolerance on a ladder of powers of two
from 100 times the fraction of the range whose maximum error meets the
bound (a file of 64^3 bricks without levels of detail, written page by
page and read whole with one request). For each codec and tolerance: compression ratio (raw bytes / compressed
bytes; for libvds, the whole file, 64^3 chunks, and in a second row
128^3 chunks, metadata included: each chunk is compressed on its own so
that any brick reads alone, and larger ones share more of the coarse
levels, as SZ3's one stream for the whole array does),
maximum and RMS error, PSNR (value range / RMS error), how many values
exceed the bound (checked on every value, in float64, where the difference
of two float32 values is exact), and encode and decode speed (median of
--runs; libvds writes and commits a file without fsync and reads it back
whole, the others compress and decompress in memory). Output: Markdown.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(ROOT, "target", "pyenv")
PEERS = ["zfpy==1.0.1.post0", "pysz==1.1.0"]

if "--setup" in sys.argv:
    if not os.path.exists(os.path.join(VENV, "bin", "python")):
        sys.exit("run `sh .ci/deps.sh` first (it makes target/pyenv with the vds package)")
    subprocess.check_call([os.path.join(VENV, "bin", "pip"), "install", "-q", *PEERS])
    sys.exit(0)
if os.path.realpath(sys.prefix) != os.path.realpath(VENV):
    python = os.path.join(VENV, "bin", "python")
    if not os.path.exists(python):
        sys.exit("run `sh .ci/deps.sh` and `python3 bench/lossy.py --setup` first")
    os.execv(python, [python, *sys.argv])

import numpy as np  # noqa: E402
import openvds  # noqa: E402
import pysz  # noqa: E402
import zfpy  # noqa: E402

import vds  # noqa: E402


def smooth(n):
    """The native benchmark's suite-b volume (bench/bench.rs `volume`)."""
    x = (np.arange(n, dtype=np.float32) / np.float32(n))[:, None, None]
    y = (np.arange(n, dtype=np.float32) / np.float32(n))[None, :, None]
    z = (np.arange(n, dtype=np.float32) / np.float32(n))[None, None, :]
    return (np.sin(6 * x + 2 * y) * np.cos(9 * z + 3 * x * y) + np.float32(0.25) * np.sin(17 * z)).astype(np.float32)


def seismic(ni, nx, nt, seed=7):
    """Post-stack-like amplitudes: layered reflectivity along folded, dipping
    horizons with a normal fault, convolved with a Ricker wavelet, plus
    band-limited noise."""
    rng = np.random.default_rng(seed)
    dt = 0.004
    # Reflectivity as a function of (relative) depth: sparse, signed.
    depth = np.zeros(nt * 2, np.float64)
    spikes = rng.choice(len(depth), size=len(depth) // 6, replace=False)
    depth[spikes] = rng.laplace(0.0, 0.08, size=len(spikes))
    i = np.arange(ni)[:, None]
    j = np.arange(nx)[None, :]
    shift = 0.15 * i + 0.08 * j + 12.0 * np.sin(i / 37.0) * np.cos(j / 53.0)
    shift = shift + np.where(i + 0.6 * j > 0.8 * ni, 18.0, 0.0)  # the fault's throw
    t = np.arange(nt)[None, None, :]
    pos = t + shift[:, :, None] + nt // 4
    lo = np.clip(np.floor(pos).astype(np.int64), 0, len(depth) - 2)
    w = pos - np.floor(pos)
    refl = depth[lo] * (1 - w) + depth[lo + 1] * w
    # Ricker wavelet, 30 Hz, convolved along time.
    tw = np.arange(-32, 33) * dt
    a = (np.pi * 30.0 * tw) ** 2
    ricker = (1 - 2 * a) * np.exp(-a)
    spec = np.fft.rfft(refl, n=nt + 64, axis=2) * np.fft.rfft(ricker, n=nt + 64)[None, None, :]
    trace = np.fft.irfft(spec, n=nt + 64, axis=2)[:, :, 32:32 + nt]
    noise = rng.standard_normal(trace.shape)
    band = np.fft.rfft(noise, axis=2)
    f = np.fft.rfftfreq(nt, dt)
    band *= ((f > 8) & (f < 80))[None, None, :]
    noise = np.fft.irfft(band, n=nt, axis=2)
    noise *= 0.03 * trace.std() / noise.std()
    return (trace + noise).astype(np.float32) * np.float32(1000.0)


def through_segy(make, work):
    """The array ``make()`` gives as field data arrive: written by segyio as
    SEG-Y of IBM floats (format 1, 4 ms), then imported with
    ``vds.from_segy`` as a user would; returns the imported amplitudes
    (IBM's rounding included)."""
    import segyio

    sgy, mid = os.path.join(work, "survey.sgy"), os.path.join(work, "survey-import.vds")
    segyio.tools.from_array(sgy, make(), format=1, dt=4000)
    vds.from_segy(sgy, mid)
    with vds.open(mid) as ds:
        out = ds["amplitude"][...]
    os.remove(sgy)
    os.remove(mid)
    return out


def median_time(fn, runs):
    # The last result is dropped before each run: a 512 MiB array kept
    # alive while the next one is made costs the kernel fresh (huge) pages
    # every time, 0.5 s or more here, which the timing would charge to
    # whichever codec ran.
    times, out = [], None
    for _ in range(runs):
        out = None
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def errors(a, b, tol):
    d = np.abs(b.astype(np.float64) - a.astype(np.float64))
    rng = float(a.max()) - float(a.min())
    rms = float(np.sqrt(np.mean(d * d)))
    psnr = 20 * np.log10(rng / rms) if rms > 0 else float("inf")
    return float(d.max()), rms, psnr, int(np.count_nonzero(d > tol))


def run_vds(a, tol, runs, work, side=64):
    path = os.path.join(work, "lossy.vds")
    chunks = [min(side, n) for n in a.shape]

    def encode():
        with vds.create(path, axes=[(f"d{k}", n) for k, n in enumerate(a.shape)], sync=False, overwrite=True,
                        variables={"v": {"dtype": "float32", "dims": [f"d{k}" for k in range(a.ndim)], "chunks": chunks,
                                         "codec": f"bounded:{tol!r}"}}) as ds:
            ds["v"][...] = a

    def decode():
        with vds.open(path) as ds:
            return np.asarray(ds["v"])

    te, _ = median_time(encode, runs)
    td, back = median_time(decode, runs)
    return os.path.getsize(path), te, td, back


def run_zfp(a, tol, runs, work):
    te, z = median_time(lambda: zfpy.compress_numpy(a, tolerance=tol), runs)
    td, back = median_time(lambda: zfpy.decompress_numpy(z), runs)
    return len(z), te, td, back


def run_sz(a, tol, runs, work):
    config = pysz.szConfig()
    config.errorBoundMode = pysz.szErrorBoundMode.ABS
    config.absErrorBound = tol
    te, (z, _) = median_time(lambda: pysz.sz.compress(a, config), runs)
    td, (back, _) = median_time(lambda: pysz.sz.decompress(z, np.float32, a.shape), runs)
    return z.nbytes, te, td, back


def run_wavelet(a, tol, runs, work):
    """OpenVDS+'s wavelet compression (the openvds wheel) at its own
    tolerance parameter `tol`: 64^3 bricks, no levels of detail, written
    page by page and read back whole with one request."""
    path = os.path.join(work, "wavelet.vds")
    lo, hi = float(a.min()), float(a.max())
    layout = openvds.VolumeDataLayoutDescriptor
    page_mode = openvds.VolumeDataPageAccessor.AccessMode.AccessMode_Create

    def encode():
        if os.path.exists(path):
            os.remove(path)
        # OpenVDS's dimension 0 is the array's last axis.
        axes = [openvds.VolumeDataAxisDescriptor(a.shape[d], f"d{d}", "", 0.0, float(a.shape[d] - 1)) for d in (2, 1, 0)]
        channel = openvds.VolumeDataChannelDescriptor(openvds.VolumeDataFormat.Format_R32,
                                                      openvds.VolumeDataComponents.Components_1, "v", "", lo, hi)
        handle = openvds.create(path, "", layout(layout.BrickSize.BrickSize_64, 0, 0, 4, layout.LODLevels.LODLevels_None,
                                                 layout.Options.Options_None, 0),
                                axes, [channel], openvds.MetadataContainer(), openvds.CompressionMethod.Wavelet, tol)
        manager = openvds.getAccessManager(handle)
        pages = manager.createVolumeDataPageAccessor(openvds.DimensionsND.Dimensions_012, 0, 0, 8, page_mode)
        for chunk in range(pages.getChunkCount()):
            page = pages.createPage(chunk)
            plo, phi = page.getMinMax()
            buf = np.array(page.getWritableBuffer(), copy=False)
            buf[...] = a[tuple(slice(x, y) for x, y in zip(reversed(plo[:3]), reversed(phi[:3])))].reshape(buf.shape)
            page.release()
        pages.commit()
        manager.flush()
        openvds.close(handle)

    def decode():
        handle = openvds.open(path, "")
        request = openvds.getAccessManager(handle).requestVolumeSubset(
            (0, 0, 0), tuple(reversed(a.shape)), dimensionsND=openvds.DimensionsND.Dimensions_012, lod=0, channel=0,
            format=openvds.VolumeDataFormat.Format_R32)
        if not request.waitForCompletion():
            raise RuntimeError(f"openvds: {request.errorMessage}")
        # The request's own array, which outlives the handle.
        back = np.asarray(request.data_out)[: a.size].reshape(a.shape)
        openvds.close(handle)
        return back

    te, _ = median_time(encode, runs)
    td, back = median_time(decode, runs)
    return os.path.getsize(path), te, td, back


def wavelet_at(a, bound, rel, work):
    """The loosest wavelet tolerance, on a ladder of powers of two from
    100 * rel (OpenVDS states its tolerance in percent of the value range),
    whose maximum error meets `bound`: the comparison at the same maximum
    error. None when no tolerance on the ladder meets it."""
    def meets(t):
        return errors(a, run_wavelet(a, t, 1, work)[3], bound)[3] == 0
    t = 100 * rel
    if meets(t):
        for _ in range(8):
            if not meets(2 * t):
                break
            t *= 2
        return t
    for _ in range(8):
        t /= 2
        if meets(t):
            return t
    return None


CODECS = [("libvds bounded", run_vds), ("libvds bounded, 128^3 chunks", lambda *x: run_vds(*x, side=128)),
          ("zfp (zfpy, accuracy)", run_zfp), ("SZ3 (pysz, ABS)", run_sz)]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="smaller arrays")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--dir", default=None, help="scratch directory (default: a temporary one)")
    p.add_argument("--setup", action="store_true", help="install the peers (done above)")
    p.add_argument("--blocks", action="store_true",
                   help="instead: libvds alone on the seismic-like volume, whole 64^3 chunks against blocks inside them")
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="vds-lossy-", dir=args.dir)
    if args.blocks:
        try:
            blocks(args, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    try:
        n = 256 if args.quick else 512
        data = [(f"smooth {n}^3 (bench suite b)", lambda: smooth(n))]
        s = (128, 128, 256) if args.quick else (256, 256, 512)
        data.append((f"seismic-like {s[0]}x{s[1]}x{s[2]}", lambda: seismic(*s)))
        s2 = (s[0], s[1] // 2, s[2])
        data.append((f"SEG-Y by segyio (IBM floats), imported: seismic-like {s2[0]}x{s2[1]}x{s2[2]}, another seed",
                     lambda: through_segy(lambda: seismic(*s2, seed=11), work)))
        print(f"vds {vds.__version__}, zfpy {getattr(zfpy, '__version__', '?')}, pysz {PEERS[1]}; "
              f"median of {args.runs} runs; ratio = raw bytes / compressed bytes\n")
        for name, make in data:
            a = make()
            rng = float(a.max()) - float(a.min())
            mib = a.nbytes / 2**20
            print(f"### {name}: {mib:.0f} MiB, value range {rng:.4g}\n")
            print("| tolerance (of range) | codec | ratio | max error | max / tolerance | RMS error | PSNR dB "
                  "| values beyond bound | encode MiB/s | decode MiB/s |")
            print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
            for rel in (1e-2, 1e-3, 1e-4):
                tol = rel * rng
                for label, run in CODECS:
                    back = None  # (see median_time)
                    size, te, td, back = run(a, tol, args.runs, work)
                    mx, rms, psnr, beyond = errors(a, back, tol)
                    print(f"| {tol:.4g} ({rel:g}) | {label} | {a.nbytes / size:.2f} | {mx:.4g} | {mx / tol:.3f} | {rms:.4g} "
                          f"| {psnr:.1f} | {beyond} | {mib / te:.0f} | {mib / td:.0f} |", flush=True)
                # zfp's accuracy mode keeps well inside its tolerance, so it is
                # also given the loosest multiple of the tolerance whose
                # maximum error still meets the bound: the same maximum error.
                loosest = None
                for mult in (2, 4, 8, 16, 32):
                    z = zfpy.compress_numpy(a, tolerance=tol * mult)
                    if errors(a, zfpy.decompress_numpy(z), tol)[3] == 0:
                        loosest = mult
                    else:
                        break
                if loosest:
                    back = None
                    size, te, td, back = run_zfp(a, tol * loosest, args.runs, work)
                    mx, rms, psnr, beyond = errors(a, back, tol)
                    print(f"| {tol:.4g} ({rel:g}) | zfp, tolerance x{loosest} | {a.nbytes / size:.2f} | {mx:.4g} | {mx / tol:.3f} "
                          f"| {rms:.4g} | {psnr:.1f} | {beyond} | {mib / te:.0f} | {mib / td:.0f} |", flush=True)
                back = None
                tw = wavelet_at(a, tol, rel, work)
                if tw is not None:
                    size, te, td, back = run_wavelet(a, tw, args.runs, work)
                    mx, rms, psnr, beyond = errors(a, back, tol)
                    print(f"| {tol:.4g} ({rel:g}) | OpenVDS wavelet, its tolerance {tw:g} | {a.nbytes / size:.2f} | {mx:.4g} "
                          f"| {mx / tol:.3f} | {rms:.4g} | {psnr:.1f} | {beyond} | {mib / te:.0f} | {mib / td:.0f} |", flush=True)
            print()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def blocks(args, work):
    """Ratio, and the time of 200 random traces (the time axis whole) read
    from a freshly opened file (best of --runs), with whole 64^3 chunks and
    with blocks inside them."""
    s = (128, 128, 256) if args.quick else (256, 256, 512)
    a = seismic(*s)
    rng = float(a.max()) - float(a.min())
    print(f"### seismic-like {s[0]}x{s[1]}x{s[2]}, 64^3 chunks: whole or in blocks (best of {args.runs})\n")
    print("| tolerance (of range) | blocks | ratio | 200 traces | values beyond bound |")
    print("|---|---|---:|---:|---:|")
    path = os.path.join(work, "blocks.vds")
    for rel in (1e-2, 1e-3):
        tol = rel * rng
        for shape in (False, [32, 32, 32], [16, 16, 64]):
            var = {"dtype": "float32", "dims": ["i", "j", "k"], "chunks": [64, 64, 64], "codec": f"bounded:{tol!r}", "blocks": shape}
            with vds.create(path, axes=[("i", s[0]), ("j", s[1]), ("k", s[2])], variables={"v": var}, sync=False,
                            overwrite=True) as ds:
                ds["v"][...] = a
            best = float("inf")
            for _ in range(args.runs):
                r = np.random.default_rng(1)
                with vds.open(path) as ds:
                    v = ds["v"]
                    t = time.perf_counter()
                    for _ in range(200):
                        i, j = r.integers(0, s[0]), r.integers(0, s[1])
                        v[i, j, :]
                    best = min(best, time.perf_counter() - t)
            with vds.open(path) as ds:
                beyond = errors(a, np.asarray(ds["v"]), tol)[3]
            label = "whole chunks" if shape is False else "x".join(map(str, shape))
            print(f"| {tol:.4g} ({rel:g}) | {label} | {a.nbytes / os.path.getsize(path):.2f} | {best * 1000:.0f} ms | {beyond} |",
                  flush=True)


if __name__ == "__main__":
    main()
