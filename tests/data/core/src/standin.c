/* A stand-in for a GPU-stack library (named like libcuda, libcublasLt, libtorch_cuda or a user's
   extension by the build): ENTRY calls two internal functions and the innermost writes through NULL,
   or calls abort() when built with -DABORT (a library giving up on an error path). */
#include <stdlib.h>
__attribute__((noinline)) static void inner(int *p) {
#ifdef ABORT
    if (!p) abort();
#endif
    *p = 1;
}
__attribute__((noinline)) static void middle(int *p) { inner(p); __asm__ volatile(""); }
int ENTRY(int *p) { middle(p); return 0; }
