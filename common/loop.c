// loop.c: see loop.h.
#define LOG_MODULE "loop"
#include "loop.h"

#include "apex.h"
#include "clock.h"
#include "log.h"
#include "signals.h"
#include "xalloc.h"

#include <errno.h>
#include <zmq.h>

typedef struct {
    loop_reader_fn fn;
    void *arg;
} s_reader;

typedef struct {
    int64_t interval_ms;
    int64_t next_ms;
    loop_timer_fn fn;
    void *arg;
} s_timer;

struct loop {
    zmq_pollitem_t items[LOOP_MAX_READERS];
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

int loop_add_reader(loop_t *self, void *socket, loop_reader_fn fn, void *arg) {
    if (self->n_readers == LOOP_MAX_READERS) {
        return -1;
    }
    int i = self->n_readers++;
    self->items[i] = (zmq_pollitem_t){.socket = socket, .events = ZMQ_POLLIN};
    self->readers[i] = (s_reader){fn, arg};
    return 0;
}

int loop_add_timer(loop_t *self, int64_t interval_ms, loop_timer_fn fn, void *arg) {
    if (self->n_timers == LOOP_MAX_TIMERS) {
        return -1;
    }
    APEX_ASSERT(interval_ms > 0);
    self->timers[self->n_timers++] =
        (s_timer){interval_ms, clock_now_ms() + interval_ms, fn, arg};
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

int loop_run(loop_t *self) {
    self->stop = 0;
    int64_t last_poll_ns = 0;
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
        int rc = zmq_poll(self->items, self->n_readers, (long)wait);
        if (rc < 0) {
            if (errno == EINTR) {
                continue;
            }
            log_error("zmq_poll: %s", zmq_strerror(errno));
            return -1;
        }
        for (int i = 0; i < self->n_readers && rc > 0 && !self->stop; i++) {
            if (self->items[i].revents & ZMQ_POLLIN) {
                if (self->readers[i].fn(self, self->items[i].socket, self->readers[i].arg) != 0) {
                    return 0;
                }
            }
        }
    }
    return 0;
}
