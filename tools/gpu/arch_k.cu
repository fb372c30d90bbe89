// One kernel and a C entry point, built by tools/capture_gpu.sh for several targets (SASS of one architecture,
// PTX of one, both): which builds launch on the GPU at hand, and which fail with "no kernel image", is the oracle
// for postmortem's arch-mismatch rules.
#include <cuda_runtime.h>

__global__ void scale(float *x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}

// Returns the CUDA error of one launch of scale and its synchronisation (0 when it ran).
extern "C" int run_scale(void) {
    float *x = nullptr;
    const int n = 1 << 16;
    cudaError_t err = cudaMalloc(&x, n * sizeof(float));
    if (err != cudaSuccess) return err;
    scale<<<(n + 255) / 256, 256>>>(x, 2.0f, n);
    err = cudaGetLastError();
    if (err == cudaSuccess) err = cudaDeviceSynchronize();
    cudaFree(x);
    return err;
}
