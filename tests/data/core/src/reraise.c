/* A SIGSEGV handler that re-raises the signal the way Python's faulthandler does (SA_NODEFER, SIG_DFL,
   raise): the process dies inside the handler, three frames under it in libcrash.so. With the argument
   "altstack" the handler runs on a sigaltstack. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
void lib_a(int *p);
static void on_segv(int sig, siginfo_t *info, void *context) {
    (void)info; (void)context;
    signal(sig, SIG_DFL);
    raise(sig);
}
int main(int argc, char **argv) {
    struct sigaction action = {0};
    action.sa_sigaction = on_segv;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    if (argc > 1 && strcmp(argv[1], "altstack") == 0) {
        stack_t alt = {.ss_sp = malloc(1 << 16), .ss_size = 1 << 16};
        sigaltstack(&alt, NULL);
        action.sa_flags |= SA_ONSTACK;
    }
    sigaction(SIGSEGV, &action, NULL);
    lib_a(NULL);
    return 0;
}
