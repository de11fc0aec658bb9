// shards.c: see shards.h. Dimension names: K = [replay] shards.
#define LOG_MODULE "learner"
#include "shards.h"

#include "apex.h"
#include "clock.h"
#include "limiter.h"
#include "log.h"
#include "rng.h"
#include "xalloc.h"

#include <stdio.h>
#include <string.h>

#define SHARDS_LOG_MS 5000 // a repeating complaint about a shard: at most once per interval

typedef enum { SHARD_UNKNOWN = 0, SHARD_UP, SHARD_DOWN } s_state;

typedef struct {
    char ep[CONFIG_STR_LEN];
    void *sock;
    s_state state;
    wire_replay_stats_t st; // the last stats it sent
    int has_stats;
    int64_t stats_ms;       // when they arrived
    uint64_t seen_inserted; // the inserts the limiter has been told of
    // The one stats request in flight (a probe answered at once, or a watch for inserts).
    int probing;
    uint64_t probe_id;
    int64_t probe_deadline_ms;
    int64_t down_since_ms;
    uint64_t served_meanwhile; // sample requests the other shards got while this one was down
    uint64_t requests;         // sample requests sent to it
    log_limiter_t log;
} s_shard;

struct shards {
    int K;
    s_shard *sh; // (K)
    int64_t min_size, request_timeout_ms, watch_timeout_ms;
    limiter_t limiter; // the run's replay ratio (K > 1 only)
    rng_t rng;         // the choice of shard: this rank's stream (shards_stream)
    int rank;
    uint64_t seed;
    int traced;                    // choices in trace (up to SHARDS_TRACE_N, then logged)
    uint8_t trace[SHARDS_TRACE_N]; // the first choices
    int held;                      // the last pick found no request may go: watch for inserts
    uint64_t next_own_id;
    uint64_t went_down; // bit k: shard k went down since shards_take_down last reported it
    int64_t started_ms;
    wire_buf_t out;
    wire_replay_stats_t sum;
};

// ---------------------------------------------------------------------------------------
// Lifetime

void shards_stream(rng_t *r, uint64_t seed, int rank) {
    APEX_ASSERT(rank >= 0);
    rng_init_stream(r, seed, RNG_ROLE_SHARDS, (uint64_t)rank);
}

shards_t *shards_new(const apex_config_t *cfg, int rank, void *ctx, security_t *sec,
                     const net_opts_t *o) {
    shards_t *s = xcalloc(1, sizeof *s);
    s->K = (int)cfg->replay.shards;
    s->sh = xcalloc((size_t)s->K, sizeof *s->sh);
    s->min_size = cfg->replay.min_size_to_sample;
    s->request_timeout_ms = cfg->learner.request_timeout_ms;
    // A watch is held by the shard for up to sample_timeout_ms, then answered.
    s->watch_timeout_ms = cfg->replay.sample_timeout_ms + cfg->learner.request_timeout_ms;
    limiter_init(&s->limiter, cfg->replay.samples_per_insert, cfg->replay.spi_tolerance,
                 (uint64_t)(cfg->learner.batch_size * cfg->learner.batches_per_request));
    // Each rank its own stream: with one shared by all, every rank would send its n-th
    // request to the same shard, so each step's N batches would all come from one shard.
    s->rank = rank;
    s->seed = (uint64_t)cfg->run.seed;
    shards_stream(&s->rng, s->seed, rank);
    wire_buf_init(&s->out, 256);
    s->started_ms = clock_now_ms();
    char err[CONFIG_ERR_LEN];
    int one = 1;
    for (int k = 0; k < s->K; k++) {
        s_shard *h = &s->sh[k];
        // config_load checked that every endpoint resolves: a failure here is a bug.
        int rc = config_shard_endpoint(cfg->endpoints.replay_sample, k, s->K, h->ep, sizeof h->ep,
                                       err, sizeof err);
        APEX_ASSERT(rc == 0);
        h->sock = net_socket(ctx, ZMQ_DEALER, o);
        if (!h->sock || security_client(sec, h->sock, "replay") != 0) {
            shards_destroy(&s);
            return NULL;
        }
        // Do not queue requests on a connection that is not up: nobody would answer them; a
        // send that would block is what tells a shard is down.
        zmq_setsockopt(h->sock, ZMQ_IMMEDIATE, &one, sizeof one);
        if (net_connect(h->sock, h->ep) != 0) {
            shards_destroy(&s);
            return NULL;
        }
    }
    return s;
}

void shards_destroy(shards_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    shards_t *s = *self_p;
    for (int k = 0; k < s->K; k++) {
        net_close(&s->sh[k].sock);
    }
    wire_buf_fini(&s->out);
    free(s->sh);
    free(s);
    *self_p = NULL;
}

int shards_count(const shards_t *self) { return self->K; }
void *shards_socket(const shards_t *self, int k) { return self->sh[k].sock; }

int shards_index(const shards_t *self, const void *sock) {
    for (int k = 0; k < self->K; k++) {
        if (self->sh[k].sock == sock) {
            return k;
        }
    }
    return -1;
}

int shards_up(const shards_t *self) {
    if (self->K == 1) {
        return 1;
    }
    int n = 0;
    for (int k = 0; k < self->K; k++) {
        n += self->sh[k].state == SHARD_UP;
    }
    return n;
}

// ---------------------------------------------------------------------------------------
// Liveness

static void s_down(shards_t *s, int k, int64_t now, const char *why) {
    s_shard *h = &s->sh[k];
    if (h->state == SHARD_DOWN) {
        return;
    }
    h->state = SHARD_DOWN;
    h->probing = 0; // its answer, if it ever comes, is taken like any other reply
    h->down_since_ms = now;
    h->served_meanwhile = 0;
    s->went_down |= 1ull << k;
    log_warn("replay shard %d (%s) is down: %s; sampling from the %d other shard(s) up, their "
             "priority mass renormalised",
             k, h->ep, why, shards_up(s));
}

int shards_take_down(shards_t *self) {
    if (!self->went_down) {
        return -1;
    }
    int k = __builtin_ctzll(self->went_down);
    self->went_down &= ~(1ull << k);
    return k;
}

// Sends a stats request to shard k: answered at once (after = 0), or once the shard's insert
// count reaches `after` (a watch). Returns APEX_OK or the send's error.
static int s_stats_request(shards_t *s, int k, uint64_t after, int64_t now) {
    s_shard *h = &s->sh[k];
    wire_msg_t m = {.type = WIRE_MSG_SAMPLE_REQUEST};
    m.u.sample_request = (wire_sample_request_t){
        .id = SHARDS_OWN_ID_BIT | ++s->next_own_id, .stats_only = 1, .stats_after = after};
    wire_encode(&m, &s->out);
    int rc = net_send(h->sock, s->out.data, s->out.len, ZMQ_DONTWAIT);
    if (rc == APEX_OK) {
        h->probing = 1;
        h->probe_id = m.u.sample_request.id;
        h->probe_deadline_ms = now + (after ? s->watch_timeout_ms : s->request_timeout_ms);
    }
    return rc;
}

void shards_tick(shards_t *self, int64_t now) {
    if (self->K == 1) {
        return;
    }
    for (int k = 0; k < self->K; k++) {
        s_shard *h = &self->sh[k];
        if (h->probing && now > h->probe_deadline_ms) {
            h->probing = 0;
            s_down(self, k, now, "a stats request went unanswered");
        }
        if (h->state == SHARD_UNKNOWN && now - self->started_ms > self->request_timeout_ms) {
            s_down(self, k, now, "no answer since the learner started");
        }
        if (h->probing) {
            continue;
        }
        if (h->state != SHARD_UP) {
            s_stats_request(self, k, 0, now); // would block while not connected: next tick
        } else if (now - h->stats_ms > SHARDS_STATS_MAX_AGE_MS) {
            if (s_stats_request(self, k, 0, now) != APEX_OK) {
                s_down(self, k, now, "not connected");
            }
        } else if (self->held) {
            s_stats_request(self, k, h->st.inserted + 1, now);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Choice of shard, the run's replay ratio

// The smallest p^alpha over the shards up that hold data (0 = none known).
static double s_min_priority(const shards_t *s) {
    double m = 0.0;
    for (int k = 0; k < s->K; k++) {
        const s_shard *h = &s->sh[k];
        if (h->state == SHARD_UP && h->st.size > 0 && (m == 0.0 || h->st.min_priority < m)) {
            m = h->st.min_priority;
        }
    }
    return m;
}

// Sampling is held: every shard up without a stats request in flight gets a watch for its
// next insert, which is what can lift the hold (min_size_to_sample or the ratio).
static void s_hold(shards_t *s, int64_t now) {
    s->held = 1;
    for (int k = 0; k < s->K; k++) {
        s_shard *h = &s->sh[k];
        if (h->state == SHARD_UP && !h->probing &&
            s_stats_request(s, k, h->st.inserted + 1, now) != APEX_OK) {
            s_down(s, k, now, "not connected");
        }
    }
}

// Shard k with probability P_k / sum P: u is a point in [0, mass), and k the shard whose
// share of [0, mass) holds it. (Rounding can leave u past the last share: the last shard up.)
static int s_choose(const shards_t *s, double u) {
    int last = -1;
    for (int k = 0; k < s->K; k++) {
        const s_shard *h = &s->sh[k];
        if (h->state != SHARD_UP || h->st.size == 0) {
            continue;
        }
        last = k;
        if (u < h->st.total_priority) {
            return k;
        }
        u -= h->st.total_priority;
    }
    return last;
}

// Keeps choice k; the SHARDS_TRACE_N-th is logged with the ones before it, so that the log
// shows each rank's stream at work (ranks of a group must not choose alike) and a run's
// choices can be reproduced from its seed and rank.
static void s_trace(shards_t *s, int k) {
    s->trace[s->traced++] = (uint8_t)k;
    if (s->traced < SHARDS_TRACE_N) {
        return;
    }
    char line[SHARDS_TRACE_N * 3 + 1];
    size_t n = 0;
    for (int i = 0; i < SHARDS_TRACE_N; i++) {
        n += (size_t)snprintf(line + n, sizeof line - n, i ? " %u" : "%u", s->trace[i]);
    }
    log_info("rank %d's first %d choices of shard (its stream: seed %llu, index %d): %s", s->rank,
             SHARDS_TRACE_N, (unsigned long long)s->seed, s->rank, line);
}

int shards_pick(shards_t *self, uint32_t rows, int64_t now) {
    if (self->K == 1) {
        return 0;
    }
    uint64_t size = 0;
    double mass = 0.0;
    for (int k = 0; k < self->K; k++) {
        const s_shard *h = &self->sh[k];
        if (h->state == SHARD_UP && h->st.size > 0) {
            size += h->st.size;
            mass += h->st.total_priority;
        }
    }
    if (size < (uint64_t)self->min_size || !(mass > 0.0) ||
        !limiter_can_sample(&self->limiter, rows)) {
        s_hold(self, now);
        return -1;
    }
    self->held = 0;
    int k = s_choose(self, rng_uniform(&self->rng) * mass);
    if (self->traced < SHARDS_TRACE_N) {
        s_trace(self, k);
    }
    return k;
}

int shards_send_request(shards_t *self, int k, wire_sample_request_t *req, int64_t now) {
    s_shard *h = &self->sh[k];
    if (self->K > 1) {
        req->min_priority = s_min_priority(self);
    }
    wire_msg_t m = {.type = WIRE_MSG_SAMPLE_REQUEST, .u.sample_request = *req};
    wire_encode(&m, &self->out);
    int rc = net_send(h->sock, self->out.data, self->out.len, ZMQ_DONTWAIT);
    if (self->K == 1) {
        return rc;
    }
    if (rc != APEX_OK) {
        s_down(self, k, now, "not connected");
        return rc;
    }
    // Counted when sent: the ratio holds whatever the replies do (a refused one is refunded).
    limiter_sampled(&self->limiter, (uint64_t)req->batch_size * (req->batches ? req->batches : 1));
    h->requests++;
    for (int j = 0; j < self->K; j++) {
        self->sh[j].served_meanwhile += self->sh[j].state == SHARD_DOWN;
    }
    return APEX_OK;
}

int shards_send_to(shards_t *self, int k, const wire_sample_request_t *req) {
    wire_msg_t m = {.type = WIRE_MSG_SAMPLE_REQUEST, .u.sample_request = *req};
    wire_encode(&m, &self->out);
    int rc = net_send(self->sh[k].sock, self->out.data, self->out.len, ZMQ_DONTWAIT);
    self->sh[k].requests += rc == APEX_OK && !req->stats_only; // (shards_report)
    return rc;
}

int shards_send_update(shards_t *self, int k, const wire_priority_update_t *u) {
    wire_msg_t m = {.type = WIRE_MSG_PRIORITY_UPDATE, .u.priority_update = *u};
    wire_encode(&m, &self->out);
    return net_send(self->sh[k].sock, self->out.data, self->out.len, ZMQ_DONTWAIT);
}

void shards_not_served(shards_t *self, int k, uint32_t rows) {
    (void)k;
    if (self->K > 1) {
        limiter_refund(&self->limiter, rows);
    }
}

void shards_timed_out(shards_t *self, int k, int64_t now) {
    if (self->K > 1) {
        char why[96];
        snprintf(why, sizeof why, "a sample request went unanswered for %lld ms",
                 (long long)self->request_timeout_ms);
        s_down(self, k, now, why);
    }
}

// ---------------------------------------------------------------------------------------
// Replies

// Keeps the stats of shard k and tells the limiter of its new inserts. A shard that comes
// back with fewer inserts than seen (restored without its last, unacknowledged ones, or
// empty with durability none) is counted from its new count on.
static void s_take_stats(shards_t *s, int k, const wire_replay_stats_t *st, int64_t now) {
    s_shard *h = &s->sh[k];
    if (h->has_stats && st->inserted > h->seen_inserted) {
        limiter_inserted(&s->limiter, st->inserted - h->seen_inserted);
    }
    h->seen_inserted = st->inserted;
    h->st = *st;
    h->has_stats = 1;
    h->stats_ms = now;
    if (h->state == SHARD_UNKNOWN) {
        log_info("replay shard %d (%s) answers: %llu transitions, %llu inserted", k, h->ep,
                 (unsigned long long)st->size, (unsigned long long)st->inserted);
    } else if (h->state == SHARD_DOWN) {
        log_info("replay shard %d (%s) is back after %.1f s (%llu transitions, %llu inserted); "
                 "%llu sample requests went to the other shards meanwhile",
                 k, h->ep, (double)(now - h->down_since_ms) / 1000.0, (unsigned long long)st->size,
                 (unsigned long long)st->inserted, (unsigned long long)h->served_meanwhile);
    }
    h->state = SHARD_UP;
}

int shards_take_reply(shards_t *self, int k, const wire_sample_reply_t *r, int64_t now) {
    s_shard *h = &self->sh[k];
    if (self->K == 1 && r->stats.shards == 1) {
        h->st = r->stats;
        return 0;
    }
    if (r->stats.shards != (uint32_t)self->K || r->stats.shard != (uint32_t)k) {
        // Counting one server's mass twice, or a stranger's, would bend every choice.
        log_every(&h->log, SHARDS_LOG_MS, LOG_ERROR,
                  "%s, shard %d of [endpoints] replay_sample, is served by shard %u of %u; "
                  "its replies are dropped\n---> HINT: the k-th endpoint must reach the "
                  "apex-replay started with --shard k and [replay] shards = %d",
                  h->ep, k, r->stats.shard, r->stats.shards, self->K);
        return -1;
    }
    s_take_stats(self, k, &r->stats, now);
    if (!(r->id & SHARDS_OWN_ID_BIT)) {
        return 0;
    }
    if (h->probing && r->id == h->probe_id) {
        h->probing = 0;
    }
    return 1;
}

uint64_t shards_requests(const shards_t *self, int k) { return self->sh[k].requests; }

void shards_report(const shards_t *self) {
    if (self->K == 1) {
        return;
    }
    char line[CONFIG_MAX_SHARDS * 32];
    size_t n = 0;
    uint64_t all = 0;
    for (int k = 0; k < self->K; k++) {
        all += self->sh[k].requests;
        n += (size_t)snprintf(line + n, sizeof line - n, "%s%llu to shard %d", k ? ", " : "",
                              (unsigned long long)self->sh[k].requests, k);
    }
    log_info("rank %d sent %llu sample requests: %s", self->rank, (unsigned long long)all, line);
}

const wire_replay_stats_t *shards_stats(shards_t *self) {
    if (self->K == 1) {
        return &self->sh[0].st;
    }
    wire_replay_stats_t *t = &self->sum;
    *t = (wire_replay_stats_t){.shards = (uint32_t)self->K};
    for (int k = 0; k < self->K; k++) {
        shards_stats_add(t, &self->sh[k].st);
    }
    t->min_priority = s_min_priority(self);
    return t;
}

void shards_stats_add(wire_replay_stats_t *t, const wire_replay_stats_t *st) {
    t->size += st->size;
    t->capacity += st->capacity;
    t->inserted += st->inserted;
    t->sampled += st->sampled;
    t->updated += st->updated;
    t->stale_updates += st->stale_updates;
    t->bad_messages += st->bad_messages;
    t->limiter_waits += st->limiter_waits;
    t->duplicate_batches += st->duplicate_batches;
    t->total_priority += st->total_priority;
    t->det_env_frames += st->det_env_frames;
    t->det_episodes += st->det_episodes;
    t->det_return_sum += st->det_return_sum;
    t->det_return_n += st->det_return_n;
    t->det_version_min = APEX_MIN(t->det_version_min, st->det_version_min);
}
