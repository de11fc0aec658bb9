// persist.h: the replay server's durability policy ([replay] durability): what is restored at
// start-up, when the write-ahead log commits, when snapshots are taken, and when the acks
// that wait for the log may go out.
//
// The mechanics of files (snapshot format, log segments, the writer thread, fork) live in
// replay/durable.c; this module decides when and what. It owns the durable_t and the
// writer's wake-up pipe, and borrows the server state a snapshot carries besides the store
// (persist_state_t: counters, exactly-once marks, the rate limiter's credit) plus the ack
// queues (replay/acks.h). Calls go one way: the server calls persist; persist never calls the
// server. The one way back is the record callback of persist_restore, through which the
// server applies each restored log record with the same code as live traffic.
//
// Lifecycle: persist_new -> persist_restore -> persist_attach (timers, writer thread) ->
// persist_log / persist_ack ... -> persist_shutdown -> persist_destroy.
// Not thread-safe: the server's thread (the writer thread is durable.c's, and only writes).
#ifndef APEX_PERSIST_H
#define APEX_PERSIST_H

#include <stddef.h>
#include <stdint.h>

#include "acks.h"
#include "config.h"
#include "dedupe.h"
#include "durable.h"
#include "limiter.h"
#include "loop.h"
#include "store.h"

// Server counters that survive a restart with the data (they are reported to the learner,
// which writes them to metrics.csv: a restart must not send them back to 0).
typedef struct {
    uint64_t sampled_rows, updated, duplicate_batches, limiter_waits;
} persist_counters_t;

// What a snapshot carries besides the store; all borrowed, owned by the server.
typedef struct {
    store_t *store;
    dedupe_t *dedupe;
    limiter_t *limiter;
    persist_counters_t *counters;
    acks_t *acks;
} persist_state_t;

typedef struct persist persist_t;

// Applies one restored log record (kind: durable_rec_kind; payload: the wire message as it
// arrived). Called only from inside persist_restore.
typedef void (*persist_record_fn)(void *arg, int kind, const void *payload, size_t len);

// Opens <out_dir>/<name>/replay/ for cfg's durability (nothing is read yet). NULL after
// logging why. ctx: the server's ZeroMQ context (the writer wakes the loop through it).
persist_t *persist_new(const apex_config_t *cfg, void *ctx, const persist_state_t *state);
// Stops the writer thread, closes its pipe, waits for a snapshot child. Accepts NULL.
void persist_destroy(persist_t **self_p);

// Loads the snapshot into the store and the state, then feeds every later log record to fn.
// Logs what it restored. Returns 0, or -1 after logging why (a start-up error).
int persist_restore(persist_t *self, persist_record_fn fn, void *arg);
// Registers the snapshot and group-commit timers and starts the log's writer thread. 0 or -1.
int persist_attach(persist_t *self, loop_t *loop);

// Appends a received insert or priority update to the log (wal; otherwise a no-op), and
// starts a commit when the log buffer is half full.
void persist_log(persist_t *self, int kind, const void *raw, size_t len);
// Acknowledges an insert: at once (none/snapshot, or wal while degraded) or once its log
// record is on disk (wal). Duplicates are acknowledged too.
void persist_ack(persist_t *self, const uint8_t *id, size_t id_len, uint32_t actor, uint64_t seq);

// Final group commit, acks and snapshot (SIGTERM). Logs the outcome.
void persist_shutdown(persist_t *self);

int persist_degraded(const persist_t *self);
uint64_t persist_acks_without_durability(const persist_t *self);

#endif
