// shards.h: the learner's side of the replay: one DEALER per replay shard, which shard each
// sample request goes to, the run's replay ratio, and each shard's liveness.
//
// [replay] shards = 1 is the learner as it always was: one socket, every request to it, no
// requests of this module's own; the server holds the replay ratio (replay/server.h).
// [replay] shards = K > 1 (docs/architecture.md "Sharded replay"):
//   - Choice. A sample request goes to shard k with probability P_k / sum_j P_j over the
//     shards that are up, P_k being the total p^alpha of k's last stats. Each shard samples
//     its rows proportionally to p^alpha within its own mass, so every row is drawn with
//     probability p_i / sum_j P_j: global prioritized replay, as from one server. (RLlib's
//     round-robin choice draws p_i / (K P_k) instead.)
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
#include "security.h"
#include "wire.h"

#define SHARDS_STATS_MAX_AGE_MS 50 // a shard silent this long is asked for its stats
// Ids of this module's own (stats) requests; the caller's sample request ids stay below.
#define SHARDS_OWN_ID_BIT (1ull << 63)

typedef struct shards shards_t;

// Creates [replay] shards DEALERs on ctx (CURVE clients of "replay" through sec, ZMQ_IMMEDIATE,
// options o) and connects shard k's to its [endpoints] replay_sample (config.h's rule).
// Returns NULL after logging why. Caller destroys (before zmq_ctx_term of ctx).
shards_t *shards_new(const apex_config_t *cfg, void *ctx, security_t *sec, const net_opts_t *o);
void shards_destroy(shards_t **self_p);

int shards_count(const shards_t *self);
void *shards_socket(const shards_t *self, int k);
// The shard whose socket sock is, or -1.
int shards_index(const shards_t *self, const void *sock);

// The shard the next sample request of `rows` rows goes to: 0 when K = 1. When K > 1: drawn
// with probability P_k / sum P over the shards up, or -1 when no request may go now (no shard
// up with data, fewer than min_size_to_sample transitions in all, or the replay ratio; stats
// requests then wait for the inserts that change that).
int shards_pick(shards_t *self, uint32_t rows, int64_t now_ms);
// Sends req (its min_priority filled in when K > 1) to shard k. APEX_OK; APEX_EAGAIN when
// it would block, which with K > 1 takes k down (see shards_take_down).
int shards_send_request(shards_t *self, int k, wire_sample_request_t *req, int64_t now_ms);
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
// Shards up now (K = 1: 1).
int shards_up(const shards_t *self);

#endif
