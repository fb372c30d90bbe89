#!/usr/bin/env bash
# Captures what only a real GPU produces (issue 18), for tests/data/gpu-real/: CUDA errors of small programs with
# known bugs (tools/gpu/bugs.cu), compute-sanitizer reports in text and XML, cuda-gdb sessions, a GPU core dump read
# back by cuda-gdb, which builds of one kernel launch and which fail with "no kernel image", nvidia-smi under load,
# and PyTorch's own failures and flight-recorder dump.
#
# Usage: tools/capture_gpu.sh OUTDIR [BUDGET_SECONDS]
# Every step is guarded: it runs under a timeout, its output goes to OUTDIR/work/<step>.out and .err, and its exit
# status to OUTDIR/work/steps.tsv, so one failure (or a machine with no GPU at all) loses nothing else. Steps that
# would start after BUDGET_SECONDS (default 420) are recorded as skipped. At the end the work folder is packed into
# OUTDIR/gpu-real.tar.xz (and a large host core into a file of its own), since a device run brings back few files.
set -u
out=${1:?usage: capture_gpu.sh OUTDIR [BUDGET_SECONDS]}
budget=${2:-420}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
w="$out/work"
b="$w/bin"
mkdir -p "$w" "$b" "$w/coredump" "$w/flight"
printf 'step\trc\tseconds\tcommand\n' >"$w/steps.tsv"
t0=$SECONDS

# step NAME LIMIT CMD...: runs CMD with stdout and stderr in NAME.out / NAME.err; records the exit status.
step() {
    local name=$1 limit=$2
    shift 2
    local cmd="${*//[$'\t\n']/ }"  # one line a step
    if ((SECONDS - t0 > budget)); then
        printf '%s\tskipped\t0\t%s\n' "$name" "$cmd" >>"$w/steps.tsv"
        return 0
    fi
    local start=$SECONDS rc
    timeout -k 5 "$limit" "$@" >"$w/$name.out" 2>"$w/$name.err" </dev/null
    rc=$?
    printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - start))" "$cmd" >>"$w/steps.tsv"
    return 0
}
have() { command -v "$1" >/dev/null 2>&1; }

# Probe: what this machine has.
step probe-nvidia-smi 30 nvidia-smi
step probe-gpu 30 nvidia-smi --query-gpu=name,pci.bus_id,driver_version,compute_cap,memory.total --format=csv
step probe-nvcc 30 nvcc --version
step probe-tools 10 bash -c 'for t in nvcc compute-sanitizer cuda-gdb cuobjdump nvdisasm python3; do
    printf "%s\t%s\n" "$t" "$(command -v $t || echo missing)"; done; uname -a; cat /proc/sys/kernel/core_pattern'
step probe-torch 60 python3 -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available())'

# Builds, on this machine (the committed fixtures' libraries are used as they are).
step build-bugs 180 nvcc -lineinfo -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
    -o "$b/bugs" "$here/gpu/bugs.cu"
step build-arch-probe 120 nvcc -o "$b/arch_probe" "$here/gpu/arch_probe.cu"
arch_build() {  # arch_build NAME GENCODE...: a shared library of tools/gpu/arch_k.cu for those targets
    local name=$1
    shift
    step "build-arch-$name" 120 nvcc -shared -Xcompiler -fPIC -cudart shared "$@" -o "$b/libarch_$name.so" \
        "$here/gpu/arch_k.cu"
}
arch_build sm80 -gencode arch=compute_80,code=sm_80
arch_build ptx80 -gencode arch=compute_80,code=compute_80
arch_build sm90 -gencode arch=compute_90,code=sm_90
arch_build ptx120 -gencode arch=compute_120,code=compute_120
arch_build sm80_sm120 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_120,code=sm_120
arch_build sm90_rdc -rdc=true -gencode arch=compute_90,code=sm_90
cp "$repo"/tests/data/fatbin/libk_*.so "$b/" 2>/dev/null

# The programs with one bug each, run plainly: the CUDA error text a user sees.
modes="oob race uninit syncdiv misaligned assert illegal"
for m in $modes; do step "plain-$m" 60 "$b/bugs" "$m"; done

# compute-sanitizer: each bug under the tool that finds it, as text and as --xml.
sanitize() {  # sanitize TOOL MODE
    step "sanitizer-$1-$2" 180 compute-sanitizer --tool "$1" "$b/bugs" "$2"
    step "sanitizer-$1-$2-xml" 180 compute-sanitizer --tool "$1" --xml yes --save "$w/sanitizer-$1-$2.xml" \
        "$b/bugs" "$2"
}
for m in oob misaligned assert illegal; do sanitize memcheck "$m"; done
sanitize racecheck race
sanitize initcheck uninit
sanitize synccheck syncdiv

# cuda-gdb: where the faulting kernels stop.
for m in illegal misaligned assert; do
    step "cuda-gdb-$m" 180 cuda-gdb -batch -ex run -ex bt -ex 'info cuda kernels' -ex 'info cuda lanes' \
        -ex 'info cuda devices' --args "$b/bugs" "$m"
done

# A GPU core dump of the illegal address (and the host core the abort writes), then cuda-gdb reading it back.
step coredump 180 bash -c "cd '$w/coredump' && ulimit -c unlimited && CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1 \
    CUDA_COREDUMP_FILE='$w/coredump/core_%h_%p.nvcudmp' '$b/bugs' illegal"
step coredump-light 180 bash -c "cd '$w/coredump' && CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1 \
    CUDA_COREDUMP_GENERATION_FLAGS=skip_nonrelocated_elf_images,skip_global_memory,skip_shared_memory,skip_local_memory,skip_abort \
    CUDA_COREDUMP_FILE='$w/coredump/light_%h_%p.nvcudmp' '$b/bugs' illegal"
for dump in "$w"/coredump/*.nvcudmp; do
    [ -e "$dump" ] || continue
    step "cudacore-$(basename "$dump" .nvcudmp)" 180 cuda-gdb -batch -ex "target cudacore $dump" \
        -ex 'info cuda kernels' -ex 'info cuda devices' -ex 'info cuda sms' -ex 'info cuda warps' \
        -ex 'info cuda lanes' -ex bt -ex 'info registers $pc' -ex 'x/4i $pc'
done
step cuobjdump-bugs 60 cuobjdump -elf -sass "$b/bugs"

# Which builds launch on this GPU: one process a library, so a sticky error of one cannot spoil the next.
for lib in "$b"/libarch_*.so "$b"/libk_*.so; do
    [ -e "$lib" ] || continue
    n=$(basename "$lib" .so)
    step "arch-$n" 60 "$b/arch_probe" "$lib"
    step "arch-$n-nojit" 60 env CUDA_DISABLE_PTX_JIT=1 "$b/arch_probe" "$lib"
done
step arch-cuobjdump 60 bash -c "for f in '$b'/lib*.so; do echo \"== \$f\"; cuobjdump -lelf -lptx \"\$f\"; done"

# nvidia-smi, idle and under load.
step nvsmi-q 60 nvidia-smi -q
step nvsmi-q-x 60 nvidia-smi -q -x
step nvsmi-topo 60 nvidia-smi topo -m
step nvsmi-load 60 bash -c "'$b/bugs' burn 8 & sleep 1;
    nvidia-smi dmon -c 6 >'$w/nvsmi-dmon.txt' 2>&1 &
    timeout 6 nvidia-smi --query-gpu=timestamp,name,pci.bus_id,driver_version,pstate,temperature.gpu,utilization.gpu,utilization.memory,memory.total,memory.used,power.draw,clocks.sm,clocks.mem,clocks_throttle_reasons.active --format=csv -l 1;
    nvidia-smi >'$w/nvsmi-table-load.txt' 2>&1; nvidia-smi -q >'$w/nvsmi-q-load.txt' 2>&1;
    nvidia-smi -q -x >'$w/nvsmi-q-x-load.xml' 2>&1; wait"
step dmesg-nvrm 30 bash -c 'dmesg 2>&1 | grep -i -E "nvrm|xid|nvidia" | tail -200'

# PyTorch's own failures, where python3 has torch.
for c in oom assert; do step "torch-$c" 120 python3 "$here/gpu/torch_cases.py" "$c"; done
step torch-illegal 120 python3 "$here/gpu/torch_cases.py" illegal "$b/libk_multi.so"
step torch-illegal-blocking 120 env CUDA_LAUNCH_BLOCKING=1 python3 "$here/gpu/torch_cases.py" illegal "$b/libk_multi.so"
step torch-flight 180 bash -c "cd '$w/flight' && python3 '$here/gpu/torch_cases.py' flight"

# Pack: the work folder without the binaries; a large host core goes in a file of its own.
find "$w/coredump" -maxdepth 1 -name 'core*' ! -name '*.nvcudmp' -size +1M -exec mv {} "$out/" \; 2>/dev/null
for core in "$out"/core*; do [ -e "$core" ] && xz -T0 -6 "$core"; done
tar -C "$out" --exclude=work/bin -cJf "$out/gpu-real.tar.xz" work
echo "capture done in $((SECONDS - t0)) s; steps:"
cat "$w/steps.tsv"
rm -rf "$w"
