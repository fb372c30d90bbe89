/* A SIGSEGV handler that calls abort(): the stack passes through a signal frame. */
#include <signal.h>
#include <stdlib.h>
#include <stddef.h>
void lib_a(int *p);
static void on_segv(int sig, siginfo_t *info, void *context) { (void)sig; (void)info; (void)context; abort(); }
int main(void) {
    struct sigaction action = {0};
    action.sa_sigaction = on_segv;
    action.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &action, NULL);
    lib_a(NULL);
    return 0;
}
