// server.h: the apex-replay daemon's state and event loop.
//
// One thread, one loop (common/loop.h), two bound sockets:
//   insert (ROUTER, [endpoints] replay_insert_bind): actors' DEALERs send TransitionBatch;
//          the server stores each valid batch and answers InsertAck{actor_id, seq}.
//   sample (ROUTER, [endpoints] replay_sample_bind): the learner's DEALER sends SampleRequest
//          and PriorityUpdate; every SampleRequest is answered exactly once with a
//          SampleReply carrying the request id: OK with a batch, NOT_READY when the rate
//          limiter held it for sample_timeout_ms, or REFUSED. A stats request (a sharded
//          learner's) is answered NOT_READY with the stats alone, once the server's insert
//          count reaches the one it names, or at sample_timeout_ms.
// Sharded ([replay] shards = K > 1, cfg turned into shard k's by config_select_shard): the
// server holds capacity / K, draws from its own random stream, stores only batches of actors
// i with i mod K = k, keeps its files in <run>/replay<k>/, reports its shard and minimum
// priority in every reply's stats, and normalises weights by the minimum a request names. It
// does not hold the replay ratio or min_size_to_sample: the learner does, over every shard
// (learner/shards.h; docs/architecture.md "Sharded replay").
// Every frame is decoded and validated by common/wire before it touches the store; a bad one
// is counted per message kind and per peer, logged at most once per interval, and dropped.
// Oversized frames are refused by libzmq (ZMQ_MAXMSGSIZE) before they are buffered.
//
// Rate limiter (Reverb's idea, without its failure modes): sampling waits until the store
// holds min_size_to_sample transitions and, when samples_per_insert > 0, while
//   sampled + batch > samples_per_insert * inserted + spi_tolerance.
// Inserts are never blocked (actors must never stall; the ring evicts FIFO), so the two
// sides can never wait on each other, and a held request always gets an answer by its
// deadline, so the learner can never wait forever.
#ifndef APEX_REPLAY_SERVER_H
#define APEX_REPLAY_SERVER_H

#include <stdint.h>

#include "config.h"
#include "wire.h"

typedef struct replay_server replay_server_t;

// Creates the store (refusing, with a log line, a capacity that does not fit in memory),
// restores it per [replay] durability from <out_dir>/<name>/replay/, and (listen != 0)
// binds both endpoints. Returns NULL after logging why. Caller destroys.
replay_server_t *replay_server_new(const apex_config_t *cfg, int listen);
void replay_server_destroy(replay_server_t **self_p);

// Runs the loop until SIGINT/SIGTERM or replay_server_stop. Returns 0, or -1 on a loop error.
int replay_server_run(replay_server_t *self);
// Asks a running server to return from replay_server_run within ~50 ms. Thread-safe
// (the only function that is; used by tests that run the server in a thread).
void replay_server_stop(replay_server_t *self);

// The endpoints actually bound (ephemeral ports resolved), for tests.
const char *replay_server_insert_endpoint(const replay_server_t *self);
const char *replay_server_sample_endpoint(const replay_server_t *self);

// Snapshot of the counters (what SampleReply carries). Only from the server's thread, or
// after replay_server_run returned.
void replay_server_stats(const replay_server_t *self, wire_replay_stats_t *out);
// Writes the stored transitions as CSV (slot, generation, p^alpha, action, reward, discount,
// obs..., next_obs...), and the exactly-once marks to <path>.marks (per actor: epoch, 1 +
// highest stored seq, the seqs of the dedupe window below it that are not stored). For a
// server created with listen = 0 after a restore. 0 or -1.
int replay_server_dump(const replay_server_t *self, const char *path);

// Clients refused by the CURVE allow-list ([security] mode = curve).
uint64_t replay_server_denied(const replay_server_t *self);

// Bad messages counted for one kind (WIRE_MSG_NONE = undecodable frames).
uint64_t replay_server_bad_count(const replay_server_t *self, wire_msg_type kind);

#endif
