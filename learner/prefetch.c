// prefetch.c: see prefetch.h.
#define LOG_MODULE "learner"
#include "prefetch.h"

#include "apex.h"
#include "log.h"
#include "net.h"
#include "xalloc.h"

#include <math.h>
#include <string.h>

#define LOG_INTERVAL_MS 5000

typedef enum { SLOT_FREE = 0, SLOT_IN_FLIGHT, SLOT_READY } s_slot_state;
typedef enum { SUB_ASK = 0, SUB_ASKED, SUB_IN } s_sub_state; // one shard's part of a place

// One slot: a request in flight, then the batches its reply brought back.
typedef struct {
    s_slot_state state;
    uint64_t id;
    int64_t sent_ms;
    uint64_t arrival;          // order in which batches became ready
    int shard;                 // the replay shard asked (its reply's keys go back there)
    uint32_t next;             // the next batch to train, of batches_per_request
    wire_rows_t rows;          // batch_size x batches_per_request rows, as the replay stores them
    uint64_t det_index;        // deterministic runs: the request's place in the schedule,
    uint32_t det_attempt;      // and how many times it was asked for before (a timeout)
    int det_fresh;             // a place taken, not asked for yet (its first ask: attempt 0)
    wire_replay_stats_t stats; // the replay's counters when it served the reply
    // [run] deterministic with K > 1 replay shards ("fan-out", prefetch.h): the place is asked
    // of every shard, and its rows are drawn from the K answers once all are in.
    float beta;                     // the place's
    wire_rows_t *sub;               // (K) shard k's answer
    wire_replay_stats_t *sub_stats; // (K) its counters
    uint8_t *sub_state;             // (K) s_sub_state
    int64_t *sub_sent_ms;           // (K)
    int subs_in;
    uint8_t *row_shard; // (rows) the shard each row was drawn from
} s_slot;

struct prefetch {
    shards_t *shards; // borrowed
    wire_decoder_t *dec;
    s_slot *slots;
    int n_slots;
    uint32_t batch, batches; // rows per batch, batches per request
    size_t obs_bytes;        // one observation
    int64_t timeout_ms;      // [learner] request_timeout_ms
    const char *replay_ep;   // for the liveness log (one shard)
    uint64_t next_id, next_arrival;
    s_slot *training; // the slot of the batch prefetch_next gave, until prefetch_trained
    float *prio_out;  // (batch) the priorities that go out
    uint64_t *keys_out;
    prefetch_stats_t st;
    log_limiter_t bad_log, live_log, prio_log, refused_log;
    // [run] deterministic: the group's ranks and this one's (request i of this rank is the
    // group's i x ranks + rank + 1), the beta schedule (a request's beta is the one of the
    // update at which a steady learner issues it, not of whenever it went out), and the
    // horizon watch (prefetch.h).
    int det, ranks, rank;
    uint64_t det_local;
    double beta_start, beta_end, beta_steps;
    uint64_t watch_h, watch_id; // the horizon asked (0: none in flight), and its request id
    uint64_t watch_asks;        // watches sent (the low bits of their ids)
    int64_t watch_ms;
    uint64_t answer_h, answer_served; // the answer, until prefetch_det_take
    int has_answer;
    // Fan-out (deterministic, K > 1 shards): K, the run's seed (each place's draw of rows is
    // its own stream), and the horizon watch's answers, one per shard (the smallest counts).
    int fan;
    uint64_t seed;
    uint8_t *watch_in;      // (K)
    uint8_t *watch_sent;    // (K) the watch\'s question reached shard k
    uint64_t *watch_served; // (K)
    uint64_t *upd_keys;     // (batch) one shard's part of a batch's update
    float *upd_prio;
};

#define DET_WATCH_ID_BIT (1ull << 62) // (SHARDS_OWN_ID_BIT is bit 63)
#define DET_ATTEMPT_MAX 4095          // (WIRE_DET_ID's attempts stay below the bits above)

prefetch_t *prefetch_new(const apex_config_t *cfg, shards_t *shards, int64_t now_ms) {
    prefetch_t *p = xcalloc(1, sizeof *p);
    p->shards = shards;
    p->n_slots = (int)cfg->learner.prefetch;
    APEX_ASSERT(p->n_slots >= 1 && p->n_slots <= PREFETCH_MAX_SLOTS); // (the config's bounds)
    p->batch = (uint32_t)cfg->learner.batch_size;
    p->batches = (uint32_t)cfg->learner.batches_per_request;
    p->obs_bytes = (size_t)cfg->env.obs_dim * wire_obs_elem_bytes((uint32_t)cfg->env.obs_dtype);
    p->timeout_ms = cfg->learner.request_timeout_ms;
    p->replay_ep = cfg->endpoints.replay_sample;
    wire_limits_t lim = {.obs_dim = (uint32_t)cfg->env.obs_dim,
                         .obs_dtype = (uint32_t)cfg->env.obs_dtype,
                         .n_actions = (uint32_t)cfg->env.n_actions,
                         .action_dim = (uint32_t)cfg->env.action_dim,
                         .action_low = cfg->env.action_low,
                         .action_high = cfg->env.action_high,
                         .max_count = (uint32_t)cfg->replay.max_batch};
    p->dec = wire_decoder_new(&lim);
    size_t B = (size_t)p->batch * p->batches;
    p->slots = xcalloc((size_t)p->n_slots, sizeof *p->slots);
    for (int i = 0; i < p->n_slots; i++) {
        wire_rows_init(&p->slots[i].rows, B, p->obs_bytes, (uint32_t)cfg->env.action_dim);
    }
    p->prio_out = xmalloc(p->batch * sizeof(float));
    p->keys_out = xmalloc(p->batch * sizeof(uint64_t));
    p->st.last_reply_ms = now_ms;
    p->det = cfg->run.deterministic;
    p->ranks = 1;
    if (p->det && shards_count(shards) > 1) {
        int K = shards_count(shards);
        p->fan = K;
        p->seed = (uint64_t)cfg->run.seed;
        for (int i = 0; i < p->n_slots; i++) {
            s_slot *s = &p->slots[i];
            s->sub = xcalloc((size_t)K, sizeof *s->sub);
            for (int k = 0; k < K; k++) {
                wire_rows_init(&s->sub[k], B, p->obs_bytes, (uint32_t)cfg->env.action_dim);
            }
            s->sub_stats = xcalloc((size_t)K, sizeof *s->sub_stats);
            s->sub_state = xcalloc((size_t)K, 1);
            s->sub_sent_ms = xcalloc((size_t)K, sizeof *s->sub_sent_ms);
            s->row_shard = xcalloc(B, 1);
        }
        p->watch_in = xcalloc((size_t)K, 1);
        p->watch_sent = xcalloc((size_t)K, 1);
        p->watch_served = xcalloc((size_t)K, sizeof *p->watch_served);
        p->upd_keys = xmalloc(p->batch * sizeof(uint64_t));
        p->upd_prio = xmalloc(p->batch * sizeof(float));
    }
    p->beta_start = cfg->learner.beta_start;
    p->beta_end = cfg->learner.beta_end;
    p->beta_steps = (double)cfg->learner.beta_steps;
    return p;
}

void prefetch_det_group(prefetch_t *self, int rank, int ranks) {
    self->rank = rank;
    self->ranks = ranks;
}

// The beta of the update at which a learner that is never short of data issues request l of
// this rank: after training request l - prefetch (every request's batches), or at the start.
static float s_det_beta(const prefetch_t *p, uint64_t l) {
    uint64_t n = (uint64_t)p->n_slots;
    double steps = l >= n ? (double)((l - n + 1) * p->batches) : 0.0;
    double f = steps / p->beta_steps;
    return (float)(p->beta_start + (p->beta_end - p->beta_start) * (f < 1.0 ? f : 1.0));
}

void prefetch_destroy(prefetch_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    prefetch_t *p = *self_p;
    for (int i = 0; i < p->n_slots; i++) {
        s_slot *s = &p->slots[i];
        wire_rows_fini(&s->rows);
        for (int k = 0; s->sub && k < p->fan; k++) {
            wire_rows_fini(&s->sub[k]);
        }
        free(s->sub);
        free(s->sub_stats);
        free(s->sub_state);
        free(s->sub_sent_ms);
        free(s->row_shard);
    }
    free(p->watch_in);
    free(p->watch_sent);
    free(p->watch_served);
    free(p->upd_keys);
    free(p->upd_prio);
    free(p->slots);
    free(p->prio_out);
    free(p->keys_out);
    wire_decoder_destroy(&p->dec);
    free(p);
    *self_p = NULL;
}

// ---------------------------------------------------------------------------------------
// Requests

// Frees the slots waiting on a shard that went down (their replies will not come), so that
// their requests go to the shards still up.
static void s_forget_down_shards(prefetch_t *p) {
    for (int k; (k = shards_take_down(p->shards)) >= 0;) {
        for (int i = 0; i < p->n_slots; i++) {
            if (p->slots[i].state == SLOT_IN_FLIGHT && p->slots[i].shard == k) {
                p->slots[i].state = SLOT_FREE;
                p->st.timeouts++;
            }
        }
    }
}

// The next place of this rank in the group's schedule.
static void s_det_place(prefetch_t *p, s_slot *s) {
    s->det_index = p->det_local * (uint64_t)p->ranks + (uint64_t)p->rank + 1;
    s->det_attempt = 0;
    p->det_local++;
}

// Fan-out: a free slot takes the next place; every shard whose answer for a slot's place is
// not in and not asked (a send that would block, a timeout, a refusal) is asked. A shard
// that does not answer holds the run back until it does: skipping it would change the rows.
// The slots in the given states, in the order of their places (a slot that trained its
// batches takes the next place, so slot order is not place order): asks go out in place
// order, so that a replay that restarted hears the earliest place first (it starts its
// schedule at the first place it hears of, and drops a re-ask below it as served).
static int s_by_place(const prefetch_t *p, int free, int in_flight, int *order) {
    int n = 0;
    for (int i = 0; i < p->n_slots; i++) {
        const s_slot *s = &p->slots[i];
        if ((free && s->state == SLOT_FREE) || (in_flight && s->state == SLOT_IN_FLIGHT)) {
            int j = n++;
            for (; j > 0 && p->slots[order[j - 1]].det_index > s->det_index; j--) {
                order[j] = order[j - 1];
            }
            order[j] = i;
        }
    }
    return n;
}

// A free slot with no place takes the next one (slot order: the places come out in order).
static void s_det_take_places(prefetch_t *p) {
    for (int i = 0; i < p->n_slots; i++) {
        s_slot *s = &p->slots[i];
        if (s->state == SLOT_FREE && !s->det_index) {
            s_det_place(p, s);
            s->det_fresh = 1;
        }
    }
}

static void s_fan_issue(prefetch_t *p, int64_t now_ms) {
    s_det_take_places(p);
    int order[PREFETCH_MAX_SLOTS];
    int n = s_by_place(p, 1, 1, order);
    for (int o = 0; o < n; o++) {
        s_slot *s = &p->slots[order[o]];
        if (s->state == SLOT_FREE) {
            if (!s->det_index) {
                s_det_place(p, s);
            }
            s->beta = s_det_beta(p, (s->det_index - 1) / (uint64_t)p->ranks);
            s->det_fresh = 0;
            memset(s->sub_state, SUB_ASK, (size_t)p->fan);
            s->subs_in = 0;
            s->shard = -1; // (no single shard: s_forget_down_shards leaves it alone)
            s->state = SLOT_IN_FLIGHT;
        }
        for (int k = 0; k < p->fan; k++) {
            if (s->sub_state[k] != SUB_ASK) {
                continue;
            }
            wire_sample_request_t req = {.id = WIRE_DET_ID(s->det_index, s->det_attempt),
                                         .batch_size = p->batch,
                                         .beta = s->beta,
                                         .batches = p->batches,
                                         .det_index = s->det_index};
            if (shards_send_to(p->shards, k, &req) == APEX_OK) {
                s->sub_state[k] = SUB_ASKED;
                s->sub_sent_ms[k] = now_ms;
            }
        }
    }
}

void prefetch_issue(prefetch_t *self, float beta, int64_t now_ms) {
    if (self->fan) {
        s_fan_issue(self, now_ms);
        return;
    }
    uint32_t rows = self->batch * self->batches;
    int order[PREFETCH_MAX_SLOTS], n = self->n_slots;
    if (self->det) {
        s_det_take_places(self);
        n = s_by_place(self, 1, 0, order);
    }
    for (int o = 0; o < n; o++) {
        s_slot *s = &self->slots[self->det ? order[o] : o];
        if (s->state != SLOT_FREE) {
            continue;
        }
        wire_sample_request_t req = {.id = self->next_id + 1,
                                     .batch_size = self->batch,
                                     .beta = beta,
                                     .batches = self->batches};
        if (self->det) {
            // A slot that timed out or was not served asks again for its place in the
            // schedule (the next ask); a slot that trained its batches took the next place.
            if (!s->det_fresh && s->det_attempt < DET_ATTEMPT_MAX) {
                s->det_attempt++;
            }
            s->det_fresh = 0;
            req.det_index = s->det_index;
            req.id = WIRE_DET_ID(s->det_index, s->det_attempt);
            req.beta = s_det_beta(self, (s->det_index - 1) / (uint64_t)self->ranks);
        }
        int k, rc = APEX_EAGAIN;
        // A failed send takes its shard down (shards_send_request), so this ends within K tries.
        while ((k = shards_pick(self->shards, rows, now_ms)) >= 0 &&
               (rc = shards_send_request(self->shards, k, &req, now_ms)) != APEX_OK &&
               shards_count(self->shards) > 1) {
        }
        s_forget_down_shards(self);
        if (rc != APEX_OK) {
            return;
        }
        s->id = self->det ? req.id : ++self->next_id;
        s->shard = k;
        s->sent_ms = now_ms;
        s->state = SLOT_IN_FLIGHT;
    }
}

void prefetch_tick(prefetch_t *self, float beta, int64_t now_ms) {
    for (int i = 0; self->fan && i < self->n_slots; i++) {
        s_slot *s = &self->slots[i];
        int again = 0;
        for (int k = 0; s->state == SLOT_IN_FLIGHT && k < self->fan; k++) {
            if (s->sub_state[k] == SUB_ASKED && now_ms - s->sub_sent_ms[k] > self->timeout_ms) {
                s->sub_state[k] = SUB_ASK;
                self->st.timeouts++;
                again = 1;
            }
        }
        if (again && s->det_attempt < DET_ATTEMPT_MAX) {
            s->det_attempt++; // (a shard that served the first ask drops this one)
        }
    }
    for (int i = 0; !self->fan && i < self->n_slots; i++) {
        s_slot *s = &self->slots[i];
        if (s->state == SLOT_IN_FLIGHT && now_ms - s->sent_ms > self->timeout_ms) {
            s->state = SLOT_FREE;
            self->st.timeouts++;
            shards_timed_out(self->shards, s->shard, now_ms);
        }
    }
    shards_tick(self->shards, now_ms); // with several shards: their liveness, logged per shard
    s_forget_down_shards(self);
    if (shards_count(self->shards) == 1 && now_ms - self->st.last_reply_ms > self->timeout_ms) {
        log_every(&self->live_log, LOG_INTERVAL_MS, LOG_WARN,
                  "replay server at %s has not answered for %.1f s (%llu requests timed out); "
                  "retrying",
                  self->replay_ep, (double)(now_ms - self->st.last_reply_ms) / 1000.0,
                  (unsigned long long)self->st.timeouts);
    }
    prefetch_issue(self, beta, now_ms);
}

// ---------------------------------------------------------------------------------------
// Replies

// A deterministic run's reply fills the slot of its place, whichever ask it answers: the
// replay serves a place once and drops a later ask of it (replay/server.c), so a reply that
// comes after its request timed out is the one to take.
static s_slot *s_slot_for_id(prefetch_t *p, int shard, uint64_t id) {
    for (int i = 0; i < p->n_slots; i++) {
        const s_slot *s = &p->slots[i];
        int same = p->det ? s->det_index == WIRE_DET_INDEX(id) : s->id == id;
        if (s->state == SLOT_IN_FLIGHT && same && s->shard == shard) {
            return &p->slots[i];
        }
    }
    return NULL;
}

static prefetch_result s_bad(prefetch_t *p, const char *why) {
    p->st.bad_messages++;
    log_every(&p->bad_log, LOG_INTERVAL_MS, LOG_WARN,
              "dropped a bad reply from the replay: %s (%llu in all)", why,
              (unsigned long long)p->st.bad_messages);
    return PREFETCH_BAD;
}

// The K answers of a place make its rows: row j is row j of shard k's answer with probability
// P_k / sum P (each answer is the whole batch sampled from that shard's own priorities, so row
// j is then transition i with probability p_i / sum P over every shard: global PER), drawn
// from the place's own stream, so the rows depend on the seed and the place only. Each shard
// normalised its weights by its own smallest priority; the run's is the smallest of the K:
// w = (p_min / p_i)^beta = w_k (p_min / p_min,k)^beta. The counters are the K shards' sums.
static void s_fan_merge(prefetch_t *p, s_slot *s) {
    double total = 0.0, pmin = 0.0;
    for (int k = 0; k < p->fan; k++) {
        const wire_replay_stats_t *st = &s->sub_stats[k];
        total += st->total_priority > 0.0 ? st->total_priority : 0.0;
        if (st->min_priority > 0.0 && (pmin == 0.0 || st->min_priority < pmin)) {
            pmin = st->min_priority;
        }
    }
    // Each shard's share of [0, mass) (equal shares when none reports any mass: a guard, a
    // shard serves only with data), and its weights' rescaling.
    float scale[CONFIG_MAX_SHARDS];
    double share[CONFIG_MAX_SHARDS];
    for (int k = 0; k < p->fan; k++) {
        share[k] = total > 0.0 ? s->sub_stats[k].total_priority : 1.0 / (double)p->fan;
        double mk = s->sub_stats[k].min_priority;
        scale[k] = mk > 0.0 && pmin > 0.0 && s->beta > 0.0f ? powf((float)pmin / (float)mk, s->beta)
                                                            : 1.0f;
    }
    double mass = total > 0.0 ? total : 1.0;
    rng_t r;
    rng_init_stream(&r, p->seed, RNG_ROLE_DET_ROWS, s->det_index);
    wire_rows_t *o = &s->rows;
    size_t ab = wire_action_bytes(o->action_dim), ob = p->obs_bytes;
    uint32_t rows = p->batch * p->batches;
    for (uint32_t j = 0; j < rows; j++) {
        double u = rng_uniform(&r) * mass;
        int k = 0;
        while (k < p->fan - 1 && u >= share[k]) {
            u -= share[k];
            k++;
        }
        const wire_rows_t *in = &s->sub[k];
        o->keys[j] = in->keys[j];
        o->is_weights[j] = in->is_weights[j] * scale[k];
        o->rewards[j] = in->rewards[j];
        o->discounts[j] = in->discounts[j];
        memcpy(wire_rows_actions(o, j), wire_rows_actions(in, j), ab);
        memcpy(o->obs + j * ob, in->obs + j * ob, ob);
        memcpy(o->next_obs + j * ob, in->next_obs + j * ob, ob);
        s->row_shard[j] = (uint8_t)k;
    }
    wire_replay_stats_t *t = &s->stats;
    *t = (wire_replay_stats_t){
        .shards = (uint32_t)p->fan, .min_priority = pmin, .det_version_min = UINT64_MAX};
    for (int k = 0; k < p->fan; k++) {
        shards_stats_add(t, &s->sub_stats[k]); // (each shard's own actors' columns: summed)
    }
}

static prefetch_result s_bad(prefetch_t *p, const char *why);

// Fan-out: shard k's answer for a place in flight (the first one: a later ask of a place the
// shard served is dropped by the shard, and an answer twice is late here).
static prefetch_result s_fan_take(prefetch_t *p, int k, const wire_sample_reply_t *r) {
    s_slot *s = NULL;
    for (int i = 0; i < p->n_slots && !s; i++) {
        s_slot *c = &p->slots[i];
        if (c->state == SLOT_IN_FLIGHT && c->det_index == WIRE_DET_INDEX(r->id) &&
            c->sub_state[k] != SUB_IN) {
            s = c;
        }
    }
    if (!s) {
        p->st.late_replies++;
        return PREFETCH_LATE;
    }
    uint32_t rows = p->batch * p->batches;
    if (r->status != WIRE_SAMPLE_OK) {
        p->st.refused += r->status == WIRE_SAMPLE_REFUSED;
        p->st.not_ready += r->status != WIRE_SAMPLE_REFUSED;
        if (r->status == WIRE_SAMPLE_REFUSED) {
            log_every(&p->refused_log, LOG_INTERVAL_MS, LOG_ERROR,
                      "replay shard %d refused a sample of %u x %u rows (check [replay] "
                      "capacity and max_batch; %llu refused)",
                      k, p->batches, p->batch, (unsigned long long)p->st.refused);
        }
        s->sub_state[k] = SUB_ASK; // asked again at the next issue, as the next ask (a shard
        s->det_attempt += s->det_attempt < DET_ATTEMPT_MAX; // that did serve it drops it)
        return PREFETCH_NOT_SERVED;
    }
    if (r->count != rows) {
        s->sub_state[k] = SUB_ASK;
        s->det_attempt += s->det_attempt < DET_ATTEMPT_MAX;
        return s_bad(p, "not the rows asked for");
    }
    wire_rows_copy(&s->sub[k], 0, r, r->count, p->obs_bytes);
    s->sub_stats[k] = r->stats;
    s->sub_state[k] = SUB_IN;
    if (++s->subs_in < p->fan) {
        return PREFETCH_TAKEN;
    }
    s_fan_merge(p, s);
    s->next = 0;
    s->arrival = ++p->next_arrival;
    s->state = SLOT_READY;
    if (!p->st.started) {
        p->st.started = 1;
        log_info("first batch received (the %d replay shards hold %llu transitions): training "
                 "starts",
                 p->fan, (unsigned long long)s->stats.size);
    }
    return PREFETCH_TAKEN;
}

// A decoded reply on shard k's socket.
static prefetch_result s_take_reply(prefetch_t *p, int k, const wire_sample_reply_t *r,
                                    int64_t now) {
    int own = shards_take_reply(p->shards, k, r, now); // keeps the stats; 1: its own request
    if (own < 0) {
        return s_bad(p, "its stats name another shard");
    }
    if (own > 0) {
        return PREFETCH_STATS;
    }
    p->st.last_reply_ms = now;
    if (r->id & DET_WATCH_ID_BIT) {
        if (p->fan && r->id == p->watch_id && r->stats.det_horizon == p->watch_h &&
            !p->watch_in[k]) {
            // Each shard's count; the horizon's is the smallest: the places every shard had
            // served when its own actors' periods before h were in (prefetch.h).
            p->watch_in[k] = 1;
            p->watch_served[k] = r->stats.det_served;
            int all = 1;
            uint64_t m = UINT64_MAX;
            for (int j = 0; j < p->fan; j++) {
                all &= p->watch_in[j];
                m = p->watch_served[j] < m ? p->watch_served[j] : m;
            }
            if (all) {
                p->answer_h = p->watch_h;
                p->answer_served = m;
                p->has_answer = 1;
                p->watch_h = 0;
            }
        } else if (p->det && !p->fan && r->id == p->watch_id &&
                   r->stats.det_horizon == p->watch_h) {
            p->answer_h = r->stats.det_horizon;
            p->answer_served = r->stats.det_served;
            p->has_answer = 1;
            p->watch_h = 0;
        }
        return PREFETCH_STATS; // (an older watch's answer, or one that timed out: asked again)
    }
    if (p->fan) {
        return s_fan_take(p, k, r);
    }
    s_slot *s = s_slot_for_id(p, k, r->id);
    if (!s) {
        p->st.late_replies++; // answered after its timeout; its slot was already re-issued
        return PREFETCH_LATE;
    }
    uint32_t rows = p->batch * p->batches;
    if (r->status != WIRE_SAMPLE_OK) {
        // NOT_READY: the replay's limiter is holding learning back (e.g. min_size_to_sample).
        // REFUSED: a configuration mismatch; logged, and retried so that a fixed replay
        // server is picked up.
        if (r->status == WIRE_SAMPLE_REFUSED) {
            p->st.refused++;
            log_every(&p->refused_log, LOG_INTERVAL_MS, LOG_ERROR,
                      "replay refused a sample of %u x %u rows (check [replay] capacity and "
                      "max_batch; %llu refused)",
                      p->batches, p->batch, (unsigned long long)p->st.refused);
        } else {
            p->st.not_ready++;
        }
        shards_not_served(p->shards, k, rows);
        s->state = SLOT_FREE;
        return PREFETCH_NOT_SERVED;
    }
    if (r->count != rows) {
        shards_not_served(p->shards, k, rows); // nothing usable was sampled for this request
        s->state = SLOT_FREE;
        return s_bad(p, "not the rows asked for");
    }
    // The decoder checked the reply's dtype and dims against the run's; the network reads the
    // observations as they are (uint8 or float32, with the run's scale: model/nn.h).
    wire_rows_copy(&s->rows, 0, r, r->count, p->obs_bytes);
    s->stats = r->stats;
    s->next = 0;
    s->arrival = ++p->next_arrival;
    s->state = SLOT_READY;
    if (!p->st.started) {
        p->st.started = 1;
        log_info("first batch received (replay holds %llu transitions): training starts",
                 (unsigned long long)shards_stats(p->shards)->size);
    }
    return PREFETCH_TAKEN;
}

prefetch_result prefetch_handle(prefetch_t *self, int k, const void *buf, size_t len,
                                int64_t now_ms) {
    wire_msg_t m;
    int rc = wire_decode(self->dec, buf, len, &m);
    if (rc != APEX_OK) {
        return s_bad(self, wire_decoder_last_error(self->dec));
    }
    if (m.type != WIRE_MSG_SAMPLE_REPLY) {
        return s_bad(self, "not a SampleReply");
    }
    return s_take_reply(self, k, &m.u.sample_reply, now_ms);
}

int prefetch_read(prefetch_t *self, int k, int max, int64_t now_ms) {
    void *sock = shards_socket(self->shards, k);
    int n = 0;
    for (; n < max; n++) {
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        if (net_recv(sock, &msg, ZMQ_DONTWAIT) != APEX_OK) {
            zmq_msg_close(&msg);
            break; // nothing more now (or the socket is closing)
        }
        if (zmq_msg_more(&msg)) {
            // A DEALER hears one frame per message from a ROUTER; drop the rest of this one.
            net_drain_more(sock);
            s_bad(self, "more than one frame");
        } else {
            prefetch_handle(self, k, zmq_msg_data(&msg), zmq_msg_size(&msg), now_ms);
        }
        zmq_msg_close(&msg);
    }
    return n;
}

// ---------------------------------------------------------------------------------------
// Training

int prefetch_next(prefetch_t *self, prefetch_batch_t *out) {
    s_slot *best = NULL;
    for (int i = 0; i < self->n_slots; i++) {
        s_slot *s = &self->slots[i];
        // A deterministic run trains in the schedule's order (which is the arrival order
        // too, as long as no request had to be asked again).
        uint64_t key = self->det ? s->det_index : s->arrival;
        if (s->state == SLOT_READY &&
            (!best || key < (self->det ? best->det_index : best->arrival))) {
            best = s;
        }
    }
    self->training = best;
    if (!best) {
        return 0;
    }
    size_t r0 = (size_t)best->next * self->batch, o0 = r0 * self->obs_bytes;
    const wire_rows_t *w = &best->rows;
    out->batch = (train_batch_t){
        .obs = w->obs + o0,
        .actions = w->actions ? w->actions + r0 : NULL,
        .cont_actions = w->cont_actions ? w->cont_actions + r0 * w->action_dim : NULL,
        .rewards = w->rewards + r0,
        .discounts = w->discounts + r0,
        .next_obs = w->next_obs + o0,
        .is_weights = w->is_weights + r0,
        .size = (int)self->batch};
    out->keys = w->keys + r0;
    out->shard = best->shard; // (-1 in a fan-out: each row's own, prefetch_trained)
    out->stats = &best->stats;
    return 1;
}

void prefetch_trained(prefetch_t *self, const float *priorities, float beta, int64_t now_ms) {
    s_slot *s = self->training;
    APEX_ASSERT(s && s->state == SLOT_READY); // prefetch_next gave a batch (programming error)
    self->training = NULL;
    const uint64_t *keys = s->rows.keys + (size_t)s->next * self->batch;
    const float *prio = priorities;
    // Rows whose priority the replay would refuse (NaN: a loss gone NaN, or past the wire's
    // bound) keep their old priority: the rest of the update goes out.
    int all_ok = 1;
    for (uint32_t i = 0; i < self->batch; i++) {
        all_ok &= priorities[i] >= 0.0f && priorities[i] <= WIRE_PRIORITY_MAX; // false for NaN
    }
    uint32_t n = self->batch;
    if (!all_ok) {
        n = 0;
        for (uint32_t i = 0; i < self->batch; i++) {
            if (priorities[i] >= 0.0f && priorities[i] <= WIRE_PRIORITY_MAX) {
                self->keys_out[n] = keys[i];
                self->prio_out[n++] = priorities[i];
            }
        }
        keys = self->keys_out, prio = self->prio_out;
        self->st.bad_priorities += self->batch - n;
        log_every(&self->prio_log, LOG_INTERVAL_MS, LOG_ERROR,
                  "priorities outside [0, %g] (a loss gone NaN or infinite: training "
                  "diverged?): %llu left out of the updates so far",
                  (double)WIRE_PRIORITY_MAX, (unsigned long long)self->st.bad_priorities);
    }
    wire_priority_update_t up = {
        .count = n, .keys = keys, .priorities = prio, .det_index = s->det_index};
    if (self->fan) {
        // Each shard its own rows' priorities, every shard an update (maybe empty): its
        // schedule counts one per batch of each place it served.
        const uint8_t *from = s->row_shard + (size_t)s->next * self->batch;
        for (int k = 0; k < self->fan; k++) {
            uint32_t m = 0;
            for (uint32_t i = 0; i < self->batch; i++) {
                if (from[i] == k && priorities[i] >= 0.0f && priorities[i] <= WIRE_PRIORITY_MAX) {
                    self->upd_keys[m] = s->rows.keys[(size_t)s->next * self->batch + i];
                    self->upd_prio[m++] = priorities[i];
                }
            }
            up = (wire_priority_update_t){.count = m,
                                          .keys = self->upd_keys,
                                          .priorities = self->upd_prio,
                                          .det_index = s->det_index};
            if (shards_send_update(self->shards, k, &up) != APEX_OK) {
                self->st.dropped_updates++;
            }
        }
    } else if ((n > 0 || self->det) && shards_send_update(self->shards, s->shard, &up) != APEX_OK) {
        // (a deterministic replay counts every batch's update, an empty one too)
        self->st.dropped_updates++;
    }
    if (++s->next == self->batches) {
        s->state = SLOT_FREE;
        s->det_index = 0; // the next request takes the next place
        prefetch_issue(self, beta, now_ms);
    }
}

const prefetch_stats_t *prefetch_stats(const prefetch_t *self) { return &self->st; }

// ---------------------------------------------------------------------------------------
// The horizon watch (deterministic runs)

// Fan-out: the watch's question to every shard it has not reached yet (a shard not connected
// yet refuses the send: asked at the next call, not after the timeout, which at start-up held
// every actor for a whole request_timeout_ms).
static void s_fan_watch_send(prefetch_t *p) {
    wire_sample_request_t req = {.id = p->watch_id, .stats_only = 1, .det_horizon = p->watch_h};
    for (int k = 0; k < p->fan; k++) {
        if (!p->watch_sent[k] && shards_send_to(p->shards, k, &req) == APEX_OK) {
            p->watch_sent[k] = 1;
        }
    }
}

void prefetch_det_watch(prefetch_t *self, uint64_t h, int64_t now_ms) {
    if (self->has_answer) {
        return; // an answer not taken yet
    }
    if (self->watch_h == h && now_ms - self->watch_ms <= self->timeout_ms) {
        if (self->fan) {
            s_fan_watch_send(self); // (the question in flight; to any shard it missed)
        }
        return;
    }
    wire_sample_request_t req = {
        .id = DET_WATCH_ID_BIT | ++self->watch_asks, .stats_only = 1, .det_horizon = h};
    if (self->fan) {
        // Every shard, under one id (ids are per connection); asked again together.
        self->watch_h = h;
        self->watch_id = req.id;
        self->watch_ms = now_ms;
        memset(self->watch_in, 0, (size_t)self->fan);
        memset(self->watch_sent, 0, (size_t)self->fan);
        s_fan_watch_send(self);
        return;
    }
    if (shards_send_request(self->shards, 0, &req, now_ms) == APEX_OK) {
        self->watch_h = h;
        self->watch_id = req.id;
        self->watch_ms = now_ms;
    }
}

int prefetch_det_take(prefetch_t *self, uint64_t *h, uint64_t *served) {
    if (!self->has_answer) {
        return 0;
    }
    *h = self->answer_h;
    *served = self->answer_served;
    self->has_answer = 0;
    return 1;
}
