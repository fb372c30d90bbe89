__attribute__((noinline)) void lib_c(int *p) { *p = 1; }
__attribute__((noinline)) void lib_b(int *p) { lib_c(p); }
__attribute__((noinline)) void lib_a(int *p) { lib_b(p); }
int main(void) { lib_a(0); return 0; }
