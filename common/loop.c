// loop.c: see loop.h.
#define LOG_MODULE "loop"
#include "loop.h"

#include "apex.h"
#include "clock.h"
#include "log.h"
#include "signals.h"
#include "xalloc.h"

#include <errno.h>
#include <poll.h>
#include <zmq.h>

typedef struct {
    loop_reader_fn fn;
    void *arg;
    void *socket;
    int drains; // registered with loop_add_drain_reader
    // The socket was left empty with its commands processed (its last operation was a
    // receive that said EAGAIN, or ZMQ_EVENTS without POLLIN), so its ZMQ_FD will signal
    // new input and the loop may block on the fd without asking libzmq first.
    int empty;
    int ready;
    // loop_recheck was called for this socket while its own reader ran: whatever the
    // reader returns, an operation may have followed its last receive.
    int rechecked;
} s_reader;

typedef struct {
    int64_t interval_ms;
    int64_t next_ms;
    loop_timer_fn fn;
    void *arg;
} s_timer;

struct loop {
    struct pollfd fds[LOOP_MAX_READERS]; // each reader socket's ZMQ_FD
    s_reader readers[LOOP_MAX_READERS];
    int n_readers;
    s_timer timers[LOOP_MAX_TIMERS];
    int n_timers;
    loop_idle_fn idle;
    void *idle_arg;
    int busy; // the idle handler's last answer was "more work"
    int stop;
};

loop_t *loop_new(void) { return xcalloc(1, sizeof(loop_t)); }

void loop_destroy(loop_t **self_p) {
    if (self_p && *self_p) {
        free(*self_p);
        *self_p = NULL;
    }
}

static int s_add_reader(loop_t *self, void *socket, loop_reader_fn fn, void *arg, int drains) {
    if (self->n_readers == LOOP_MAX_READERS) {
        return -1;
    }
    int fd;
    size_t sz = sizeof fd;
    if (zmq_getsockopt(socket, ZMQ_FD, &fd, &sz) != 0) {
        return -1;
    }
    int i = self->n_readers++;
    self->fds[i] = (struct pollfd){.fd = fd, .events = POLLIN};
    self->readers[i] = (s_reader){.fn = fn, .arg = arg, .socket = socket, .drains = drains};
    return 0;
}

int loop_add_reader(loop_t *self, void *socket, loop_reader_fn fn, void *arg) {
    return s_add_reader(self, socket, fn, arg, 0);
}

int loop_add_drain_reader(loop_t *self, void *socket, loop_reader_fn fn, void *arg) {
    return s_add_reader(self, socket, fn, arg, 1);
}

void loop_drained(loop_t *self, void *socket) {
    for (int i = 0; i < self->n_readers; i++) {
        if (self->readers[i].socket == socket) {
            self->readers[i].rechecked = 0;
        }
    }
}

void loop_recheck(loop_t *self, void *socket) {
    for (int i = 0; i < self->n_readers; i++) {
        if (self->readers[i].socket == socket) {
            self->readers[i].empty = 0;
            self->readers[i].rechecked = 1;
        }
    }
}

// Asks libzmq whether the reader's socket has input; this processes the socket's pending
// commands, after which (without POLLIN) its ZMQ_FD is a reliable signal. Returns 1 when
// there is input, 0 when not, -1 on error.
static int s_check_events(s_reader *r) {
    uint32_t ev = 0;
    size_t sz = sizeof ev;
    if (zmq_getsockopt(r->socket, ZMQ_EVENTS, &ev, &sz) != 0) {
        return -1;
    }
    r->empty = !(ev & ZMQ_POLLIN);
    return !r->empty;
}

int loop_add_timer(loop_t *self, int64_t interval_ms, loop_timer_fn fn, void *arg) {
    if (self->n_timers == LOOP_MAX_TIMERS) {
        return -1;
    }
    APEX_ASSERT(interval_ms > 0);
    self->timers[self->n_timers++] = (s_timer){interval_ms, clock_now_ms() + interval_ms, fn, arg};
    return 0;
}

void loop_set_idle(loop_t *self, loop_idle_fn fn, void *arg) {
    self->idle = fn;
    self->idle_arg = arg;
}

void loop_stop(loop_t *self) { self->stop = 1; }

// Runs due timers; returns the ms until the next one (capped at 1 s so that the shutdown
// flag is seen promptly even if a signal slips past zmq_poll's EINTR), or -1 to stop.
static int64_t s_run_timers(loop_t *self) {
    int64_t now = clock_now_ms();
    int64_t wait = 1000;
    for (int i = 0; i < self->n_timers; i++) {
        s_timer *t = &self->timers[i];
        if (now >= t->next_ms) {
            if (t->fn(self, t->arg) != 0) {
                return -1;
            }
            // Skip missed ticks instead of firing a burst after a stall.
            t->next_ms += t->interval_ms;
            if (t->next_ms <= now) {
                t->next_ms = now + t->interval_ms;
            }
        }
        if (t->next_ms - now < wait) {
            wait = t->next_ms - now;
        }
    }
    return wait < 0 ? 0 : wait;
}

// While the idle handler is busy, sockets and timers are looked at only this often: a
// zmq_poll is a system call, and the actor's idle handler (one vector step) can run
// hundreds of thousands of times a second.
#define BUSY_POLL_NS 200000

// Waits for input as zmq_poll would, with fewer system calls: libzmq spends two (getpid and
// poll) on every ZMQ_EVENTS query and every receive that finds nothing, and zmq_poll asks
// every socket before and again after it blocks. Here a socket known to be empty (its
// drain reader's last receive said EAGAIN) is not asked at all: the loop blocks on its
// ZMQ_FD, and when the fd fires the drain reader is called directly (its own DONTWAIT
// receive processes the commands). Other sockets are asked with ZMQ_EVENTS, as before.
// Returns the number of readers marked ready, or -1 on a poll error.
static int s_wait(loop_t *self, int64_t wait) {
    int ready = 0;
    for (int i = 0; i < self->n_readers; i++) {
        s_reader *r = &self->readers[i];
        r->ready = 0;
        // Other readers' sockets may be used by anyone between two waits (the actor and the
        // learner send from their idle handlers): ask libzmq every time, as zmq_poll does.
        r->empty = r->drains && r->empty;
        if (!r->empty) {
            int rc = s_check_events(r);
            if (rc < 0) {
                return -1;
            }
            r->ready = rc;
            ready += rc;
        }
    }
    // Even with input known, a zero-timeout poll: an empty drain reader's socket is only
    // ever seen through its fd, and must not wait behind a busy neighbour.
    int rc = poll(self->fds, (nfds_t)self->n_readers, ready > 0 ? 0 : (int)wait);
    if (rc <= 0) {
        return rc < 0 && errno != EINTR ? -1 : ready;
    }
    for (int i = 0; i < self->n_readers; i++) {
        s_reader *r = &self->readers[i];
        if (!self->fds[i].revents || r->ready) {
            continue;
        }
        // The fd says "commands waiting", which may or may not mean input.
        if (r->drains) {
            r->ready = 1;
        } else if ((r->ready = s_check_events(r)) < 0) {
            return -1;
        }
        ready += r->ready;
    }
    return ready;
}

int loop_run(loop_t *self) {
    self->stop = 0;
    int64_t last_poll_ns = 0;
    for (int i = 0; i < self->n_readers; i++) {
        self->readers[i].empty = 0; // nothing is known about the sockets yet
    }
    while (!self->stop && !signals_should_stop()) {
        if (self->idle && self->busy && clock_now_ns() - last_poll_ns < BUSY_POLL_NS) {
            int r = self->idle(self, self->idle_arg);
            if (r < 0) {
                break;
            }
            self->busy = r > 0;
            continue;
        }
        last_poll_ns = clock_now_ns();
        int64_t wait = s_run_timers(self);
        if (wait < 0) {
            break;
        }
        if (self->idle) {
            int r = self->idle(self, self->idle_arg);
            if (r < 0) {
                break;
            }
            self->busy = r > 0;
            if (r > 0) {
                wait = 0;
            }
        }
        int rc = s_wait(self, wait);
        if (rc < 0) {
            log_error("poll: %s", zmq_strerror(errno));
            return -1;
        }
        for (int i = 0; i < self->n_readers && rc > 0 && !self->stop; i++) {
            s_reader *r = &self->readers[i];
            if (!r->ready) {
                continue;
            }
            r->empty = 0;
            r->rechecked = 0;
            int res = r->fn(self, r->socket, r->arg);
            if (res < 0) {
                return 0;
            }
            // A send on the socket after the reader's last receive (e.g. acks) may have
            // consumed the fd's wake-up: then LOOP_DRAINED cannot be trusted.
            r->empty = r->drains && res == LOOP_DRAINED && !r->rechecked;
        }
    }
    return 0;
}

int loop_timer_intervals(const loop_t *self, int64_t *intervals_ms, int max) {
    for (int i = 0; i < self->n_timers && i < max; i++) {
        intervals_ms[i] = self->timers[i].interval_ms;
    }
    return self->n_timers;
}
