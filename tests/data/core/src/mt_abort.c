/* Four threads; thread 2 calls abort() while the others wait. */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
static pthread_barrier_t ready;
static void *waiter(void *arg) { pthread_barrier_wait(&ready); for (;;) pause(); return arg; }
static void *aborter(void *arg) { pthread_barrier_wait(&ready); usleep(10000); abort(); return arg; }
int main(void) {
    pthread_t t[4];
    pthread_barrier_init(&ready, NULL, 5);
    for (long i = 0; i < 4; i++) pthread_create(&t[i], NULL, i == 2 ? aborter : waiter, NULL);
    pthread_barrier_wait(&ready);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    return 0;
}
