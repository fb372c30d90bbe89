/* Blocks in read() on a pipe nobody writes, two calls below main: the native stack gdb must show. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void ready(void)
{
    char line[64];
    int n = snprintf(line, sizeof line, "main %d\n", (int)getpid());
    if (write(atoi(getenv("HUNG_READY_FD")), line, (size_t)n) != n)
        exit(2);
}

__attribute__((noinline)) static ssize_t wait_for_input(int fd)
{
    char byte;
    ready();
    return read(fd, &byte, 1); /* HANG read */
}

int main(void)
{
    int fds[2];
    if (pipe(fds) != 0)
        return 1;
    return (int)wait_for_input(fds[0]); /* HANG main */
}
