// child.c: see child.h.
#include "child.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

// In the child between fork and exec: async-signal-safe calls only (the parent has threads).
static _Noreturn void s_child_exec(char *const *argv, pid_t parent) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) { // the parent died before prctl took effect
        _exit(1);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL); // the actor ignores it; exec keeps ignored signals ignored
#ifdef SYS_close_range
    syscall(SYS_close_range, 3u, ~0u, 0u); // the actor's sockets are not the child's
#endif
    execv(argv[0], argv);
    static const char msg[] = "apex child: exec failed\n";
    ssize_t rc = write(2, msg, sizeof msg - 1);
    (void)rc;
    _exit(127);
}

pid_t child_start(char *const *argv) {
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        s_child_exec(argv, parent);
    }
    return pid;
}

int child_reap(pid_t pid, char *how, size_t cap) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == 0 || (r < 0 && errno == EINTR)) {
        return 0;
    }
    if (r < 0) {
        snprintf(how, cap, "vanished (%s: reaped elsewhere, is SIGCHLD ignored?)", strerror(errno));
    } else if (WIFEXITED(status)) {
        snprintf(how, cap, "exited with status %d", WEXITSTATUS(status));
    } else if (WIFSIGNALED(status)) {
        snprintf(how, cap, "was killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    } else {
        snprintf(how, cap, "ended (wait status 0x%x)", (unsigned)status);
    }
    return 1;
}

void child_kill_wait(pid_t pid) {
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
}
