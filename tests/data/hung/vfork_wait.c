/* A thread in uninterruptible sleep, made without any driver: after vfork() the parent sleeps in the kernel
 * (state D, wait_for_vfork_done) until the child execs or exits; this child sleeps first. A ptrace interrupt
 * cannot stop such a thread until it wakes: what a thread stuck in a GPU driver looks like to a snapshot. */
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

int main(void)
{
    ready();
    pid_t child = vfork(); /* HANG vfork */
    if (child == 0) {
        sleep(600);
        _exit(0);
    }
    return child < 0;
}
