// fuzz_learner.c: libFuzzer harness of what apex-learner does with the messages its peers
// send: the replay's SampleReplies (learner/prefetch.h, with learner/shards.h keeping each
// reply's statistics), the actors' and evaluator's WeightsRequests (common/weights_server.h)
// and the actors' ActorStats (metrics_take_message, learner/metrics.h).
//
// An input is a program (fuzz_prog.h) run against fresh modules. The first byte chooses the
// run: one replay server or two shards, batch size (1 or 4), batches per request (1 or 2),
// prefetch slots (1 or 3), float32 or uint8 observations, discrete actions or continuous
// ones (bit 5: [env] action_dim 1 in [-1, 2], the DPG learner's run). The stand-in replay shards are
// ROUTERs of the harness on inproc endpoints (created once per process; they swallow what
// the learner sends); the weights endpoint is bound on inproc too. Then each operation:
//   0  the free slots send their requests (beta from the edge table); the harness reads them
//      off the stand-ins, so it knows the ids in flight and on which shard
//   1  a SampleReply on a shard: an id in flight (or any), a status (OK, NOT_READY, REFUSED,
//      or none of them), the rows asked for or one more or fewer, rows and stats fields from
//      the edge tables (totals, minima, shard and shard count)
//   2  the next ready batch is trained: priorities from the edge table go back
//   3  time passes: request timeouts, shard liveness, re-issues
//   4  raw bytes on a shard's socket
//   5  a WeightsRequest (peer id, have_version, well formed or not)
//   6  raw bytes on the weights endpoint
//   7  a new weights version (higher) or the heartbeat
//   8  an ActorStats: actor id (some beyond [actor] num_actors), frames and frames_delta,
//      episodes with returns, lengths and epsilons from the edge tables
//   9  raw bytes on the stats socket
// Checked after every operation, beyond "no crash, no leak, no sanitizer report":
//   - a batch handed to training is what the trainer may take (train.h): the run's rows,
//     finite rewards, discounts and importance weights in [0, 1], actions in range (a
//     continuous run: finite, within the bounds, and no discrete ones), finite float
//     observations;
//   - the run's frame count only grows; a mean return exists only with episodes and is
//     finite; the held weights requests stay within the table.
#include "fuzz.h"
#include "fuzz_prog.h"

#include "config.h"
#include "log.h"
#include "metrics.h"
#include "prefetch.h"
#include "security.h"
#include "shards.h"
#include "weights_server.h"
#include "wire.h"

#include <stdio.h>
#include <string.h>
#include <zmq.h>

#define OBS 3
#define ACTIONS 2
#define ACTORS 4
#define MAX_ROWS 12 // rows a generated reply may carry (4 x 2 + a few)
#define HOLD_MAX 4
#define INFLIGHT_MAX 8

static void *s_ctx, *s_replay[2];

// What the inputs so far reached (tests/check_fuzz_learner.c checks that the seeds get past
// the decoder into every handler). Test-only state.
typedef struct {
    uint64_t trained, trained_cont, weights_answers, episodes; // trained_cont: continuous runs'
} fuzz_learner_stats_t;
static fuzz_learner_stats_t fuzz_learner_stats;

typedef struct {
    apex_config_t cfg;
    security_t *sec;
    shards_t *shards;
    prefetch_t *p;
    weights_server_t *w;
    metrics_t metrics;
    wire_decoder_t *stats_dec, *replay_dec;
    wire_buf_t buf;
    int K, uint8_obs, cont; // cont: continuous actions (action_dim 1)
    uint32_t rows;          // per request
    int64_t now;
    uint64_t inflight[INFLIGHT_MAX]; // ids read off the stand-ins, with their shard
    int inflight_shard[INFLIGHT_MAX], n_inflight;
    uint64_t version, last_frames;
} s_run;

static void s_setup_process(void) {
    if (s_ctx) {
        return;
    }
    s_ctx = zmq_ctx_new();
    for (int k = 0; k < 2; k++) {
        s_replay[k] = zmq_socket(s_ctx, ZMQ_ROUTER);
        int zero = 0;
        zmq_setsockopt(s_replay[k], ZMQ_LINGER, &zero, sizeof zero);
        char ep[64];
        snprintf(ep, sizeof ep, "inproc://fuzz-replay-%d", k);
        FUZZ_CHECK(zmq_bind(s_replay[k], ep) == 0);
    }
}

// Reads what the learner sent a stand-in replay: requests are remembered as in flight.
static void s_drain_replays(s_run *r) {
    for (int k = 0; k < 2; k++) {
        for (;;) {
            zmq_msg_t id, body;
            zmq_msg_init(&id);
            zmq_msg_init(&body);
            if (zmq_msg_recv(&id, s_replay[k], ZMQ_DONTWAIT) < 0) {
                zmq_msg_close(&id);
                zmq_msg_close(&body);
                break;
            }
            FUZZ_CHECK(zmq_msg_more(&id) && zmq_msg_recv(&body, s_replay[k], 0) >= 0);
            wire_msg_t m;
            if (r &&
                wire_decode(r->replay_dec, zmq_msg_data(&body), zmq_msg_size(&body), &m) ==
                    APEX_OK &&
                m.type == WIRE_MSG_SAMPLE_REQUEST && !m.u.sample_request.stats_only &&
                r->n_inflight < INFLIGHT_MAX) {
                r->inflight[r->n_inflight] = m.u.sample_request.id;
                r->inflight_shard[r->n_inflight++] = k;
            }
            zmq_msg_close(&id);
            zmq_msg_close(&body);
        }
    }
}

static void s_start(s_run *r, uint8_t b) {
    r->K = 1 + (b & 1);
    r->uint8_obs = (b >> 1) & 1;
    r->cont = (b >> 5) & 1;
    const char *sets[24];
    int n = 0;
    sets[n++] = "env.id=external";
    sets[n++] = "env.obs_dim=3";
    if (r->cont) {
        sets[n++] = "env.action_dim=1";
        sets[n++] = "env.action_low=-1";
        sets[n++] = "env.action_high=2";
    } else {
        sets[n++] = "env.n_actions=2";
    }
    sets[n++] = "actor.num_actors=4";
    sets[n++] = "replay.max_batch=16";
    sets[n++] = "actor.send_batch=16";
    sets[n++] = "learner.request_timeout_ms=100";
    sets[n++] = (b >> 2) & 1 ? "learner.batch_size=4" : "learner.batch_size=1";
    sets[n++] = (b >> 3) & 1 ? "learner.batches_per_request=2" : "learner.batches_per_request=1";
    sets[n++] = (b >> 4) & 1 ? "learner.prefetch=3" : "learner.prefetch=1";
    if (r->uint8_obs) {
        sets[n++] = "env.obs_dtype=uint8";
    }
    if (r->K == 2) {
        sets[n++] = "replay.shards=2";
        sets[n++] = "replay.min_size_to_sample=1";
        sets[n++] = "endpoints.replay_sample=inproc://fuzz-replay-0,inproc://fuzz-replay-1";
        sets[n++] = "endpoints.replay_insert=inproc://fuzz-insert-0,inproc://fuzz-insert-1";
    } else {
        sets[n++] = "endpoints.replay_sample=inproc://fuzz-replay-0";
    }
    char err[CONFIG_ERR_LEN];
    if (config_load(&r->cfg, NULL, sets, n, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_learner: config: %s\n", err);
        FUZZ_CHECK(!"the harness's config loads");
    }
    r->rows = (uint32_t)(r->cfg.learner.batch_size * r->cfg.learner.batches_per_request);
    r->sec = security_new(s_ctx, &r->cfg, "learner", -1, 0);
    net_opts_t o = {.max_msg_bytes = 1 << 20};
    r->shards = shards_new(&r->cfg, 0, s_ctx, r->sec, &o);
    FUZZ_CHECK(r->sec && r->shards);
    r->p = prefetch_new(&r->cfg, r->shards, r->now);
    // A closed socket's inproc endpoint is released asynchronously: a new name per input.
    static unsigned long run;
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://fuzz-weights-%lu", run++);
    r->w = weights_server_new(s_ctx, NULL, ep, HOLD_MAX);
    FUZZ_CHECK(r->w != NULL);
    wire_limits_t lim = {.obs_dim = OBS,
                         .n_actions = r->cont ? 0 : ACTIONS,
                         .action_dim = r->cont ? 1 : 0,
                         .action_low = r->cfg.env.action_low,
                         .action_high = r->cfg.env.action_high,
                         .max_count = 16,
                         .max_episodes = 64,
                         .max_actors = ACTORS};
    r->stats_dec = wire_decoder_new(&lim);
    r->replay_dec = wire_decoder_new(&lim);
    wire_buf_init(&r->buf, 0);
}

static void s_stop(s_run *r) {
    prefetch_destroy(&r->p);
    shards_destroy(&r->shards);
    weights_server_destroy(&r->w);
    security_destroy(&r->sec);
    wire_decoder_destroy(&r->stats_dec);
    wire_decoder_destroy(&r->replay_dec);
    wire_buf_fini(&r->buf);
    s_drain_replays(NULL); // what the closed sockets left on the stand-ins
}

// ---------------------------------------------------------------------------------------
// Operations

static void s_op_reply(s_run *r, fuzz_prog_t *in) {
    static uint64_t keys[MAX_ROWS];
    static float w[MAX_ROWS], obs[MAX_ROWS * OBS], next[MAX_ROWS * OBS], rew[MAX_ROWS],
        disc[MAX_ROWS];
    static uint8_t obs8[MAX_ROWS * OBS], next8[MAX_ROWS * OBS];
    static int32_t act[MAX_ROWS];
    static float cact[MAX_ROWS];
    uint8_t b = fuzz_u8(in);
    int k = (int)fuzz_u8(in) % r->K;
    uint64_t id = fuzz_u64(in);
    if (r->n_inflight && (b & 1)) {
        int i = (int)fuzz_u8(in) % r->n_inflight;
        id = r->inflight[i];
        k = b & 2 ? k : r->inflight_shard[i];
    }
    static const int delta[] = {0, 0, 0, -1, 1};
    uint32_t count = (uint32_t)((int)r->rows + delta[fuzz_u8(in) % 5]);
    count = count > MAX_ROWS ? MAX_ROWS : count;
    for (uint32_t i = 0; i < count; i++) {
        keys[i] = fuzz_u64(in);
        w[i] = b & 4 ? fuzz_f32(in) : 1.0f;
        rew[i] = b & 8 ? fuzz_f32(in) : 1.0f;
        disc[i] = b & 16 ? fuzz_f32(in) : 0.5f;
        act[i] = b & 32 ? fuzz_i32(in) : (int32_t)(fuzz_u8(in) % ACTIONS);
        if (r->cont) { // discrete runs read no more bytes than they did
            cact[i] = b & 32 ? fuzz_f32(in) : -1.0f + 3.0f * (float)(act[i] & 255) / 255.0f;
        }
        for (int j = 0; j < OBS; j++) {
            obs[i * OBS + j] = b & 64 ? fuzz_f32(in) : 0.5f;
            next[i * OBS + j] = b & 64 ? fuzz_f32(in) : -0.5f;
            obs8[i * OBS + j] = fuzz_u8(in);
            next8[i * OBS + j] = fuzz_u8(in);
        }
    }
    static const wire_sample_status st[] = {WIRE_SAMPLE_OK, WIRE_SAMPLE_OK, WIRE_SAMPLE_NOT_READY,
                                            WIRE_SAMPLE_REFUSED, (wire_sample_status)7};
    wire_sample_status status = st[fuzz_u8(in) % 5];
    wire_msg_t m = {.type = WIRE_MSG_SAMPLE_REPLY};
    wire_sample_reply_t *y = &m.u.sample_reply;
    *y = (wire_sample_reply_t){.id = id, .status = status};
    if (status == WIRE_SAMPLE_OK && count > 0) {
        int u8 = r->uint8_obs ^ (b >> 7);
        y->count = count;
        y->obs_dim = OBS;
        y->obs_dtype = u8 ? WIRE_OBS_UINT8 : WIRE_OBS_FLOAT32;
        y->keys = keys, y->is_weights = w, y->rewards = rew;
        if (r->cont) {
            y->action_dim = 1, y->cont_actions = cact;
        } else {
            y->actions = act;
        }
        y->discounts = disc;
        y->obs = u8 ? (const void *)obs8 : (const void *)obs;
        y->next_obs = u8 ? (const void *)next8 : (const void *)next;
    }
    uint8_t sb = fuzz_u8(in);
    y->stats = (wire_replay_stats_t){.size = fuzz_u64(in),
                                     .capacity = fuzz_u64(in),
                                     .inserted = fuzz_u64(in),
                                     .sampled = fuzz_u64(in),
                                     .total_priority = sb & 1 ? fuzz_f64(in) : 4.0,
                                     .min_priority = sb & 2 ? fuzz_f64(in) : 0.5,
                                     .shard = (uint32_t)fuzz_u8(in) % 3,
                                     .shards = (uint32_t)fuzz_u8(in) % 3};
    wire_encode(&m, &r->buf);
    prefetch_handle(r->p, k, r->buf.data, r->buf.len, r->now);
}

// A batch the trainer is handed must be one it may take (train.h, wire.h).
static void s_check_batch(const s_run *r, const prefetch_batch_t *b) {
    FUZZ_CHECK(b->batch.size == (int)r->cfg.learner.batch_size);
    FUZZ_CHECK(b->shard >= 0 && b->shard < r->K);
    for (int i = 0; i < b->batch.size; i++) {
        FUZZ_CHECK(isfinite(b->batch.rewards[i]));
        FUZZ_CHECK(b->batch.discounts[i] >= 0.0f && b->batch.discounts[i] <= WIRE_DISCOUNT_MAX);
        FUZZ_CHECK(b->batch.is_weights[i] >= 0.0f && b->batch.is_weights[i] <= WIRE_IS_WEIGHT_MAX);
        if (r->cont) {
            float a = b->batch.cont_actions[i];
            FUZZ_CHECK(!b->batch.actions && isfinite(a) && a >= -1.0f && a <= 2.0f);
        } else {
            FUZZ_CHECK(b->batch.actions[i] >= 0 && b->batch.actions[i] < ACTIONS);
        }
        if (!r->uint8_obs) {
            for (int j = 0; j < OBS; j++) {
                FUZZ_CHECK(isfinite(((const float *)b->batch.obs)[i * OBS + j]));
                FUZZ_CHECK(isfinite(((const float *)b->batch.next_obs)[i * OBS + j]));
            }
        }
    }
}

static void s_op_train(s_run *r, fuzz_prog_t *in) {
    prefetch_batch_t b;
    if (!prefetch_next(r->p, &b)) {
        return;
    }
    s_check_batch(r, &b);
    fuzz_learner_stats.trained++;
    fuzz_learner_stats.trained_cont += (uint64_t)r->cont;
    float prio[16];
    for (int i = 0; i < b.batch.size; i++) {
        prio[i] = fuzz_f32(in);
    }
    prefetch_trained(r->p, prio, fuzz_f32(in), r->now);
}

static void s_op_weights_request(s_run *r, fuzz_prog_t *in) {
    static const char *const ids[] = {"actor-0", "actor-1", "actor-2", "actor-3", "eval", "x"};
    uint8_t b = fuzz_u8(in);
    wire_msg_t m = {.type = WIRE_MSG_WEIGHTS_REQUEST};
    m.u.weights_request.have_version = fuzz_u64(in);
    wire_encode(&m, &r->buf);
    const char *id = ids[b % 6];
    weights_server_handle(r->w, id, strlen(id), r->buf.data, r->buf.len, (b >> 6) == 3, r->now);
}

static void s_op_raw(fuzz_prog_t *in, uint8_t *raw, size_t *len) {
    *len = (size_t)fuzz_u8(in) * 8u;
    *len = *len < in->n ? *len : in->n;
    fuzz_bytes(in, raw, *len);
}

static void s_op_stats(s_run *r, fuzz_prog_t *in) {
    static float ret[8], eps[8];
    static uint32_t len[8];
    uint32_t n = fuzz_u8(in) % 8;
    for (uint32_t i = 0; i < n; i++) {
        ret[i] = fuzz_f32(in);
        eps[i] = fuzz_f32(in);
        len[i] = fuzz_u32(in);
    }
    wire_msg_t m = {.type = WIRE_MSG_ACTOR_STATS};
    uint64_t frames = fuzz_u64(in);
    m.u.actor_stats = (wire_actor_stats_t){.actor_id = (uint32_t)fuzz_u8(in) % (ACTORS + 2),
                                           .frames = frames,
                                           .frames_delta = fuzz_u8(in) & 1 ? frames : fuzz_u64(in),
                                           .weights_version = fuzz_u64(in),
                                           .dropped_batches = fuzz_u64(in),
                                           .env_faults = fuzz_u64(in),
                                           .episodes_dropped = fuzz_u64(in),
                                           .n_episodes = n,
                                           .returns = n ? ret : NULL,
                                           .lengths = n ? len : NULL,
                                           .epsilons = n ? eps : NULL};
    wire_encode(&m, &r->buf);
    metrics_take_message(&r->metrics, r->stats_dec, r->buf.data, r->buf.len, r->now);
}

static void s_check(s_run *r) {
    uint64_t frames = metrics_frames(&r->metrics);
    FUZZ_CHECK(frames >= r->last_frames);
    r->last_frames = frames;
    double mean = metrics_mean_return(&r->metrics);
    FUZZ_CHECK(r->metrics.n_returns == 0 ? isnan(mean) : isfinite(mean));
    weights_server_stats_t ws;
    weights_server_stats(r->w, &ws);
    FUZZ_CHECK(ws.held >= 0 && ws.held <= HOLD_MAX);
    const prefetch_stats_t *ps = prefetch_stats(r->p);
    FUZZ_CHECK(ps->not_ready + ps->refused + ps->late_replies + ps->bad_messages < (1ull << 40));
}

int fuzz_learner_one(const uint8_t *data, size_t size) {
    log_level_current = -1; // every refusal is logged: keep the fuzzer quiet
    s_setup_process();
    s_drain_replays(NULL);
    fuzz_prog_t in = {data, size};
    static s_run r; // large (the config): not on the stack
    memset(&r, 0, sizeof r);
    r.now = 1000000;
    s_start(&r, fuzz_u8(&in));
    static uint8_t raw[2048];
    size_t len;
    for (int ops = 0; !fuzz_prog_done(&in) && ops < 256; ops++) {
        switch (fuzz_u8(&in) % 10) {
        case 0:
            prefetch_issue(r.p, fuzz_f32(&in), r.now);
            s_drain_replays(&r);
            break;
        case 1:
            s_op_reply(&r, &in);
            break;
        case 2:
            s_op_train(&r, &in);
            s_drain_replays(&r);
            break;
        case 3:
            r.now += (int64_t)fuzz_u8(&in) * 10;
            prefetch_tick(r.p, 0.5f, r.now);
            s_drain_replays(&r);
            break;
        case 4: {
            int k = (int)fuzz_u8(&in) % r.K;
            s_op_raw(&in, raw, &len);
            prefetch_handle(r.p, k, raw, len, r.now);
            break;
        }
        case 5:
            s_op_weights_request(&r, &in);
            break;
        case 6: {
            uint8_t b = fuzz_u8(&in);
            s_op_raw(&in, raw, &len);
            weights_server_handle(r.w, "actor-0", b % 9, raw, len, b >> 7, r.now);
            break;
        }
        case 7:
            if (fuzz_u8(&in) & 1) {
                static const float params[1] = {0.5f};
                r.version += 1 + fuzz_u8(&in);
                wire_weights_t w = {.version = r.version, .num_params = 1, .params = params};
                weights_server_publish(r.w, &w);
            } else {
                r.now += (int64_t)fuzz_u8(&in) * 10;
                weights_server_heartbeat(r.w, r.now);
            }
            break;
        case 8:
            s_op_stats(&r, &in);
            break;
        default:
            s_op_raw(&in, raw, &len);
            metrics_take_message(&r.metrics, r.stats_dec, raw, len, r.now);
            break;
        }
        s_check(&r);
    }
    weights_server_stats_t ws;
    weights_server_stats(r.w, &ws);
    fuzz_learner_stats.weights_answers += ws.answers;
    fuzz_learner_stats.episodes += r.metrics.episodes;
    s_stop(&r);
    return 0;
}

#ifndef FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return fuzz_learner_one(data, size);
}
#endif
