// loop.h: a small zmq_poll reactor, one per thread (STYLE S13; CZMQ zloop, Redis ae).
//
// Readers are called when their socket is readable; timers every interval_ms on the
// monotonic clock. A handler returns 0 to continue or -1 to stop the loop.
//
// Drain readers (loop_add_drain_reader) save system calls on a busy socket (see s_wait in
// loop.c). Their contract: receive only with ZMQ_DONTWAIT, and return LOOP_DRAINED when the
// last receive found the socket empty (EAGAIN) with no operation on the socket after it,
// or 0 when input may be left. Any other operation on that socket (a send from a timer, a
// receive from another handler, a send from the reader itself after its last receive)
// must be accompanied by loop_recheck(loop, socket): libzmq may consume the socket's
// wake-up signal during it, and the loop would otherwise block without seeing the input.
// (A recheck during the socket's own reader overrides its LOOP_DRAINED.) The loop also
// stops when a shutdown signal has been received (signals.h). An optional idle handler is
// called on every iteration (for the actor, whose real work is stepping environments):
// when it returns 1 ("I have more work") the loop polls with a zero timeout.
// Sizes are fixed at creation: no allocation while running. Not thread-safe.
#ifndef APEX_LOOP_H
#define APEX_LOOP_H

#include <stdint.h>

typedef struct loop loop_t;
typedef int (*loop_reader_fn)(loop_t *loop, void *socket, void *arg);
typedef int (*loop_timer_fn)(loop_t *loop, void *arg);
typedef int (*loop_idle_fn)(loop_t *loop, void *arg); // 1 = busy, 0 = idle, -1 = stop

#define LOOP_MAX_READERS 16
#define LOOP_MAX_TIMERS 16

loop_t *loop_new(void);
void loop_destroy(loop_t **self_p);
// Register handlers. Return 0, or -1 when the fixed table is full (a programming error).
int loop_add_reader(loop_t *self, void *socket, loop_reader_fn fn, void *arg);
int loop_add_drain_reader(loop_t *self, void *socket, loop_reader_fn fn, void *arg);
#define LOOP_DRAINED 1 // a drain reader's "my socket is empty" (handlers otherwise return 0)
int loop_add_timer(loop_t *self, int64_t interval_ms, loop_timer_fn fn, void *arg);
// Says that socket (of a drain reader) was used outside its reader: look at it before
// blocking. Cheap (a flag); callable from handlers.
void loop_recheck(loop_t *self, void *socket);
// Says that a receive on socket just returned EAGAIN: uses of it before that receive no
// longer matter (its commands are processed). A drain reader calls it at its last receive.
void loop_drained(loop_t *self, void *socket);
void loop_set_idle(loop_t *self, loop_idle_fn fn, void *arg);
// Runs until a handler returns -1 or shutdown is requested. Returns 0 on a clean stop,
// -1 when zmq_poll itself failed.
int loop_run(loop_t *self);
// Asks the loop to return after the current handler (callable from handlers).
void loop_stop(loop_t *self);
// The intervals of the registered timers, in registration order: writes up to max of them
// to intervals_ms and returns how many timers there are. Read-only; for tests that check a
// configured period reaches its timer without waiting for it to fire.
int loop_timer_intervals(const loop_t *self, int64_t *intervals_ms, int max);

#endif
