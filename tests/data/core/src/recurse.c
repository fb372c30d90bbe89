/* Recurses without end until the stack's guard gap stops it with SIGSEGV (a stack overflow). */
#include <stdio.h>
__attribute__((noinline)) int recurse(int depth) {
    volatile char pad[64];
    pad[0] = (char)depth;
    return recurse(depth + 1) + pad[0];
}
int main(void) { printf("%d\n", recurse(0)); return 0; }
