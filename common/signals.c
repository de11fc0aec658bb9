// signals.c: see signals.h.
#include "signals.h"

#include "log.h"

#include <string.h>
#include <unistd.h>

volatile sig_atomic_t signals_shutdown_requested = 0;

static void s_on_signal(int sig) {
    if (signals_shutdown_requested) {
        log_raw_from_handler("second signal: exiting now\n");
        _exit(130);
    }
    signals_shutdown_requested = sig;
}

void signals_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = s_on_signal;
    sigemptyset(&sa.sa_mask);
    // No SA_RESTART: a blocking call returns EINTR so that the loop sees the flag promptly.
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    // A file-size limit (ulimit -f) must make write(2) fail with EFBIG, which is handled like
    // a full disk, instead of killing the daemon.
    signal(SIGXFSZ, SIG_IGN);
}
