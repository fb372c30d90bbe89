#!/bin/sh
# Rebuilds the committed example cores of signatures/core.yaml (real crashes, compressed) and the
# binaries beside them. The cores name the paths they were made in (/tmp/postmortem-cores/...);
# postmortem finds the binaries again by base name in the core's own directory.
# Needs gcc, zstd and a kernel core_pattern that writes "core" in the working directory.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
map="-fdebug-prefix-map=$here=."  # no path of the building machine in the debug info
work=/tmp/postmortem-cores
rm -rf "$work"
mkdir -p "$work/site-packages/torch/lib" "$work/site-packages/myext"
cd "$work"
gcc -O1 -g $map -o gpu_crash "$here/src/gpu_crash.c" -ldl
lib() { gcc -O1 -shared -fPIC -DENTRY="$2" ${3:-} -Wl,-soname,"$(basename "$1")" -o "$1" "$here/src/standin.c"; }
lib libcuda.so.570.124.06 cuLaunchKernel
lib libcublasLt.so.12.4.5.8 cublasLtMatmul
lib site-packages/torch/lib/libtorch_cuda.so at_cuda_launch
lib site-packages/myext/_ops.cpython-311-x86_64-linux-gnu.so my_op_forward
lib libcudart.so.12.4.127 cudaLaunchKernel -DABORT
gcc -O0 -g $map -fno-omit-frame-pointer -shared -fPIC -o libcrash.so "$here/src/libcrash.c"
gcc -O0 -g $map -o crash "$here/src/crash.c" -L. -lcrash -Wl,-rpath,'$ORIGIN'
run() {  # name, command...
    name=$1; shift
    mkdir -p "run-$name"
    # a fixed, tiny environment: a core holds its environment, and these cores are committed
    (cd "run-$name" && ulimit -c unlimited && env -i PATH=/usr/bin:/bin CUDA_VISIBLE_DEVICES=0 \
        NCCL_DEBUG=WARN EXAMPLE_TOKEN=not-a-secret "$@" >/dev/null 2>&1) || true
    zstd -q -19 -f "run-$name/core" -o "$here/$name.core.zst"
}
run driver ../gpu_crash ../libcuda.so.570.124.06 cuLaunchKernel
run cublas ../gpu_crash ../libcublasLt.so.12.4.5.8 cublasLtMatmul
run torch ../gpu_crash ../site-packages/torch/lib/libtorch_cuda.so at_cuda_launch
run extension ../gpu_crash ../site-packages/myext/_ops.cpython-311-x86_64-linux-gnu.so my_op_forward
run cudart-abort ../gpu_crash ../libcudart.so.12.4.127 cudaLaunchKernel
run null-write ../crash
gcc -O0 -g $map -o recurse "$here/src/recurse.c"
run stack-overflow sh -c 'ulimit -s 256 && exec ../recurse'
for f in gpu_crash libcuda.so.570.124.06 libcublasLt.so.12.4.5.8 site-packages/torch/lib/libtorch_cuda.so \
         site-packages/myext/_ops.cpython-311-x86_64-linux-gnu.so libcudart.so.12.4.127 libcrash.so crash recurse; do
    cp "$f" "$here/"
done
