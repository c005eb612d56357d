"""Create a small volume, write it with NumPy, and read slices back."""
import numpy as np
import vds

# Describe the file: three axes and one variable in 32^3 compressed chunks.
with vds.create(
    "quickstart.vds",
    axes=[("inline", 100), ("crossline", 80), {"name": "time", "size": 60, "unit": "ms", "last": 236.0}],
    variables={"amplitude": {"dtype": "float32", "dims": ["inline", "crossline", "time"],
                             "chunks": [32, 32, 32], "codec": ("deflate", 6)}},
    attrs={"survey": "quickstart"},
    overwrite=True,
) as ds:
    volume = np.sin(np.arange(100 * 80 * 60, dtype=np.float32) * 0.001).reshape(100, 80, 60)
    ds["amplitude"][...] = volume  # leaving the block commits atomically

# Read back with NumPy indexing: C-order arrays, any step, negative ones too.
with vds.open("quickstart.vds") as ds:
    amp = ds["amplitude"]
    time_slice = amp[:, :, 30]  # shape (100, 80)
    trace = amp[1, -1, ::-2]
    assert np.array_equal(time_slice, volume[:, :, 30]) and np.array_equal(trace, volume[1, -1, ::-2])
    print(amp, amp.axes["time"].values[:3], ds.attrs["survey"])
