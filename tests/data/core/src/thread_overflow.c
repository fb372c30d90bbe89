/* A thread with a 256 KiB stack recurses until it hits the guard page glibc maps below that stack. */
#include <pthread.h>
__attribute__((noinline)) int recurse(int depth) {
    volatile char pad[64];
    pad[0] = (char)depth;
    return recurse(depth + 1) + pad[0];
}
static void *worker(void *arg) { (void)arg; recurse(0); return 0; }
int main(void) {
    pthread_attr_t attr;
    pthread_t thread;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1 << 18);
    pthread_create(&thread, &attr, worker, 0);
    pthread_join(thread, 0);
    return 0;
}
