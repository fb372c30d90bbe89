/* Four calls deep, each doing work after its call (no tail calls), then a write through NULL. Built
   -O2 -fomit-frame-pointer, the callers can only be found by CFI: frame pointers are gone, and a
   stack scan is a guess. Built -static (no .eh_frame_hdr) and -fno-asynchronous-unwind-tables -g
   (.debug_frame only), it tests where the unwinder finds that CFI. */
int *volatile target;
volatile int sink;
__attribute__((noinline)) int leaf(int x) { *target = x; return sink + x; }
__attribute__((noinline)) int level3(int x) { return leaf(x + 1) * 3 + sink; }
__attribute__((noinline)) int level2(int x) { return level3(x * 2) * 2 + sink; }
__attribute__((noinline)) int level1(int x) { return level2(x - 1) - sink; }
int main(void) { return level1(sink); }
