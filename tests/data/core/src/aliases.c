/* One function under several names of each binding, and a zero-sized label, built without -g so that gdb
   names them from the symbol table (its minimal symbols), for tests/test_symbols.py. */
#include <stdlib.h>

static int zz_local(int x) { return x * 3 + 1; }
int aa_global(int x) __attribute__((alias("zz_local")));
int mm_weak(int x) __attribute__((weak, alias("zz_local")));

static int aa_local(int x) { return x * 5 + 2; }
int zz_global(int x) __attribute__((alias("aa_local")));

__asm__(".text\n.globl zero_sized\nzero_sized:\n\tnop\n\tnop\n\tret\n");

int main(int argc, char **argv) { (void)argv; return aa_global(argc) + zz_global(argc) + (argc > 5 ? abort(), 0 : 0); }
