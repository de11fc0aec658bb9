// child.h: child processes of the actor (its Python env workers): start, reap without
// blocking, kill.
//
// What it does: fork + exec with the child in its own process group (a terminal's Ctrl-C
// reaches the actor, which then stops its children) and with PR_SET_PDEATHSIG = SIGKILL (the
// child dies with the thread that started it, even when that is SIGKILLed), every fd above
// 2 closed and the signal mask cleared. Reaping is waitpid(pid, WNOHANG) on the given pid
// only, so other children of the process are left alone.
// What it does not do: install a SIGCHLD handler (the caller polls), search PATH, or
// redirect output (children write to the actor's stderr). Descriptors reach a child only
// when passed to child_start_fds.
// Thread-safe; PR_SET_PDEATHSIG ties a child to the calling *thread*.
#ifndef APEX_CHILD_H
#define APEX_CHILD_H

#include <stddef.h>
#include <sys/types.h>

// Starts argv[0] (a path) with argv (NULL-terminated). Returns the pid, or -1 with errno
// set (fork failed; a failed exec shows as the child exiting with status 127).
pid_t child_start(char *const *argv);
// child_start, with the caller's fds[0 .. n_fds) (n_fds <= CHILD_MAX_FDS) given to the child
// as its fds 3, 4, ... (close-on-exec cleared); every other fd above 2 is closed there.
#define CHILD_MAX_FDS 8
pid_t child_start_fds(char *const *argv, const int *fds, int n_fds);
// Returns 1 if pid has ended (and reaps it), writing how ("exited with status 2", "was
// killed by signal 9 (Killed)") into how; 0 while it runs. A pid that is not a child any
// more (reaped elsewhere: SIGCHLD ignored?) counts as ended.
int child_reap(pid_t pid, char *how, size_t cap);
// Sends SIGKILL to pid and waits for it (blocking; SIGKILL ends it at once).
void child_kill_wait(pid_t pid);

#endif
