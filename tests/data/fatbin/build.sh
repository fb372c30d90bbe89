#!/bin/sh
# Builds the fatbin fixtures from k.cu with nvcc (13.0 was used for the committed files; see SOURCES.md).
# Usage: build.sh [OUTDIR]   (default: this directory)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here}
mkdir -p "$out"
cd "$here"
cu=k.cu  # a relative name: -G debug info records the path it is given, and no machine's path belongs in a fixture
nv() { nvcc -cudart shared "$@"; }
multi="-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_120,code=sm_120 -gencode arch=compute_120,code=compute_120"
nv -c $multi "$cu" -o "$out/k_multi.o"
nv -shared -Xcompiler -fPIC $multi "$cu" -o "$out/libk_multi.so"
nv -shared -Xcompiler -fPIC -gencode arch=compute_80,code=compute_80 "$cu" -o "$out/libk_ptx80.so"
nv -shared -Xcompiler -fPIC -gencode arch=compute_80,code=sm_80 "$cu" -o "$out/libk_sm80only.so"
nv -shared -Xcompiler -fPIC -gencode arch=compute_90,code=sm_90 -gencode arch=compute_120,code=compute_120 "$cu" \
    -o "$out/libk_sm90_ptx120.so"
nv -shared -Xcompiler -fPIC -gencode arch=compute_80,code=sm_80 -gencode arch=compute_80,code=compute_80 "$cu" \
    -o "$out/libk_sm80_ptx80.so"
nv -c -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_120f,code=sm_120f "$cu" -o "$out/k_variants.o"
nv -c -G -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 "$cu" -o "$out/k_debug.o"
for mode in none speed balance size; do
    nv -c --compress-mode=$mode -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 "$cu" \
        -o "$out/k_$mode.o"
done
nv -cubin -gencode arch=compute_90,code=sm_90 "$cu" -o "$out/k_sm90.cubin"
