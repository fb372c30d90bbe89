/* A plugin three calls deep (no tail calls, no frame pointers at -O2 -fomit-frame-pointer), then a NULL write. */
volatile int plugin_sink;
__attribute__((noinline)) static int plugin_leaf(int *p, int x) { *p = x; return plugin_sink + x; }
__attribute__((noinline)) static int plugin_step(int *p, int x) { return plugin_leaf(p, x + 1) * 3 + plugin_sink; }
int plugin_run(int *p) { return plugin_step(p, plugin_sink) * 2 + plugin_sink; }
