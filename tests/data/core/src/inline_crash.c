/* Built -O2 so that the static functions are inlined: the NULL write happens inside store (inlined
   into twice, inlined into outer), and main's return address lies inside run, inlined into main. */
#include <stddef.h>

static volatile int sink;

static inline __attribute__((always_inline)) void store(int *p, int v) { p[v - 1] = v; }
static inline __attribute__((always_inline)) void twice(int *p, int v) { store(p, v); sink = v; }
__attribute__((noinline, noclone)) void outer(int *p, int v) { twice(p, v); sink = 2; }
static inline __attribute__((always_inline)) void run(int *p, int v) { outer(p, v); sink = 3; }

int main(int argc, char **argv) {
    (void)argv;
    run(NULL, argc);
    return 0;
}
