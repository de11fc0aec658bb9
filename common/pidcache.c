// pidcache.c: getpid() without a system call, for libzmq's wake-ups.
//
// libzmq is built with fork detection: every time one of its threads wakes another
// (signaler_t::send, ::wait, ::recv_failable) it compares the pid the signaler was made in
// with getpid(), so that a forked child never signals its parent's sockets. glibc stopped
// caching the pid in 2.25, so each of those is a system call, and on the VMs this project
// runs on a system call costs 1.5-3 us. `strace -c -f build/bench/bench_replay_tcp
// --pushers 0` counted ~11 getpid calls per sampled batch (one request, one reply and one
// priority update), more than any other system call but poll; caching it raised the
// learner's sample rate over TCP by 15-25 % (bench/RESULTS.md).
//
// A function named getpid in the executable interposes libc's for every shared library:
// the linker exports it because libzmq refers to it, and the dynamic linker binds libzmq's
// calls to it. The value is read at start-up and again in the child of every fork, by a
// pthread_atfork handler, so fork detection stays correct: the only forks in apex are
// glibc fork() calls (the replay server's snapshot children), which run the handlers. A raw
// clone(2) or vfork would not; apex makes none. check_apex tests both the value after a
// fork and that the interposition is in effect; cli.sh checks every daemon exports it.
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

// 0 until first read. Relaxed atomics: every thread that fills it stores the same value.
static _Atomic pid_t s_pid;

static void s_refresh(void) {
    atomic_store_explicit(&s_pid, (pid_t)syscall(SYS_getpid), memory_order_relaxed);
}

__attribute__((constructor)) static void s_init(void) {
    s_refresh();
    pthread_atfork(NULL, NULL, s_refresh);
}

pid_t getpid(void) {
    // A shared library's constructor may run before s_init.
    pid_t p = atomic_load_explicit(&s_pid, memory_order_relaxed);
    if (__builtin_expect(p == 0, 0)) {
        s_refresh();
        p = atomic_load_explicit(&s_pid, memory_order_relaxed);
    }
    return p;
}
