"""libvds beside its peers, on the same workloads, in one run.

    python3 bench/peers.py --setup          # creates target/bench-venv with the peers (pip)
    python3 bench/peers.py [--quick] [--suite a,b,c,d] [--dir DIR]

Systems: a plain file (the floor), libvds (through python/vds.py over the
C ABI), h5py, netCDF4, zarr v3, tensorstore (zarr v3 driver), ds-format,
blosc2 and TileDB. Every table gives each
system's median time, throughput and size on disk, its time divided by
libvds's, and by the floor's. Files are written without fsync by all
systems. Warm OS cache; each timed read opens its file afresh. Suite d
(a streaming write) runs each system in a process of its own, for its
peak resident memory.
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
PEERS = ["numpy", "h5py", "netCDF4", "zarr>=3", "ds-format", "blosc2", "tensorstore", "tiledb"]

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
import tiledb  # noqa: E402
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

    # Suite d: create an empty array, write regions of it, close.
    def create(self, path, shape, dtype, chunks, level):
        dims = DIMS[: len(shape)]
        return vds.create(path, [(d, n) for d, n in zip(dims, shape)], [("v", dtype, dims, list(chunks), ("deflate", level))],
                          overwrite=True, sync=False)

    def write_at(self, h, start, a):
        h.write("v", a, start=start)
        h.commit()  # as the native suite d: each chunk row is committed (without fsync)

    def finish(self, h):
        h.close()


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

    def create(self, path, shape, dtype, chunks, level):
        f = h5py.File(path, "w")
        f.create_dataset("v", shape, dtype, chunks=tuple(chunks), compression="gzip", compression_opts=level, shuffle=True)
        return f

    def write_at(self, h, start, a):
        h["v"][tuple(slice(s, s + n) for s, n in zip(start, a.shape))] = a

    def finish(self, h):
        h.close()


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

    def create(self, path, shape, dtype, chunks, level):
        f = netCDF4.Dataset(path, "w")
        for d, n in zip(DIMS, shape):
            f.createDimension(d, n)
        f.createVariable("v", dtype, DIMS[: len(shape)], chunksizes=tuple(chunks), zlib=True, complevel=level, shuffle=True)
        return f

    def write_at(self, h, start, a):
        h["v"][tuple(slice(s, s + n) for s, n in zip(start, a.shape))] = a

    def finish(self, h):
        h.close()


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

    def create(self, path, shape, dtype, chunks, level):
        rm(path)
        return zarr.create_array(store=path, shape=shape, chunks=tuple(chunks), dtype=dtype,
                                 compressors=zarr.codecs.GzipCodec(level=level), zarr_format=3)

    def write_at(self, h, start, a):
        h[tuple(slice(s, s + n) for s, n in zip(start, a.shape))] = a

    def finish(self, h):
        pass  # each assignment has stored its chunks


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

    def create(self, path, shape, dtype, chunks, level):
        rm(path)
        cp = {"codec": blosc2.Codec.ZLIB, "clevel": level, "filters": [blosc2.Filter.SHUFFLE]}
        return blosc2.empty(shape, dtype, chunks=tuple(chunks), urlpath=path, mode="w", cparams=cp)

    def write_at(self, h, start, a):
        h[tuple(slice(s, s + n) for s, n in zip(start, a.shape))] = a

    def finish(self, h):
        pass  # each assignment has stored its chunks


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

    def create(self, path, shape, dtype, chunks, level):
        codecs = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "gzip", "configuration": {"level": level}}]
        spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": path},
                "metadata": {"shape": list(shape), "data_type": np.dtype(dtype).name, "codecs": codecs,
                             "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}}}}
        return ts.open(spec, create=True, delete_existing=True).result()

    def write_at(self, h, start, a):
        h[tuple(slice(s, s + n) for s, n in zip(start, a.shape))].write(a).result()

    def finish(self, h):
        pass  # each write's result() has stored its chunks


class TileDb:
    """A dense array, one tile per chunk, one attribute "v"."""
    name, ext = "tiledb", ".tdb"

    def create(self, path, shape, dtype, chunks, level):
        rm(path)
        dims = [tiledb.Dim(name=d, domain=(0, n - 1), tile=t, dtype=np.uint64) for d, n, t in zip(DIMS, shape, chunks or shape)]
        # The others' codec: byte shuffle, then deflate (gzip) at the same level.
        filters = tiledb.FilterList([tiledb.ByteShuffleFilter(), tiledb.GzipFilter(level)]) if level else None
        tiledb.Array.create(path, tiledb.ArraySchema(domain=tiledb.Domain(*dims), attrs=[tiledb.Attr("v", dtype, filters=filters)]))
        return tiledb.open(path, "w")

    def write_at(self, h, start, a):
        h[tuple(slice(s, s + n) for s, n in zip(start, a.shape))] = a  # one fragment per write

    def finish(self, h):
        h.close()

    def write(self, path, a, chunks, level):
        h = self.create(path, a.shape, a.dtype, chunks, level)
        self.write_at(h, (0,) * a.ndim, a)
        self.finish(h)

    def read(self, path, dtype, shape):
        with self.opener(path) as h:
            return h[...]

    def opener(self, path):
        return tiledb.open(path, attr="v")  # with one attribute named, reads give arrays, not dicts

    def region(self, h, start, shape):
        return h[tuple(slice(s, s + n) for s, n in zip(start, shape))]


SYSTEMS = [Floor(), Vds(), H5(), Nc(), Zarr(), Ts(), Ds(), Blosc(), TileDb()]


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
        label = "deflate level 1 with shuffle (zarr, tensorstore: gzip level 1, no shuffle)" if level else "uncompressed"
        table(f"(b) {n}^3 float32 volume in 64^3 chunks, {label}", sorted(rows, key=lambda r: r[0]))


def suite_c(o):
    chunks = 2**16 if o.quick else 262144
    d = os.path.join(o.dir, "c")
    os.makedirs(d, exist_ok=True)
    a = np.arange(chunks * 4, dtype=np.int32)
    rows = []
    # zarr and blosc2 take minutes to write this many chunks (23 s and 64 s at 65536 here): quick runs only.
    # tiledb stays: about 8 s at 262144.
    for s in [Vds(), H5(), Ts(), TileDb()] + ([Zarr(), Blosc()] if o.quick else []):
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


ROW = 64  # suite d: planes per chunk row, and the chunk edge


def chunk_row(out, z0):
    """Fills `out` (ROW planes of side x side float32) with planes z0.. of suite d's volume, the native suite d's
    formula: value = (flat index % 65521) * 0.001, in float32. Plane by plane from a 4 MiB ramp, so that the
    volume is never held, and cheaply (a copy per plane)."""
    m2 = out.shape[1] * out.shape[2]
    ramp = (np.arange(65521 + m2) % 65521).astype(np.float32) * np.float32(0.001)
    for p in range(out.shape[0]):
        off = (z0 + p) * m2 % 65521
        out[p] = ramp[off:off + m2].reshape(out.shape[1:])


def memory(field):
    """VmRSS (resident now) or VmHWM (the peak of that since the process's exec) of this process, in bytes."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))


def stream_child(name, path, planes, side):
    """Suite d in a process of its own (its peak memory is then its own): streams the volume into `path`
    through the system `name`, chunk row by chunk row from one reused buffer, and prints the time of
    the writes and the close, the resident memory just before the first write, and the peak."""
    s = next(x for x in SYSTEMS if x.name == name)
    h = s.create(path, (planes, side, side), np.float32, (ROW, ROW, ROW), 1)
    row = np.empty((ROW, side, side), np.float32)
    secs = 0.0
    for z0 in range(0, planes, ROW):
        chunk_row(row, z0)  # not timed: the data's making is the same for all
        if z0 == 0:
            before = memory("VmRSS")  # imports, the empty array, and the filled chunk row buffer
        t = time.perf_counter()
        s.write_at(h, (z0, 0, 0), row)
        secs += time.perf_counter() - t
    t = time.perf_counter()
    s.finish(h)
    secs += time.perf_counter() - t
    print(f"stream {secs} {before} {memory('VmHWM')}", flush=True)


def suite_d(o):
    # A 4 GiB volume (256 MiB chunk rows) in full; two chunk rows in quick runs, so the streaming is exercised.
    planes, side = (2 * ROW, 1024) if o.quick else (1024, 1024)
    d = os.path.join(o.dir, "d")
    os.makedirs(d, exist_ok=True)
    nbytes = planes * side * side * 4
    rows, mem = [], []
    # ds-format writes whole files only, so it cannot stream; the plain file has no codec to compare.
    for s in [x for x in SYSTEMS if hasattr(x, "write_at")]:
        p = os.path.join(d, "stream" + s.ext)
        # The child reports its own peak (VmHWM): wait4's ru_maxrss would not do, since Linux starts a
        # child's at the parent's resident size when it was spawned (the high-water mark crosses exec).
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--stream", s.name, p, str(planes), str(side)],
                             stdout=subprocess.PIPE, text=True, check=True).stdout
        secs, before, peak = out.split("stream ")[-1].split()
        rows.append(("stream write, deflate level 1", s.name, float(secs), nbytes, size_of(p)))
        mem.append((s.name, int(peak), int(before)))
        # Not timed, in this process: the last chunk row reads back as written.
        want = np.empty((ROW, side, side), np.float32)
        chunk_row(want, planes - ROW)
        assert np.array_equal(s.region(s.opener(p), (planes - ROW, 0, 0), want.shape), want), s.name
        rm(p)
    table(f"(d) streaming write of {nbytes / 2**30:.1f} GiB float32 ({planes}x{side}x{side}) in {ROW}^3 chunks, "
          f"one {ROW}-plane chunk row ({ROW * side * side * 4 // 2**20} MiB) per write", rows)
    print("\nds-format is left out: it writes whole files only. Zarr and tensorstore: gzip level 1, no shuffle; "
          "the others deflate level 1 with shuffle. Time: the writes and the close, not the making of the data.")
    print(f"\npeak resident memory (before: just before the first write, with the imports, the created array "
          f"and the filled {ROW * side * side * 4 // 2**20} MiB chunk row buffer):\n")
    for name, peak, before in mem:
        print(f"- {name}: peak {peak / 2**20:.0f} MiB, before {before / 2**20:.0f} MiB, added by writing {(peak - before) / 2**20:.0f} MiB")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--suite", default="a,b,c,d")
    ap.add_argument("--dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "vds-peers"))
    ap.add_argument("--stream", nargs=4, help=argparse.SUPPRESS)  # suite d's child: system, path, planes, side
    o = ap.parse_args([x for x in sys.argv[1:] if x != "--setup"])
    if o.stream:
        name, path, planes, side = o.stream
        return stream_child(name, path, int(planes), int(side))
    os.makedirs(o.dir, exist_ok=True)
    from importlib.metadata import version
    print("versions: " + ", ".join(f"{p} {version(p)}" for p in ["numpy", "h5py", "netCDF4", "zarr", "tensorstore", "ds-format", "blosc2", "tiledb"])
          + f", libvds {vds.version()}")
    for s in o.suite.split(","):
        {"a": suite_a, "b": suite_b, "c": suite_c, "d": suite_d}[s](o)


if __name__ == "__main__":
    main()
