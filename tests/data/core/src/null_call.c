/* Calls through a NULL function pointer two frames down: frame 0 is pc 0, its caller is at the stack pointer. */
#include <stddef.h>
typedef void (*handler_fn)(int);
handler_fn volatile handler = NULL;
__attribute__((noinline)) void dispatch(int event) { handler(event); }
__attribute__((noinline)) void run_loop(int n) { dispatch(n); }
int main(void) { run_loop(1); return 0; }
