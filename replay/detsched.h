// detsched.h: the replay server's deterministic schedule ([run] deterministic;
// docs/architecture.md "Deterministic runs").
//
// In a normal run the replay applies each message when it arrives, so what a sample sees
// depends on how the actors' inserts, the learner's requests and its priority updates
// happened to interleave. A deterministic run fixes that interleaving by counters alone:
//   - inserts are applied period-major: all of actor 0's batches of weight-sync period 0,
//     then actor 1's, ..., then period 1 of each actor (an actor marks a period's last
//     batch); a batch that arrives before its turn is held, unacknowledged;
//   - requests are served in the order of their det_index (1, 2, ...), and request r is
//     served exactly when the inserts applied so far first let the rate limiter allow it:
//     no insert is applied while the next request could be served (so samples per insert
//     are exact), whether or not that request has arrived yet;
//   - the priority updates of request i are applied just before request i + lag is served
//     (lag = the learner group's requests in flight: [learner] prefetch x ranks); a learner
//     sends them before it asks again, so they are always there in time, and always land at
//     the same point;
//   - the horizon (every actor's periods below it applied) and the requests served when it
//     got there are recorded, which is how the learner picks the weights an actor acts with.
//
// This module holds what waits (copies of the raw messages) and keeps the counters; the
// server decodes and applies. No allocation once a slot's buffer has grown to the largest
// message it held. Not thread-safe.
#ifndef APEX_DETSCHED_H
#define APEX_DETSCHED_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h"

// Horizons whose served count is remembered (the learner asks for each in turn).
#define DETSCHED_HORIZONS 4096
#define DETSCHED_ID_MAX 256 // routing ids kept (libzmq's are at most 255 bytes)

typedef struct detsched detsched_t;

// n_actors: the actors inserting here (ids 0 .. n_actors - 1); window: the most batches one
// actor can have unacknowledged ([actor] max_pending_batches); lag: requests in flight of
// the whole learner group; batches: batches per request (each brings that many updates).
detsched_t *detsched_new(int n_actors, int window, int lag, int batches);
// A replay shard's schedule ([replay] shards = K): only actors first, first + stride, ...
// insert here (config_actor_shard: index mod K), so only theirs are turns. Called before any
// insert; without it every actor's are.
void detsched_members(detsched_t *self, int first, int stride);
void detsched_destroy(detsched_t **self_p);

// ---- inserts

typedef enum {
    DETSCHED_HELD,      // copied: applied in its turn
    DETSCHED_DUPLICATE, // already held (a re-send of a batch waiting its turn): dropped
    DETSCHED_FULL,      // the actor's queue is full: dropped unacknowledged (it re-sends)
} detsched_hold_result;

// Holds a validated batch's raw message (b: its decoded view) that came from the peer id (its
// acknowledgement goes there once it is applied).
detsched_hold_result detsched_hold_insert(detsched_t *self, const wire_batch_t *b,
                                          const uint8_t *id, size_t id_len, const void *raw,
                                          size_t len);

// The batch whose turn it is, if it has arrived: its raw bytes and its sender's routing id
// (valid until the next pop). Returns 0 when the turn's actor has nothing queued.
int detsched_peek_insert(detsched_t *self, const void **raw, size_t *len, const uint8_t **id,
                         size_t *id_len);

// What the server found the peeked batch to be once decoded (b), and did with it: applied
// in its turn. Moves the turn on after a period's last batch, and the horizon after the last
// actor's; returns 1 when this was a batch out of turn (of an earlier period, or of an actor
// restarted, or of a run that is not deterministic: applied at once, the schedule diverges),
// which the server logs.
int detsched_pop_insert(detsched_t *self, const wire_batch_t *b);

// Whether the batch at the head of the turn's queue belongs to a later period than the turn
// (its actor never ended the turn's period: a restarted actor): then the turn moves on
// without it. Returns 1 when it did.
int detsched_skip_stale_turn(detsched_t *self, const wire_batch_t *b);

// ---- requests and updates

// Holds a sample request (its routing id too). Returns 0, or -1 when its index is outside
// the window the schedule can hold (a learner restarted with another schedule: the caller
// then calls detsched_restart).
int detsched_hold_request(detsched_t *self, const uint8_t *id, size_t id_len,
                          const wire_sample_request_t *req);
// The next request in order, if it has arrived.
int detsched_next_request(detsched_t *self, const uint8_t **id, size_t *id_len,
                          const wire_sample_request_t **req);
uint64_t detsched_next_index(const detsched_t *self);
// The first request of this schedule: 1, or the index it last restarted at (requests below it
// were never served by it).
uint64_t detsched_base_index(const detsched_t *self);
// The learner's schedule starts again at index (a restarted learner): held requests and
// updates of the old one are dropped, and the horizons reached so far read as reached before
// any request was served (the new learner's first weights).
void detsched_restart(detsched_t *self, uint64_t index);

// Holds a priority update (its det_index names its request). Returns 0, or -1 when it names
// a request not served or long gone (the caller applies it at once and logs).
int detsched_hold_update(detsched_t *self, uint64_t index, const void *raw, size_t len);
// Whether every update due before the next request is here.
int detsched_updates_ready(const detsched_t *self);
// The due updates one by one (raw bytes valid until the next call); 0 when none is left.
int detsched_take_update(detsched_t *self, const void **raw, size_t *len);
// The next request was served.
void detsched_served(detsched_t *self);

// ---- the horizon

uint64_t detsched_horizon(const detsched_t *self);
// The turn jumps to period h (the horizon to h): a learner asks about a horizon past the next
// one, which only a replay restarted under a running schedule sees (its actors, waiting for
// the weights of that horizon, would otherwise never send the batches that get it there).
void detsched_fast_forward(detsched_t *self, uint64_t h);
// Whether the schedule restarted since it was made (detsched_restart: a learner or this
// replay restarted): it is then no longer the one a seed fixes, and liveness is all that is
// left to keep: batches are taken as they came, from any actor, and the horizon follows the
// furthest period an actor ended.
int detsched_diverged(const detsched_t *self);
// The requests served when the horizon reached h (h <= the horizon); -1 when h is older
// than DETSCHED_HORIZONS horizons ago.
int64_t detsched_served_at(const detsched_t *self, uint64_t h);

typedef struct {
    uint64_t held_inserts, duplicates, full, out_of_turn, held_updates, held_requests;
} detsched_stats_t;
void detsched_stats(const detsched_t *self, detsched_stats_t *out);

#endif
