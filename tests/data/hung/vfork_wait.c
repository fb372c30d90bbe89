/* A thread in uninterruptible sleep, made without any driver: after vfork() the parent sleeps in the kernel
 * (state D, wait_for_vfork_done) until the child execs or exits; this child sleeps first. A ptrace interrupt
 * cannot stop such a thread until it wakes: what a thread stuck in a GPU driver looks like to a snapshot. With the
 * argument "thread", a second thread waits in pause() first: a process whose other threads can be stopped. */
#include <pthread.h>
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

static void *idle(void *unused)
{
    (void)unused;
    for (;;)
        pause();
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t other;
    if (argc > 1 && pthread_create(&other, NULL, idle, NULL) != 0)
        return 2;
    ready();
    pid_t child = vfork(); /* HANG vfork */
    if (child == 0) {
        sleep(600);
        _exit(0);
    }
    return child < 0;
}
