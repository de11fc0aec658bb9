// fuzz_replay.c: libFuzzer harness of what apex-replay does with messages (issue #26: 19.5 M
// fuzzed messages never found the SampleRequest that stopped the server, because the
// decoders were fuzzed alone).
//
// An input is a program (fuzz_prog.h) run against a fresh replay server (replay/server_int.h:
// made with listen = 0, so no sockets; replay_server_handle is what its loop does with one
// message). The first byte chooses the run: capacity (1, 7 or 64), alpha, float32 or uint8
// observations, one server or shard 0/1 of two, the replay ratio, min_size_to_sample. Then each
// operation is an opcode byte and its operands:
//   0  TransitionBatch on the insert socket: actor id (some beyond [actor] num_actors, some of
//      the other shard), epoch, seq (UINT64_MAX among them), 1-20 rows (max_batch is 16),
//      observations, actions, rewards, discounts and priorities from the edge tables
//   1  SampleRequest on the sample socket: id, batch size, beta, batches, min_priority,
//      stats_only, stats_after
//   2  PriorityUpdate: keys near the ring's slots and generations, priorities
//   3, 4  raw bytes on the insert / sample socket
//   5  time passes (the limiter timer: held requests served or expired)
//   6  a valid message of a kind that does not belong there (both sockets)
//   7  a valid message of another protocol version
//   8  the peer's routing id changes (empty, long, printable or not)
// Checked after every operation, beyond "no crash, no leak, no sanitizer report":
//   - the store holds at most its capacity; its total and minimum p^alpha are finite and >= 0,
//     the total > 0 whenever it holds anything;
//   - counters only grow; held requests stay within their tables;
//   - every SampleReply the server built decodes under the learner's limits, with exactly the
//     rows asked for (OK), none otherwise, importance weights in [0, 1], and keys naming held
//     slots: what a peer sends can never make the server send what its learner refuses.
#include "fuzz.h"
#include "fuzz_prog.h"

#include "config.h"
#include "log.h"
#include "server_int.h"
#include "store.h"
#include "wire.h"

#include <stdio.h>
#include <string.h>

#define OBS 4
#define ACTIONS 3
#define ACTORS 4
#define MAX_BATCH 16
#define MAX_ROWS 20 // rows a generated batch may carry (past MAX_BATCH on purpose)

// What the inputs so far reached (tests/check_fuzz_replay.c checks that the seeds get past
// the decoder into every handler). Test-only state.
typedef struct {
    uint64_t stored, replies_ok, replies_other, updated;
} fuzz_replay_stats_t;
static fuzz_replay_stats_t fuzz_replay_stats;

typedef struct {
    replay_server_t *s;
    wire_decoder_t *learner; // what a learner accepts from this server
    wire_buf_t buf;
    uint8_t id[300];
    size_t id_len;
    int64_t now;
    int uint8_obs;
    uint64_t last_sampled, last_bad, last_dropped;
} s_run;

static replay_server_t *s_server(uint8_t b, int *uint8_obs) {
    static const char *const caps[] = {"replay.capacity=1", "replay.capacity=7",
                                       "replay.capacity=64"};
    static const char *const alphas[] = {"replay.alpha=0.6", "replay.alpha=1", "replay.alpha=0"};
    const char *sets[16];
    int n = 0;
    sets[n++] = "env.id=external";
    sets[n++] = "env.obs_dim=4";
    sets[n++] = "env.n_actions=3";
    sets[n++] = "actor.num_actors=4";
    sets[n++] = "replay.max_batch=16";
    sets[n++] = "learner.batch_size=4";
    sets[n++] = "actor.send_batch=16";
    sets[n++] = "run.out_dir=/nonexistent-fuzz"; // durability none: nothing is written
    int sharded = (b / 18) % 4 == 1 || (b / 18) % 4 == 2;
    int cap = sharded && b % 3 == 0 ? 1 : b % 3; // a slot per shard at least
    sets[n++] = caps[cap];
    sets[n++] = alphas[(b / 3) % 3];
    *uint8_obs = (b / 9) & 1;
    if (*uint8_obs) {
        sets[n++] = "env.obs_dtype=uint8";
    }
    switch ((b / 18) % 4) {
    case 0:
        break;
    case 1:
        sets[n++] = "replay.shards=2";
        break;
    case 2:
        sets[n++] = "replay.shards=2"; // shard 1 (below)
        break;
    default:
        sets[n++] = "replay.samples_per_insert=2";
        sets[n++] = "replay.spi_tolerance=4";
        break;
    }
    sets[n++] = (b / 72) & 1 && cap > 0 ? "replay.min_size_to_sample=3"
                                        : "replay.min_size_to_sample=1";
    apex_config_t cfg;
    char err[CONFIG_ERR_LEN];
    if (config_load(&cfg, NULL, sets, n, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_replay: config: %s\n", err);
        FUZZ_CHECK(!"the harness's config loads");
    }
    config_select_shard(&cfg, (b / 18) % 4 == 2); // apex-replay --shard 1
    replay_server_t *s = replay_server_new(&cfg, 0);
    FUZZ_CHECK(s != NULL);
    return s;
}

// ---------------------------------------------------------------------------------------
// Operations

static void s_send(s_run *r, replay_sock which, const wire_msg_t *m) {
    wire_encode(m, &r->buf);
    replay_server_handle(r->s, which, r->id, r->id_len, r->buf.data, r->buf.len, r->now);
}

static void s_op_batch(s_run *r, fuzz_prog_t *in) {
    static float obs[MAX_ROWS * OBS], next[MAX_ROWS * OBS], rew[MAX_ROWS], disc[MAX_ROWS],
        prio[MAX_ROWS];
    static uint8_t obs8[MAX_ROWS * OBS], next8[MAX_ROWS * OBS];
    static int32_t act[MAX_ROWS];
    uint8_t b = fuzz_u8(in);
    uint32_t count = 1 + (uint32_t)fuzz_u8(in) % MAX_ROWS;
    for (uint32_t i = 0; i < count * OBS; i++) {
        obs[i] = fuzz_f32(in), next[i] = fuzz_f32(in);
        obs8[i] = fuzz_u8(in), next8[i] = fuzz_u8(in);
    }
    for (uint32_t i = 0; i < count; i++) {
        // Mostly valid numbers, so the batch gets past the decoder often enough.
        act[i] = b & 1 ? fuzz_i32(in) : (int32_t)(fuzz_u8(in) % ACTIONS);
        rew[i] = b & 2 ? fuzz_f32(in) : (float)fuzz_u8(in);
        disc[i] = b & 4 ? fuzz_f32(in) : (float)(fuzz_u8(in) % 5) * 0.25f;
        prio[i] = fuzz_f32(in);
        if (!(b & 8)) {
            obs[i * OBS] = next[i * OBS] = 0.0f; // finite rows
            for (int j = 1; j < OBS; j++) {
                obs[i * OBS + j] = next[i * OBS + j] = (float)j;
            }
        }
    }
    wire_msg_t m = {.type = WIRE_MSG_TRANSITION_BATCH};
    m.u.batch = (wire_batch_t){.actor_id = (uint32_t)fuzz_u8(in) % (ACTORS + 2),
                               .epoch = fuzz_u8(in) % 3,
                               .seq = fuzz_u64(in),
                               .weights_version = fuzz_u64(in),
                               .count = count,
                               .obs_dim = b & 16 ? OBS - 1 : OBS, // the arrays hold either
                               .obs_dtype = r->uint8_obs ^ ((b >> 5) & 1),
                               .actions = act,
                               .rewards = rew,
                               .discounts = disc,
                               .priorities = b & 64 ? prio : NULL};
    int u8 = m.u.batch.obs_dtype == WIRE_OBS_UINT8;
    m.u.batch.obs = u8 ? (const void *)obs8 : (const void *)obs;
    m.u.batch.next_obs = u8 ? (const void *)next8 : (const void *)next;
    s_send(r, REPLAY_SOCK_INSERT, &m);
}

static void s_op_sample(s_run *r, fuzz_prog_t *in) {
    wire_msg_t m = {.type = WIRE_MSG_SAMPLE_REQUEST};
    uint8_t b = fuzz_u8(in);
    wire_sample_request_t *q = &m.u.sample_request;
    q->id = fuzz_u64(in);
    q->stats_only = b & 1;
    q->min_priority = b & 2 ? fuzz_f64(in) : 0.0;
    q->beta = b & 4 ? fuzz_f32(in) : 0.4f;
    if (q->stats_only) {
        q->stats_after = fuzz_u64(in); // (rows in a stats request: only raw bytes can say so)
    } else {
        q->batch_size = fuzz_u8(in) % (MAX_BATCH + 4);
        q->batches = fuzz_u8(in) % 70;
        q->stats_after = b & 16 ? fuzz_u64(in) : 0;
    }
    s_send(r, REPLAY_SOCK_SAMPLE, &m);
}

static void s_op_update(s_run *r, fuzz_prog_t *in) {
    static uint64_t keys[MAX_ROWS];
    static float prio[MAX_ROWS];
    uint32_t count = 1 + (uint32_t)fuzz_u8(in) % MAX_ROWS;
    for (uint32_t i = 0; i < count; i++) {
        uint8_t k = fuzz_u8(in);
        keys[i] = k < 200 ? WIRE_KEY(k % 70, fuzz_u8(in) % 4) : fuzz_u64(in);
        prio[i] = fuzz_f32(in);
    }
    wire_msg_t m = {.type = WIRE_MSG_PRIORITY_UPDATE};
    m.u.priority_update =
        (wire_priority_update_t){.count = count, .keys = keys, .priorities = prio};
    s_send(r, REPLAY_SOCK_SAMPLE, &m);
}

static void s_op_raw(s_run *r, fuzz_prog_t *in, replay_sock which) {
    static uint8_t raw[4096];
    size_t len = (size_t)fuzz_u8(in) * 16u;
    len = len < in->n ? len : in->n;
    fuzz_bytes(in, raw, len);
    replay_server_handle(r->s, which, r->id, r->id_len, raw, len, r->now);
}

static void s_op_other_kind(s_run *r, fuzz_prog_t *in) {
    static const float params[3] = {1, 2, 3};
    static const float ret = 1.0f, eps = 0.1f;
    static const uint32_t len = 3;
    wire_msg_t m = {0};
    switch (fuzz_u8(in) % 5) {
    case 0:
        m.type = WIRE_MSG_WEIGHTS;
        m.u.weights = (wire_weights_t){.version = 1, .num_params = 3, .params = params};
        break;
    case 1:
        m.type = WIRE_MSG_ACTOR_STATS;
        m.u.actor_stats = (wire_actor_stats_t){
            .frames = 5, .n_episodes = 1, .returns = &ret, .lengths = &len, .epsilons = &eps};
        break;
    case 2:
        m.type = WIRE_MSG_INSERT_ACK;
        m.u.insert_ack = (wire_insert_ack_t){.seq = fuzz_u64(in)};
        break;
    case 3:
        m.type = WIRE_MSG_WEIGHTS_REQUEST;
        break;
    default:
        m.type = WIRE_MSG_SAMPLE_REPLY;
        m.u.sample_reply = (wire_sample_reply_t){.status = WIRE_SAMPLE_NOT_READY};
        break;
    }
    s_send(r, fuzz_u8(in) & 1 ? REPLAY_SOCK_SAMPLE : REPLAY_SOCK_INSERT, &m);
}

static void s_op_version(s_run *r, fuzz_prog_t *in) {
    wire_msg_t m = {.type = WIRE_MSG_SAMPLE_REQUEST};
    m.u.sample_request = (wire_sample_request_t){.id = 1, .batch_size = 1, .beta = 0.5f};
    uint32_t v = fuzz_u8(in);
    wire_encode_version(&m, v == APEX_PROTOCOL_VERSION ? v + 1 : v, &r->buf);
    replay_server_handle(r->s, REPLAY_SOCK_SAMPLE, r->id, r->id_len, r->buf.data, r->buf.len,
                         r->now);
}

static void s_op_peer(s_run *r, fuzz_prog_t *in) {
    uint8_t b = fuzz_u8(in);
    r->id_len = b < 128 ? b % 12 : b < 192 ? sizeof r->id : (size_t)b;
    fuzz_bytes(in, r->id, r->id_len);
}

// ---------------------------------------------------------------------------------------
// Invariants

// The reply the server built last (a ring buffer lent to libzmq, or the copy buffer): a
// learner of this run must take it.
static void s_check_reply(s_run *r) {
    replay_server_t *s = r->s;
    const wire_buf_t *b = &s->replies[(s->reply_next + REPLY_RING - 1) % REPLY_RING].buf;
    wire_msg_t m;
    int rc = wire_decode(r->learner, b->data, b->len, &m);
    if (rc != APEX_OK) {
        fprintf(stderr, "fuzz_replay: a reply the learner refuses: %s\n",
                wire_decoder_last_error(r->learner));
    }
    FUZZ_CHECK(rc == APEX_OK && m.type == WIRE_MSG_SAMPLE_REPLY);
    const wire_sample_reply_t *y = &m.u.sample_reply;
    FUZZ_CHECK(y->stats.size <= y->stats.capacity && y->stats.size <= store_size(s->store));
    if (y->status != WIRE_SAMPLE_OK) {
        FUZZ_CHECK(y->count == 0);
        fuzz_replay_stats.replies_other++;
        return;
    }
    fuzz_replay_stats.replies_ok++;
    FUZZ_CHECK(y->count >= 1 && y->count <= MAX_BATCH);
    for (uint32_t i = 0; i < y->count; i++) {
        FUZZ_CHECK(WIRE_KEY_SLOT(y->keys[i]) < store_size(s->store));
        FUZZ_CHECK(y->is_weights[i] >= 0.0f && y->is_weights[i] <= WIRE_IS_WEIGHT_MAX);
    }
}

static void s_check(s_run *r) {
    replay_server_t *s = r->s;
    store_t *st = s->store;
    FUZZ_CHECK(store_size(st) <= store_capacity(st));
    double total = store_total_priority(st), min = store_min_priority(st);
    FUZZ_CHECK(isfinite(total) && total >= 0.0 && isfinite(min) && min >= 0.0);
    FUZZ_CHECK(store_size(st) == 0 || total > 0.0);
    FUZZ_CHECK(s->pending_len >= 0 && s->pending_len <= PENDING_MAX);
    FUZZ_CHECK(s->n_watches >= 0 && s->n_watches <= WATCH_MAX);
    FUZZ_CHECK(s->counters.sampled_rows >= r->last_sampled && s->bad_total >= r->last_bad);
    r->last_sampled = s->counters.sampled_rows, r->last_bad = s->bad_total;
    uint64_t replies = s->counters.sampled_rows + s->not_ready + s->refused + s->stats_replies;
    if (replies != r->last_dropped && s->reply_copies == 0) {
        s_check_reply(r);
    }
    r->last_dropped = replies;
}

int fuzz_replay_one(const uint8_t *data, size_t size) {
    // A fresh server per input logs its first refusal of each kind: thousands of lines a
    // second. Below LOG_ERROR nothing is written.
    log_level_current = -1;
    fuzz_prog_t in = {data, size};
    s_run r = {.now = 1000000};
    r.s = s_server(fuzz_u8(&in), &r.uint8_obs);
    wire_limits_t lim = {.obs_dim = OBS,
                         .obs_dtype = r.uint8_obs ? WIRE_OBS_UINT8 : WIRE_OBS_FLOAT32,
                         .n_actions = ACTIONS,
                         .max_count = MAX_BATCH};
    r.learner = wire_decoder_new(&lim);
    wire_buf_init(&r.buf, 0);
    memcpy(r.id, "actor-0", 7);
    r.id_len = 7;
    for (int ops = 0; !fuzz_prog_done(&in) && ops < 256; ops++) {
        switch (fuzz_u8(&in) % 9) {
        case 0:
            s_op_batch(&r, &in);
            break;
        case 1:
            s_op_sample(&r, &in);
            break;
        case 2:
            s_op_update(&r, &in);
            break;
        case 3:
            s_op_raw(&r, &in, REPLAY_SOCK_INSERT);
            break;
        case 4:
            s_op_raw(&r, &in, REPLAY_SOCK_SAMPLE);
            break;
        case 5:
            r.now += (int64_t)fuzz_u8(&in) * 10;
            replay_server_tick(r.s, r.now);
            break;
        case 6:
            s_op_other_kind(&r, &in);
            break;
        case 7:
            s_op_version(&r, &in);
            break;
        default:
            s_op_peer(&r, &in);
            break;
        }
        s_check(&r);
    }
    fuzz_replay_stats.stored += store_inserted(r.s->store);
    fuzz_replay_stats.updated += r.s->counters.updated;
    wire_buf_fini(&r.buf);
    wire_decoder_destroy(&r.learner);
    replay_server_destroy(&r.s);
    return 0;
}

#ifndef FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_replay_one(data, size); }
#endif
