// Loads each library named on the command line, launches its kernels and prints what the launch did, one line per
// library: the oracle of tools/capture_gpu.sh's arch step. A library of tools/gpu/arch_k.cu is run through its
// run_scale(); one of tests/data/fatbin/k.cu through its launch(), whose second kernel stores out of bounds, so
// cudaErrorIllegalAddress there means its kernels were found and ran.
#include <cstdio>
#include <cuda_runtime.h>
#include <dlfcn.h>

int main(int argc, char **argv) {
    int failed = 0;
    for (int i = 1; i < argc; ++i) {
        void *lib = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            printf("%s\tdlopen\t%s\n", argv[i], dlerror());
            ++failed;
            continue;
        }
        cudaError_t err;
        auto run = reinterpret_cast<int (*)(void)>(dlsym(lib, "run_scale"));
        auto launch = reinterpret_cast<void (*)(float *, int, int *)>(dlsym(lib, "launch"));
        if (run) {
            err = static_cast<cudaError_t>(run());
        } else if (launch) {
            float *x = nullptr;
            int *p = nullptr;
            err = cudaMalloc(&x, 1024 * sizeof(float));
            if (err == cudaSuccess) err = cudaMalloc(&p, 1024 * sizeof(int));
            if (err == cudaSuccess) {
                launch(x, 1024, p);
                err = cudaGetLastError();
                if (err == cudaSuccess) err = cudaDeviceSynchronize();
            }
        } else {
            printf("%s\tdlsym\tneither run_scale nor launch found\n", argv[i]);
            ++failed;
            continue;
        }
        printf("%s\t%s\t%s\n", argv[i], cudaGetErrorName(err), cudaGetErrorString(err));
        fflush(stdout);
        failed += err != cudaSuccess;
    }
    return failed ? 1 : 0;
}
