#!/bin/sh
# Installs what the tests need beyond a Rust toolchain, when it is missing:
# a C and a C++ compiler, binutils (nm, readelf), pkg-config, valgrind, and
# a Python virtual environment in target/pyenv with NumPy and ds-format (to
# read the .ds files the vds tool writes), maturin (builds the Python
# package), pytest, and the peers its tests compare with or write through:
# xarray, Dask with distributed, netCDF4 and h5py; segyio, which writes
# the SEG-Y files the SEG-Y tests import and reads back those libvds writes;
# openvds (the OpenVDS+ wheel, CC BY-ND: installed, never vendored), which
# writes and reads the OpenVDS volumes vds.from_openvds and vds.to_openvds
# convert; and moto's S3 server (the remote tests read containers from it). nginx serves
# the remote tests' HTTP range requests (started by the tests on loopback; the
# package's own service is not used). Then the Python package
# itself (python/), built from these sources, when the venv has none yet;
# tests/python_binding.rs reinstalls it so that it is always current.
# Used by .ci/run and by the README's test command.
set -eu
cd "$(dirname "$0")/.."
missing=""
for tool in cc:gcc c++:g++ nm:binutils readelf:binutils pkg-config:pkg-config valgrind:valgrind ldd:libc-bin python3:python3; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || missing="$missing ${tool#*:}"
done
python3 -c "import venv, ensurepip" 2>/dev/null || missing="$missing python3-venv"
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing="$missing nginx-light"
if [ -n "$missing" ]; then
    echo "installing:$missing"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    # shellcheck disable=SC2086
    $sudo apt-get install -y -qq $missing
fi
py=target/pyenv/bin/python
if ! $py -c "import numpy, ds_format, maturin, pytest, xarray, dask.array, distributed, netCDF4, h5py, segyio, openvds, moto.server" 2>/dev/null; then
    echo "creating target/pyenv with numpy, ds-format, maturin, pytest, xarray, dask, netCDF4, h5py, segyio, openvds and moto"
    [ -x $py ] || python3 -m venv target/pyenv
    target/pyenv/bin/pip install -q "numpy>=1.24" "ds-format==5.0.2" "maturin>=1.9,<2" "pytest>=8" \
        "xarray>=2024.1" "dask[array]>=2024.1" "distributed>=2024.1" "netCDF4>=1.6" "h5py>=3.8" \
        "segyio==1.9.14" "openvds==3.4.9" "moto[server]>=5.0"
fi
if ! $py -c "import vds._vds" 2>/dev/null; then
    echo "building and installing the Python package (python/) into target/pyenv"
    # No build isolation: maturin comes from the venv (its build hook runs it
    # from PATH), so nothing is fetched here.
    PATH="$PWD/target/pyenv/bin:$PATH" target/pyenv/bin/pip install -q --no-build-isolation --no-deps ./python
fi
