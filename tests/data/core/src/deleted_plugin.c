/* Loads ./libplugin.so, deletes the file, then crashes inside it: only the core holds the plugin now.
   coredump_filter 0x3f asks the kernel to dump file-backed pages too, so its CFI is in the core. */
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>
int main(void) {
    FILE *filter = fopen("/proc/self/coredump_filter", "w");
    if (filter) { fputs("0x3f", filter); fclose(filter); }
    void *plugin = dlopen("./libplugin.so", RTLD_NOW);
    if (!plugin) return 2;
    int (*run)(int *) = (int (*)(int *))dlsym(plugin, "plugin_run");
    unlink("libplugin.so");
    return run ? run(NULL) : 3;
}
