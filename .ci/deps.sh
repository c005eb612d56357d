#!/bin/sh
# Installs what the tests need beyond a Rust toolchain, when it is missing:
# a C and a C++ compiler, binutils (nm, readelf), pkg-config, valgrind, and
# a Python virtual environment in target/pyenv with NumPy (for the Python
# binding's tests) and ds-format (to read the .ds files the vds tool writes).
# Used by .ci/run and by the README's test command.
set -eu
cd "$(dirname "$0")/.."
missing=""
for tool in cc:gcc c++:g++ nm:binutils readelf:binutils pkg-config:pkg-config valgrind:valgrind ldd:libc-bin python3:python3; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || missing="$missing ${tool#*:}"
done
python3 -c "import venv, ensurepip" 2>/dev/null || missing="$missing python3-venv"
if [ -n "$missing" ]; then
    echo "installing:$missing"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    # shellcheck disable=SC2086
    $sudo apt-get install -y -qq $missing
fi
if ! target/pyenv/bin/python -c "import numpy, ds_format" 2>/dev/null; then
    echo "creating target/pyenv with numpy and ds-format"
    python3 -m venv target/pyenv
    target/pyenv/bin/pip install -q "numpy>=1.24" "ds-format==5.0.2"
fi
