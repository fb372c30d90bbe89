/* Loads the library named in argv[1] and calls its function argv[2] with a NULL pointer. */
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    if (argc < 3) return 2;
    void *library = dlopen(argv[1], RTLD_NOW);
    if (!library) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    int (*entry)(int *) = (int (*)(int *))dlsym(library, argv[2]);
    if (!entry) return 1;
    return entry(0);
}
