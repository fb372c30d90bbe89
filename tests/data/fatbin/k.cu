// Two kernels for postmortem's fatbin tests: one that writes out of bounds on purpose.
extern "C" __global__ void scale(float *x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}

__global__ void crash(int *p) {
    p[blockIdx.x * blockDim.x + threadIdx.x + (1 << 28)] = 1;
}

extern "C" void launch(float *x, int n, int *p) {
    scale<<<(n + 255) / 256, 256>>>(x, 2.0f, n);
    crash<<<4, 128>>>(p);
}
