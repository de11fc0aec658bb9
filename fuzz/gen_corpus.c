// gen_corpus.c: writes the seed corpus of fuzz_wire, one real encoded message per file.
//
// Usage: gen_corpus <corpus dir> <replay dir>. Every message kind is encoded with wire_encode from fixed values
// (no randomness, so rerunning gives the same bytes and `git diff` shows real changes):
// TransitionBatch with and without priorities, SampleRequest (also with sharded replay's
// min_priority, and stats requests), SampleReply OK / NOT_READY / REFUSED (also from a shard), PriorityUpdate, Weights, ActorStats with 0 and 3 episodes, InsertAck, plus a few
// that only some fuzz_wire profiles accept (obs_dim 6, one row) and one of another protocol
// version; frame-mode batches (issue #27: frames with rows, frames only, rows only, uint8
// stacks of 3), accepted only by fuzz_wire's frame-mode profiles; and hostile ones made by
// editing encoded bytes: a short priorities field, and
// 20000 unknown fields. The last goes to the replay dir (run once per fuzz run and by make
// test, never mutated): as a seed it cuts libFuzzer's speed from ~100k to ~4k execs/s.
// Rerun with `make fuzz-corpus` after a change to proto/apex.proto.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

#define MAX_ROWS 64
#define MAX_OBS 6
#define N_PARAMS 100

// Fixture arrays, large enough for every message below.
static float s_obs[MAX_ROWS * MAX_OBS], s_next[MAX_ROWS * MAX_OBS];
static float s_rew[MAX_ROWS], s_disc[MAX_ROWS], s_prio[MAX_ROWS], s_isw[MAX_ROWS];
static float s_params[N_PARAMS], s_ret[MAX_ROWS], s_eps[MAX_ROWS];
static int32_t s_act[MAX_ROWS];
static uint64_t s_keys[MAX_ROWS];
static uint32_t s_len[MAX_ROWS];

static void s_fill(void) {
    for (int i = 0; i < MAX_ROWS * MAX_OBS; i++) {
        s_obs[i] = 0.03125f * (float)(i % 17) - 0.25f;
        s_next[i] = s_obs[i] + 0.0078125f;
    }
    for (int i = 0; i < MAX_ROWS; i++) {
        s_act[i] = i % 2;
        s_rew[i] = i % 5 == 4 ? 0.0f : 2.970100f;
        s_disc[i] = i % 5 == 4 ? 0.0f : 0.970299f;
        s_prio[i] = 0.5f + 0.25f * (float)(i % 7);
        s_isw[i] = 1.0f / (float)(1 + i % 4);
        s_keys[i] = WIRE_KEY(1000u + (uint32_t)i, 3u);
        s_ret[i] = 10.0f * (float)(i + 1);
        s_len[i] = 10u * (uint32_t)(i + 1);
        s_eps[i] = 0.4f / (float)(i + 1);
    }
    for (int i = 0; i < N_PARAMS; i++) {
        s_params[i] = 0.001f * (float)(i - N_PARAMS / 2);
    }
}

static int s_write(const char *dir, const char *name, const wire_msg_t *m, uint32_t version) {
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_encode_version(m, version, &b);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(b.data, 1, b.len, f) == b.len;
    if (f && fclose(f) != 0) {
        ok = 0;
    }
    if (!ok) {
        fprintf(stderr, "gen_corpus: %s: %s\n", path, strerror(errno));
    }
    wire_buf_fini(&b);
    return ok ? 0 : -1;
}

// Hostile seeds, made by editing an encoded message: protobuf fields appended at the end of
// a message override or extend it, so no protobuf writer is needed here.
static int s_write_bytes(const char *dir, const char *name, const uint8_t *data, size_t len) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(data, 1, len, f) == len;
    if (f && fclose(f) != 0) {
        ok = 0;
    }
    if (!ok) {
        fprintf(stderr, "gen_corpus: %s: %s\n", path, strerror(errno));
    }
    return ok ? 0 : -1;
}

// A one-row batch whose priorities field holds 3 bytes instead of 4 (the length check).
static int s_write_short_priorities(const char *dir, const wire_msg_t *one_row) {
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_encode(one_row, &b);
    // Envelope: 08 <version> 12 <len> <TransitionBatch>, with len < 128 for one row.
    int ok = b.len > 4 && b.data[0] == 0x08 && b.data[2] == 0x12 && b.data[3] < 125 &&
             (size_t)b.data[3] + 4 == b.len;
    uint8_t out[256];
    size_t n = 0;
    if (ok) {
        memcpy(out, b.data, b.len);
        n = b.len;
        static const uint8_t prio[] = {0x5a, 0x03, 0x00, 0x00, 0x80}; // field 11, 3 bytes
        memcpy(out + n, prio, sizeof prio);
        n += sizeof prio;
        out[3] = (uint8_t)(out[3] + sizeof prio);
    }
    wire_buf_fini(&b);
    if (!ok) {
        fprintf(stderr, "gen_corpus: unexpected encoding of a one-row batch\n");
        return -1;
    }
    return s_write_bytes(dir, "hostile_batch_short_priorities", out, n);
}

// An InsertAck followed by 20000 unknown varint fields: protobuf-c keeps unknown fields,
// which needs more memory than the decoder's arena (the malloc fallback in wire.c).
static int s_write_unknown_fields(const char *dir) {
    static uint8_t out[8 + 2 * 20000];
    static const uint8_t ack[] = {0x08, 0x01, 0x42, 0x04, 0x08, 0x01, 0x10, 0x2a};
    memcpy(out, ack, sizeof ack);
    size_t n = sizeof ack;
    for (int i = 0; i < 20000; i++) {
        out[n++] = 0x78; // field 15, varint: not in Envelope
        out[n++] = (uint8_t)(i & 0x7f);
    }
    return s_write_bytes(dir, "hostile_unknown_fields", out, n);
}

static wire_msg_t s_batch(uint32_t count, uint32_t obs_dim, int with_priorities) {
    wire_msg_t m = {.type = WIRE_MSG_TRANSITION_BATCH};
    m.u.batch = (wire_batch_t){.actor_id = 1,
                               .seq = 42,
                               .weights_version = 7,
                               .count = count,
                               .obs_dim = obs_dim,
                               .obs = s_obs,
                               .actions = s_act,
                               .rewards = s_rew,
                               .discounts = s_disc,
                               .next_obs = s_next,
                               .priorities = with_priorities ? s_prio : NULL};
    return m;
}

// Frame mode: the rows' stacks by their newest frame, the frames' links.
static uint32_t s_fprev[MAX_ROWS];
static uint64_t s_ofr[MAX_ROWS], s_nfr[MAX_ROWS];

// A frame-mode batch of count rows and n_frames new frames of obs_dim / k elements from
// first: an episode starts at every 7th frame (a link of 0), the others link to the frame
// before, and row r's transition goes from frame first - 2 + r to first + r (the first rows
// name frames of the previous batch).
static wire_msg_t s_frame_batch(uint32_t count, uint32_t n_frames, uint32_t obs_dim, uint32_t k,
                                uint32_t dtype) {
    const uint64_t first = 1000;
    for (uint32_t i = 0; i < n_frames; i++) {
        s_fprev[i] = i % 7 == 0 ? 0 : 1;
    }
    for (uint32_t r = 0; r < count; r++) {
        s_ofr[r] = first - 2 + r;
        s_nfr[r] = first + r;
    }
    wire_msg_t m = s_batch(count, obs_dim, 1);
    wire_batch_t *b = &m.u.batch;
    b->obs = b->next_obs = NULL;
    b->obs_dtype = dtype;
    b->frame_stack = k;
    b->first_frame = first;
    b->frame_count = n_frames;
    b->frames = n_frames ? s_obs : NULL;
    b->frame_prev = n_frames ? s_fprev : NULL;
    b->obs_frames = count ? s_ofr : NULL;
    b->next_frames = count ? s_nfr : NULL;
    if (count == 0) {
        b->actions = NULL, b->rewards = b->discounts = b->priorities = NULL;
    }
    return m;
}

static wire_msg_t s_reply(wire_sample_status status, uint32_t count) {
    wire_msg_t m = {.type = WIRE_MSG_SAMPLE_REPLY};
    wire_sample_reply_t *r = &m.u.sample_reply;
    r->id = 9;
    r->status = status;
    r->stats = (wire_replay_stats_t){.size = 5000,
                                     .capacity = 1u << 20,
                                     .inserted = 5000,
                                     .sampled = 640,
                                     .updated = 576,
                                     .stale_updates = 2,
                                     .bad_messages = 1,
                                     .limiter_waits = 3,
                                     .duplicate_batches = 1,
                                     .total_priority = 1234.5};
    if (status == WIRE_SAMPLE_OK) {
        r->count = count;
        r->obs_dim = 4;
        r->keys = s_keys;
        r->is_weights = s_isw;
        r->obs = s_obs;
        r->actions = s_act;
        r->rewards = s_rew;
        r->discounts = s_disc;
        r->next_obs = s_next;
    }
    return m;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: gen_corpus <corpus dir> <replay dir>\n");
        return 2;
    }
    const char *dir = argv[1];
    s_fill();
    int rc = 0;
    wire_msg_t m;

    m = s_batch(16, 4, 1);
    rc |= s_write(dir, "batch_prio", &m, APEX_PROTOCOL_VERSION);
    m = s_batch(16, 4, 0);
    rc |= s_write(dir, "batch_noprio", &m, APEX_PROTOCOL_VERSION);
    m = s_batch(1, 4, 1);
    rc |= s_write(dir, "batch_one_row", &m, APEX_PROTOCOL_VERSION);
    rc |= s_write_short_priorities(dir, &m);
    rc |= s_write_unknown_fields(argv[2]);
    m = s_batch(MAX_ROWS, 4, 1);
    rc |= s_write(dir, "batch_64", &m, APEX_PROTOCOL_VERSION);
    m = s_batch(8, 6, 0); // Acrobot-sized rows: accepted only by the obs_dim 6 profile
    rc |= s_write(dir, "batch_obs6", &m, APEX_PROTOCOL_VERSION);
    m = s_batch(1, 1, 0); // accepted only by the one-row, obs_dim 1 profile
    rc |= s_write(dir, "batch_obs1", &m, APEX_PROTOCOL_VERSION);
    m = s_batch(16, 4, 1);
    rc |= s_write(dir, "batch_version2", &m, APEX_PROTOCOL_VERSION + 1);
    // uint8 observations ([env] id = external): the bytes of the float rows' first quarter,
    // accepted only by the uint8 profile.
    m = s_batch(16, 4, 1);
    m.u.batch.obs_dtype = WIRE_OBS_UINT8;
    rc |= s_write(dir, "batch_uint8", &m, APEX_PROTOCOL_VERSION);
    // Continuous actions of 2 floats in fuzz_wire's profile-5 bounds ([-2, 2] x [0, 1]),
    // obs_dim 3: accepted only by that profile (issue #28).
    static float cont[2 * 16];
    for (int i = 0; i < 16; i++) {
        cont[2 * i] = -2.0f + 0.25f * (float)i, cont[2 * i + 1] = (float)i / 15.0f;
    }
    m = s_batch(16, 3, 1);
    m.u.batch.actions = NULL, m.u.batch.action_dim = 2, m.u.batch.cont_actions = cont;
    rc |= s_write(dir, "batch_continuous", &m, APEX_PROTOCOL_VERSION);

    // Frame mode (issue #27): stacks of 2 float32 frames of 2 (fuzz_wire's profile 6): rows
    // with their frames, frames only, rows only (over the previous batch's frames: their
    // numbers below first_frame); and stacks of 3 uint8 frames of 2 (profile 7: at most 4
    // frames, 8 rows).
    m = s_frame_batch(16, 20, 4, 2, WIRE_OBS_FLOAT32);
    rc |= s_write(dir, "batch_frames", &m, APEX_PROTOCOL_VERSION);
    m = s_frame_batch(0, 3, 4, 2, WIRE_OBS_FLOAT32);
    rc |= s_write(dir, "batch_frames_only", &m, APEX_PROTOCOL_VERSION);
    m = s_frame_batch(2, 0, 4, 2, WIRE_OBS_FLOAT32);
    m.u.batch.first_frame = 1002;
    rc |= s_write(dir, "batch_frames_rows_only", &m, APEX_PROTOCOL_VERSION);
    m = s_frame_batch(4, 4, 6, 3, WIRE_OBS_UINT8);
    rc |= s_write(dir, "batch_frames_uint8_k3", &m, APEX_PROTOCOL_VERSION);

    m = (wire_msg_t){.type = WIRE_MSG_SAMPLE_REQUEST};
    m.u.sample_request = (wire_sample_request_t){.id = 5, .batch_size = 64, .beta = 0.4f};
    rc |= s_write(dir, "sample_request", &m, APEX_PROTOCOL_VERSION);
    m.u.sample_request = (wire_sample_request_t){.id = 6, .batch_size = 1, .beta = 1.0f};
    rc |= s_write(dir, "sample_request_one", &m, APEX_PROTOCOL_VERSION);
    m.u.sample_request =
        (wire_sample_request_t){.id = 7, .batch_size = 512, .beta = 0.5f, .batches = 4};
    rc |= s_write(dir, "sample_request_batches4", &m, APEX_PROTOCOL_VERSION);
    // Sharded replay: a request with the learner's global minimum, and stats requests (a
    // watch for inserts, and one answered at once).
    m.u.sample_request = (wire_sample_request_t){
        .id = 8, .batch_size = 512, .beta = 0.5f, .batches = 4, .min_priority = 0.03125};
    rc |= s_write(dir, "sample_request_min_priority", &m, APEX_PROTOCOL_VERSION);
    m.u.sample_request = (wire_sample_request_t){
        .id = (1ull << 63) | 3, .stats_only = 1, .stats_after = 5001, .min_priority = 0.5};
    rc |= s_write(dir, "sample_request_stats_watch", &m, APEX_PROTOCOL_VERSION);
    m.u.sample_request = (wire_sample_request_t){.id = (1ull << 63) | 4, .stats_only = 1};
    rc |= s_write(dir, "sample_request_stats_now", &m, APEX_PROTOCOL_VERSION);

    m = s_reply(WIRE_SAMPLE_OK, 16);
    rc |= s_write(dir, "sample_reply_ok", &m, APEX_PROTOCOL_VERSION);
    m.u.sample_reply.obs_dtype = WIRE_OBS_UINT8;
    rc |= s_write(dir, "sample_reply_uint8", &m, APEX_PROTOCOL_VERSION);
    m.u.sample_reply.obs_dtype = WIRE_OBS_FLOAT32;
    m.u.sample_reply.obs_dim = 3, m.u.sample_reply.actions = NULL;
    m.u.sample_reply.action_dim = 2, m.u.sample_reply.cont_actions = cont;
    rc |= s_write(dir, "sample_reply_continuous", &m, APEX_PROTOCOL_VERSION);
    m = s_reply(WIRE_SAMPLE_NOT_READY, 0);
    rc |= s_write(dir, "sample_reply_not_ready", &m, APEX_PROTOCOL_VERSION);
    m = s_reply(WIRE_SAMPLE_REFUSED, 0);
    rc |= s_write(dir, "sample_reply_refused", &m, APEX_PROTOCOL_VERSION);
    // From shard 1 of 2, with its minimum p^alpha (a stats reply, and one with rows).
    m = s_reply(WIRE_SAMPLE_NOT_READY, 0);
    m.u.sample_reply.stats.min_priority = 0.0625;
    m.u.sample_reply.stats.shard = 1;
    m.u.sample_reply.stats.shards = 2;
    rc |= s_write(dir, "sample_reply_shard_stats", &m, APEX_PROTOCOL_VERSION);
    m = s_reply(WIRE_SAMPLE_OK, 16);
    m.u.sample_reply.stats.min_priority = 0.0625;
    m.u.sample_reply.stats.shard = 1;
    m.u.sample_reply.stats.shards = 2;
    rc |= s_write(dir, "sample_reply_shard_ok", &m, APEX_PROTOCOL_VERSION);

    m = (wire_msg_t){.type = WIRE_MSG_PRIORITY_UPDATE};
    m.u.priority_update =
        (wire_priority_update_t){.count = 16, .keys = s_keys, .priorities = s_prio};
    rc |= s_write(dir, "priority_update", &m, APEX_PROTOCOL_VERSION);

    m = (wire_msg_t){.type = WIRE_MSG_WEIGHTS};
    m.u.weights = (wire_weights_t){
        .version = 3, .learner_step = 150, .num_params = N_PARAMS, .params = s_params};
    rc |= s_write(dir, "weights_100", &m, APEX_PROTOCOL_VERSION);
    m.u.weights.num_params = 1;
    rc |= s_write(dir, "weights_1", &m, APEX_PROTOCOL_VERSION);

    m = (wire_msg_t){.type = WIRE_MSG_ACTOR_STATS};
    m.u.actor_stats = (wire_actor_stats_t){
        .actor_id = 2, .frames = 100000, .weights_version = 12, .dropped_batches = 0};
    rc |= s_write(dir, "actor_stats_empty", &m, APEX_PROTOCOL_VERSION);
    m.u.actor_stats.n_episodes = 3;
    m.u.actor_stats.returns = s_ret;
    m.u.actor_stats.lengths = s_len;
    m.u.actor_stats.epsilons = s_eps;
    m.u.actor_stats.dropped_batches = 4;
    rc |= s_write(dir, "actor_stats_3", &m, APEX_PROTOCOL_VERSION);

    m = (wire_msg_t){.type = WIRE_MSG_INSERT_ACK};
    m.u.insert_ack = (wire_insert_ack_t){.actor_id = 1, .seq = 42};
    rc |= s_write(dir, "insert_ack", &m, APEX_PROTOCOL_VERSION);

    static const uint64_t s_more[5] = {43, 44, 46, 1ull << 40, 45};
    m.u.insert_ack = (wire_insert_ack_t){.actor_id = 1, .seq = 42, .n_more = 5, .more = s_more};
    rc |= s_write(dir, "insert_ack_batched", &m, APEX_PROTOCOL_VERSION);

    m = (wire_msg_t){.type = WIRE_MSG_WEIGHTS_REQUEST};
    m.u.weights_request.have_version = (3ull << 32) | 17;
    rc |= s_write(dir, "weights_request", &m, APEX_PROTOCOL_VERSION);

    return rc ? 1 : 0;
}
