/* Calls through every x86-64 PLT layout ld makes (lazy .plt, .plt.sec with IBT, .plt.got for a function whose
   address is also taken), for tests/test_symbols.py: gdb stops the program in a stub and writes a core. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int (*volatile take)(const char *) = puts;

int main(int argc, char **argv)
{
    take("through the GOT");
    printf("%zu\n", strlen(argv[0]));
    puts("through the PLT");
    abort();
}
