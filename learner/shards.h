// shards.h: the learner's side of the replay: one DEALER per replay shard, which shard each
// sample request goes to, the run's replay ratio, and each shard's liveness.
//
// [replay] shards = 1 is the learner as it always was: one socket, every request to it, no
// requests of this module's own; the server holds the replay ratio (replay/server.h).
// [replay] shards = K > 1 (docs/architecture.md "Sharded replay"):
//   - Choice. A sample request goes to shard k with probability P_k / sum_j P_j over the
//     shards that are up, P_k being the total p^alpha of k's last stats. Each shard samples
//     its rows proportionally to p^alpha within its own mass (stratified), so a row's
//     marginal is p_i / sum_j P_j when the P_k are current: global prioritized replay, as
//     from one server, row by row; not a batch's joint distribution (a request's rows all
//     come from one shard: docs/architecture.md "Sharded replay").
//     (RLlib's round-robin choice draws p_i / (K P_k) instead.) Each rank of a learner group
//     draws from its own stream (shards_stream): with a shared one, all ranks would send
//     their n-th requests to the same shard, and every step's N batches would come from one.
//   - Weights. Each request names the smallest p^alpha over the shards that are up, and the
//     shard normalises by it (store_sample_min): w_i = (min / p_i)^beta, what one server over
//     the same data computes (N and the total cancel in (N P(i))^-beta / max_j w_j).
//   - Replay ratio and min_size_to_sample, for the whole run: a limiter_t (common/limiter.h)
//     counts the rows of every request sent and the inserts the shards report (the growth of
//     each one's `inserted`); a request goes out only when the shards up hold at least
//     min_size_to_sample transitions and the limiter allows it. The shards hold neither.
//   - Stats. Every reply's stats are kept. A stats request (proto: SampleRequest.stats_only)
//     goes to a shard whose stats are older than SHARDS_STATS_MAX_AGE_MS, and, while sampling
//     is held, one per shard that waits for its next insert (so the limiter learns of it at
//     once, without polling).
//   - Liveness. A shard is down once a send to it would block (no connection: ZMQ_IMMEDIATE)
//     or a request to it timed out: that is logged at once, the other shards are sampled
//     (their mass renormalised), and the down one is probed every request tick; its first
//     answer takes it back (logged with how long it was away).
// Priority updates go to the shard whose reply held the keys (the caller keeps the shard of
// each request); keys themselves are unchanged.
// Not thread-safe: the learner's thread owns it and its sockets.
#ifndef APEX_SHARDS_H
#define APEX_SHARDS_H

#include <stdint.h>

#include "config.h"
#include "net.h"
#include "rng.h"
#include "security.h"
#include "wire.h"

#define SHARDS_STATS_MAX_AGE_MS 50 // a shard silent this long is asked for its stats
// Ids of this module's own (stats) requests; the caller's sample request ids stay below.
#define SHARDS_OWN_ID_BIT (1ull << 63)
#define SHARDS_TRACE_N 64 // a rank logs its first this many choices of shard (one line)

typedef struct shards shards_t;

// Creates [replay] shards DEALERs on ctx (CURVE clients of "replay" through sec, ZMQ_IMMEDIATE,
// options o) and connects shard k's to its [endpoints] replay_sample (config.h's rule). rank:
// the learner's rank in its group (0 for a single learner), whose choice stream it uses.
// Returns NULL after logging why. Caller destroys (before zmq_ctx_term of ctx).
shards_t *shards_new(const apex_config_t *cfg, int rank, void *ctx, security_t *sec,
                     const net_opts_t *o);
void shards_destroy(shards_t **self_p);

// The stream rank `rank` chooses shards with: rng_init_stream(seed, RNG_ROLE_SHARDS, rank).
// Reproducible for a fixed seed and topology, distinct per rank; rank 0's is a single
// learner's. shards_pick draws one rng_uniform from it per choice (none when K = 1).
void shards_stream(rng_t *r, uint64_t seed, int rank);

int shards_count(const shards_t *self);
void *shards_socket(const shards_t *self, int k);
// The shard whose socket sock is, or -1.
int shards_index(const shards_t *self, const void *sock);

// The shard the next sample request of `rows` rows goes to: 0 when K = 1. When K > 1: drawn
// with probability P_k / sum P over the shards up, or -1 when no request may go now (no shard
// up with data, fewer than min_size_to_sample transitions in all, or the replay ratio; stats
// requests then wait for the inserts that change that). When K > 1, the first SHARDS_TRACE_N
// choices are logged in one line, with the rank: ranks' streams can be told apart and
// reproduced from the log.
int shards_pick(shards_t *self, uint32_t rows, int64_t now_ms);
// Sends req (its min_priority filled in when K > 1) to shard k. APEX_OK; APEX_EAGAIN when
// it would block, which with K > 1 takes k down (see shards_take_down).
int shards_send_request(shards_t *self, int k, wire_sample_request_t *req, int64_t now_ms);
// Sends req to shard k as it is: no shard choice, ratio or liveness bookkeeping (a
// deterministic run asks every shard for each place: learner/prefetch.c). APEX_OK or the
// send's error (APEX_EAGAIN while shard k is not connected).
int shards_send_to(shards_t *self, int k, const wire_sample_request_t *req);
// Sends a priority update to shard k (best effort: APEX_OK or the send's error).
int shards_send_update(shards_t *self, int k, const wire_priority_update_t *u);

// Takes a reply that arrived on shard k's socket and keeps its stats. Returns 0 for a sample
// reply (the caller's), 1 for the answer to one of this module's stats requests (nothing
// more to do), -1 for a reply to drop: its stats name another shard than k (endpoints that
// do not match the shards' --shard, or a shard of a sharded run answering an unsharded
// learner; logged).
int shards_take_reply(shards_t *self, int k, const wire_sample_reply_t *r, int64_t now_ms);
// A sample request of `rows` rows to shard k was answered NOT_READY or REFUSED: nothing was
// sampled, and the limiter gets the rows back.
void shards_not_served(shards_t *self, int k, uint32_t rows);
// A sample request to shard k went unanswered for [learner] request_timeout_ms.
void shards_timed_out(shards_t *self, int k, int64_t now_ms);
// The request timer's share: stats requests that timed out, probes of shards that are down
// or not yet heard from, stats requests for stale stats and, while sampling is held, the
// watches for inserts. No-op when K = 1.
void shards_tick(shards_t *self, int64_t now_ms);
// A shard that went down since the last call (its requests in flight will not be answered:
// the caller frees them), or -1 when none.
int shards_take_down(shards_t *self);

// The replay counters of the run: the sum over every shard's last stats (K = 1: the server's
// own). Borrowed; valid until the next call on self.
const wire_replay_stats_t *shards_stats(shards_t *self);
// Adds shard stats st into t, the sum over shards: the counters, the priority mass, and the
// deterministic actors' columns (each shard's own actors': sums; det_version_min the smaller).
// min_priority, shard and shards are the caller's.
void shards_stats_add(wire_replay_stats_t *t, const wire_replay_stats_t *st);
// Shards up now (K = 1: 1).
int shards_up(const shards_t *self);
// Sample requests this learner sent to shard k so far (K = 1: 0, not counted).
uint64_t shards_requests(const shards_t *self, int k);
// Logs the sample requests sent to each shard (K > 1; nothing when K = 1).
void shards_report(const shards_t *self);

#endif
