// prefetch.h: the learner's sample requests in flight, and the batches they bring back.
//
// [learner] prefetch slots. A free slot sends a SampleRequest for [learner]
// batches_per_request batches of [learner] batch_size rows to the replay shard
// learner/shards.h picks; ZeroMQ's I/O thread receives the reply while the training thread
// computes, so when an update ends the next batch is usually waiting (the prefetch: no
// thread of its own, docs/architecture.md "Learner"). A reply is copied into its slot, whose
// batches are then trained one after the other, oldest arrival first; the slot's request goes
// out again once its last batch is trained. A request unanswered for [learner]
// request_timeout_ms is forgotten and re-issued (a late reply is ignored by its id), so a
// restarted replay server is picked up without a restart of the learner.
//
// Every reply is peer input: prefetch_handle decodes it (the run's dims, dtype, counts and
// actions, wire.h) and takes only a reply to a request in flight, on the shard it was sent
// to, with exactly the rows asked for; anything else is counted, logged at most once per
// interval and dropped, and its slot (if any) asks again. Nothing a peer sends can assert.
// After a batch is trained, prefetch_trained sends its new priorities back to the shard the
// keys came from, leaving out (counted, logged) any priority outside the wire's range: a
// NaN loss must not get every update of the run refused.
//
// What it does not do: train, choose shards or hold the replay ratio (shards.h), publish.
// Not thread-safe: the learner's thread owns it; shards (borrowed) must outlive it.
#ifndef APEX_PREFETCH_H
#define APEX_PREFETCH_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "shards.h"
#include "train.h"
#include "wire.h"

typedef struct prefetch prefetch_t;

// One batch ready to train: views into its slot, valid until prefetch_trained.
typedef struct {
    train_batch_t batch;  // obs, actions, rewards, discounts, next_obs, is_weights; size
    const uint64_t *keys; // (batch.size) the rows' replay keys
    int shard;            // the shard the keys name
    const wire_replay_stats_t *stats; // the replay's counters when it served the batch
} prefetch_batch_t;

// What became of one message (prefetch_handle).
typedef enum {
    PREFETCH_TAKEN,      // a reply with rows: its slot's batches are ready
    PREFETCH_NOT_SERVED, // NOT_READY or REFUSED: its slot asks again
    PREFETCH_STATS,      // the answer to one of shards.h's own stats requests
    PREFETCH_LATE,       // a reply to a request already timed out (its slot was re-used)
    PREFETCH_BAD,        // malformed, of another kind, of another shard, or wrong rows
} prefetch_result;

typedef struct {
    uint64_t timeouts;        // requests unanswered for request_timeout_ms (or on a shard gone)
    uint64_t late_replies;    // PREFETCH_LATE
    uint64_t not_ready;       // NOT_READY answers (the replay's limiter holding learning back)
    uint64_t refused;         // REFUSED answers (a configuration mismatch)
    uint64_t bad_messages;    // PREFETCH_BAD
    uint64_t bad_priorities;  // priorities left out of updates (outside [0, WIRE_PRIORITY_MAX])
    uint64_t dropped_updates; // priority updates that could not be sent
    int started;              // a reply with rows has arrived
    int64_t last_reply_ms;    // monotonic time of the last reply of the replay (any status)
} prefetch_stats_t;

#define PREFETCH_MAX_SLOTS 64 // [learner] prefetch's largest (config_schema.c)

// Allocates the slots for cfg ([learner] prefetch, batch_size, batches_per_request; the
// run's obs_dim and dtype) and a decoder for replies (cfg's limits). shards is borrowed.
// Caller destroys with prefetch_destroy (before shards_destroy).
prefetch_t *prefetch_new(const apex_config_t *cfg, shards_t *shards, int64_t now_ms);
void prefetch_destroy(prefetch_t **self_p);

// Sends a request with this beta for every free slot, each to the shard shards_pick draws. A
// send that would block (not connected) leaves the slot free for the next call.
void prefetch_issue(prefetch_t *self, float beta, int64_t now_ms);

// Takes one message that arrived on shard k's socket: buf[0..len) as received.
prefetch_result prefetch_handle(prefetch_t *self, int k, const void *buf, size_t len,
                                int64_t now_ms);
// Handles what waits on sock (shard k's socket), at most max messages. Returns how many.
int prefetch_read(prefetch_t *self, int k, int max, int64_t now_ms);

// The batch to train next (oldest arrival first): 1 and *out, or 0 when none is ready.
int prefetch_next(prefetch_t *self, prefetch_batch_t *out);
// The batch prefetch_next gave was trained and priorities (batch.size, raw |TD| + eps) are its
// rows' new priorities: sends them to the batch's shard and moves on; after a slot's last
// batch, its request goes out again (with beta).
void prefetch_trained(prefetch_t *self, const float *priorities, float beta, int64_t now_ms);

// The request timer: forgets requests unanswered for request_timeout_ms and those on shards
// that went down, runs shards_tick, logs a silent replay server (one shard), and re-issues.
void prefetch_tick(prefetch_t *self, float beta, int64_t now_ms);

const prefetch_stats_t *prefetch_stats(const prefetch_t *self);

// [run] deterministic (docs/architecture.md "Deterministic runs"). Each request carries its
// place in the group's schedule (det_index: request i of rank r of R is i R + r + 1; a request
// asked again keeps its place) and a beta fixed by that place; each batch's priority update
// carries it too, and goes out even when empty. prefetch_det_group sets the rank and the
// group's size (before the first prefetch_issue; default rank 0 of 1).
void prefetch_det_group(prefetch_t *self, int rank, int ranks);
// The horizon watch: asks the replay (one stats request in flight, asked again after
// request_timeout_ms) for the requests it had served when its horizon reached h (>= 1).
// prefetch_det_take gives the answer once: 1 with h and served, or 0 while there is none.
void prefetch_det_watch(prefetch_t *self, uint64_t h, int64_t now_ms);
int prefetch_det_take(prefetch_t *self, uint64_t *h, uint64_t *served);

#endif
