"""libvds beside its peers, on the same workloads, in one run.

    python3 bench/peers.py --setup          # creates target/bench-venv with the peers (pip)
    python3 bench/peers.py [--quick] [--suite a,b,c] [--dir DIR]

Systems: a plain file (the floor), libvds (through python/vds.py over the
C ABI), h5py, netCDF4, zarr v3, tensorstore (zarr v3 driver), ds-format and
blosc2. Every table gives each
system's median time, throughput and size on disk, its time divided by
libvds's, and by the floor's. Files are written without fsync by all
systems. Warm OS cache; each timed read opens its file afresh.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(ROOT, "target", "bench-venv")
PEERS = ["numpy", "h5py", "netCDF4", "zarr>=3", "ds-format", "blosc2", "tensorstore"]

if "--setup" in sys.argv:
    subprocess.check_call([sys.executable, "-m", "venv", VENV])
    subprocess.check_call([os.path.join(VENV, "bin", "pip"), "install", "-q", *PEERS])
    subprocess.check_call(["cargo", "build", "--release", "--lib", "--manifest-path", os.path.join(ROOT, "Cargo.toml")])
    sys.exit(0)
if os.path.realpath(sys.prefix) != os.path.realpath(VENV):
    python = os.path.join(VENV, "bin", "python")
    if not os.path.exists(python):
        sys.exit("run `python3 bench/peers.py --setup` first")
    os.execv(python, [python, *sys.argv])

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ.setdefault("VDS_LIBRARY", os.path.join(ROOT, "target", "release", "libvds.so"))
import vds  # noqa: E402

import blosc2  # noqa: E402
import ds_format  # noqa: E402
import h5py  # noqa: E402
import netCDF4  # noqa: E402
import tensorstore as ts  # noqa: E402
import zarr  # noqa: E402


def median_time(reps, fn):
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def size_of(path):
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
    return os.path.getsize(path) if os.path.exists(path) else 0


def rm(path):
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)


DIMS = ["i", "j", "k"]


class Floor:
    name, ext = "plain file", ".bin"

    def write(self, path, a, chunks, level):
        with open(path, "wb") as f:
            f.write(a.tobytes())

    def read(self, path, dtype, shape):
        with open(path, "rb") as f:
            return np.frombuffer(f.read(), dtype).reshape(shape)


class Vds:
    name, ext = "libvds", ".vds"

    def write(self, path, a, chunks, level):
        dims = DIMS[: a.ndim]
        codec = ("deflate", level) if level else None
        with vds.create(path, [(d, n) for d, n in zip(dims, a.shape)], [("v", a.dtype.name, dims, list(chunks) if chunks else None, codec)],
                        overwrite=True, sync=False) as ds:
            ds.write("v", a)

    def read(self, path, dtype, shape):
        with vds.open(path) as ds:
            return ds.read("v")

    def opener(self, path):
        return vds.open(path)

    def region(self, h, start, shape):
        return h.read("v", start=start, shape=shape)


class H5:
    name, ext = "h5py", ".h5"

    def write(self, path, a, chunks, level):
        with h5py.File(path, "w") as f:
            kw = dict(compression="gzip", compression_opts=level, shuffle=True) if level else {}
            f.create_dataset("v", data=a, chunks=tuple(chunks) if chunks else None, **kw)

    def read(self, path, dtype, shape):
        with h5py.File(path, "r") as f:
            return f["v"][...]

    def opener(self, path):
        return h5py.File(path, "r")

    def region(self, h, start, shape):
        return h["v"][tuple(slice(s, s + n) for s, n in zip(start, shape))]


class Nc:
    name, ext = "netCDF4", ".nc"

    def write(self, path, a, chunks, level):
        with netCDF4.Dataset(path, "w") as f:
            for d, n in zip(DIMS, a.shape):
                f.createDimension(d, n)
            v = f.createVariable("v", a.dtype, DIMS[: a.ndim], chunksizes=tuple(chunks) if chunks else None,
                                 zlib=bool(level), complevel=level or 4, shuffle=bool(level))
            v[...] = a

    def read(self, path, dtype, shape):
        with netCDF4.Dataset(path, "r") as f:
            f.set_auto_mask(False)
            return f["v"][...]

    def opener(self, path):
        f = netCDF4.Dataset(path, "r")
        f.set_auto_mask(False)
        return f

    def region(self, h, start, shape):
        return h["v"][tuple(slice(s, s + n) for s, n in zip(start, shape))]


class Zarr:
    name, ext = "zarr v3", ".zarr"

    def write(self, path, a, chunks, level):
        rm(path)
        comp = zarr.codecs.GzipCodec(level=level) if level else None
        z = zarr.create_array(store=path, shape=a.shape, chunks=tuple(chunks) if chunks else a.shape, dtype=a.dtype,
                              compressors=comp, zarr_format=3)
        z[...] = a

    def read(self, path, dtype, shape):
        return zarr.open_array(path, mode="r")[...]

    def opener(self, path):
        return zarr.open_array(path, mode="r")

    def region(self, h, start, shape):
        return h[tuple(slice(s, s + n) for s, n in zip(start, shape))]


class Ds:
    name, ext = "ds-format", ".ds"

    def write(self, path, a, chunks, level):
        ds_format.write(path, {"v": a, ".": {"v": {".dims": DIMS[: a.ndim]}}})

    def read(self, path, dtype, shape):
        return ds_format.read(path)["v"]


class Blosc:
    name, ext = "blosc2", ".b2nd"

    def write(self, path, a, chunks, level):
        rm(path)
        cp = {"codec": blosc2.Codec.ZLIB, "clevel": level, "filters": [blosc2.Filter.SHUFFLE]} if level else {"clevel": 0}
        blosc2.asarray(a, urlpath=path, mode="w", chunks=tuple(chunks) if chunks else None, cparams=cp)

    def read(self, path, dtype, shape):
        return blosc2.open(path)[...]

    def opener(self, path):
        return blosc2.open(path)

    def region(self, h, start, shape):
        return h[tuple(slice(s, s + n) for s, n in zip(start, shape))]


class Ts:
    name, ext = "tensorstore", ".ts.zarr"

    def write(self, path, a, chunks, level):
        codecs = [{"name": "bytes", "configuration": {"endian": "little"}}]
        if level:
            codecs.append({"name": "gzip", "configuration": {"level": level}})
        spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": path},
                "metadata": {"shape": list(a.shape), "data_type": a.dtype.name, "codecs": codecs,
                             "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks or a.shape)}}}}
        ts.open(spec, create=True, delete_existing=True).result().write(a).result()

    def read(self, path, dtype, shape):
        return self.opener(path).read().result()

    def opener(self, path):
        return ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": path}}).result()

    def region(self, h, start, shape):
        return h[tuple(slice(s, s + n) for s, n in zip(start, shape))].read().result()


SYSTEMS = [Floor(), Vds(), H5(), Nc(), Zarr(), Ts(), Ds(), Blosc()]


def table(title, rows):
    """rows: (operation, system, seconds, bytes moved, bytes on disk)."""
    print(f"\n### {title}\n")
    print("| operation | system | time | throughput | on disk | / libvds | / floor |")
    print("|---|---|---:|---:|---:|---:|---:|")
    ref = {(op): s for op, sysname, s, _, _ in rows if sysname == "libvds"}
    floor = {(op): s for op, sysname, s, _, _ in rows if sysname == "plain file"}
    for op, sysname, s, moved, disk in rows:
        tp = f"{moved / s / 2**20:.0f} MiB/s" if moved and s > 0 else "-"
        dk = f"{disk / 2**20:.2f} MiB" if disk else "-"
        r = f"{s / ref[op]:.2f}" if op in ref else "-"
        f = f"{s / floor[op]:.2f}" if op in floor else "-"
        t = f"{s * 1e3:.2f} ms" if s < 1 else f"{s:.2f} s"
        print(f"| {op} | {sysname} | {t} | {tp} | {dk} | {r} | {f} |")
    sys.stdout.flush()


def suite_a(o):
    n = 200 if o.quick else 1000
    d = os.path.join(o.dir, "a")
    os.makedirs(d, exist_ok=True)
    rows = []
    for label, a in [("tiny files (one int64)", np.array([42], np.int64)), ("small files (arange(1000) int64)", np.arange(1000, dtype=np.int64))]:
        for s in SYSTEMS:
            paths = [os.path.join(d, f"{s.name.replace(' ', '_')}{i}{s.ext}") for i in range(n)]
            w = median_time(3, lambda: [s.write(p, a, None, 0) for p in paths])
            r = median_time(3, lambda: [s.read(p, a.dtype, a.shape) for p in paths])
            assert np.array_equal(s.read(paths[0], a.dtype, a.shape), a), s.name
            rows.append((f"write {n} {label}", s.name, w, a.nbytes * n, size_of(paths[0])))
            rows.append((f"read {n} {label}", s.name, r, a.nbytes * n, 0))
    planes = 20 if o.quick else 100
    a = (np.arange(planes * 1000 * 1000, dtype=np.float64) % 7919).reshape(planes, 1000, 1000)
    for s in SYSTEMS:
        p = os.path.join(d, "large" + s.ext)
        w = median_time(3, lambda: s.write(p, a, (1, 250, 1000), 0))
        r = median_time(3, lambda: s.read(p, a.dtype, a.shape))
        rows.append((f"write large ({planes}x1000x1000 float64)", s.name, w, a.nbytes, size_of(p)))
        rows.append((f"read large ({planes}x1000x1000 float64)", s.name, r, a.nbytes, 0))
        rm(p)
    rows.append((f"memcpy large", "numpy copy", median_time(3, lambda: a.copy()), a.nbytes, 0))
    table(f"(a) ds-format paper's workloads ({n} files each)", sorted(rows, key=lambda r: r[0]))


def volume(n):
    x = np.linspace(0, 1, n, dtype=np.float32)
    i, j, k = np.meshgrid(x, x, x, indexing="ij", sparse=True)
    return (np.sin(6 * i + 2 * j) * np.cos(9 * k + 3 * i * j) + 0.25 * np.sin(17 * k)).astype(np.float32)


def suite_b(o):
    n = 256 if o.quick else 512
    d = os.path.join(o.dir, "b")
    os.makedirs(d, exist_ok=True)
    v = volume(n)
    rng = np.random.default_rng(7)
    bricks = [tuple(int(x) * 64 for x in rng.integers(0, n // 64, 3)) for _ in range(1000)]
    boxes = [tuple(int(x) for x in rng.integers(0, n - 8, 3)) for _ in range(1000)]
    for level in (0, 1):
        rows = []
        for s in SYSTEMS:
            if s.name == "ds-format" and level:
                continue  # ds-format has no compression
            p = os.path.join(d, "vol" + s.ext)
            w = median_time(3, lambda: s.write(p, v, (64, 64, 64), level))
            rows.append(("full write", s.name, w, v.nbytes, size_of(p)))
            r = median_time(3, lambda: s.read(p, v.dtype, v.shape))
            assert np.array_equal(s.read(p, v.dtype, v.shape), v), s.name
            rows.append(("full read", s.name, r, v.nbytes, 0))
            if hasattr(s, "opener"):
                for axis in range(3):
                    start, shape = [0, 0, 0], [n, n, n]
                    start[axis], shape[axis] = n // 2, 1

                    def one_slice():
                        h = s.opener(p)
                        s.region(h, start, shape)
                    rows.append((f"slice across axis {axis}", s.name, median_time(5, one_slice), n * n * 4, 0))
                h = s.opener(p)
                rows.append(("1000 random 64^3 bricks", s.name, median_time(3, lambda: [s.region(h, b, (64, 64, 64)) for b in bricks]), 1000 * 64**3 * 4, 0))
                rows.append(("1000 random 8^3 boxes", s.name, median_time(3, lambda: [s.region(h, b, (8, 8, 8)) for b in boxes]), 1000 * 512 * 4, 0))
            rm(p)
        label = "deflate level 1 with shuffle (zarr: gzip level 1, no shuffle)" if level else "uncompressed"
        table(f"(b) {n}^3 float32 volume in 64^3 chunks, {label}", sorted(rows, key=lambda r: r[0]))


def suite_c(o):
    chunks = 2**16 if o.quick else 262144
    d = os.path.join(o.dir, "c")
    os.makedirs(d, exist_ok=True)
    a = np.arange(chunks * 4, dtype=np.int32)
    rows = []
    # zarr and blosc2 take minutes to write this many chunks (23 s and 64 s at 65536 here): quick runs only.
    for s in [Vds(), H5(), Ts()] + ([Zarr(), Blosc()] if o.quick else []):
        p = os.path.join(d, "many" + s.ext)
        t0 = time.perf_counter()
        s.write(p, a, (4,), 0)
        build = time.perf_counter() - t0

        def open_last():
            h = s.opener(p)
            assert s.region(h, (chunks * 4 - 4,), (4,))[3] == chunks * 4 - 1

        rows.append(("open + read the last chunk (median of 51)", s.name, median_time(51, open_last), 16, 0))
        rows.append((f"write {chunks} chunks (once)", s.name, build, a.nbytes, size_of(p)))
        rm(p)
    table(f"(c) open latency at {chunks} chunks", sorted(rows, key=lambda r: r[0]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--suite", default="a,b,c")
    ap.add_argument("--dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "vds-peers"))
    o = ap.parse_args([x for x in sys.argv[1:] if x != "--setup"])
    os.makedirs(o.dir, exist_ok=True)
    from importlib.metadata import version
    print("versions: " + ", ".join(f"{p} {version(p)}" for p in ["numpy", "h5py", "netCDF4", "zarr", "tensorstore", "ds-format", "blosc2"]) + f", libvds {vds.version()}")
    for s in o.suite.split(","):
        {"a": suite_a, "b": suite_b, "c": suite_c}[s](o)


if __name__ == "__main__":
    main()
