/* The library swapped_library.c maps, built twice by tests/test_snapshot.py with its one function named
   MARKER_FN each time: the same code at the same offsets, another name in its symbol and line tables. */
#include <unistd.h>

int MARKER_FN(int fd)
{
    char byte;
    return (int)read(fd, &byte, 1); /* HANG read */
}
