"""libvds beside its peers, on the same workloads, in one run.

    python3 bench/peers.py --setup          # creates target/bench-venv with the peers (pip)
    python3 bench/peers.py [--quick] [--suite a,b,c,d] [--dir DIR]
    python3 bench/peers.py --suite b-zstd   # one variant of suite b alone: b-raw, b-deflate or b-zstd

Systems: a plain file (the floor), libvds (through its Python package,
python/, a PyO3 extension; in suite a also its whole-file calls,
vds.save and vds.load, as "libvds save/load"), h5py, netCDF4, zarr v3, tensorstore (zarr v3 driver), ds-format,
blosc2 and TileDB. Every table gives each
system's median time, throughput and size on disk, its time divided by
libvds's, and by the floor's. Files are written without fsync by all
systems. Warm OS cache; each timed read opens its file afresh. Suite d
(a streaming write) runs each system in a process of its own, for its
peak resident memory.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(ROOT, "target", "bench-venv")
PEERS = ["numpy", "h5py", "hdf5plugin", "netCDF4", "zarr>=3", "ds-format", "blosc2", "tensorstore", "tiledb",
         "fsspec", "aiohttp",  # zarr and h5py over HTTP in bench/remote_peers.py
         "s3fs"]  # zarr and h5py over S3 (remote_peers.py --s3)

if "--setup" in sys.argv:
    subprocess.check_call([sys.executable, "-m", "venv", VENV])
    subprocess.check_call([os.path.join(VENV, "bin", "pip"), "install", "-q", *PEERS])
    # libvds's own Python package, built from these sources (maturin, release profile).
    subprocess.check_call([os.path.join(VENV, "bin", "pip"), "install", "-q", "--force-reinstall", "--no-deps",
                           os.path.join(ROOT, "python")])
    sys.exit(0)
if os.path.realpath(sys.prefix) != os.path.realpath(VENV):
    python = os.path.join(VENV, "bin", "python")
    if not os.path.exists(python):
        sys.exit("run `python3 bench/peers.py --setup` first")
    os.execv(python, [python, *sys.argv])

import numpy as np  # noqa: E402

import vds  # noqa: E402

import ctypes  # noqa: E402
import warnings  # noqa: E402

import blosc2  # noqa: E402
import ds_format  # noqa: E402
import h5py  # noqa: E402
import netCDF4  # noqa: E402
import tensorstore as ts  # noqa: E402
import tiledb  # noqa: E402
import zarr  # noqa: E402
from zarr.codecs.numcodecs import Shuffle as ZarrShuffle  # noqa: E402

try:
    import hdf5plugin  # noqa: E402 - h5py's zstd filter; a venv made before it was a peer lacks it
except ImportError:
    hdf5plugin = None
warnings.filterwarnings("ignore", message="Numcodecs codecs are not in the Zarr version 3 specification")


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

# A codec is None (uncompressed) or (name, level), name "deflate" or "zstd", as vds.create takes it; every
# system that can shuffles the bytes first. Each system's `codecs` names those it can write.


class Floor:
    name, ext = "plain file", ".bin"
    codecs = ("deflate", "zstd")  # raw bytes in every table: the floor of the full write and read

    def write(self, path, a, chunks, codec):
        # The array's own bytes (no copy), over what the file held and then cut to length: the
        # cheapest way to replace a file's bytes, as libvds overwrites a container. Emptying the
        # file first (open "wb") frees its blocks only to allocate them again, and ext4 flushes a
        # file emptied and rewritten when it is closed; the peers' own writers all empty it.
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644), "wb") as f:
            f.write(np.ascontiguousarray(a).data.cast("B"))
            f.truncate()

    def read(self, path, dtype, shape):
        with open(path, "rb") as f:
            return np.frombuffer(f.read(), dtype).reshape(shape)


class Vds:
    name, ext = "libvds", ".vds"
    codecs = ("deflate", "zstd")

    def write(self, path, a, chunks, codec):
        with self.create(path, a.shape, a.dtype, chunks, codec) as ds:
            ds["v"][...] = a

    def read(self, path, dtype, shape):
        with vds.open(path) as ds:
            return ds["v"][...]

    def opener(self, path):
        return vds.open(path)

    def region(self, h, start, shape):
        return h["v"][tuple(slice(s, s + n) for s, n in zip(start, shape))]

    # Suite d: create an empty array, write regions of it, close.
    def create(self, path, shape, dtype, chunks, codec):
        dims = DIMS[: len(shape)]
        var = {"dtype": dtype, "dims": dims, "chunks": list(chunks) if chunks else None, "codec": codec}
        return vds.create(path, list(zip(dims, shape)), {"v": var}, overwrite=True, sync=False)

    def write_at(self, h, start, a):
        h["v"][tuple(slice(s, s + n) for s, n in zip(start, a.shape))] = a
        h.commit()  # as the native suite d: each chunk row is committed (without fsync)

    def finish(self, h):
        h.close()


class VdsFiles(Vds):
    """libvds through its whole-file calls, vds.save and vds.load (suite a: as ds-format's write and read)."""
    name = "libvds save/load"

    def write(self, path, a, chunks, codec):
        vds.save(path, {"v": a}, dims={"v": DIMS[: a.ndim]}, chunks=None if chunks is None else {"v": list(chunks)},
                 codec=codec, overwrite=True, sync=False)

    def read(self, path, dtype, shape):
        return vds.load(path)["v"]


class H5:
    name, ext = "h5py", ".h5"
    codecs = ("deflate", "zstd") if hdf5plugin else ("deflate",)
    lacks = "its zstd filter needs hdf5plugin: rerun --setup"

    @staticmethod
    def filters(codec):
        """HDF5's shuffle, then deflate or hdf5plugin's zstd (filter 32015)."""
        if not codec:
            return {}
        name, level = codec
        compression = dict(compression="gzip", compression_opts=level) if name == "deflate" else hdf5plugin.Zstd(clevel=level)
        return dict(shuffle=True, **compression)

    def write(self, path, a, chunks, codec):
        with h5py.File(path, "w") as f:
            f.create_dataset("v", data=a, chunks=tuple(chunks) if chunks else None, **self.filters(codec))

    def read(self, path, dtype, shape):
        with h5py.File(path, "r") as f:
            return f["v"][...]

    def opener(self, path):
        return h5py.File(path, "r")

    def region(self, h, start, shape):
        return h["v"][tuple(slice(s, s + n) for s, n in zip(start, shape))]

    def create(self, path, shape, dtype, chunks, codec):
        f = h5py.File(path, "w")
        f.create_dataset("v", shape, dtype, chunks=tuple(chunks), **self.filters(codec))
        return f

    def write_at(self, h, start, a):
        h["v"][tuple(slice(s, s + n) for s, n in zip(start, a.shape))] = a

    def finish(self, h):
        h.close()


class Nc:
    name, ext = "netCDF4", ".nc"
    codecs = ("deflate", "zstd")

    @staticmethod
    def variable(f, shape, dtype, chunks, codec):
        for d, n in zip(DIMS, shape):
            f.createDimension(d, n)
        name, level = codec or (None, 4)
        v = f.createVariable("v", dtype, DIMS[: len(shape)], chunksizes=tuple(chunks) if chunks else None,
                             compression={None: None, "deflate": "zlib", "zstd": "zstd"}[name], complevel=level, shuffle=bool(codec))
        if name == "zstd":
            # netCDF4-python sets the shuffle only with zlib and drops shuffle=True here: set it through the
            # libnetcdf the extension links (shuffle on, no deflate). libnetcdf puts the shuffle before zstd.
            lib = ctypes.CDLL(netCDF4._netCDF4.__file__)  # dlsym also searches the libraries it links
            assert lib.nc_def_var_deflate(v._grpid, v._varid, 1, 0, 0) == 0 and v.filters()["shuffle"], v.filters()
        return v

    def write(self, path, a, chunks, codec):
        with netCDF4.Dataset(path, "w") as f:
            self.variable(f, a.shape, a.dtype, chunks, codec)[...] = a

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

    def create(self, path, shape, dtype, chunks, codec):
        f = netCDF4.Dataset(path, "w")
        self.variable(f, shape, dtype, chunks, codec)
        return f

    def write_at(self, h, start, a):
        h["v"][tuple(slice(s, s + n) for s, n in zip(start, a.shape))] = a

    def finish(self, h):
        h.close()


class Zarr:
    name, ext = "zarr v3", ".zarr"
    codecs = ("deflate", "zstd")

    def create(self, path, shape, dtype, chunks, codec):
        rm(path)
        # deflate: gzip without shuffle (as ever in these tables); zstd: numcodecs' byte shuffle (outside the v3 spec) first.
        if not codec:
            compressors = None
        elif codec[0] == "deflate":
            compressors = zarr.codecs.GzipCodec(level=codec[1])
        else:
            compressors = [ZarrShuffle(elementsize=np.dtype(dtype).itemsize), zarr.codecs.ZstdCodec(level=codec[1])]
        return zarr.create_array(store=path, shape=shape, chunks=tuple(chunks) if chunks else shape, dtype=dtype,
                                 serializer=zarr.codecs.BytesCodec(), compressors=compressors, zarr_format=3)

    def write(self, path, a, chunks, codec):
        self.create(path, a.shape, a.dtype, chunks, codec)[...] = a

    def read(self, path, dtype, shape):
        return zarr.open_array(path, mode="r")[...]

    def opener(self, path):
        return zarr.open_array(path, mode="r")

    def region(self, h, start, shape):
        return h[tuple(slice(s, s + n) for s, n in zip(start, shape))]

    def write_at(self, h, start, a):
        h[tuple(slice(s, s + n) for s, n in zip(start, a.shape))] = a

    def finish(self, h):
        pass  # each assignment has stored its chunks


class Ds:
    name, ext = "ds-format", ".ds"
    codecs, lacks = (), "no codec"

    def write(self, path, a, chunks, codec):
        ds_format.write(path, {"v": a, ".": {"v": {".dims": DIMS[: a.ndim]}}})

    def read(self, path, dtype, shape):
        return ds_format.read(path)["v"]


class Blosc:
    name, ext = "blosc2", ".b2nd"
    codecs = ("deflate", "zstd")

    @staticmethod
    def cparams(codec):
        if not codec:
            return {"clevel": 0}
        name, level = codec
        return {"codec": {"deflate": blosc2.Codec.ZLIB, "zstd": blosc2.Codec.ZSTD}[name], "clevel": level, "filters": [blosc2.Filter.SHUFFLE]}

    def write(self, path, a, chunks, codec):
        rm(path)
        blosc2.asarray(a, urlpath=path, mode="w", chunks=tuple(chunks) if chunks else None, cparams=self.cparams(codec))

    def read(self, path, dtype, shape):
        return blosc2.open(path)[...]

    def opener(self, path):
        return blosc2.open(path)

    def region(self, h, start, shape):
        return h[tuple(slice(s, s + n) for s, n in zip(start, shape))]

    def create(self, path, shape, dtype, chunks, codec):
        rm(path)
        return blosc2.empty(shape, dtype, chunks=tuple(chunks), urlpath=path, mode="w", cparams=self.cparams(codec))

    def write_at(self, h, start, a):
        h[tuple(slice(s, s + n) for s, n in zip(start, a.shape))] = a

    def finish(self, h):
        pass  # each assignment has stored its chunks


class Ts:
    name, ext = "tensorstore", ".ts.zarr"
    codecs = ("deflate", "zstd")

    def create(self, path, shape, dtype, chunks, codec):
        # zarr3 has no plain shuffle codec in tensorstore (only blosc's): deflate is gzip, zstd is zstd, unshuffled.
        codecs = [{"name": "bytes", "configuration": {"endian": "little"}}]
        if codec:
            codecs.append({"name": {"deflate": "gzip", "zstd": "zstd"}[codec[0]], "configuration": {"level": codec[1]}})
        spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": path},
                "metadata": {"shape": list(shape), "data_type": np.dtype(dtype).name, "codecs": codecs,
                             "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks or shape)}}}}
        return ts.open(spec, create=True, delete_existing=True).result()

    def write(self, path, a, chunks, codec):
        self.create(path, a.shape, a.dtype, chunks, codec).write(a).result()

    def read(self, path, dtype, shape):
        return self.opener(path).read().result()

    def opener(self, path):
        return ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": path}}).result()

    def region(self, h, start, shape):
        return h[tuple(slice(s, s + n) for s, n in zip(start, shape))].read().result()

    def write_at(self, h, start, a):
        h[tuple(slice(s, s + n) for s, n in zip(start, a.shape))].write(a).result()

    def finish(self, h):
        pass  # each write's result() has stored its chunks


class TileDb:
    """A dense array, one tile per chunk, one attribute "v"."""
    name, ext = "tiledb", ".tdb"
    codecs = ("deflate", "zstd")

    def create(self, path, shape, dtype, chunks, codec):
        rm(path)
        dims = [tiledb.Dim(name=d, domain=(0, n - 1), tile=t, dtype=np.uint64) for d, n, t in zip(DIMS, shape, chunks or shape)]
        # The others' codec: byte shuffle, then deflate (gzip) or zstd at the same level.
        if codec:
            compress = {"deflate": tiledb.GzipFilter, "zstd": tiledb.ZstdFilter}[codec[0]]
            filters = tiledb.FilterList([tiledb.ByteShuffleFilter(), compress(codec[1])])
        else:
            filters = None
        tiledb.Array.create(path, tiledb.ArraySchema(domain=tiledb.Domain(*dims), attrs=[tiledb.Attr("v", dtype, filters=filters)]))
        return tiledb.open(path, "w")

    def write_at(self, h, start, a):
        h[tuple(slice(s, s + n) for s, n in zip(start, a.shape))] = a  # one fragment per write

    def finish(self, h):
        h.close()

    def write(self, path, a, chunks, codec):
        h = self.create(path, a.shape, a.dtype, chunks, codec)
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
# Suite a (many small files, the ds-format paper's workloads) also times libvds's whole-file calls.
SUITE_A = SYSTEMS[:2] + [VdsFiles()] + SYSTEMS[2:]


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
        for s in SUITE_A:
            paths = [os.path.join(d, f"{s.name.replace(' ', '_').replace('/', '_')}{i}{s.ext}") for i in range(n)]
            w = median_time(3, lambda: [s.write(p, a, None, None) for p in paths])
            r = median_time(3, lambda: [s.read(p, a.dtype, a.shape) for p in paths])
            assert np.array_equal(s.read(paths[0], a.dtype, a.shape), a), s.name
            rows.append((f"write {n} {label}", s.name, w, a.nbytes * n, size_of(paths[0])))
            rows.append((f"read {n} {label}", s.name, r, a.nbytes * n, 0))
    planes = 20 if o.quick else 100
    a = (np.arange(planes * 1000 * 1000, dtype=np.float64) % 7919).reshape(planes, 1000, 1000)
    for s in SUITE_A:
        p = os.path.join(d, s.name.replace(' ', '_').replace('/', '_') + "large" + s.ext)
        w = median_time(3, lambda: s.write(p, a, (1, 250, 1000), None))
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


# Suite b's variants: name -> (codec, table label, note printed under the table).
B_VARIANTS = {
    "raw": (None, "uncompressed", None),
    "deflate": (("deflate", 1), "deflate level 1 with shuffle (zarr, tensorstore: gzip level 1, no shuffle)", None),
    "zstd": (("zstd", 1), "zstd level 1 with byte shuffle (zarr v3: bytes, numcodecs.shuffle, zstd; tensorstore: zstd, no shuffle)",
             "Byte shuffle, then zstd level 1, per 64^3 chunk: libvds; h5py: HDF5's shuffle, then hdf5plugin's Zstd "
             "filter; netCDF4: compression=\"zstd\", its shuffle set through libnetcdf (netCDF4-python drops "
             "shuffle=True with zstd); zarr v3: bytes, numcodecs.shuffle (not in the v3 spec), zstd; blosc2: ZSTD "
             "with SHUFFLE, in blocks within each chunk; TileDB: ByteShuffleFilter, ZstdFilter. Tensorstore: zstd "
             "without shuffle (its zarr3 driver's only shuffle is blosc's). The plain file is raw."),
}


def vds_codec_id(path):
    """The codec id ("none", "deflate", "zstd") of the first variable in a libvds file's descriptor, its second line."""
    with open(path, "rb") as f:
        return json.loads(f.read(1 << 16).split(b"\n")[1])["variables"][0]["codec"]["id"]


def suite_b(o, variants):
    n = 256 if o.quick else 512
    d = os.path.join(o.dir, "b")
    os.makedirs(d, exist_ok=True)
    v = volume(n)
    rng = np.random.default_rng(7)
    bricks = [tuple(int(x) * 64 for x in rng.integers(0, n // 64, 3)) for _ in range(1000)]
    boxes = [tuple(int(x) for x in rng.integers(0, n - 8, 3)) for _ in range(1000)]
    for codec, label, note in (B_VARIANTS[x] for x in variants):
        rows, left_out = [], []
        for s in SYSTEMS:
            if codec and codec[0] not in s.codecs:
                left_out.append(f"{s.name} ({s.lacks})")
                continue
            p = os.path.join(d, "vol" + s.ext)
            w = median_time(3, lambda: s.write(p, v, (64, 64, 64), codec))
            rows.append(("full write", s.name, w, v.nbytes, size_of(p)))
            if isinstance(s, Vds):  # not timed: the codec asked for is the one stored
                assert vds_codec_id(p) == (codec[0] if codec else "none"), vds_codec_id(p)
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
        table(f"(b) {n}^3 float32 volume in 64^3 chunks, {label}", sorted(rows, key=lambda r: r[0]))
        if note or left_out:
            print("\n" + " ".join(([note] if note else []) + ([f"Left out: {', '.join(left_out)}."] if left_out else [])))
            sys.stdout.flush()


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
        s.write(p, a, (4,), None)
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
    h = s.create(path, (planes, side, side), np.float32, (ROW, ROW, ROW), ("deflate", 1))
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
    ap.add_argument("--suite", default="a,b,c,d", help="a, b (its three variants: uncompressed, deflate, zstd), "
                    "c, d, or one variant of b alone: b-raw, b-deflate, b-zstd")
    ap.add_argument("--dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "vds-peers"))
    ap.add_argument("--stream", nargs=4, help=argparse.SUPPRESS)  # suite d's child: system, path, planes, side
    o = ap.parse_args([x for x in sys.argv[1:] if x != "--setup"])
    if o.stream:
        name, path, planes, side = o.stream
        return stream_child(name, path, int(planes), int(side))
    os.makedirs(o.dir, exist_ok=True)
    from importlib.metadata import version
    print("versions: " + ", ".join(f"{p} {version(p)}" for p in ["numpy", "h5py", "hdf5plugin", "netCDF4", "zarr", "numcodecs",
                                                                   "tensorstore", "ds-format", "blosc2", "tiledb"] if hdf5plugin or p != "hdf5plugin")
          + f", libvds {vds.__version__}")
    suites = {"a": suite_a, "b": lambda o: suite_b(o, B_VARIANTS), "c": suite_c, "d": suite_d}
    suites.update({f"b-{x}": (lambda o, x=x: suite_b(o, [x])) for x in B_VARIANTS})
    for s in o.suite.split(","):
        if s not in suites:
            sys.exit(f"unknown suite {s!r}: expected one of {', '.join(suites)}")
    for s in o.suite.split(","):
        suites[s](o)


if __name__ == "__main__":
    main()
