/* Threads whose stacks all lie in one big mapping, as Go's goroutine stacks lie in its heap arenas and a fiber
 * pool's in one allocation: THREADS threads, each given a slice of one 64 MiB anonymous mapping as its stack
 * (pthread_attr_setstack), all blocked in read() on a pipe no one writes. A snapshot that copied each thread's
 * stack up to the end of its mapping would copy the mapping once per thread. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define THREADS 200
#define MAPPING (64UL << 20)
#define SLICE ((MAPPING / THREADS) & ~4095UL)

static int never[2];

static void *wait_here(void *arg)
{
    char buffer[256];
    memset(buffer, (int)(long)arg, sizeof buffer); /* a frame with bytes of its own */
    if (read(never[0], buffer, sizeof buffer) < 0) /* HANG wait_here */
        return NULL;
    return arg;
}

int main(void)
{
    char *stacks = mmap(NULL, MAPPING, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (stacks == MAP_FAILED || pipe(never) != 0)
        return 2;
    memset(stacks, 0x5a, MAPPING); /* every page real, as a busy arena's are */
    for (long i = 0; i < THREADS; i++) {
        pthread_attr_t attr;
        pthread_t thread;
        pthread_attr_init(&attr);
        pthread_attr_setstack(&attr, stacks + i * SLICE, SLICE);
        if (pthread_create(&thread, &attr, wait_here, (void *)i) != 0)
            return 3;
    }
    char line[64];
    int n = snprintf(line, sizeof line, "main %d\n", (int)getpid());
    if (write(atoi(getenv("HUNG_READY_FD")), line, (size_t)n) != n)
        return 4;
    char byte;
    return (int)read(never[0], &byte, 1);
}
