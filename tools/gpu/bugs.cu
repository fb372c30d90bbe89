// Small CUDA programs with one known bug each, for tools/capture_gpu.sh (issue 18): run on a real GPU, plainly,
// under compute-sanitizer and under cuda-gdb, so postmortem's GPU-side readers are checked against real output.
// Usage: bugs MODE   with MODE one of: oob race uninit syncdiv misaligned assert illegal burn ok
#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CHECK(call)                                                                                        \
    do {                                                                                                   \
        cudaError_t err_ = (call);                                                                         \
        if (err_ != cudaSuccess) {                                                                         \
            fprintf(stderr, "CUDA error at %s:%d: %s (%s)\n", __FILE__, __LINE__, cudaGetErrorString(err_), \
                    cudaGetErrorName(err_));                                                               \
            return 1;                                                                                      \
        }                                                                                                  \
    } while (0)

// One element past the end of a 1000-element buffer is written by the last thread of the last block.
__global__ void write_past_end(int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) out[i] = i;
}

// Neighbours read a shared slot that another thread writes, with no barrier between: a shared-memory race.
__global__ void shared_race(int *out) {
    __shared__ int slots[256];
    slots[threadIdx.x] = threadIdx.x;
    out[threadIdx.x] = slots[(threadIdx.x + 1) % blockDim.x];
}

// Reads a buffer that cudaMalloc gave and nothing wrote.
__global__ void read_uninit(const int *in, int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] + 1;
}

// Only the even threads of each warp reach the barrier.
__global__ void divergent_barrier(int *out) {
    __shared__ int slot[64];
    if (threadIdx.x % 2 == 0) {
        slot[threadIdx.x] = 1;
        __syncthreads();
    }
    out[threadIdx.x] = slot[threadIdx.x];
}

// A 4-byte load from an address that is 4-byte aligned plus one.
__global__ void misaligned_load(const char *base, int *out) {
    const int *p = reinterpret_cast<const int *>(base + 1);
    out[threadIdx.x] = p[threadIdx.x];
}

// An index check that fails for the last thread, as a bounds assert in a framework's kernel does.
__global__ void index_assert(const int *index, int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int k = index[i];
    assert(k >= 0 && k < n);
    out[i] = k;
}

// A store a quarter of a gigabyte past its buffer: a warp illegal address, which a GPU core dump records.
__global__ void store_far(int *p) { p[blockIdx.x * blockDim.x + threadIdx.x + (1 << 28)] = 1; }

// Keeps the GPU busy for about the given number of clock ticks, so nvidia-smi sees load.
__global__ void spin(long long ticks, int *out) {
    long long start = clock64();
    while (clock64() - start < ticks) {
    }
    out[blockIdx.x] = 1;
}

static int finish(const char *what) {
    cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess) {
        fprintf(stderr, "CUDA error after %s: %s (%s)\n", what, cudaGetErrorString(err), cudaGetErrorName(err));
        return 1;
    }
    printf("%s: finished without a CUDA error\n", what);
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "ok";
    int *out = nullptr, *in = nullptr;
    const int n = 1000;
    CHECK(cudaMalloc(&out, 4096 * sizeof(int)));
    CHECK(cudaMalloc(&in, 4096 * sizeof(int)));
    if (!strcmp(mode, "oob")) {
        int *small = nullptr;
        CHECK(cudaMalloc(&small, n * sizeof(int)));
        write_past_end<<<(n + 255) / 256, 256>>>(small, n);
        return finish("write_past_end");
    }
    if (!strcmp(mode, "race")) {
        shared_race<<<1, 256>>>(out);
        return finish("shared_race");
    }
    if (!strcmp(mode, "uninit")) {
        read_uninit<<<4, 256>>>(in, out, n);
        return finish("read_uninit");
    }
    if (!strcmp(mode, "syncdiv")) {
        divergent_barrier<<<1, 64>>>(out);
        return finish("divergent_barrier");
    }
    if (!strcmp(mode, "misaligned")) {
        misaligned_load<<<1, 32>>>(reinterpret_cast<const char *>(in), out);
        return finish("misaligned_load");
    }
    if (!strcmp(mode, "assert")) {
        int host[256];
        for (int i = 0; i < 256; ++i) host[i] = i;
        host[255] = n + 7;
        CHECK(cudaMemcpy(in, host, sizeof host, cudaMemcpyHostToDevice));
        index_assert<<<1, 256>>>(in, out, n);
        return finish("index_assert");
    }
    if (!strcmp(mode, "illegal")) {
        store_far<<<4, 128>>>(out);
        return finish("store_far");
    }
    if (!strcmp(mode, "burn")) {
        int seconds = argc > 2 ? atoi(argv[2]) : 5;
        int rate_khz = 0;
        CHECK(cudaDeviceGetAttribute(&rate_khz, cudaDevAttrClockRate, 0));
        spin<<<1024, 128>>>(static_cast<long long>(rate_khz) * 1000 * seconds, out);
        return finish("spin");
    }
    CHECK(cudaMemset(out, 0, 4096 * sizeof(int)));
    return finish("ok");
}
