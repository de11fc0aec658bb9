// child.c: see child.h.
#include "child.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

// In the child between fork and exec: async-signal-safe calls only (the parent has threads).
static _Noreturn void s_child_exec(char *const *argv, pid_t parent, const int *fds, int n_fds) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) { // the parent died before prctl took effect
        _exit(1);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL); // the actor ignores it; exec keeps ignored signals ignored
    // The fds to pass go to 3, 4, ...: first out of the way (above any target), then down,
    // so that one fd's target can never be another's source. dup2 clears close-on-exec.
    int high[CHILD_MAX_FDS];
    for (int i = 0; i < n_fds; i++) {
        high[i] = fcntl(fds[i], F_DUPFD, 3 + CHILD_MAX_FDS);
        if (high[i] < 0) {
            _exit(126);
        }
    }
    for (int i = 0; i < n_fds; i++) {
        if (dup2(high[i], 3 + i) < 0) {
            _exit(126);
        }
    }
#ifdef SYS_close_range
    // The actor's sockets are not the child's.
    syscall(SYS_close_range, (unsigned)(3 + n_fds), ~0u, 0u);
#else
    for (int fd = 3 + n_fds; fd < 1024; fd++) {
        close(fd);
    }
#endif
    execv(argv[0], argv);
    static const char msg[] = "apex child: exec failed\n";
    ssize_t rc = write(2, msg, sizeof msg - 1);
    (void)rc;
    _exit(127);
}

pid_t child_start_fds(char *const *argv, const int *fds, int n_fds) {
    if (n_fds < 0 || n_fds > CHILD_MAX_FDS) {
        errno = EINVAL;
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        s_child_exec(argv, parent, fds, n_fds);
    }
    return pid;
}

pid_t child_start(char *const *argv) { return child_start_fds(argv, NULL, 0); }

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
