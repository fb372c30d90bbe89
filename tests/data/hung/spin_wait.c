/* A program that spins in a function named as CUDA's synchronize is: CUDA's default wait for a kernel polls, burning
   a core, so a job stuck in cudaStreamSynchronize uses CPU while it makes no progress. postmortem run --hang-after
   must call it hung, not busy (tests/test_snapshot.py). It spins for argv[1] seconds, then exits. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int cudaStreamSynchronize(void *stream, long seconds) {
    time_t end = time(NULL) + seconds;
    volatile unsigned long spins = 0;
    while (time(NULL) < end) { /* HANG spin */
        spins++;
    }
    return stream != NULL;
}

int main(int argc, char **argv) {
    printf("working\n");
    fflush(stdout);
    cudaStreamSynchronize(NULL, argc > 1 ? atol(argv[1]) : 6);
    printf("done\n");
    return 0;
}
