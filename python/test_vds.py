"""Tests of the Python binding against NumPy references: every dtype, both
memory orders, strided regions, attributes, errors. Run by tests/python_binding.rs."""

import json
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vds  # noqa: E402

d = tempfile.mkdtemp()
rng = np.random.default_rng(7)
checks = 0

for i, dt in enumerate(vds.DTYPES):
    shape = (13, 7, 5)
    if dt == "bool":
        ref = rng.integers(0, 2, shape).astype(bool)
    elif dt.startswith("float"):
        ref = rng.standard_normal(shape).astype(dt)
    else:
        info = np.iinfo(dt)
        ref = rng.integers(info.min, info.max, shape, dtype=dt, endpoint=True)
    path = os.path.join(d, f"{dt}.vds")
    codec = None if dt == "int8" else ("zstd", 3) if i % 2 else "deflate"
    with vds.create(path, axes=[("a", 13), ("b", 7), ("c", 5)],
                    variables=[("v", dt, ["a", "b", "c"], [4, 3, 2], codec)]) as ds:
        ds.write("v", np.asfortranarray(ref) if dt in ("int16", "float64") else ref)
    with open(path, "rb") as f:
        f.readline()
        want = {None: "none", "deflate": "deflate", ("zstd", 3): "zstd"}[codec]
        assert json.loads(f.readline())["variables"][0]["codec"]["id"] == want, dt
    with vds.open(path) as ds:
        assert ds.variables == ["v"]
        got = ds.read("v")
        assert got.dtype == ref.dtype and np.array_equal(got, ref), dt
        f = ds.read("v", order="F")
        assert f.flags.f_contiguous and np.array_equal(f, ref), dt
        s = ds.read("v", start=(1, 0, 2), shape=(4, 7, 1), step=(3, 1, 1))
        assert np.array_equal(s, ref[1:13:3, :, 2:3]), dt
        checks += 4
for bad in ["lz4", ("zstd", 23), ["zstd", 0]]:
    try:
        vds.create(os.path.join(d, "bad.vds"), axes=[("a", 4)], variables=[("v", "int32", ["a"], None, bad)])
        raise AssertionError(f"codec {bad!r} must be refused")
    except (ValueError, vds.VdsError):
        checks += 1

# Big-endian arrays are written as their values (the C ABI takes native order),
# and reads fill a caller's array whatever its order.
path = os.path.join(d, "order.vds")
ref = np.arange(60, dtype=">f8").reshape(6, 10) * 0.5
with vds.create(path, axes=[("a", 6), ("b", 10)], variables=[("v", np.dtype(">f8"), ["a", "b"], [4, 4], None)]) as ds:
    ds.write("v", ref)
    ds.write("v", np.array([[-1, -2]], ">i4").astype(">f8"), start=(5, 8))
ref[5, 8:] = [-1, -2]
with vds.open(path) as ds:
    got = ds.read("v")
    assert got.dtype == np.float64 and np.array_equal(got, ref)
    out = np.zeros((6, 10), np.float64, order="F")
    assert ds.read("v", out=out) is out and np.array_equal(out, ref)
    for bad in (np.frombuffer(bytes(480), np.float64).reshape(6, 10), np.zeros((6, 9)), np.zeros((6, 10), np.float32),
                np.zeros((6, 20))[:, ::2]):
        try:
            ds.read("v", out=bad)
            raise AssertionError("a read-only, misshapen, mistyped or strided out must raise")
        except ValueError:
            pass
    checks += 3

path = os.path.join(d, "attrs.vds")
with vds.create(path, axes=[("x", 10)], variables=[("v", "float32", ["x"], None, None)], attributes={"survey": "py"}) as ds:
    ds.set_attribute("list", [1, 2, 3])
with vds.open(path) as ds:
    assert ds.attributes() == {"survey": "py", "list": [1, 2, 3]}
    assert np.array_equal(ds.read("v"), np.zeros(10, np.float32))
    checks += 2
    try:
        ds.read("v", start=(5,), shape=(6,))
        raise AssertionError("out of range must raise")
    except vds.VdsError as e:
        assert e.status == 9 and "beyond the extent 10" in str(e), str(e)
    try:
        ds.write("v", np.zeros(10, np.float32))
        raise AssertionError("read-only must raise")
    except vds.VdsError as e:
        assert e.status == 10
    try:
        ds.write("v", np.zeros(10, np.float64))
        raise AssertionError
    except vds.VdsError as e:
        assert e.status in (8, 10)
    checks += 3

# An exception inside the with-block rolls back instead of committing.
try:
    with vds.open(path, write=True) as ds:
        ds.write("v", np.ones(10, np.float32))
        raise RuntimeError("boom")
except RuntimeError:
    pass
with vds.open(path) as ds:
    assert np.array_equal(ds.read("v"), np.zeros(10, np.float32))
    checks += 1

try:
    vds.open(os.path.join(d, "missing.vds"))
    raise AssertionError
except vds.VdsError as e:
    assert e.status == 2 and "missing.vds" in str(e)
    checks += 1

# Growth: a growable axis appended to, then resized.
path = os.path.join(d, "grow.vds")
with vds.create(path, axes=[("t", 1), ("s", 3)], variables=[("v", "int32", ["t", "s"], [2, 3], None)], growable=["t"]) as ds:
    ds.write("v", np.array([[1, 2, 3]], np.int32))
    assert ds.append("v", "t", np.arange(6, dtype=np.int32).reshape(2, 3)) == 1
with vds.open(path, write=True) as ds:
    assert np.array_equal(ds.read("v"), np.array([[1, 2, 3], [0, 1, 2], [3, 4, 5]], np.int32))
    ds.resize_axis("t", 2)
    assert ds.add_external_slot("grow.vdx") == 1
with vds.open(path) as ds:
    assert ds.read("v").shape == (2, 3)
    checks += 2

# Many small writes to one chunk, stored once; then compaction moves the chunks out to a slot and back.
path = os.path.join(d, "storm.vds")
ref = np.arange(4096, dtype=np.int32)
with vds.create(path, axes=[("x", 4096)], variables=[("v", "int32", ["x"], [1024], None)]) as ds:
    ds.write("v", ref)
with vds.open(path, write=True) as ds:
    before = os.path.getsize(path)
    for i in range(200):
        ref[i * 5] = -i
        ds.write("v", ref[i * 5:i * 5 + 1], start=(i * 5,))
    assert np.array_equal(ds.read("v"), ref)
    ds.commit()
    assert 4096 <= os.path.getsize(path) - before < 4096 + 8192  # the one chunk, its index page
    ds.set_cache_size(0)
    ds.write("v", ref[:1])
    ds.write("v", ref[1:2], start=(1,))
    ds.commit()
    was, now = ds.compact()
    assert now < was and now == os.path.getsize(path)
    slot = ds.add_external_slot("storm.vdx")
    ds.commit()
    ds.set_slot_policy("fixed", [slot])
    ds.compact("into_slots")
    assert os.path.getsize(os.path.join(d, "storm.vdx")) == 32 + 4 * 4096
    ds.compact("fold")
os.remove(os.path.join(d, "storm.vdx"))
with vds.open(path) as ds:
    assert np.array_equal(ds.read("v"), ref)
    checks += 4

# Parallel writers: four processes write fragments through multiprocessing, one merge adopts them.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parallel_write  # noqa: E402

assert parallel_write.main(os.path.join(d, "parallel.vds"), 4) == 0
with vds.open(os.path.join(d, "parallel.vds")) as ds:
    assert np.array_equal(ds.read("amplitude"), parallel_write.reference())
    checks += 1
try:
    vds.fragment(os.path.join(d, "parallel.vds"), "parallel.vds.part0")
    raise AssertionError
except vds.VdsError as e:
    assert e.status == 3 and "part0" in str(e)  # already exists
    checks += 1

print(f"python binding: all {checks} checks passed (libvds {vds.version()}, numpy {np.__version__})")
