// check_wire.c: round trips of every message, and every kind of bad input rejected with the
// right code: truncation, wrong version, mismatched counts, bad dims, NaN/Inf, oversize.
// uint8 observations: byte-exact round trips (bytes that would be NaN as float32 included),
// a dtype other than the run's refused, lengths checked against the declared dtype.
// Hostile bytes are built with a tiny independent protobuf writer, not with wire.c.
#include "check_apex.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "wire.h"
#include "xalloc.h"
#include "fcodec.h"

#define OBS 4
#define ACT 2
#define ROWS 5

static const wire_limits_t s_lim = {
    .obs_dim = OBS, .n_actions = ACT, .num_params = 10, .max_count = 64, .max_episodes = 8};

// Fixture arrays for a ROWS-row batch.
static float s_obs[ROWS * OBS], s_next[ROWS * OBS], s_rew[ROWS], s_disc[ROWS], s_prio[ROWS];
static int32_t s_act[ROWS];

static void s_fill(void) {
    for (int i = 0; i < ROWS * OBS; i++) {
        s_obs[i] = 0.25f * (float)i - 1.0f;
        s_next[i] = -0.5f * (float)i;
    }
    for (int i = 0; i < ROWS; i++) {
        s_act[i] = i % ACT;
        s_rew[i] = (float)i * 1.5f;
        s_disc[i] = i == 2 ? 0.0f : 0.970299f;
        s_prio[i] = 0.1f + (float)i;
    }
}

static wire_msg_t s_batch_msg(void) {
    s_fill();
    wire_msg_t m = {.type = WIRE_MSG_TRANSITION_BATCH};
    m.u.batch = (wire_batch_t){.actor_id = 3,
                               .epoch = 1ULL << 60,
                               .seq = 77,
                               .weights_version = 9,
                               .count = ROWS,
                               .obs_dim = OBS,
                               .obs = s_obs,
                               .actions = s_act,
                               .rewards = s_rew,
                               .discounts = s_disc,
                               .next_obs = s_next,
                               .priorities = s_prio};
    return m;
}

static int s_decode(const wire_buf_t *b, wire_msg_t *out) {
    wire_decoder_t *d = wire_decoder_new(&s_lim);
    int rc = wire_decode(d, b->data, b->len, out);
    // Copy nothing out: callers of this helper only look at rc and scalar fields.
    wire_decoder_destroy(&d);
    return rc;
}

START_TEST(test_batch_round_trip) {
    wire_msg_t m = s_batch_msg();
    wire_buf_t b;
    wire_buf_init(&b, 16); // forces growth
    wire_encode(&m, &b);
    wire_decoder_t *d = wire_decoder_new(&s_lim);
    wire_msg_t o;
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
    ck_assert_int_eq(o.type, WIRE_MSG_TRANSITION_BATCH);
    const wire_batch_t *x = &o.u.batch;
    ck_assert_uint_eq(x->actor_id, 3);
    ck_assert_uint_eq(x->seq, 77);
    ck_assert_uint_eq(x->epoch, 1ULL << 60);
    ck_assert_uint_eq(x->weights_version, 9);
    ck_assert_uint_eq(x->count, ROWS);
    ck_assert_mem_eq(x->obs, s_obs, sizeof s_obs);
    ck_assert_mem_eq(x->next_obs, s_next, sizeof s_next);
    ck_assert_mem_eq(x->actions, s_act, sizeof s_act);
    ck_assert_mem_eq(x->rewards, s_rew, sizeof s_rew);
    ck_assert_mem_eq(x->discounts, s_disc, sizeof s_disc);
    ck_assert_mem_eq(x->priorities, s_prio, sizeof s_prio);
    // Without priorities the view is NULL (replay then uses its max priority).
    m.u.batch.priorities = NULL;
    wire_encode(&m, &b);
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
    ck_assert_ptr_null(o.u.batch.priorities);
    wire_decoder_destroy(&d);
    wire_buf_fini(&b);
}
END_TEST

START_TEST(test_small_messages_round_trip) {
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_decoder_t *d = wire_decoder_new(&s_lim);
    wire_msg_t m = {.type = WIRE_MSG_SAMPLE_REQUEST}, o;
    m.u.sample_request =
        (wire_sample_request_t){.id = 1234567890123ULL, .batch_size = 32, .beta = 0.4f};
    wire_encode(&m, &b);
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
    ck_assert_int_eq(o.type, WIRE_MSG_SAMPLE_REQUEST);
    ck_assert_uint_eq(o.u.sample_request.id, 1234567890123ULL);
    ck_assert_uint_eq(o.u.sample_request.batch_size, 32);
    ck_assert_float_eq(o.u.sample_request.beta, 0.4f);
    ck_assert_uint_eq(o.u.sample_request.batches, 1); // absent on the wire: one batch
    m.u.sample_request.batches = 2;
    wire_encode(&m, &b);
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
    ck_assert_uint_eq(o.u.sample_request.batches, 2);
    ck_assert_uint_eq(o.u.sample_request.batch_size, 32);
    m.u.sample_request =
        (wire_sample_request_t){.id = 1234567890123ULL, .batch_size = 32, .beta = 0.4f};

    uint64_t keys[3] = {WIRE_KEY(5, 1), WIRE_KEY(0xffffffffu, 7), 0};
    float pr[3] = {0.5f, 0.0f, 123.0f};
    m = (wire_msg_t){.type = WIRE_MSG_PRIORITY_UPDATE};
    m.u.priority_update = (wire_priority_update_t){.count = 3, .keys = keys, .priorities = pr};
    wire_encode(&m, &b);
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
    ck_assert_int_eq(o.type, WIRE_MSG_PRIORITY_UPDATE);
    ck_assert_mem_eq(o.u.priority_update.keys, keys, sizeof keys);
    ck_assert_mem_eq(o.u.priority_update.priorities, pr, sizeof pr);
    ck_assert_uint_eq(WIRE_KEY_SLOT(o.u.priority_update.keys[1]), 0xffffffffu);
    ck_assert_uint_eq(WIRE_KEY_GEN(o.u.priority_update.keys[1]), 7);

    float params[10];
    for (int i = 0; i < 10; i++) {
        params[i] = (float)i / 3.0f;
    }
    m = (wire_msg_t){.type = WIRE_MSG_WEIGHTS};
    m.u.weights =
        (wire_weights_t){.version = 42, .learner_step = 4200, .num_params = 10, .params = params};
    wire_encode(&m, &b);
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
    ck_assert_uint_eq(o.u.weights.version, 42);
    ck_assert_uint_eq(o.u.weights.learner_step, 4200);
    ck_assert_mem_eq(o.u.weights.params, params, sizeof params);

    float rets[2] = {12.0f, 500.0f}, eps[2] = {0.4f, 0.0001f};
    uint32_t lens[2] = {12, 500};
    m = (wire_msg_t){.type = WIRE_MSG_ACTOR_STATS};
    m.u.actor_stats = (wire_actor_stats_t){.actor_id = 1,
                                           .frames = 99999,
                                           .weights_version = 3,
                                           .dropped_batches = 2,
                                           .n_episodes = 2,
                                           .returns = rets,
                                           .lengths = lens,
                                           .epsilons = eps};
    wire_encode(&m, &b);
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
    ck_assert_uint_eq(o.u.actor_stats.frames, 99999);
    ck_assert_uint_eq(o.u.actor_stats.dropped_batches, 2);
    ck_assert_mem_eq(o.u.actor_stats.returns, rets, sizeof rets);
    ck_assert_mem_eq(o.u.actor_stats.lengths, lens, sizeof lens);
    ck_assert_mem_eq(o.u.actor_stats.epsilons, eps, sizeof eps);

    m = (wire_msg_t){.type = WIRE_MSG_ACTOR_STATS}; // zero episodes is legal
    wire_encode(&m, &b);
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
    ck_assert_uint_eq(o.u.actor_stats.n_episodes, 0);

    m = (wire_msg_t){.type = WIRE_MSG_INSERT_ACK};
    m.u.insert_ack = (wire_insert_ack_t){.actor_id = 7, .seq = 1ULL << 40};
    wire_encode(&m, &b);
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
    ck_assert_int_eq(o.type, WIRE_MSG_INSERT_ACK);
    ck_assert_uint_eq(o.u.insert_ack.seq, 1ULL << 40);
    ck_assert_uint_eq(o.u.insert_ack.n_more, 0);
    ck_assert_ptr_null(o.u.insert_ack.more);
    wire_decoder_destroy(&d);
    wire_buf_fini(&b);
}
END_TEST

// Hand-encoded InsertAck{actor_id = 3, seq = 5, seqs = [1] * n_more} in an Envelope.
static size_t s_forge_ack(uint8_t *out, uint32_t n_more) {
    uint8_t body[16 + WIRE_ACK_MAX_SEQS + 8];
    size_t n = 0;
    body[n++] = 0x08, body[n++] = 3;      // actor_id
    body[n++] = 0x10, body[n++] = 5;      // seq
    body[n++] = 0x1a;                     // seqs, packed
    for (uint32_t v = n_more;; v >>= 7) { // its length: n_more one-byte varints
        body[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        if (v <= 0x7f) {
            break;
        }
    }
    memset(body + n, 1, n_more);
    n += n_more;
    size_t o = 0;
    out[o++] = 0x08, out[o++] = APEX_PROTOCOL_VERSION; // version
    out[o++] = 0x42;                                   // insert_ack = 8, length-delimited
    for (size_t v = n;; v >>= 7) {
        out[o++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        if (v <= 0x7f) {
            break;
        }
    }
    memcpy(out + o, body, n);
    return o + n;
}

START_TEST(test_batched_ack) {
    wire_decoder_t *d = wire_decoder_new(&s_lim);
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_msg_t m = {.type = WIRE_MSG_INSERT_ACK}, o;
    // Round trip, including the largest legal count and seqs needing 10-byte varints.
    static uint64_t more[WIRE_ACK_MAX_SEQS - 1];
    for (uint32_t i = 0; i < WIRE_ACK_MAX_SEQS - 1; i++) {
        more[i] = i % 3 == 0 ? UINT64_MAX - i : (uint64_t)i * 7919;
    }
    uint32_t counts[] = {1, 2, 17, WIRE_ACK_MAX_SEQS - 1};
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
        m.u.insert_ack =
            (wire_insert_ack_t){.actor_id = 2, .seq = 0, .n_more = counts[k], .more = more};
        wire_encode(&m, &b);
        ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
        ck_assert_int_eq(o.type, WIRE_MSG_INSERT_ACK);
        ck_assert_uint_eq(o.u.insert_ack.actor_id, 2);
        ck_assert_uint_eq(o.u.insert_ack.seq, 0);
        ck_assert_uint_eq(o.u.insert_ack.n_more, counts[k]);
        ck_assert_mem_eq(o.u.insert_ack.more, more, counts[k] * sizeof *more);
    }
    // A single ack is byte for byte what builds without batched acks send.
    m.u.insert_ack = (wire_insert_ack_t){.actor_id = 1, .seq = 2};
    wire_encode(&m, &b);
    const uint8_t single[] = {0x08, APEX_PROTOCOL_VERSION, 0x42, 0x04, 0x08, 0x01, 0x10, 0x02};
    ck_assert_uint_eq(b.len, sizeof single);
    ck_assert_mem_eq(b.data, single, sizeof single);
    // The count is bounded: one seq over the limit is refused, the limit itself is not.
    uint8_t raw[32 + WIRE_ACK_MAX_SEQS + 16];
    size_t n = s_forge_ack(raw, WIRE_ACK_MAX_SEQS - 1);
    ck_assert_int_eq(wire_decode(d, raw, n, &o), APEX_OK);
    ck_assert_uint_eq(o.u.insert_ack.n_more, WIRE_ACK_MAX_SEQS - 1);
    ck_assert_uint_eq(o.u.insert_ack.more[WIRE_ACK_MAX_SEQS - 2], 1);
    n = s_forge_ack(raw, WIRE_ACK_MAX_SEQS);
    ck_assert_int_eq(wire_decode(d, raw, n, &o), APEX_EINVAL);
    ck_assert_int_eq(o.type, WIRE_MSG_INSERT_ACK);
    ck_assert_ptr_null(o.u.insert_ack.more);
    wire_decoder_destroy(&d);
    wire_buf_fini(&b);
}
END_TEST

START_TEST(test_sample_reply_round_trip) {
    s_fill();
    uint64_t keys[ROWS];
    float w[ROWS];
    for (int i = 0; i < ROWS; i++) {
        keys[i] = WIRE_KEY(i * 3, i);
        w[i] = 1.0f / (float)(i + 1);
    }
    wire_msg_t m = {.type = WIRE_MSG_SAMPLE_REPLY}, o;
    m.u.sample_reply =
        (wire_sample_reply_t){.id = 8,
                              .status = WIRE_SAMPLE_OK,
                              .count = ROWS,
                              .obs_dim = OBS,
                              .keys = keys,
                              .is_weights = w,
                              .obs = s_obs,
                              .actions = s_act,
                              .rewards = s_rew,
                              .discounts = s_disc,
                              .next_obs = s_next,
                              .stats = {.size = 100, .capacity = 128, .total_priority = 3.5}};
    wire_buf_t b;
    wire_buf_init(&b, 64);
    wire_encode(&m, &b);
    wire_decoder_t *d = wire_decoder_new(&s_lim);
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
    const wire_sample_reply_t *r = &o.u.sample_reply;
    ck_assert_int_eq(r->status, WIRE_SAMPLE_OK);
    ck_assert_uint_eq(r->id, 8);
    ck_assert_mem_eq(r->keys, keys, sizeof keys);
    ck_assert_mem_eq(r->is_weights, w, sizeof w);
    ck_assert_mem_eq(r->next_obs, s_next, sizeof s_next);
    ck_assert_uint_eq(r->stats.size, 100);
    ck_assert_double_eq(r->stats.total_priority, 3.5);
    // A not-ready reply carries no rows.
    m.u.sample_reply = (wire_sample_reply_t){.id = 9, .status = WIRE_SAMPLE_NOT_READY};
    wire_encode(&m, &b);
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
    ck_assert_int_eq(o.u.sample_reply.status, WIRE_SAMPLE_NOT_READY);
    ck_assert_uint_eq(o.u.sample_reply.count, 0);
    // An OK reply whose weight is above 1 is refused.
    w[0] = 1.5f;
    m.u.sample_reply = (wire_sample_reply_t){.id = 8,
                                             .status = WIRE_SAMPLE_OK,
                                             .count = ROWS,
                                             .obs_dim = OBS,
                                             .keys = keys,
                                             .is_weights = w,
                                             .obs = s_obs,
                                             .actions = s_act,
                                             .rewards = s_rew,
                                             .discounts = s_disc,
                                             .next_obs = s_next};
    wire_encode(&m, &b);
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_EINVAL);
    wire_decoder_destroy(&d);
    wire_buf_fini(&b);
}
END_TEST

// Continuous actions (issue #28): action_dim floats per row, round trips of a batch and a
// sample reply, the run's action_dim and bounds enforced (a bound itself is inside, the next
// float past it is not), non-finite actions refused, and the bounds copied by the decoder.
#define CD 3
START_TEST(test_continuous_actions) {
    s_fill();
    float low[CD] = {-1.0f, -2.0f, 0.0f}, high[CD] = {1.0f, 2.0f, 0.5f}, a[ROWS * CD];
    for (int i = 0; i < ROWS; i++) {
        for (int j = 0; j < CD; j++) {
            a[i * CD + j] = low[j] + (high[j] - low[j]) * (float)i / (ROWS - 1); // ends included
        }
    }
    wire_limits_t lim = s_lim;
    lim.action_dim = CD, lim.action_low = low, lim.action_high = high;
    wire_decoder_t *d = wire_decoder_new(&lim), *disc = wire_decoder_new(&s_lim);
    low[0] = 0.9f; // the decoder keeps its own copy
    wire_msg_t m = s_batch_msg(), o;
    m.u.batch.actions = NULL, m.u.batch.action_dim = CD, m.u.batch.cont_actions = a;
    wire_buf_t b;
    wire_buf_init(&b, 16);
    wire_encode(&m, &b);
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
    ck_assert_uint_eq(o.u.batch.action_dim, CD);
    ck_assert_ptr_null(o.u.batch.actions);
    ck_assert_mem_eq(o.u.batch.cont_actions, a, sizeof a);
    ck_assert_mem_eq(o.u.batch.obs, s_obs, sizeof s_obs);
    // A discrete run refuses continuous actions, and a continuous one discrete actions or
    // another action_dim.
    ck_assert_int_eq(wire_decode(disc, b.data, b.len, &o), APEX_EINVAL);
    ck_assert_ptr_nonnull(strstr(wire_decoder_last_error(disc), "continuous"));
    wire_msg_t md = s_batch_msg();
    wire_encode(&md, &b);
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_EINVAL);
    m.u.batch.action_dim = CD - 1; // (the same floats read as 7 rows' worth: wrong length too)
    wire_encode(&m, &b);
    ck_assert_int_ne(wire_decode(d, b.data, b.len, &o), APEX_OK);
    m.u.batch.action_dim = CD;
    // Out of the bounds by one float, NaN, +-inf: refused, naming the row and component.
    const float bad[] = {nextafterf(2.0f, INFINITY), nextafterf(-2.0f, -INFINITY), NAN, INFINITY,
                         -INFINITY};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        float keep = a[2 * CD + 1];
        a[2 * CD + 1] = bad[k];
        wire_encode(&m, &b);
        ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_EINVAL);
        if (isfinite(bad[k])) {
            ck_assert_ptr_nonnull(strstr(wire_decoder_last_error(d), "action[1]"));
            ck_assert_ptr_nonnull(strstr(wire_decoder_last_error(d), "row 2"));
        }
        a[2 * CD + 1] = keep;
    }
    // Without bounds any finite action passes.
    wire_limits_t open = lim;
    open.action_low = open.action_high = NULL;
    wire_decoder_t *d_open = wire_decoder_new(&open);
    a[0] = 1e30f;
    wire_encode(&m, &b);
    ck_assert_int_eq(wire_decode(d_open, b.data, b.len, &o), APEX_OK);
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_EINVAL);
    a[0] = low[0] = -1.0f;
    // A sample reply's continuous rows round-trip and are held to the same bounds.
    uint64_t keys[ROWS];
    float w[ROWS];
    for (int i = 0; i < ROWS; i++) {
        keys[i] = WIRE_KEY(i, i);
        w[i] = 1.0f;
    }
    wire_msg_t r = {.type = WIRE_MSG_SAMPLE_REPLY};
    r.u.sample_reply = (wire_sample_reply_t){.id = 8,
                                             .status = WIRE_SAMPLE_OK,
                                             .count = ROWS,
                                             .obs_dim = OBS,
                                             .keys = keys,
                                             .is_weights = w,
                                             .obs = s_obs,
                                             .action_dim = CD,
                                             .cont_actions = a,
                                             .rewards = s_rew,
                                             .discounts = s_disc,
                                             .next_obs = s_next};
    wire_encode(&r, &b);
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
    ck_assert_uint_eq(o.u.sample_reply.action_dim, CD);
    ck_assert_mem_eq(o.u.sample_reply.cont_actions, a, sizeof a);
    ck_assert_int_eq(wire_decode(disc, b.data, b.len, &o), APEX_EINVAL);
    a[ROWS * CD - 1] = 0.75f; // component 2's high is 0.5
    wire_encode(&r, &b);
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_EINVAL);
    // The largest message (a sample reply of many rows) grows by the action's floats.
    wire_limits_t big = s_lim, big_cont = lim;
    big.max_count = big_cont.max_count = 1000;
    ck_assert_uint_eq(wire_max_message_bytes(&big_cont) - wire_max_message_bytes(&big),
                      1000 * (CD - 1) * sizeof(float));
    wire_decoder_destroy(&d);
    wire_decoder_destroy(&d_open);
    wire_decoder_destroy(&disc);
    wire_buf_fini(&b);
}
END_TEST

START_TEST(test_every_truncation_rejected) {
    wire_msg_t m = s_batch_msg(), o;
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_encode(&m, &b);
    wire_decoder_t *d = wire_decoder_new(&s_lim);
    for (size_t len = 0; len < b.len; len++) {
        int rc = wire_decode(d, b.data, len, &o);
        ck_assert_msg(rc != APEX_OK, "prefix of %zu/%zu bytes accepted", len, b.len);
    }
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
    wire_decoder_destroy(&d);
    wire_buf_fini(&b);
}
END_TEST

START_TEST(test_wrong_version) {
    wire_msg_t m = s_batch_msg(), o;
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_encode_version(&m, APEX_PROTOCOL_VERSION + 1, &b);
    ck_assert_int_eq(s_decode(&b, &o), APEX_EVERSION);
    wire_encode_version(&m, 0, &b);
    ck_assert_int_eq(s_decode(&b, &o), APEX_EVERSION);
    wire_buf_fini(&b);
}
END_TEST

START_TEST(test_non_finite_and_ranges) {
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_msg_t o;
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int k = 0; k < 3; k++) {
        wire_msg_t m = s_batch_msg();
        s_obs[7] = bad[k];
        wire_encode(&m, &b);
        ck_assert_int_eq(s_decode(&b, &o), APEX_EINVAL);
        ck_assert_int_eq(o.type, WIRE_MSG_TRANSITION_BATCH); // kind kept for counting
        m = s_batch_msg();
        s_rew[1] = bad[k];
        wire_encode(&m, &b);
        ck_assert_int_eq(s_decode(&b, &o), APEX_EINVAL);
        m = s_batch_msg();
        s_next[ROWS * OBS - 1] = bad[k];
        wire_encode(&m, &b);
        ck_assert_int_eq(s_decode(&b, &o), APEX_EINVAL);
        m = s_batch_msg();
        s_prio[0] = bad[k];
        wire_encode(&m, &b);
        ck_assert_int_eq(s_decode(&b, &o), APEX_EINVAL);
    }
    wire_msg_t m = s_batch_msg();
    s_disc[0] = 1.01f;
    wire_encode(&m, &b);
    ck_assert_int_eq(s_decode(&b, &o), APEX_EINVAL);
    m = s_batch_msg();
    s_prio[4] = -1.0f;
    wire_encode(&m, &b);
    ck_assert_int_eq(s_decode(&b, &o), APEX_EINVAL);
    m = s_batch_msg();
    s_act[3] = ACT; // out of range
    wire_encode(&m, &b);
    ck_assert_int_eq(s_decode(&b, &o), APEX_EINVAL);
    m = s_batch_msg();
    s_act[3] = -1;
    wire_encode(&m, &b);
    ck_assert_int_eq(s_decode(&b, &o), APEX_EINVAL);
    // Beta outside [0, 1] and NaN beta.
    m = (wire_msg_t){.type = WIRE_MSG_SAMPLE_REQUEST};
    m.u.sample_request = (wire_sample_request_t){.id = 1, .batch_size = 4, .beta = NAN};
    wire_encode(&m, &b);
    ck_assert_int_eq(s_decode(&b, &o), APEX_EINVAL);
    m.u.sample_request.beta = 1.5f;
    wire_encode(&m, &b);
    ck_assert_int_eq(s_decode(&b, &o), APEX_EINVAL);
    wire_buf_fini(&b);
}
END_TEST

START_TEST(test_counts_and_dims) {
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_msg_t o;
    wire_msg_t m = s_batch_msg();
    m.u.batch.obs_dim = OBS - 1; // consistent lengths, wrong dimension for this run
    wire_encode(&m, &b);
    ck_assert_int_eq(s_decode(&b, &o), APEX_EINVAL);
    m = (wire_msg_t){.type = WIRE_MSG_SAMPLE_REQUEST};
    m.u.sample_request = (wire_sample_request_t){.id = 1, .batch_size = 0, .beta = 0.5f};
    wire_encode(&m, &b);
    ck_assert_int_eq(s_decode(&b, &o), APEX_EINVAL);
    m.u.sample_request.batch_size = s_lim.max_count + 1;
    wire_encode(&m, &b);
    ck_assert_int_eq(s_decode(&b, &o), APEX_EINVAL);
    // Several batches: their rows together within max_count, and at most 64 batches.
    m.u.sample_request =
        (wire_sample_request_t){.id = 1, .batch_size = 16, .beta = 0.5f, .batches = 4};
    wire_encode(&m, &b);
    ck_assert_int_eq(s_decode(&b, &o), APEX_OK); // 64 rows
    m.u.sample_request.batches = 5;
    wire_encode(&m, &b);
    ck_assert_int_eq(s_decode(&b, &o), APEX_EINVAL); // 80 rows
    wire_limits_t big = s_lim;
    big.max_count = 4096;
    big.max_message_bytes = wire_max_message_bytes(&big);
    wire_decoder_t *dbig = wire_decoder_new(&big);
    m.u.sample_request = (wire_sample_request_t){
        .id = 1, .batch_size = 1, .beta = 0.5f, .batches = WIRE_MAX_BATCHES_PER_REQUEST};
    wire_encode(&m, &b);
    ck_assert_int_eq(wire_decode(dbig, b.data, b.len, &o), APEX_OK);
    m.u.sample_request.batches = WIRE_MAX_BATCHES_PER_REQUEST + 1; // few rows, too many batches
    wire_encode(&m, &b);
    ck_assert_int_eq(wire_decode(dbig, b.data, b.len, &o), APEX_EINVAL);
    wire_decoder_destroy(&dbig);
    float params[9] = {0};
    m = (wire_msg_t){.type = WIRE_MSG_WEIGHTS};
    m.u.weights = (wire_weights_t){.version = 1, .num_params = 9, .params = params};
    wire_encode(&m, &b);
    ck_assert_int_eq(s_decode(&b, &o), APEX_EINVAL);
    float rets[9] = {0}, eps[9] = {0};
    uint32_t lens[9] = {0};
    m = (wire_msg_t){.type = WIRE_MSG_ACTOR_STATS};
    m.u.actor_stats =
        (wire_actor_stats_t){.n_episodes = 9, .returns = rets, .lengths = lens, .epsilons = eps};
    wire_encode(&m, &b);
    ck_assert_int_eq(s_decode(&b, &o), APEX_EINVAL); // more than max_episodes
    wire_buf_fini(&b);
}
END_TEST

// ---- a minimal independent protobuf writer, for hostile inputs ---------------------------

typedef struct {
    uint8_t b[4096];
    size_t n;
} pb_t;

static void pb_varint(pb_t *p, uint64_t v) {
    while (v >= 0x80) {
        p->b[p->n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p->b[p->n++] = (uint8_t)v;
}
static void pb_uint(pb_t *p, int field, uint64_t v) {
    pb_varint(p, (uint64_t)field << 3);
    pb_varint(p, v);
}
static void pb_bytes(pb_t *p, int field, const void *data, size_t len) {
    pb_varint(p, ((uint64_t)field << 3) | 2);
    pb_varint(p, len);
    memcpy(p->b + p->n, data, len);
    p->n += len;
}

// Envelope{version, body field=2 (TransitionBatch)} with arrays of the given row counts.
static void s_forge_batch(pb_t *env, uint32_t count, int obs_rows, int act_rows, int rew_rows) {
    s_fill();
    pb_t body = {.n = 0};
    pb_uint(&body, 1, 1);
    pb_uint(&body, 4, count);
    pb_uint(&body, 5, OBS);
    pb_bytes(&body, 6, s_obs, (size_t)obs_rows * OBS * 4);
    pb_bytes(&body, 7, s_act, (size_t)act_rows * 4);
    pb_bytes(&body, 8, s_rew, (size_t)rew_rows * 4);
    pb_bytes(&body, 9, s_disc, (size_t)ROWS * 4);
    pb_bytes(&body, 10, s_next, (size_t)ROWS * OBS * 4);
    env->n = 0;
    pb_uint(env, 1, APEX_PROTOCOL_VERSION);
    pb_bytes(env, 2, body.b, body.n);
}

static int s_decode_raw(const void *buf, size_t len, wire_msg_t *o) {
    wire_decoder_t *d = wire_decoder_new(&s_lim);
    int rc = wire_decode(d, buf, len, o);
    wire_decoder_destroy(&d);
    return rc;
}

START_TEST(test_forged_mismatched_counts) {
    pb_t p;
    wire_msg_t o;
    s_forge_batch(&p, ROWS, ROWS, ROWS, ROWS);
    ck_assert_int_eq(s_decode_raw(p.b, p.n, &o), APEX_OK); // the forge itself is valid
    s_forge_batch(&p, ROWS, ROWS - 1, ROWS, ROWS);
    ck_assert_int_eq(s_decode_raw(p.b, p.n, &o), APEX_EPROTO);
    s_forge_batch(&p, ROWS, ROWS, ROWS - 2, ROWS);
    ck_assert_int_eq(s_decode_raw(p.b, p.n, &o), APEX_EPROTO);
    s_forge_batch(&p, ROWS, ROWS, ROWS, 1);
    ck_assert_int_eq(s_decode_raw(p.b, p.n, &o), APEX_EPROTO);
    s_forge_batch(&p, ROWS + 1, ROWS, ROWS, ROWS);
    ck_assert_int_eq(s_decode_raw(p.b, p.n, &o), APEX_EPROTO);
    s_forge_batch(&p, 1000000, ROWS, ROWS, ROWS); // absurd count
    ck_assert_int_eq(s_decode_raw(p.b, p.n, &o), APEX_EINVAL);
}
END_TEST

START_TEST(test_garbage_and_empty) {
    wire_msg_t o;
    ck_assert_int_ne(s_decode_raw("", 0, &o), APEX_OK);
    pb_t p = {.n = 0};
    pb_uint(&p, 1, APEX_PROTOCOL_VERSION); // an envelope with no body
    ck_assert_int_eq(s_decode_raw(p.b, p.n, &o), APEX_EPROTO);
    // Random bytes never crash the decoder (ASan/UBSan run checks memory safety).
    rng_t r;
    rng_init(&r, 1);
    uint8_t buf[512];
    wire_decoder_t *d = wire_decoder_new(&s_lim);
    int accepted = 0;
    for (int it = 0; it < 20000; it++) {
        size_t len = rng_below(&r, sizeof buf);
        for (size_t i = 0; i < len; i++) {
            buf[i] = (uint8_t)rng_next_u32(&r);
        }
        accepted += wire_decode(d, buf, len, &o) == APEX_OK;
    }
    // Some random inputs can be legal (e.g. tiny messages); most must not be.
    ck_assert_int_lt(accepted, 200);
    // Many unknown fields: more unpacked memory than the arena, still freed and refused.
    pb_t u = {.n = 0};
    while (u.n < sizeof u.b - 8) {
        pb_uint(&u, 15, 1);
    }
    ck_assert_int_ne(wire_decode(d, u.b, u.n, &o), APEX_OK);
    wire_decoder_destroy(&d);
}
END_TEST

START_TEST(test_oversized) {
    wire_limits_t lim = s_lim;
    lim.max_message_bytes = 100;
    wire_decoder_t *d = wire_decoder_new(&lim);
    wire_msg_t m = s_batch_msg(), o;
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_encode(&m, &b);
    ck_assert_uint_gt(b.len, 100);
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_ENOSPC);
    ck_assert_ptr_nonnull(strstr(wire_decoder_last_error(d), "exceeds"));
    wire_decoder_destroy(&d);
    // The derived limit admits the largest legal message.
    ck_assert_uint_ge(wire_max_message_bytes(&s_lim), b.len);
    wire_buf_fini(&b);
}
END_TEST

// ---- uint8 observations ------------------------------------------------------------------

static const wire_limits_t s_lim8 = {.obs_dim = OBS,
                                     .obs_dtype = WIRE_OBS_UINT8,
                                     .n_actions = ACT,
                                     .num_params = 10,
                                     .max_count = 64,
                                     .max_episodes = 8};

// Little-endian float32 NaN and +Inf: harmless as bytes, refused as float32 observations.
static const uint8_t s_nan_le[4] = {0xff, 0xff, 0xc0, 0x7f}, s_inf_le[4] = {0x00, 0x00, 0x80, 0x7f};

// uint8 fixture of ROWS rows of OBS bytes: 0, 255, and rows that read as float32 would be
// NaN or Inf (with OBS = 4 each row is exactly one float's bytes).
static uint8_t s_obs8[ROWS * OBS], s_next8[ROWS * OBS];

static void s_fill8(void) {
    for (int i = 0; i < ROWS * OBS; i++) {
        s_obs8[i] = (uint8_t)(37 * i + 11);
        s_next8[i] = (uint8_t)(250 - 13 * i);
    }
    memcpy(s_obs8, s_nan_le, 4);                     // obs row 0
    memcpy(s_obs8 + 2 * OBS, s_inf_le, 4);           // obs row 2
    memcpy(s_next8 + (ROWS - 1) * OBS, s_nan_le, 4); // next_obs row 4
    s_obs8[OBS] = 0, s_obs8[OBS + 1] = 255;
    s_next8[0] = 255, s_next8[1] = 0;
}

// The fixture batch with uint8 observations.
static wire_msg_t s_batch_msg8(void) {
    wire_msg_t m = s_batch_msg();
    s_fill8();
    m.u.batch.obs_dtype = WIRE_OBS_UINT8;
    m.u.batch.obs = s_obs8;
    m.u.batch.next_obs = s_next8;
    return m;
}

static uint64_t s_keys[ROWS];
static float s_isw[ROWS];

// Fills the float32 and uint8 fixtures and the keys and weights of a reply.
static void s_fill_reply(void) {
    s_fill();
    s_fill8();
    for (int i = 0; i < ROWS; i++) {
        s_keys[i] = WIRE_KEY(i * 5 + 1, 0xfffffff0u + (uint32_t)i);
        s_isw[i] = i == 0 ? 0.0f : 1.0f / (float)i;
    }
}

// A SampleReply of the fixture rows with observations of dtype t.
static wire_msg_t s_reply_msg(uint32_t t) {
    s_fill_reply();
    wire_msg_t m = {.type = WIRE_MSG_SAMPLE_REPLY};
    m.u.sample_reply = (wire_sample_reply_t){
        .id = 11,
        .status = WIRE_SAMPLE_OK,
        .count = ROWS,
        .obs_dim = OBS,
        .obs_dtype = t,
        .keys = s_keys,
        .is_weights = s_isw,
        .obs = t == WIRE_OBS_UINT8 ? (const void *)s_obs8 : (const void *)s_obs,
        .actions = s_act,
        .rewards = s_rew,
        .discounts = s_disc,
        .next_obs = t == WIRE_OBS_UINT8 ? (const void *)s_next8 : (const void *)s_next,
        .stats = {.size = 5, .capacity = 37}};
    return m;
}

START_TEST(test_uint8_batch_round_trip) {
    wire_msg_t m = s_batch_msg8(), o;
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_encode(&m, &b);
    size_t len8 = b.len;
    wire_decoder_t *d = wire_decoder_new(&s_lim8);
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
    ck_assert_int_eq(o.type, WIRE_MSG_TRANSITION_BATCH);
    const wire_batch_t *x = &o.u.batch;
    ck_assert_uint_eq(x->obs_dtype, WIRE_OBS_UINT8);
    ck_assert_uint_eq(x->count, ROWS);
    ck_assert_uint_eq(x->obs_dim, OBS);
    ck_assert_uint_eq(x->seq, 77);
    ck_assert_mem_eq(x->obs, s_obs8, sizeof s_obs8);
    ck_assert_mem_eq(x->next_obs, s_next8, sizeof s_next8);
    ck_assert_mem_eq(x->actions, s_act, sizeof s_act);
    ck_assert_mem_eq(x->rewards, s_rew, sizeof s_rew);
    ck_assert_mem_eq(x->discounts, s_disc, sizeof s_disc);
    ck_assert_mem_eq(x->priorities, s_prio, sizeof s_prio);
    // On the wire each observation is OBS bytes, not OBS floats: the float32 encoding of
    // the same rows is 2 * ROWS * OBS * 3 bytes longer, less the 2 bytes of the obs_dtype
    // field (tag 13, value 1) that a float32 message (proto3 default 0) leaves out.
    wire_msg_t f = s_batch_msg();
    wire_encode(&f, &b);
    ck_assert_uint_eq(b.len - len8, 2 * ROWS * OBS * 3 - 2);
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_EINVAL); // float32: wrong run
    wire_decoder_destroy(&d);

    // Every byte value, at an odd obs_dim (no row is a whole number of floats), with the
    // NaN and Inf patterns at unaligned offsets.
    enum { DIM = 7, N = 37 };
    wire_limits_t lim = s_lim8;
    lim.obs_dim = DIM;
    uint8_t obs[N * DIM], next[N * DIM];
    int32_t act[N];
    float rew[N], disc[N];
    for (int i = 0; i < N * DIM; i++) {
        obs[i] = (uint8_t)i;
        next[i] = (uint8_t)(255 - i);
    }
    memcpy(obs + 3, s_nan_le, 4);
    memcpy(next + N * DIM - 5, s_nan_le, 4);
    memcpy(next + 9, s_inf_le, 4);
    for (int i = 0; i < N; i++) {
        act[i] = (i * 7) % ACT;
        rew[i] = -(float)i;
        disc[i] = 0.5f;
    }
    m.u.batch = (wire_batch_t){.actor_id = 1,
                               .seq = 2,
                               .count = N,
                               .obs_dim = DIM,
                               .obs_dtype = WIRE_OBS_UINT8,
                               .obs = obs,
                               .actions = act,
                               .rewards = rew,
                               .discounts = disc,
                               .next_obs = next};
    wire_encode(&m, &b);
    d = wire_decoder_new(&lim);
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
    ck_assert_uint_eq(o.u.batch.obs_dtype, WIRE_OBS_UINT8);
    ck_assert_uint_eq(o.u.batch.count, N);
    ck_assert_mem_eq(o.u.batch.obs, obs, sizeof obs);
    ck_assert_mem_eq(o.u.batch.next_obs, next, sizeof next);
    ck_assert_mem_eq(o.u.batch.actions, act, sizeof act);
    ck_assert_mem_eq(o.u.batch.rewards, rew, sizeof rew);
    ck_assert_ptr_null(o.u.batch.priorities);
    wire_decoder_destroy(&d);
    wire_buf_fini(&b);
}
END_TEST

// Decodes buf with d, expects APEX_EINVAL and a message naming both dtypes.
static void s_expect_dtype_refused(wire_decoder_t *d, const wire_buf_t *b, wire_msg_type kind) {
    wire_msg_t o;
    ck_assert_int_eq(wire_decode(d, b->data, b->len, &o), APEX_EINVAL);
    ck_assert_int_eq(o.type, kind); // kind kept for counting, views dropped
    ck_assert_ptr_null(kind == WIRE_MSG_TRANSITION_BATCH ? o.u.batch.obs : o.u.sample_reply.obs);
    const char *e = wire_decoder_last_error(d);
    ck_assert_msg(strstr(e, "uint8") && strstr(e, "float32"), "last error: %s", e);
}

START_TEST(test_obs_dtype_mismatch_refused) {
    wire_decoder_t *d32 = wire_decoder_new(&s_lim), *d8 = wire_decoder_new(&s_lim8);
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_msg_t m = s_batch_msg8(), o;
    wire_encode(&m, &b);
    s_expect_dtype_refused(d32, &b, WIRE_MSG_TRANSITION_BATCH); // uint8 to a float32 run
    ck_assert_int_eq(wire_decode(d8, b.data, b.len, &o), APEX_OK);
    m = s_batch_msg();
    wire_encode(&m, &b);
    s_expect_dtype_refused(d8, &b, WIRE_MSG_TRANSITION_BATCH); // float32 to a uint8 run
    ck_assert_int_eq(wire_decode(d32, b.data, b.len, &o), APEX_OK);
    m = s_reply_msg(WIRE_OBS_UINT8);
    wire_encode(&m, &b);
    s_expect_dtype_refused(d32, &b, WIRE_MSG_SAMPLE_REPLY);
    ck_assert_int_eq(wire_decode(d8, b.data, b.len, &o), APEX_OK);
    m = s_reply_msg(WIRE_OBS_FLOAT32);
    wire_encode(&m, &b);
    s_expect_dtype_refused(d8, &b, WIRE_MSG_SAMPLE_REPLY);
    ck_assert_int_eq(wire_decode(d32, b.data, b.len, &o), APEX_OK);
    wire_decoder_destroy(&d32);
    wire_decoder_destroy(&d8);
    wire_buf_fini(&b);
}
END_TEST

// Envelope{TransitionBatch} of the ROWS fixture rows declaring obs_dtype dtype, whose obs
// and next_obs carry obs_elem and next_elem bytes per element (1: s_obs8, 4: s_obs).
static void s_forge_batch_dtype(pb_t *env, uint64_t dtype, size_t obs_elem, size_t next_elem) {
    s_fill();
    s_fill8();
    pb_t body = {.n = 0};
    pb_uint(&body, 1, 1);
    pb_uint(&body, 4, ROWS);
    pb_uint(&body, 5, OBS);
    pb_bytes(&body, 6, obs_elem == 1 ? (const void *)s_obs8 : (const void *)s_obs,
             (size_t)ROWS * OBS * obs_elem);
    pb_bytes(&body, 7, s_act, (size_t)ROWS * 4);
    pb_bytes(&body, 8, s_rew, (size_t)ROWS * 4);
    pb_bytes(&body, 9, s_disc, (size_t)ROWS * 4);
    pb_bytes(&body, 10, next_elem == 1 ? (const void *)s_next8 : (const void *)s_next,
             (size_t)ROWS * OBS * next_elem);
    pb_uint(&body, 13, dtype);
    env->n = 0;
    pb_uint(env, 1, APEX_PROTOCOL_VERSION);
    pb_bytes(env, 2, body.b, body.n);
}

// Envelope{SampleReply}, likewise (status OK by omission).
static void s_forge_reply_dtype(pb_t *env, uint64_t dtype, size_t obs_elem, size_t next_elem) {
    s_fill_reply();
    pb_t body = {.n = 0};
    pb_uint(&body, 1, 11);
    pb_uint(&body, 3, ROWS);
    pb_uint(&body, 4, OBS);
    pb_bytes(&body, 5, s_keys, sizeof s_keys);
    pb_bytes(&body, 6, s_isw, sizeof s_isw);
    pb_bytes(&body, 7, obs_elem == 1 ? (const void *)s_obs8 : (const void *)s_obs,
             (size_t)ROWS * OBS * obs_elem);
    pb_bytes(&body, 8, s_act, (size_t)ROWS * 4);
    pb_bytes(&body, 9, s_rew, (size_t)ROWS * 4);
    pb_bytes(&body, 10, s_disc, (size_t)ROWS * 4);
    pb_bytes(&body, 11, next_elem == 1 ? (const void *)s_next8 : (const void *)s_next,
             (size_t)ROWS * OBS * next_elem);
    pb_uint(&body, 13, dtype);
    env->n = 0;
    pb_uint(env, 1, APEX_PROTOCOL_VERSION);
    pb_bytes(env, 4, body.b, body.n);
}

START_TEST(test_obs_dtype_length_mismatch) {
    wire_decoder_t *d32 = wire_decoder_new(&s_lim), *d8 = wire_decoder_new(&s_lim8);
    pb_t p;
    wire_msg_t o;
    void (*const forge[2])(pb_t *, uint64_t, size_t, size_t) = {s_forge_batch_dtype,
                                                                s_forge_reply_dtype};
    for (int k = 0; k < 2; k++) {
        // The forges themselves are valid when the lengths agree with the declared dtype.
        forge[k](&p, WIRE_OBS_UINT8, 1, 1);
        ck_assert_int_eq(wire_decode(d8, p.b, p.n, &o), APEX_OK);
        ck_assert_uint_eq((k ? o.u.sample_reply.obs_dtype : o.u.batch.obs_dtype), WIRE_OBS_UINT8);
        forge[k](&p, WIRE_OBS_FLOAT32, 4, 4);
        ck_assert_int_eq(wire_decode(d32, p.b, p.n, &o), APEX_OK);
        // uint8 declared, float-sized (count * obs_dim * 4) observations, or just next_obs.
        forge[k](&p, WIRE_OBS_UINT8, 4, 4);
        ck_assert_int_eq(wire_decode(d8, p.b, p.n, &o), APEX_EPROTO);
        forge[k](&p, WIRE_OBS_UINT8, 1, 4);
        ck_assert_int_eq(wire_decode(d8, p.b, p.n, &o), APEX_EPROTO);
        forge[k](&p, WIRE_OBS_UINT8, 4, 1);
        ck_assert_int_eq(wire_decode(d8, p.b, p.n, &o), APEX_EPROTO);
        // float32 declared, byte-sized observations.
        forge[k](&p, WIRE_OBS_FLOAT32, 1, 1);
        ck_assert_int_eq(wire_decode(d32, p.b, p.n, &o), APEX_EPROTO);
        forge[k](&p, WIRE_OBS_FLOAT32, 4, 1);
        ck_assert_int_eq(wire_decode(d32, p.b, p.n, &o), APEX_EPROTO);
        // A dtype neither run knows is refused by both, whatever the lengths.
        for (size_t e = 1; e <= 4; e += 3) {
            forge[k](&p, 2, e, e);
            ck_assert_int_eq(wire_decode(d8, p.b, p.n, &o), APEX_EINVAL);
            ck_assert_int_eq(wire_decode(d32, p.b, p.n, &o), APEX_EINVAL);
        }
    }
    wire_decoder_destroy(&d32);
    wire_decoder_destroy(&d8);
}
END_TEST

START_TEST(test_uint8_sample_reply_round_trip) {
    wire_msg_t m = s_reply_msg(WIRE_OBS_UINT8), o;
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_encode(&m, &b);
    wire_decoder_t *d8 = wire_decoder_new(&s_lim8);
    ck_assert_int_eq(wire_decode(d8, b.data, b.len, &o), APEX_OK);
    ck_assert_int_eq(o.type, WIRE_MSG_SAMPLE_REPLY);
    const wire_sample_reply_t *r = &o.u.sample_reply;
    ck_assert_int_eq(r->status, WIRE_SAMPLE_OK);
    ck_assert_uint_eq(r->id, 11);
    ck_assert_uint_eq(r->count, ROWS);
    ck_assert_uint_eq(r->obs_dim, OBS);
    ck_assert_uint_eq(r->obs_dtype, WIRE_OBS_UINT8);
    ck_assert_mem_eq(r->keys, s_keys, sizeof s_keys);
    ck_assert_mem_eq(r->is_weights, s_isw, sizeof s_isw);
    ck_assert_mem_eq(r->obs, s_obs8, sizeof s_obs8);
    ck_assert_mem_eq(r->next_obs, s_next8, sizeof s_next8);
    ck_assert_mem_eq(r->actions, s_act, sizeof s_act);
    ck_assert_mem_eq(r->rewards, s_rew, sizeof s_rew);
    ck_assert_mem_eq(r->discounts, s_disc, sizeof s_disc);
    ck_assert_uint_eq(r->stats.capacity, 37);
    // Non-finite float32 observations are still refused, in obs and in next_obs.
    wire_decoder_t *d32 = wire_decoder_new(&s_lim);
    m = s_reply_msg(WIRE_OBS_FLOAT32);
    wire_encode(&m, &b);
    ck_assert_int_eq(wire_decode(d32, b.data, b.len, &o), APEX_OK);
    memcpy(&s_obs[6], s_nan_le, 4);
    wire_encode(&m, &b);
    ck_assert_int_eq(wire_decode(d32, b.data, b.len, &o), APEX_EINVAL);
    ck_assert_ptr_nonnull(strstr(wire_decoder_last_error(d32), "non-finite"));
    m = s_reply_msg(WIRE_OBS_FLOAT32);
    memcpy(&s_next[ROWS * OBS - 1], s_inf_le, 4);
    wire_encode(&m, &b);
    ck_assert_int_eq(wire_decode(d32, b.data, b.len, &o), APEX_EINVAL);
    // And uint8 replies still check the rest: a NaN reward is refused.
    m = s_reply_msg(WIRE_OBS_UINT8);
    s_rew[3] = NAN;
    wire_encode(&m, &b);
    ck_assert_int_eq(wire_decode(d8, b.data, b.len, &o), APEX_EINVAL);
    wire_decoder_destroy(&d32);
    wire_decoder_destroy(&d8);
    wire_buf_fini(&b);
}
END_TEST

START_TEST(test_uint8_max_message_bytes) {
    enum { DIM = 84, MAXC = 256, NA = 6 };
    wire_limits_t l32 = {.obs_dim = DIM,
                         .obs_dtype = WIRE_OBS_FLOAT32,
                         .n_actions = NA,
                         .num_params = 100,
                         .max_count = MAXC,
                         .max_episodes = 8};
    wire_limits_t l8 = l32;
    l8.obs_dtype = WIRE_OBS_UINT8;
    size_t m32 = wire_max_message_bytes(&l32), m8 = wire_max_message_bytes(&l8);
    ck_assert_uint_lt(m8, m32);
    // Two observations per row, 3 bytes fewer per element, max_count rows.
    ck_assert_uint_eq(m32 - m8, (size_t)2 * DIM * 3 * MAXC);
    // The uint8 limit still admits the largest legal uint8 message: a full SampleReply
    // through a decoder with the derived limit.
    uint8_t *obs = malloc((size_t)MAXC * DIM), *next = malloc((size_t)MAXC * DIM);
    uint64_t keys[MAXC];
    float w[MAXC], rew[MAXC], disc[MAXC];
    int32_t act[MAXC];
    for (size_t i = 0; i < (size_t)MAXC * DIM; i++) {
        obs[i] = (uint8_t)(i * 31);
        next[i] = (uint8_t)~i;
    }
    for (int i = 0; i < MAXC; i++) {
        keys[i] = WIRE_KEY(0xffffffffu - (uint32_t)i, 0xffffffffu); // 10-byte varints
        w[i] = 1.0f;
        rew[i] = -1e30f;
        disc[i] = 1.0f;
        act[i] = i % NA;
    }
    wire_msg_t m = {.type = WIRE_MSG_SAMPLE_REPLY}, o;
    m.u.sample_reply = (wire_sample_reply_t){.id = UINT64_MAX,
                                             .status = WIRE_SAMPLE_OK,
                                             .count = MAXC,
                                             .obs_dim = DIM,
                                             .obs_dtype = WIRE_OBS_UINT8,
                                             .keys = keys,
                                             .is_weights = w,
                                             .obs = obs,
                                             .actions = act,
                                             .rewards = rew,
                                             .discounts = disc,
                                             .next_obs = next,
                                             .stats = {.size = UINT64_MAX,
                                                       .capacity = UINT64_MAX,
                                                       .inserted = UINT64_MAX,
                                                       .sampled = UINT64_MAX,
                                                       .updated = UINT64_MAX,
                                                       .stale_updates = UINT64_MAX,
                                                       .bad_messages = UINT64_MAX,
                                                       .limiter_waits = UINT64_MAX,
                                                       .duplicate_batches = UINT64_MAX,
                                                       .total_priority = WIRE_MASS_MAX}};
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_encode(&m, &b);
    ck_assert_uint_le(b.len, m8);
    wire_decoder_t *d = wire_decoder_new(&l8);
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
    ck_assert_mem_eq(o.u.sample_reply.next_obs, next, (size_t)MAXC * DIM);
    wire_decoder_destroy(&d);
    wire_buf_fini(&b);
    free(obs);
    free(next);
}
END_TEST

// Sharded replay's fields: SampleRequest min_priority / stats_only / stats_after and
// ReplayStats min_priority / shard / shards round-trip, are validated, and leave the messages
// of older builds meaning what they meant.
START_TEST(test_sharding_fields) {
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_decoder_t *d = wire_decoder_new(&s_lim);
    wire_msg_t m = {.type = WIRE_MSG_SAMPLE_REQUEST}, o;
    m.u.sample_request = (wire_sample_request_t){
        .id = 3, .batch_size = 8, .beta = 0.5f, .batches = 2, .min_priority = 0.125};
    wire_encode(&m, &b);
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
    ck_assert_double_eq(o.u.sample_request.min_priority, 0.125);
    ck_assert_int_eq(o.u.sample_request.stats_only, 0);
    ck_assert_uint_eq(o.u.sample_request.batches, 2);
    // A stats request: no rows; stats_after round-trips.
    m.u.sample_request =
        (wire_sample_request_t){.id = 4, .stats_only = 1, .stats_after = 1ull << 40};
    wire_encode(&m, &b);
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
    ck_assert_int_eq(o.u.sample_request.stats_only, 1);
    ck_assert_uint_eq(o.u.sample_request.stats_after, 1ull << 40);
    ck_assert_uint_eq(o.u.sample_request.batch_size, 0);
    ck_assert_uint_eq(o.u.sample_request.id, 4);
    // What an older server reads of it (fields 5-7 unknown, so skipped): a request for 0 rows,
    // which it refuses as invalid rather than serving a batch.
    pb_t body = {.n = 0}, env = {.n = 0};
    pb_uint(&body, 1, 4);
    pb_uint(&env, 1, APEX_PROTOCOL_VERSION);
    pb_bytes(&env, 3, body.b, body.n);
    ck_assert_int_eq(s_decode_raw(env.b, env.n, &o), APEX_EINVAL);
    // Refused: a minimum that is not finite and >= 0, rows in a stats request, stats_after
    // without stats_only.
    const double bad_min[] = {NAN, -1.0, INFINITY};
    for (int k = 0; k < 3; k++) {
        m.u.sample_request = (wire_sample_request_t){
            .id = 1, .batch_size = 4, .beta = 0.5f, .min_priority = bad_min[k]};
        wire_encode(&m, &b);
        ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_EINVAL);
        m.u.sample_request =
            (wire_sample_request_t){.id = 1, .stats_only = 1, .min_priority = bad_min[k]};
        wire_encode(&m, &b);
        ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_EINVAL);
    }
    m.u.sample_request = (wire_sample_request_t){.id = 1, .batch_size = 4, .stats_after = 9};
    wire_encode(&m, &b);
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_EINVAL);
    // ReplayStats: the new fields round-trip; one server's shard count reads as 1.
    m = (wire_msg_t){.type = WIRE_MSG_SAMPLE_REPLY};
    m.u.sample_reply = (wire_sample_reply_t){
        .id = 5,
        .status = WIRE_SAMPLE_NOT_READY,
        .stats = {.size = 9, .total_priority = 7.5, .min_priority = 0.25, .shard = 2, .shards = 3}};
    wire_encode(&m, &b);
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
    ck_assert_double_eq(o.u.sample_reply.stats.min_priority, 0.25);
    ck_assert_uint_eq(o.u.sample_reply.stats.shard, 2);
    ck_assert_uint_eq(o.u.sample_reply.stats.shards, 3);
    m.u.sample_reply.stats = (wire_replay_stats_t){.size = 9, .total_priority = 7.5};
    wire_encode(&m, &b);
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
    ck_assert_uint_eq(o.u.sample_reply.stats.shards, 1);
    ck_assert_uint_eq(o.u.sample_reply.stats.shard, 0);
    // A NaN total still reads as 0 (as before); a negative or infinite one, a bad minimum and
    // a shard beyond the count are refused: a sharded learner samples by these numbers.
    m.u.sample_reply.stats.total_priority = NAN;
    wire_encode(&m, &b);
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
    ck_assert_double_eq(o.u.sample_reply.stats.total_priority, 0.0);
    wire_replay_stats_t bad[] = {{.total_priority = -1.0},  {.total_priority = INFINITY},
                                 {.min_priority = NAN},     {.min_priority = -0.5},
                                 {.shard = 2, .shards = 2}, {.shard = 1}};
    for (size_t k = 0; k < APEX_ARRAY_LEN(bad); k++) {
        m.u.sample_reply.stats = bad[k];
        wire_encode(&m, &b);
        ck_assert_msg(wire_decode(d, b.data, b.len, &o) == APEX_EINVAL, "case %zu accepted", k);
    }
    wire_decoder_destroy(&d);
    wire_buf_fini(&b);
}
END_TEST

// WeightsRequest (actors and apex-eval --follow -> the learner's ROUTER): have_version
// survives the round trip at both ends of its range (0, "I hold nothing", is proto3's
// default and absent on the wire), the Envelope field is the contract's 9 (checked with the
// independent writer), and it is checked like every other message: version, truncation.
START_TEST(test_weights_request) {
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_decoder_t *d = wire_decoder_new(&s_lim);
    const uint64_t haves[] = {0, 1, (3ull << 32) | 17, UINT64_MAX};
    wire_msg_t m = {.type = WIRE_MSG_WEIGHTS_REQUEST}, o;
    for (size_t k = 0; k < sizeof haves / sizeof haves[0]; k++) {
        m.u.weights_request.have_version = haves[k];
        wire_encode(&m, &b);
        o = (wire_msg_t){.type = WIRE_MSG_NONE};
        o.u.weights_request.have_version = 12345; // must be overwritten, with 0 too
        ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
        ck_assert_int_eq(o.type, WIRE_MSG_WEIGHTS_REQUEST);
        ck_assert_uint_eq(o.u.weights_request.have_version, haves[k]);
        // A few bytes: far below the learner's ZMQ_MAXMSGSIZE on its weights ROUTER (4096).
        ck_assert_uint_le(b.len, 16);
    }
    ck_assert_str_eq(wire_msg_name(WIRE_MSG_WEIGHTS_REQUEST), "WeightsRequest");
    // Every prefix of the largest one is refused (UINT64_MAX is a 10-byte varint).
    for (size_t len = 0; len < b.len; len++) {
        ck_assert_msg(wire_decode(d, b.data, len, &o) != APEX_OK, "prefix of %zu/%zu accepted", len,
                      b.len);
    }
    wire_encode_version(&m, APEX_PROTOCOL_VERSION + 1, &b);
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_EVERSION);
    // Hand-written: Envelope{version, weights_request (field 9) = {have_version (1)}}.
    pb_t body = {.n = 0}, env = {.n = 0};
    pb_uint(&body, 1, (7ull << 32) | 5);
    pb_uint(&env, 1, APEX_PROTOCOL_VERSION);
    pb_bytes(&env, 9, body.b, body.n);
    ck_assert_int_eq(wire_decode(d, env.b, env.n, &o), APEX_OK);
    ck_assert_int_eq(o.type, WIRE_MSG_WEIGHTS_REQUEST);
    ck_assert_uint_eq(o.u.weights_request.have_version, (7ull << 32) | 5);
    // An empty body is a request from a peer that holds nothing.
    env.n = 0;
    pb_uint(&env, 1, APEX_PROTOCOL_VERSION);
    pb_bytes(&env, 9, "", 0);
    ck_assert_int_eq(wire_decode(d, env.b, env.n, &o), APEX_OK);
    ck_assert_int_eq(o.type, WIRE_MSG_WEIGHTS_REQUEST);
    ck_assert_uint_eq(o.u.weights_request.have_version, 0);
    wire_decoder_destroy(&d);
    wire_buf_fini(&b);
}
END_TEST

// Newest by version: newer and first are taken, a re-publish is the same, an older one is
// stale while the held version is heard (< 3 s) and taken once it is not.
START_TEST(test_weights_judge) {
    const uint64_t v1 = (1ull << 32) | 5, v2 = (2ull << 32) | 1;
    ck_assert_int_eq(wire_weights_judge(v1, 0, 0, 0), WIRE_WEIGHTS_TAKE);
    ck_assert_int_eq(wire_weights_judge(v1, 0, v2, 0), WIRE_WEIGHTS_TAKE); // nothing held
    ck_assert_int_eq(wire_weights_judge(v2, 1, v1, 0), WIRE_WEIGHTS_TAKE);
    ck_assert_int_eq(wire_weights_judge(v2, 1, v2, 99999), WIRE_WEIGHTS_SAME);
    ck_assert_int_eq(wire_weights_judge(v1, 1, v2, 0), WIRE_WEIGHTS_STALE);
    ck_assert_int_eq(wire_weights_judge(v1, 1, v2, WIRE_OLDER_WEIGHTS_AFTER_MS - 1),
                     WIRE_WEIGHTS_STALE);
    ck_assert_int_eq(wire_weights_judge(v1, 1, v2, WIRE_OLDER_WEIGHTS_AFTER_MS), WIRE_WEIGHTS_TAKE);
    ck_assert_int_eq(wire_weights_judge(0, 1, v2, WIRE_OLDER_WEIGHTS_AFTER_MS),
                     WIRE_WEIGHTS_TAKE); // a learner started afresh
}
END_TEST

// ---- frame mode (issue #27) --------------------------------------------------------------
// Stacks of K = 2 frames of FD = OBS / 2 elements. The fixture batch carries NF new frames
// numbered from FIRST: frame FIRST links to frame FIRST - 1 of an earlier batch, frame
// FIRST + 4 starts an episode (links to itself), and the rows name stacks in this batch and
// in earlier ones.

#define K 2
#define FD (OBS / K)
#define NF 6
#define FIRST 10
#define MAXF 32 // fixture capacity in frames

static const wire_limits_t s_limf = {.obs_dim = OBS,
                                     .n_actions = ACT,
                                     .num_params = 10,
                                     .max_count = 64,
                                     .max_episodes = 8,
                                     .frame_stack = K,
                                     .max_frames = 16};

static float s_frames[MAXF * FD];
static uint8_t s_frames8[MAXF * FD];
static uint32_t s_fprev[MAXF];
static uint64_t s_ofr[ROWS + 1], s_nfr[ROWS + 1]; // + 1: room for a forged extra row

static void s_fill_frames(void) {
    s_fill();
    for (int i = 0; i < MAXF * FD; i++) {
        s_frames[i] = 0.125f * (float)i - 2.0f;
        s_frames8[i] = (uint8_t)(251 * i + 3);
    }
    memcpy(s_frames8, s_nan_le, 4); // harmless as bytes
    for (int i = 0; i < MAXF; i++) {
        s_fprev[i] = i == 4 ? 0 : 1;
    }
    static const uint64_t of[ROWS] = {3, FIRST - 1, FIRST, FIRST + 2, FIRST + 4};
    static const uint64_t nf[ROWS] = {FIRST, FIRST + 1, FIRST + 3, FIRST + 3, FIRST + NF - 1};
    memcpy(s_ofr, of, sizeof of);
    memcpy(s_nfr, nf, sizeof nf);
}

// The fixture batch in frame mode, observations of dtype t.
static wire_msg_t s_frame_msg(uint32_t t) {
    wire_msg_t m = s_batch_msg();
    s_fill_frames();
    m.u.batch.obs = m.u.batch.next_obs = NULL;
    m.u.batch.obs_dtype = t;
    m.u.batch.frame_stack = K;
    m.u.batch.first_frame = FIRST;
    m.u.batch.frame_count = NF;
    m.u.batch.frames = t == WIRE_OBS_UINT8 ? (const void *)s_frames8 : (const void *)s_frames;
    m.u.batch.frame_prev = s_fprev;
    m.u.batch.obs_frames = s_ofr;
    m.u.batch.next_frames = s_nfr;
    return m;
}

// Decodes b with d and expects rc; with a non-NULL want, a message containing it.
static void s_expect(wire_decoder_t *d, const wire_buf_t *b, int rc, const char *want) {
    wire_msg_t o;
    int got = wire_decode(d, b->data, b->len, &o);
    const char *e = wire_decoder_last_error(d);
    ck_assert_msg(got == rc, "rc %d, expected %d (last error: %s)", got, rc, e);
    if (rc != APEX_OK) {
        ck_assert_int_eq(o.type, WIRE_MSG_TRANSITION_BATCH); // kind kept, views dropped
        ck_assert_ptr_null(o.u.batch.frames);
        ck_assert_ptr_null(o.u.batch.obs_frames);
    }
    ck_assert_msg(!want || strstr(e, want), "last error: %s (expected \"%s\")", e, want);
}

// The views of a decoded batch are read in place, so they must be aligned for their type
// (wire.c "Alignment of the views"); UBSan would also report a misaligned read.
static void s_check_aligned(const wire_batch_t *x) {
    ck_assert_uint_eq((uintptr_t)x->frame_prev % _Alignof(uint32_t), 0);
    ck_assert_uint_eq((uintptr_t)x->obs_frames % _Alignof(uint64_t), 0);
    ck_assert_uint_eq((uintptr_t)x->next_frames % _Alignof(uint64_t), 0);
    ck_assert_uint_eq((uintptr_t)x->frames % _Alignof(float), 0);
    ck_assert_uint_eq((uintptr_t)x->rewards % _Alignof(float), 0);
}

START_TEST(test_frame_batch_round_trip) {
    wire_limits_t lim8 = s_limf;
    lim8.obs_dtype = WIRE_OBS_UINT8;
    wire_decoder_t *d[2] = {wire_decoder_new(&s_limf), wire_decoder_new(&lim8)};
    const uint32_t dtypes[2] = {WIRE_OBS_FLOAT32, WIRE_OBS_UINT8};
    wire_buf_t b;
    wire_buf_init(&b, 0);
    for (int k = 0; k < 2; k++) {
        wire_msg_t m = s_frame_msg(dtypes[k]), o;
        wire_encode(&m, &b);
        ck_assert_int_eq(wire_decode(d[k], b.data, b.len, &o), APEX_OK);
        const wire_batch_t *x = &o.u.batch;
        size_t fbytes = (size_t)NF * FD * wire_obs_elem_bytes(dtypes[k]);
        ck_assert_uint_eq(x->obs_dtype, dtypes[k]);
        ck_assert_uint_eq(x->frame_stack, K);
        ck_assert_uint_eq(x->first_frame, FIRST);
        ck_assert_uint_eq(x->frame_count, NF);
        ck_assert_uint_eq(x->count, ROWS);
        ck_assert_uint_eq(x->obs_dim, OBS);
        ck_assert_ptr_null(x->obs);
        ck_assert_ptr_null(x->next_obs);
        ck_assert_mem_eq(x->frames, m.u.batch.frames, fbytes);
        ck_assert_mem_eq(x->frame_prev, s_fprev, NF * sizeof(uint32_t));
        ck_assert_mem_eq(x->obs_frames, s_ofr, ROWS * sizeof *s_ofr);
        ck_assert_mem_eq(x->next_frames, s_nfr, ROWS * sizeof *s_nfr);
        ck_assert_mem_eq(x->actions, s_act, sizeof s_act);
        ck_assert_mem_eq(x->rewards, s_rew, sizeof s_rew);
        ck_assert_mem_eq(x->discounts, s_disc, sizeof s_disc);
        ck_assert_mem_eq(x->priorities, s_prio, sizeof s_prio);
        ck_assert_uint_eq(x->seq, 77);
        s_check_aligned(x);
        // Carrying each frame once: the whole-observation batch of the same rows carries
        // 2 * ROWS stacks of OBS elements, this one NF frames of FD (and 20 bytes a row, 4 a
        // frame of references).
        ck_assert_uint_lt(fbytes, (size_t)2 * ROWS * OBS * wire_obs_elem_bytes(dtypes[k]));

        // Frames only (the rows they belong to come later): count 0, no row views.
        m.u.batch.count = 0;
        wire_encode(&m, &b);
        ck_assert_int_eq(wire_decode(d[k], b.data, b.len, &o), APEX_OK);
        ck_assert_uint_eq(x->count, 0);
        ck_assert_uint_eq(x->frame_count, NF);
        ck_assert_mem_eq(x->frames, m.u.batch.frames, fbytes);
        ck_assert_ptr_null(x->actions);
        ck_assert_ptr_null(x->rewards);
        ck_assert_ptr_null(x->priorities);
        ck_assert_ptr_null(x->obs_frames);
        ck_assert_ptr_null(x->next_frames);

        // Rows only, over frames of earlier batches: frame_count 0, first_frame the next
        // frame's number.
        m = s_frame_msg(dtypes[k]);
        m.u.batch.frame_count = 0;
        m.u.batch.first_frame = FIRST + NF;
        m.u.batch.frames = NULL, m.u.batch.frame_prev = NULL;
        wire_encode(&m, &b);
        ck_assert_int_eq(wire_decode(d[k], b.data, b.len, &o), APEX_OK);
        ck_assert_uint_eq(x->frame_count, 0);
        ck_assert_uint_eq(x->first_frame, FIRST + NF);
        ck_assert_ptr_null(x->frames);
        ck_assert_ptr_null(x->frame_prev);
        ck_assert_mem_eq(x->next_frames, s_nfr, ROWS * sizeof *s_nfr);
        s_check_aligned(x);
    }
    // Every prefix of a frame-mode batch is refused.
    wire_msg_t m = s_frame_msg(WIRE_OBS_UINT8), o;
    wire_encode(&m, &b);
    for (size_t len = 0; len < b.len; len++) {
        ck_assert_msg(wire_decode(d[1], b.data, len, &o) != APEX_OK, "prefix of %zu/%zu accepted",
                      len, b.len);
    }
    wire_decoder_destroy(&d[0]);
    wire_decoder_destroy(&d[1]);
    wire_buf_fini(&b);
}
END_TEST

// A decoder takes exactly the run's layout: whole observations when frame_stack is 0, frames
// of its own K otherwise; the message names both values.
START_TEST(test_frame_layout_refused) {
    wire_decoder_t *whole = wire_decoder_new(&s_lim), *frames = wire_decoder_new(&s_limf);
    wire_limits_t lim3 = s_limf;
    lim3.obs_dim = 6, lim3.frame_stack = 3;
    wire_decoder_t *frames3 = wire_decoder_new(&lim3);
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_msg_t m = s_batch_msg();
    wire_encode(&m, &b);
    s_expect(whole, &b, APEX_OK, NULL);
    s_expect(frames, &b, APEX_EINVAL, "whole observations where frames are configured");
    s_expect(frames, &b, APEX_EINVAL, "the run's is 2");
    m = s_frame_msg(WIRE_OBS_FLOAT32);
    wire_encode(&m, &b);
    s_expect(frames, &b, APEX_OK, NULL);
    s_expect(whole, &b, APEX_EINVAL, "frame mode not configured");
    s_expect(whole, &b, APEX_EINVAL, "frame_stack 2");
    s_expect(frames3, &b, APEX_EINVAL, "frame_stack 2, the run's is 3");
    // A K = 3 batch (obs_dim 6) to a K = 2 run.
    m.u.batch.obs_dim = 6, m.u.batch.frame_stack = 3, m.u.batch.frame_count = 4;
    wire_encode(&m, &b);
    s_expect(frames, &b, APEX_EINVAL, "frame_stack 3, the run's is 2");
    // The right K and the wrong obs_dim: checked as ever.
    m.u.batch.frame_stack = 2;
    wire_encode(&m, &b);
    s_expect(frames, &b, APEX_EINVAL, "obs_dim 6, expected 4");
    wire_decoder_destroy(&whole);
    wire_decoder_destroy(&frames);
    wire_decoder_destroy(&frames3);
    wire_buf_fini(&b);
}
END_TEST

// Byte lengths and scalars of a forged frame-mode batch (float32, the fixture's arrays).
typedef struct {
    uint64_t frame_stack, first_frame;
    uint32_t count, frame_count, obs_dim;
    size_t obs, next, frames, prev, ofr, nfr; // bytes
    uint64_t codec;                           // frame_codec (0: field absent)
    size_t sizes;                             // bytes of frame_sizes sent (s_fsizes)
} s_flens;
static uint32_t s_fsizes[MAXF + 1];

// The fixture batch's lengths, all consistent.
static s_flens s_flens_ok(void) {
    return (s_flens){.frame_stack = K,
                     .first_frame = FIRST,
                     .count = ROWS,
                     .frame_count = NF,
                     .obs_dim = OBS,
                     .frames = (size_t)NF * FD * 4,
                     .prev = NF * 4,
                     .ofr = ROWS * 8,
                     .nfr = ROWS * 8};
}

// Envelope{TransitionBatch} with the fixture's arrays cut to l's lengths: what a broken or
// hostile peer may send (wire_encode asserts on such input).
static void s_forge_frames(pb_t *env, const s_flens *l) {
    s_fill_frames();
    pb_t body = {.n = 0};
    pb_uint(&body, 1, 1);
    pb_uint(&body, 4, l->count);
    pb_uint(&body, 5, l->obs_dim);
    if (l->obs) {
        pb_bytes(&body, 6, s_obs, l->obs);
    }
    pb_bytes(&body, 7, s_act, (size_t)l->count * 4);
    pb_bytes(&body, 8, s_rew, (size_t)l->count * 4);
    pb_bytes(&body, 9, s_disc, (size_t)l->count * 4);
    if (l->next) {
        pb_bytes(&body, 10, s_next, l->next);
    }
    pb_uint(&body, 15, l->frame_stack);
    pb_uint(&body, 16, l->first_frame);
    pb_uint(&body, 17, l->frame_count);
    pb_bytes(&body, 18, s_frames, l->frames);
    pb_bytes(&body, 19, s_fprev, l->prev);
    pb_bytes(&body, 20, s_ofr, l->ofr);
    pb_bytes(&body, 21, s_nfr, l->nfr);
    if (l->codec) {
        pb_uint(&body, 22, l->codec);
    }
    if (l->sizes) {
        pb_bytes(&body, 23, s_fsizes, l->sizes);
    }
    env->n = 0;
    pb_uint(env, 1, APEX_PROTOCOL_VERSION);
    pb_bytes(env, 2, body.b, body.n);
}

// Decodes a forged batch with d and expects rc and (unless NULL) a message containing want.
static void s_expect_forged(wire_decoder_t *d, const s_flens *l, int rc, const char *want) {
    static pb_t p; // 4 KiB: not on the stack
    s_forge_frames(&p, l);
    wire_buf_t b = {.data = p.b, .len = p.n};
    s_expect(d, &b, rc, want);
}

// Lengths that do not match the counts (EPROTO), and the counts themselves (EINVAL).
START_TEST(test_frame_lengths_refused) {
    wire_decoder_t *d = wire_decoder_new(&s_limf), *whole = wire_decoder_new(&s_lim);
    s_flens l = s_flens_ok();
    s_expect_forged(d, &l, APEX_OK, NULL); // the forge itself is valid
    // Whole observations besides the frames.
    l.obs = ROWS * OBS * 4;
    s_expect_forged(d, &l, APEX_EPROTO, "must be empty");
    l = s_flens_ok(), l.next = ROWS * OBS * 4;
    s_expect_forged(d, &l, APEX_EPROTO, "must be empty");
    // The frames array truncated (a byte short, a frame short, absent) and oversized (a
    // byte over, a frame over, twice the frames).
    const size_t fb = (size_t)NF * FD * 4;
    const size_t bad_frames[] = {fb - 1, fb - FD * 4, 0, fb + 1, fb + FD * 4, 2 * fb};
    for (size_t k = 0; k < APEX_ARRAY_LEN(bad_frames); k++) {
        l = s_flens_ok(), l.frames = bad_frames[k];
        s_expect_forged(d, &l, APEX_EPROTO, "frame array lengths");
    }
    // Links, and the rows' frame numbers, one element short or over.
    l = s_flens_ok(), l.prev -= 4;
    s_expect_forged(d, &l, APEX_EPROTO, "frame array lengths");
    l = s_flens_ok(), l.prev += 4;
    s_expect_forged(d, &l, APEX_EPROTO, "frame array lengths");
    l = s_flens_ok(), l.ofr -= 8;
    s_expect_forged(d, &l, APEX_EPROTO, "frame array lengths");
    l = s_flens_ok(), l.nfr += 8;
    s_expect_forged(d, &l, APEX_EPROTO, "frame array lengths");
    l = s_flens_ok(), l.ofr = 4 * ROWS; // uint32 where uint64 are due
    s_expect_forged(d, &l, APEX_EPROTO, "frame array lengths");
    // More frames than max_frames (16), with consistent lengths.
    l = s_flens_ok(), l.frame_count = 17, l.frames = 17 * FD * 4, l.prev = 17 * 4;
    s_expect_forged(d, &l, APEX_EINVAL, "17 frames, at most 16");
    l.frame_count = 16, l.frames = 16 * FD * 4, l.prev = 16 * 4;
    s_expect_forged(d, &l, APEX_OK, NULL);
    // max_frames 0 means max_count.
    wire_limits_t lim0 = s_limf;
    lim0.max_frames = 0, lim0.max_count = 8;
    wire_decoder_t *d0 = wire_decoder_new(&lim0);
    l = s_flens_ok(), l.frame_count = 8, l.frames = 8 * FD * 4, l.prev = 8 * 4;
    s_expect_forged(d0, &l, APEX_OK, NULL);
    l.frame_count = 9, l.frames = 9 * FD * 4, l.prev = 9 * 4;
    s_expect_forged(d0, &l, APEX_EINVAL, "9 frames, at most 8");
    wire_decoder_destroy(&d0);
    // Frames only is a batch; neither rows nor frames is not.
    l = s_flens_ok(), l.count = 0, l.ofr = l.nfr = 0;
    s_expect_forged(d, &l, APEX_OK, NULL);
    l.frame_count = 0, l.frames = l.prev = 0;
    s_expect_forged(d, &l, APEX_EINVAL, "count 0 not in [1, 64]");
    // A stack of one frame is not frame mode.
    l = s_flens_ok(), l.frame_stack = 1;
    s_expect_forged(d, &l, APEX_EINVAL, "frame_stack 1, the run's is 2");
    // obs_dim not a multiple of K (a run of 5 elements in stacks of 2 cannot exist; the
    // decoder refuses rather than reads a partial frame).
    wire_limits_t lim5 = s_limf;
    lim5.obs_dim = 5;
    wire_decoder_t *d5 = wire_decoder_new(&lim5);
    l = s_flens_ok(), l.obs_dim = 5;
    s_expect_forged(d5, &l, APEX_EINVAL, "obs_dim 5 is not a multiple of frame_stack 2");
    wire_decoder_destroy(&d5);
    // A whole-observation batch with any frame field set: its peer is broken.
    s_flens w = {.count = ROWS, .obs_dim = OBS, .obs = ROWS * OBS * 4, .next = ROWS * OBS * 4};
    s_expect_forged(whole, &w, APEX_OK, NULL);
    w.first_frame = 1;
    s_expect_forged(whole, &w, APEX_EPROTO, "frame fields with frame_stack 0");
    w.first_frame = 0, w.frame_count = 1;
    s_expect_forged(whole, &w, APEX_EPROTO, "frame fields with frame_stack 0");
    w.frame_count = 0, w.nfr = ROWS * 8;
    s_expect_forged(whole, &w, APEX_EPROTO, "frame fields with frame_stack 0");
    wire_decoder_destroy(&d);
    wire_decoder_destroy(&whole);
}
END_TEST

// Sets the fixture batch's first_frame to first, moving the rows' frame numbers with it.
static void s_move_frames(wire_msg_t *m, uint64_t first) {
    for (int r = 0; r < ROWS; r++) {
        s_ofr[r] = s_ofr[r] - FIRST + first;
        s_nfr[r] = s_nfr[r] - FIRST + first;
    }
    m->u.batch.first_frame = first;
}

// The values: finite float32 frames, frame numbers below WIRE_FRAME_MAX, no link before
// frame 0, rows naming frames sent so far with next_obs later than obs; the other row checks
// as in whole-observation batches.
START_TEST(test_frame_values_refused) {
    wire_limits_t lim = s_limf;
    lim.max_actors = 4;
    wire_decoder_t *d = wire_decoder_new(&lim);
    wire_buf_t b;
    wire_buf_init(&b, 0);
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int k = 0; k < 3; k++) {
        wire_msg_t m = s_frame_msg(WIRE_OBS_FLOAT32);
        s_frames[NF * FD - 1] = bad[k]; // the last element of the last frame
        wire_encode(&m, &b);
        s_expect(d, &b, APEX_EINVAL, "non-finite frame");
        s_frames[NF * FD] = bad[k]; // past the frames sent: not read
        s_frames[NF * FD - 1] = 0.0f;
        wire_encode(&m, &b);
        s_expect(d, &b, APEX_OK, NULL);
    }
    // Frame numbers: up to WIRE_FRAME_MAX, and no further (nor wrapping around).
    wire_msg_t m = s_frame_msg(WIRE_OBS_FLOAT32);
    s_move_frames(&m, WIRE_FRAME_MAX - NF);
    wire_encode(&m, &b);
    s_expect(d, &b, APEX_OK, NULL);
    m = s_frame_msg(WIRE_OBS_FLOAT32);
    s_move_frames(&m, WIRE_FRAME_MAX - NF + 1);
    wire_encode(&m, &b);
    s_expect(d, &b, APEX_EINVAL, "above 4611686018427387904");
    m = s_frame_msg(WIRE_OBS_FLOAT32);
    s_move_frames(&m, UINT64_MAX - 2);
    wire_encode(&m, &b);
    s_expect(d, &b, APEX_EINVAL, "above");
    // Links: back to frame 0 at most.
    m = s_frame_msg(WIRE_OBS_FLOAT32);
    s_fprev[0] = FIRST, s_fprev[NF - 1] = FIRST + NF - 1;
    wire_encode(&m, &b);
    s_expect(d, &b, APEX_OK, NULL);
    s_fprev[0] = FIRST + 1;
    wire_encode(&m, &b);
    s_expect(d, &b, APEX_EINVAL, "frame 10 links 11 back, before frame 0");
    s_fprev[0] = 1, s_fprev[NF - 1] = UINT32_MAX;
    wire_encode(&m, &b);
    s_expect(d, &b, APEX_EINVAL, "frame 15 links 4294967295 back");
    // Rows: obs < next_obs < first_frame + frame_count.
    m = s_frame_msg(WIRE_OBS_FLOAT32);
    s_ofr[1] = s_nfr[1];
    wire_encode(&m, &b);
    s_expect(d, &b, APEX_EINVAL, "row 1 names frames 11 -> 11");
    m = s_frame_msg(WIRE_OBS_FLOAT32);
    s_ofr[2] = s_nfr[2] + 1;
    wire_encode(&m, &b);
    s_expect(d, &b, APEX_EINVAL, "row 2");
    m = s_frame_msg(WIRE_OBS_FLOAT32);
    s_nfr[4] = FIRST + NF; // not sent yet
    wire_encode(&m, &b);
    s_expect(d, &b, APEX_EINVAL, "row 4 names frames 14 -> 16, not obs < next < 16");
    m = s_frame_msg(WIRE_OBS_FLOAT32);
    s_ofr[0] = UINT64_MAX;
    wire_encode(&m, &b);
    s_expect(d, &b, APEX_EINVAL, "row 0");
    m = s_frame_msg(WIRE_OBS_FLOAT32); // rows only: every frame number below first_frame
    m.u.batch.frame_count = 0, m.u.batch.frames = NULL, m.u.batch.frame_prev = NULL;
    wire_encode(&m, &b);
    s_expect(d, &b, APEX_EINVAL, "not obs < next < 10");
    m.u.batch.first_frame = FIRST + NF;
    wire_encode(&m, &b);
    s_expect(d, &b, APEX_OK, NULL);
    // The other row checks are those of whole-observation batches.
    m = s_frame_msg(WIRE_OBS_FLOAT32);
    s_act[3] = ACT;
    wire_encode(&m, &b);
    s_expect(d, &b, APEX_EINVAL, "action 2 at row 3");
    m = s_frame_msg(WIRE_OBS_FLOAT32);
    s_rew[0] = NAN;
    wire_encode(&m, &b);
    s_expect(d, &b, APEX_EINVAL, "non-finite observation or reward");
    m = s_frame_msg(WIRE_OBS_FLOAT32);
    s_disc[0] = 1.5f;
    wire_encode(&m, &b);
    s_expect(d, &b, APEX_EINVAL, "discount");
    m = s_frame_msg(WIRE_OBS_FLOAT32);
    s_prio[0] = -1.0f;
    wire_encode(&m, &b);
    s_expect(d, &b, APEX_EINVAL, "priority");
    m = s_frame_msg(WIRE_OBS_FLOAT32);
    m.u.batch.actor_id = 4;
    wire_encode(&m, &b);
    s_expect(d, &b, APEX_EINVAL, "num_actors");
    m.u.batch.actor_id = 0, m.u.batch.seq = WIRE_SEQ_MAX + 1;
    wire_encode(&m, &b);
    s_expect(d, &b, APEX_EINVAL, "seq");
    m = s_frame_msg(WIRE_OBS_UINT8); // a uint8 batch to a float32 run
    wire_encode(&m, &b);
    s_expect(d, &b, APEX_EINVAL, "uint8");
    wire_decoder_destroy(&d);
    wire_buf_fini(&b);
}
END_TEST

// wire_max_message_bytes admits the largest frame-mode batch: max_frames frames and
// max_count rows with every scalar at its longest varint. The limits make the batch the
// largest message (many frames, few rows), so the frame term is what is tested.
// Compressed frames ([replay] compress): a round trip with real zstd blobs, and every way a
// peer can get the codec or the blobs' sizes wrong (what the blobs decompress to is the
// replay's to check: replay/store.h store_check_framed).
START_TEST(test_frame_codec) {
    wire_limits_t limz = s_limf;
    limz.frame_codec = FCODEC_ZSTD;
    wire_decoder_t *dz = wire_decoder_new(&limz), *d = wire_decoder_new(&s_limf);
    s_fill_frames();
    fcodec_t *fc = fcodec_new(FCODEC_ZSTD, 0);
    static uint8_t blobs[NF * (FD * 4 + 64)];
    uint32_t sizes[NF];
    size_t at = 0;
    for (int i = 0; i < NF; i++) {
        sizes[i] = (uint32_t)fcodec_compress(fc, s_frames + i * FD, FD * 4, blobs + at,
                                             FD * 4 + 64);
        at += sizes[i];
    }
    wire_msg_t m = {.type = WIRE_MSG_TRANSITION_BATCH}, o;
    m.u.batch = (wire_batch_t){.actor_id = 1,
                               .count = ROWS,
                               .obs_dim = OBS,
                               .actions = (const int32_t *)s_act,
                               .rewards = s_rew,
                               .discounts = s_disc,
                               .frame_stack = K,
                               .first_frame = FIRST,
                               .frame_count = NF,
                               .frames = blobs,
                               .frame_prev = s_fprev,
                               .obs_frames = s_ofr,
                               .next_frames = s_nfr,
                               .frame_codec = FCODEC_ZSTD,
                               .frame_sizes = sizes};
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_encode(&m, &b);
    ck_assert_int_eq(wire_decode(dz, b.data, b.len, &o), APEX_OK);
    ck_assert_uint_eq(o.u.batch.frame_codec, FCODEC_ZSTD);
    ck_assert_mem_eq(o.u.batch.frame_sizes, sizes, sizeof sizes);
    ck_assert_mem_eq(o.u.batch.frames, blobs, at);
    ck_assert_uint_le(b.len, wire_max_message_bytes(&limz));
    // The run's codec and the batch's must be the same, both ways.
    s_expect(d, &b, APEX_EINVAL,
             "compressed with zstd (codec 2), the run's [replay] compress is none");
    s_flens l = s_flens_ok(); // raw frames
    s_expect_forged(dz, &l, APEX_EINVAL,
                    "compressed with none (codec 0), the run's [replay] compress is zstd");
    // Blob sizes: as many as frames, each in [1, the codec's bound], summing to the bytes.
    for (int i = 0; i < NF; i++) {
        s_fsizes[i] = (uint32_t)(l.frames / NF);
    }
    l.codec = FCODEC_ZSTD, l.sizes = NF * 4;
    s_expect_forged(dz, &l, APEX_OK, NULL);
    l.sizes = (NF - 1) * 4;
    s_expect_forged(dz, &l, APEX_EPROTO, "frame array lengths");
    l.sizes = NF * 4, s_fsizes[0] += 1;
    s_expect_forged(dz, &l, APEX_EPROTO, "sizes sum to");
    s_fsizes[0] = 0, s_fsizes[1] += (uint32_t)(l.frames / NF);
    s_expect_forged(dz, &l, APEX_EINVAL, "compressed frame 0 of 0 bytes");
    s_fsizes[0] = (uint32_t)fcodec_bound(FCODEC_ZSTD, FD * 4) + 1;
    s_expect_forged(dz, &l, APEX_EINVAL, "not in [1,");
    // Sizes without a codec; a codec without frame mode.
    l = s_flens_ok(), l.sizes = NF * 4;
    s_expect_forged(d, &l, APEX_EPROTO, "frame array lengths");
    wire_decoder_t *whole = wire_decoder_new(&s_lim);
    s_flens w = {.count = ROWS,
                 .obs_dim = OBS,
                 .obs = ROWS * OBS * 4,
                 .next = ROWS * OBS * 4,
                 .codec = FCODEC_LZ4};
    s_expect_forged(whole, &w, APEX_EPROTO, "frame fields with frame_stack 0");
    wire_decoder_destroy(&whole);
    fcodec_destroy(&fc);
    wire_buf_fini(&b);
    wire_decoder_destroy(&dz);
    wire_decoder_destroy(&d);
}
END_TEST

START_TEST(test_frame_max_message_bytes) {
    enum { DIM = 64, KK = 4, MAXC = 8, NFRAMES = 1024, NA = 6 };
    for (uint32_t t = 0; t < 2; t++) {
        for (uint32_t ad = 0; ad <= 3; ad += 3) { // discrete, then 3 continuous floats
            wire_limits_t lim = {.obs_dim = DIM,
                                 .obs_dtype = t,
                                 .n_actions = ad ? 0 : NA,
                                 .action_dim = ad,
                                 .max_count = MAXC,
                                 .frame_stack = KK,
                                 .max_frames = NFRAMES};
            wire_limits_t whole = lim;
            whole.frame_stack = 0, whole.max_frames = 0;
            size_t max = wire_max_message_bytes(&lim);
            ck_assert_uint_ge(max, wire_max_message_bytes(&whole)); // never less than today's
            size_t fbytes = (size_t)NFRAMES * (DIM / KK) * wire_obs_elem_bytes(t);
            uint8_t *frames = calloc(1, fbytes);
            uint32_t *prev = malloc(NFRAMES * sizeof *prev);
            uint64_t ofr[MAXC], nfr[MAXC];
            int32_t act[MAXC];
            float cont[MAXC * 3], rew[MAXC], disc[MAXC], prio[MAXC];
            const uint64_t first = WIRE_FRAME_MAX - NFRAMES; // 9-byte varints
            for (size_t i = 0; t == WIRE_OBS_UINT8 && i < fbytes; i++) {
                frames[i] = (uint8_t)~i; // float32 frames stay 0.0f
            }
            for (uint32_t i = 0; i < NFRAMES; i++) {
                prev[i] = i % 100 == 0 ? 0 : 1;
            }
            for (int r = 0; r < MAXC; r++) {
                ofr[r] = first + (uint64_t)r, nfr[r] = first + NFRAMES - 1;
                act[r] = NA - 1, rew[r] = -1e30f, disc[r] = 1.0f, prio[r] = WIRE_PRIORITY_MAX;
                cont[3 * r] = cont[3 * r + 1] = cont[3 * r + 2] = -1e30f;
            }
            wire_msg_t m = {.type = WIRE_MSG_TRANSITION_BATCH}, o;
            m.u.batch = (wire_batch_t){.actor_id = UINT32_MAX,
                                       .epoch = UINT64_MAX,
                                       .seq = WIRE_SEQ_MAX,
                                       .weights_version = UINT64_MAX,
                                       .count = MAXC,
                                       .obs_dim = DIM,
                                       .obs_dtype = t,
                                       .actions = ad ? NULL : act,
                                       .action_dim = ad,
                                       .cont_actions = ad ? cont : NULL,
                                       .rewards = rew,
                                       .discounts = disc,
                                       .priorities = prio,
                                       .frame_stack = KK,
                                       .first_frame = first,
                                       .frame_count = NFRAMES,
                                       .frames = frames,
                                       .frame_prev = prev,
                                       .obs_frames = ofr,
                                       .next_frames = nfr};
            wire_buf_t b;
            wire_buf_init(&b, 0);
            wire_encode(&m, &b);
            ck_assert_msg(b.len <= max, "dtype %u, action_dim %u: %zu bytes, limit %zu", t, ad,
                          b.len, max);
            ck_assert_uint_gt(b.len, wire_max_message_bytes(&whole)); // the frame term counts
            wire_decoder_t *d = wire_decoder_new(&lim);               // derived max_message_bytes
            ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
            ck_assert_mem_eq(o.u.batch.frames, frames, fbytes);
            ck_assert_mem_eq(o.u.batch.frame_prev, prev, NFRAMES * sizeof *prev);
            wire_decoder_destroy(&d);
            wire_buf_fini(&b);
            free(frames);
            free(prev);
        }
    }
}
END_TEST

// A Weights message encoded around its params (wire_weights_encode_hole), the floats then
// written at the offset it returns, is byte for byte wire_encode's message: for counts whose
// length prefixes take 1, 2 and 3 varint bytes and header fields of every varint size (0
// fields are left out by protobuf), at an unaligned offset or not.
START_TEST(test_weights_hole_equals_encode) {
    const uint32_t counts[] = {1, 31, 32, 4095, 70000};
    const uint64_t big[] = {0, 1, 300, (uint64_t)1 << 40, UINT64_MAX};
    wire_buf_t ref;
    wire_buf_init(&ref, 16);
    float *params = xmalloc(70000 * sizeof(float));
    for (uint32_t i = 0; i < 70000; i++) {
        params[i] = (float)i * 0.5f - 17.25f;
    }
    int unaligned = 0;
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        for (size_t k = 0; k < sizeof big / sizeof big[0]; k++) {
            wire_weights_t w = {.version = big[k] ? big[k] : 1,
                                .learner_step = big[(k + 1) % 5],
                                .env_frames = big[(k + 2) % 5],
                                .num_params = counts[c],
                                .params = params};
            wire_msg_t m = {.type = WIRE_MSG_WEIGHTS};
            m.u.weights = w;
            wire_encode(&m, &ref);
            w.params = NULL; // not read
            size_t n = wire_weights_size(&w);
            ck_assert_uint_eq(n, ref.len);
            uint8_t *out = xmalloc(n);
            memset(out, 0xAB, n);
            size_t at = wire_weights_encode_hole(&w, out, n);
            ck_assert_uint_le(at + (size_t)counts[c] * 4, n);
            unaligned += at % 4 != 0;
            memcpy(out + at, params, (size_t)counts[c] * 4);
            ck_assert_int_eq(memcmp(out, ref.data, n), 0);
            xfree(out);
        }
    }
    ck_assert_int_gt(unaligned, 0); // the floats may land anywhere: the callers must not care
    xfree(params);
    wire_buf_fini(&ref);
}
END_TEST

// ---- deterministic runs ([run] deterministic) ---------------------------------------------
// The det fields of TransitionBatch, SampleRequest, ReplayStats, PriorityUpdate, Weights and
// WeightsRequest: round trips at their edges, what the decoder refuses (each with a message
// naming the field), and that a message with every det field 0 is byte for byte what a
// build before them sent (checked against the independent writer above: proto3 leaves 0
// fields out).

static void pb_fixed32(pb_t *p, int field, float v) {
    pb_varint(p, ((uint64_t)field << 3) | 5);
    memcpy(p->b + p->n, &v, 4); // little-endian, as the wire
    p->n += 4;
}
static void pb_fixed64(pb_t *p, int field, double v) {
    pb_varint(p, ((uint64_t)field << 3) | 1);
    memcpy(p->b + p->n, &v, 8);
    p->n += 8;
}
// Envelope{version, body as field}.
static void pb_envelope(pb_t *env, int field, const pb_t *body) {
    env->n = 0;
    pb_uint(env, 1, APEX_PROTOCOL_VERSION);
    pb_bytes(env, field, body->b, body->n);
}

// Decodes len bytes with d, expects rc; on failure, a last error naming each of want[].
static void s_expect_det(wire_decoder_t *d, const void *buf, size_t len, int rc, const char *want1,
                         const char *want2) {
    wire_msg_t o;
    int got = wire_decode(d, buf, len, &o);
    const char *e = wire_decoder_last_error(d);
    ck_assert_msg(got == rc, "rc %d, expected %d (last error: %s)", got, rc, e);
    ck_assert_msg(!want1 || strstr(e, want1), "last error: %s (expected \"%s\")", e, want1);
    ck_assert_msg(!want2 || strstr(e, want2), "last error: %s (expected \"%s\")", e, want2);
}

// The fixture batch, ended or not, of period det_period; rows carries the rows (0: none).
static wire_msg_t s_det_batch(uint64_t det_period, int end, uint32_t rows) {
    wire_msg_t m = s_batch_msg();
    m.u.batch.det_period = det_period;
    m.u.batch.det_period_end = end;
    if (rows == 0) {
        wire_batch_t *b = &m.u.batch;
        b->count = 0;
        b->obs = b->next_obs = NULL;
        b->actions = NULL;
        b->rewards = b->discounts = b->priorities = NULL;
    }
    return m;
}

START_TEST(test_det_batch_round_trip) {
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_decoder_t *d = wire_decoder_new(&s_lim);
    wire_msg_t o;
    // A period's batches with rows, its last one marked; the period at its bounds.
    const uint64_t periods[] = {1, 2, 300, 1ull << 40, WIRE_SEQ_MAX};
    for (size_t k = 0; k < APEX_ARRAY_LEN(periods); k++) {
        for (int end = 0; end < 2; end++) {
            wire_msg_t m = s_det_batch(periods[k], end, ROWS);
            wire_encode(&m, &b);
            ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
            ck_assert_uint_eq(o.u.batch.det_period, periods[k]);
            ck_assert_int_eq(o.u.batch.det_period_end, end);
            ck_assert_uint_eq(o.u.batch.count, ROWS);
            ck_assert_mem_eq(o.u.batch.obs, s_obs, sizeof s_obs);
            ck_assert_mem_eq(o.u.batch.priorities, s_prio, sizeof s_prio);
            ck_assert_uint_eq(o.u.batch.seq, 77);
        }
    }
    // A period's last batch may carry no rows (the period ends when it ends).
    wire_msg_t m = s_det_batch(5, 1, 0);
    wire_encode(&m, &b);
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
    ck_assert_int_eq(o.type, WIRE_MSG_TRANSITION_BATCH);
    ck_assert_uint_eq(o.u.batch.count, 0);
    ck_assert_uint_eq(o.u.batch.det_period, 5);
    ck_assert_int_eq(o.u.batch.det_period_end, 1);
    ck_assert_uint_eq(o.u.batch.actor_id, 3);
    ck_assert_uint_eq(o.u.batch.seq, 77);
    ck_assert_uint_eq(o.u.batch.frame_count, 0);
    ck_assert_ptr_null(o.u.batch.priorities);
    // Any other batch without rows is refused as before: one of the period that does not end
    // it, and one of a run that is not deterministic.
    m = s_det_batch(5, 0, 0);
    wire_encode(&m, &b);
    s_expect_det(d, b.data, b.len, APEX_EINVAL, "count 0", NULL);
    m = s_det_batch(0, 0, 0);
    wire_encode(&m, &b);
    s_expect_det(d, b.data, b.len, APEX_EINVAL, "count 0", NULL);
    wire_decoder_destroy(&d);
    wire_buf_fini(&b);
}
END_TEST

// Frame mode: a period's last batch may have neither rows nor frames; a batch of frames only
// keeps its period; one with neither that does not end a period is refused.
START_TEST(test_det_frame_batch_round_trip) {
    wire_limits_t lim8 = s_limf;
    lim8.obs_dtype = WIRE_OBS_UINT8;
    wire_decoder_t *d[2] = {wire_decoder_new(&s_limf), wire_decoder_new(&lim8)};
    const uint32_t dtypes[2] = {WIRE_OBS_FLOAT32, WIRE_OBS_UINT8};
    wire_buf_t b;
    wire_buf_init(&b, 0);
    for (int k = 0; k < 2; k++) {
        wire_msg_t m = s_frame_msg(dtypes[k]), o;
        m.u.batch.det_period = 9;
        m.u.batch.det_period_end = 1;
        wire_encode(&m, &b);
        ck_assert_int_eq(wire_decode(d[k], b.data, b.len, &o), APEX_OK);
        ck_assert_uint_eq(o.u.batch.det_period, 9);
        ck_assert_int_eq(o.u.batch.det_period_end, 1);
        ck_assert_uint_eq(o.u.batch.count, ROWS);
        ck_assert_uint_eq(o.u.batch.frame_count, NF);
        ck_assert_mem_eq(o.u.batch.next_frames, s_nfr, ROWS * sizeof *s_nfr);
        // Frames and no rows, within the period.
        m.u.batch.det_period_end = 0;
        m.u.batch.count = 0;
        m.u.batch.obs_frames = m.u.batch.next_frames = NULL;
        m.u.batch.actions = NULL;
        m.u.batch.rewards = m.u.batch.discounts = m.u.batch.priorities = NULL;
        wire_encode(&m, &b);
        ck_assert_int_eq(wire_decode(d[k], b.data, b.len, &o), APEX_OK);
        ck_assert_uint_eq(o.u.batch.count, 0);
        ck_assert_uint_eq(o.u.batch.frame_count, NF);
        ck_assert_uint_eq(o.u.batch.det_period, 9);
        ck_assert_int_eq(o.u.batch.det_period_end, 0);
        // Neither frames nor rows: the period's end only.
        m.u.batch.frame_count = 0;
        m.u.batch.frames = NULL;
        m.u.batch.frame_prev = NULL;
        m.u.batch.det_period_end = 1;
        wire_encode(&m, &b);
        ck_assert_int_eq(wire_decode(d[k], b.data, b.len, &o), APEX_OK);
        ck_assert_uint_eq(o.u.batch.count, 0);
        ck_assert_uint_eq(o.u.batch.frame_count, 0);
        ck_assert_uint_eq(o.u.batch.frame_stack, K);
        ck_assert_uint_eq(o.u.batch.first_frame, FIRST);
        ck_assert_uint_eq(o.u.batch.det_period, 9);
        ck_assert_int_eq(o.u.batch.det_period_end, 1);
        ck_assert_uint_eq(o.u.batch.obs_dtype, dtypes[k]);
        m.u.batch.det_period_end = 0;
        wire_encode(&m, &b);
        s_expect_det(d[k], b.data, b.len, APEX_EINVAL, "count 0", NULL);
    }
    wire_decoder_destroy(&d[0]);
    wire_decoder_destroy(&d[1]);
    wire_buf_fini(&b);
}
END_TEST

// TransitionBatch body of the fixture batch as the independent writer makes it, with rows
// rows, then det_period (field 24) and det_period_end (25) when not 0.
static void s_forge_det_batch(pb_t *env, uint32_t rows, uint64_t det_period, uint64_t end) {
    s_fill();
    pb_t body = {.n = 0};
    pb_uint(&body, 1, 3);  // actor_id
    pb_uint(&body, 2, 77); // seq
    pb_uint(&body, 3, 9);  // weights_version
    if (rows) {
        pb_uint(&body, 4, rows);
    }
    pb_uint(&body, 5, OBS);
    if (rows) {
        pb_bytes(&body, 6, s_obs, (size_t)rows * OBS * 4);
        pb_bytes(&body, 7, s_act, (size_t)rows * 4);
        pb_bytes(&body, 8, s_rew, (size_t)rows * 4);
        pb_bytes(&body, 9, s_disc, (size_t)rows * 4);
        pb_bytes(&body, 10, s_next, (size_t)rows * OBS * 4);
        pb_bytes(&body, 11, s_prio, (size_t)rows * 4);
    }
    pb_uint(&body, 12, 1ull << 60); // epoch
    if (det_period) {
        pb_uint(&body, 24, det_period);
    }
    if (end) {
        pb_uint(&body, 25, end);
    }
    pb_envelope(env, 2, &body);
}

// A deterministic period's last batch carries its actor's totals and the returns of its last
// (up to 100) episodes; ReplayStats the actors' columns as of the horizon. Round trips at the
// edges; refusals: any of them on a batch that does not end a period, 101 returns, more
// returns than episodes, a NaN or infinite return, counts past WIRE_FRAMES_MAX, bytes not a
// whole number of floats (forged); in ReplayStats a non-finite sum, more returns than 100 per
// shard, counts past WIRE_FRAMES_MAX.
START_TEST(test_det_actor_columns) {
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_decoder_t *d = wire_decoder_new(&s_lim);
    float ret[WIRE_DET_RETURNS_MAX + 1];
    for (int i = 0; i <= WIRE_DET_RETURNS_MAX; i++) {
        ret[i] = (float)i - 20.5f;
    }
    wire_msg_t m, o;
    static const uint32_t ns[] = {0, 1, WIRE_DET_RETURNS_MAX};
    for (size_t k = 0; k < APEX_ARRAY_LEN(ns); k++) {
        m = s_det_batch(4, 1, k == 1 ? 0 : ROWS);
        m.u.batch.det_frames = k == 2 ? WIRE_FRAMES_MAX : 400 * (k + 1);
        m.u.batch.det_episodes = k == 2 ? WIRE_FRAMES_MAX : ns[k] + 3;
        m.u.batch.det_returns = ns[k] ? ret : NULL;
        m.u.batch.det_n_returns = ns[k];
        wire_encode(&m, &b);
        ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
        ck_assert_uint_eq(o.u.batch.det_frames, m.u.batch.det_frames);
        ck_assert_uint_eq(o.u.batch.det_episodes, m.u.batch.det_episodes);
        ck_assert_uint_eq(o.u.batch.det_n_returns, ns[k]);
        ck_assert(ns[k] ? memcmp(o.u.batch.det_returns, ret, ns[k] * 4) == 0
                        : o.u.batch.det_returns == NULL);
    }
    // Refused: each field on a batch that does not end its period (forged: the encoder
    // asserts), then the bounds.
    static const int fields[] = {26, 27, 28};
    for (size_t k = 0; k < APEX_ARRAY_LEN(fields); k++) {
        // The fixture batch's fields, then one more.
        pb_t env, body = {.n = 0};
        s_fill();
        pb_uint(&body, 1, 3);
        pb_uint(&body, 2, 77);
        pb_uint(&body, 4, ROWS);
        pb_uint(&body, 5, OBS);
        pb_bytes(&body, 6, s_obs, (size_t)ROWS * OBS * 4);
        pb_bytes(&body, 7, s_act, (size_t)ROWS * 4);
        pb_bytes(&body, 8, s_rew, (size_t)ROWS * 4);
        pb_bytes(&body, 9, s_disc, (size_t)ROWS * 4);
        pb_bytes(&body, 10, s_next, (size_t)ROWS * OBS * 4);
        pb_uint(&body, 24, 4);
        size_t n0 = body.n;
        if (fields[k] == 28) {
            pb_uint(&body, 27, 5);
            pb_bytes(&body, 28, ret, 8);
        } else {
            pb_uint(&body, fields[k], 5);
        }
        pb_envelope(&env, 2, &body);
        s_expect_det(d, env.b, env.n, APEX_EPROTO, "without det_period_end", NULL);
        if (fields[k] == 28) { // the same with the end: decodes; 7 bytes of returns do not
            pb_uint(&body, 25, 1);
            pb_envelope(&env, 2, &body);
            s_expect_det(d, env.b, env.n, APEX_OK, NULL, NULL);
            body.n = n0;
            pb_uint(&body, 27, 5);
            pb_bytes(&body, 28, ret, 7);
            pb_uint(&body, 25, 1);
            pb_envelope(&env, 2, &body);
            s_expect_det(d, env.b, env.n, APEX_EPROTO, "det_returns bytes", NULL);
        }
    }
    m = s_det_batch(4, 1, ROWS);
    m.u.batch.det_episodes = 1000;
    m.u.batch.det_returns = ret;
    m.u.batch.det_n_returns = WIRE_DET_RETURNS_MAX;
    // 101 returns: encoded by hand (the encoder asserts 100 at most).
    pb_t env, body = {.n = 0};
    pb_uint(&body, 1, 3);
    pb_uint(&body, 2, 77);
    pb_uint(&body, 5, OBS);
    pb_uint(&body, 24, 4);
    pb_uint(&body, 25, 1);
    pb_uint(&body, 27, 1000);
    pb_bytes(&body, 28, ret, (WIRE_DET_RETURNS_MAX + 1) * 4);
    pb_envelope(&env, 2, &body);
    s_expect_det(d, env.b, env.n, APEX_EPROTO, "det_returns bytes", "at most 100");
    m.u.batch.det_episodes = WIRE_DET_RETURNS_MAX - 1; // fewer episodes than returns
    wire_encode(&m, &b);
    s_expect_det(d, b.data, b.len, APEX_EPROTO, "det_returns bytes", "det_episodes = 99");
    m.u.batch.det_episodes = 1000;
    float bad[2] = {1.0f, NAN};
    m.u.batch.det_returns = bad;
    m.u.batch.det_n_returns = 2;
    wire_encode(&m, &b);
    s_expect_det(d, b.data, b.len, APEX_EINVAL, "non-finite det_returns", NULL);
    bad[1] = INFINITY;
    wire_encode(&m, &b);
    s_expect_det(d, b.data, b.len, APEX_EINVAL, "non-finite det_returns", NULL);
    m.u.batch.det_returns = ret;
    m.u.batch.det_frames = WIRE_FRAMES_MAX + 1;
    wire_encode(&m, &b);
    s_expect_det(d, b.data, b.len, APEX_EINVAL, "det_frames or det_episodes above", NULL);
    m.u.batch.det_frames = 1;
    m.u.batch.det_episodes = WIRE_FRAMES_MAX + 1;
    wire_encode(&m, &b);
    s_expect_det(d, b.data, b.len, APEX_EINVAL, "det_frames or det_episodes above", NULL);

    // ReplayStats: the actors' columns round-trip, and their bounds.
    m = (wire_msg_t){.type = WIRE_MSG_SAMPLE_REPLY};
    m.u.sample_reply = (wire_sample_reply_t){.id = 5,
                                             .status = WIRE_SAMPLE_NOT_READY,
                                             .stats = {.size = 9,
                                                       .shard = 1,
                                                       .shards = 2,
                                                       .det_horizon = 3,
                                                       .det_env_frames = WIRE_FRAMES_MAX,
                                                       .det_episodes = 77,
                                                       .det_return_sum = -1234.5,
                                                       .det_return_n = 2 * WIRE_DET_RETURNS_MAX,
                                                       .det_version_min = (5ull << 32) | 9}};
    wire_encode(&m, &b);
    ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
    const wire_replay_stats_t *st = &o.u.sample_reply.stats;
    ck_assert_uint_eq(st->det_env_frames, WIRE_FRAMES_MAX);
    ck_assert_uint_eq(st->det_episodes, 77);
    ck_assert_double_eq(st->det_return_sum, -1234.5);
    ck_assert_uint_eq(st->det_return_n, 2 * WIRE_DET_RETURNS_MAX);
    ck_assert_uint_eq(st->det_version_min, (5ull << 32) | 9);
    wire_msg_t w = m;
    w.u.sample_reply.stats.det_return_n = 2 * WIRE_DET_RETURNS_MAX + 1; // (2 shards: 200 at most)
    wire_encode(&w, &b);
    s_expect_det(d, b.data, b.len, APEX_EINVAL, "deterministic actor columns", NULL);
    w = m;
    w.u.sample_reply.stats.det_return_sum = NAN;
    wire_encode(&w, &b);
    s_expect_det(d, b.data, b.len, APEX_EINVAL, "deterministic actor columns", NULL);
    w = m;
    w.u.sample_reply.stats.det_episodes = WIRE_FRAMES_MAX + 1;
    wire_encode(&w, &b);
    s_expect_det(d, b.data, b.len, APEX_EINVAL, "deterministic actor columns", NULL);
    w = m;
    w.u.sample_reply.stats.det_env_frames = UINT64_MAX;
    wire_encode(&w, &b);
    s_expect_det(d, b.data, b.len, APEX_EINVAL, "deterministic actor columns", NULL);
    wire_decoder_destroy(&d);
    wire_buf_fini(&b);
}
END_TEST

START_TEST(test_det_refusals) {
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_decoder_t *d = wire_decoder_new(&s_lim);
    pb_t env;
    // The forge is the fixture batch: with a period and its end it decodes (so a refusal
    // below is for the field changed alone).
    s_forge_det_batch(&env, ROWS, 4, 1);
    s_expect_det(d, env.b, env.n, APEX_OK, NULL, NULL);
    s_forge_det_batch(&env, 0, 4, 1);
    s_expect_det(d, env.b, env.n, APEX_OK, NULL, NULL);
    // det_period_end without det_period (wire_encode asserts it never makes one), with rows or
    // not; a bool field sent as another varint than 1 is still true.
    s_forge_det_batch(&env, ROWS, 0, 1);
    s_expect_det(d, env.b, env.n, APEX_EPROTO, "det_period_end without det_period", NULL);
    s_forge_det_batch(&env, 0, 0, 1);
    s_expect_det(d, env.b, env.n, APEX_EPROTO, "det_period_end without det_period", NULL);
    s_forge_det_batch(&env, 0, 0, 2);
    s_expect_det(d, env.b, env.n, APEX_EPROTO, "det_period_end without det_period", NULL);
    // det_period above WIRE_SEQ_MAX.
    wire_msg_t m = s_det_batch(WIRE_SEQ_MAX + 1, 0, ROWS);
    wire_encode(&m, &b);
    s_expect_det(d, b.data, b.len, APEX_EINVAL, "det_period", "above");
    m = s_det_batch(WIRE_SEQ_MAX + 1, 1, 0);
    wire_encode(&m, &b);
    s_expect_det(d, b.data, b.len, APEX_EINVAL, "det_period", "above");
    s_forge_det_batch(&env, ROWS, UINT64_MAX, 0);
    s_expect_det(d, env.b, env.n, APEX_EINVAL, "det_period", "above");
    // SampleRequest: a stats request with det_index; with both stats_after and det_horizon;
    // det_horizon or stats_after in a request for rows.
    m = (wire_msg_t){.type = WIRE_MSG_SAMPLE_REQUEST};
    m.u.sample_request = (wire_sample_request_t){.id = 1, .stats_only = 1, .det_index = 3};
    wire_encode(&m, &b);
    s_expect_det(d, b.data, b.len, APEX_EINVAL, "stats_only", "det_index");
    m.u.sample_request =
        (wire_sample_request_t){.id = 1, .stats_only = 1, .det_index = 3, .det_horizon = 2};
    wire_encode(&m, &b);
    s_expect_det(d, b.data, b.len, APEX_EINVAL, "stats_only", "det_index");
    m.u.sample_request =
        (wire_sample_request_t){.id = 1, .stats_only = 1, .stats_after = 5, .det_horizon = 2};
    wire_encode(&m, &b);
    s_expect_det(d, b.data, b.len, APEX_EINVAL, "stats_after", "det_horizon");
    m.u.sample_request = (wire_sample_request_t){
        .id = 1, .stats_only = 1, .stats_after = UINT64_MAX, .det_horizon = UINT64_MAX};
    wire_encode(&m, &b);
    s_expect_det(d, b.data, b.len, APEX_EINVAL, "stats_after", "det_horizon");
    m.u.sample_request =
        (wire_sample_request_t){.id = 1, .batch_size = 4, .beta = 0.5f, .det_horizon = 2};
    wire_encode(&m, &b);
    s_expect_det(d, b.data, b.len, APEX_EINVAL, "det_horizon", "without stats_only");
    m.u.sample_request = (wire_sample_request_t){
        .id = 1, .batch_size = 4, .beta = 0.5f, .det_index = 7, .det_horizon = 2};
    wire_encode(&m, &b);
    s_expect_det(d, b.data, b.len, APEX_EINVAL, "det_horizon", "without stats_only");
    m.u.sample_request =
        (wire_sample_request_t){.id = 1, .batch_size = 4, .beta = 0.5f, .stats_after = 9};
    wire_encode(&m, &b);
    s_expect_det(d, b.data, b.len, APEX_EINVAL, "stats_after", "without stats_only");
    // PriorityUpdate: no keys without det_index, as before.
    m = (wire_msg_t){.type = WIRE_MSG_PRIORITY_UPDATE};
    wire_encode(&m, &b);
    s_expect_det(d, b.data, b.len, APEX_EINVAL, "PriorityUpdate", "count 0");
    wire_decoder_destroy(&d);
    wire_buf_fini(&b);
}
END_TEST

// The det numbers at every varint size (no bound but 0 = off).
static const uint64_t s_det_vals[] = {1, 127, 128, 1ull << 40, UINT64_MAX};

// SampleRequest's det_index and det_horizon, ReplayStats' det_horizon and det_served.
START_TEST(test_det_requests_round_trip) {
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_decoder_t *d = wire_decoder_new(&s_lim);
    const uint64_t *vals = s_det_vals;
    const size_t nv = APEX_ARRAY_LEN(s_det_vals);
    wire_msg_t m, o;
    for (size_t k = 0; k < nv; k++) {
        uint64_t v = vals[k];
        // A request for rows with its det_index.
        m = (wire_msg_t){.type = WIRE_MSG_SAMPLE_REQUEST};
        m.u.sample_request = (wire_sample_request_t){
            .id = 11, .batch_size = 8, .beta = 0.5f, .batches = 2, .det_index = v};
        wire_encode(&m, &b);
        ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
        ck_assert_uint_eq(o.u.sample_request.det_index, v);
        ck_assert_uint_eq(o.u.sample_request.det_horizon, 0);
        ck_assert_uint_eq(o.u.sample_request.batches, 2);
        ck_assert_uint_eq(o.u.sample_request.batch_size, 8);
        ck_assert_uint_eq(o.u.sample_request.id, 11);
        ck_assert_int_eq(o.u.sample_request.stats_only, 0);
        // A horizon watch: a stats request with det_horizon (stats_after 0).
        m.u.sample_request = (wire_sample_request_t){
            .id = 12, .stats_only = 1, .min_priority = 0.5, .det_horizon = v};
        wire_encode(&m, &b);
        ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
        ck_assert_int_eq(o.u.sample_request.stats_only, 1);
        ck_assert_uint_eq(o.u.sample_request.det_horizon, v);
        ck_assert_uint_eq(o.u.sample_request.det_index, 0);
        ck_assert_uint_eq(o.u.sample_request.stats_after, 0);
        ck_assert_double_eq(o.u.sample_request.min_priority, 0.5);
        ck_assert_uint_eq(o.u.sample_request.id, 12);
        // ReplayStats in a reply with rows and in one without.
        m = (wire_msg_t){.type = WIRE_MSG_SAMPLE_REPLY};
        m.u.sample_reply = s_reply_msg(WIRE_OBS_FLOAT32).u.sample_reply;
        m.u.sample_reply.stats.det_horizon = v;
        m.u.sample_reply.stats.det_served = vals[(k + 2) % nv];
        wire_encode(&m, &b);
        ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
        ck_assert_int_eq(o.u.sample_reply.status, WIRE_SAMPLE_OK);
        ck_assert_uint_eq(o.u.sample_reply.count, ROWS);
        ck_assert_uint_eq(o.u.sample_reply.stats.det_horizon, v);
        ck_assert_uint_eq(o.u.sample_reply.stats.det_served, vals[(k + 2) % nv]);
        m.u.sample_reply = (wire_sample_reply_t){
            .id = 13,
            .status = WIRE_SAMPLE_NOT_READY,
            .stats = {.size = 3, .total_priority = 1.5, .det_horizon = 0, .det_served = v}};
        wire_encode(&m, &b);
        ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
        ck_assert_int_eq(o.u.sample_reply.status, WIRE_SAMPLE_NOT_READY);
        ck_assert_uint_eq(o.u.sample_reply.stats.det_horizon, 0);
        ck_assert_uint_eq(o.u.sample_reply.stats.det_served, v);
        ck_assert_uint_eq(o.u.sample_reply.stats.size, 3);
    }
    wire_decoder_destroy(&d);
    wire_buf_fini(&b);
}
END_TEST

// PriorityUpdate's det_index (with keys, and with none), Weights' and WeightsRequest's
// det_target.
START_TEST(test_det_updates_weights_round_trip) {
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_decoder_t *d = wire_decoder_new(&s_lim);
    wire_msg_t m, o;
    for (size_t k = 0; k < APEX_ARRAY_LEN(s_det_vals); k++) {
        uint64_t v = s_det_vals[k];
        // PriorityUpdate with det_index, with keys and with none (every priority was NaN).
        uint64_t keys[2] = {WIRE_KEY(4, 1), WIRE_KEY(9, 2)};
        float pr[2] = {0.25f, 8.0f};
        m = (wire_msg_t){.type = WIRE_MSG_PRIORITY_UPDATE};
        m.u.priority_update =
            (wire_priority_update_t){.count = 2, .keys = keys, .priorities = pr, .det_index = v};
        wire_encode(&m, &b);
        ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
        ck_assert_uint_eq(o.u.priority_update.det_index, v);
        ck_assert_uint_eq(o.u.priority_update.count, 2);
        ck_assert_mem_eq(o.u.priority_update.keys, keys, sizeof keys);
        ck_assert_mem_eq(o.u.priority_update.priorities, pr, sizeof pr);
        m.u.priority_update = (wire_priority_update_t){.det_index = v};
        wire_encode(&m, &b);
        ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
        ck_assert_int_eq(o.type, WIRE_MSG_PRIORITY_UPDATE);
        ck_assert_uint_eq(o.u.priority_update.count, 0);
        ck_assert_uint_eq(o.u.priority_update.det_index, v);
        // Weights answering a target, and the request naming it.
        float params[10];
        for (int i = 0; i < 10; i++) {
            params[i] = (float)i - 4.5f;
        }
        m = (wire_msg_t){.type = WIRE_MSG_WEIGHTS};
        m.u.weights = (wire_weights_t){
            .version = 6, .learner_step = 60, .num_params = 10, .params = params, .det_target = v};
        wire_encode(&m, &b);
        ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
        ck_assert_uint_eq(o.u.weights.det_target, v);
        ck_assert_uint_eq(o.u.weights.version, 6);
        ck_assert_uint_eq(o.u.weights.learner_step, 60);
        ck_assert_mem_eq(o.u.weights.params, params, sizeof params);
        m = (wire_msg_t){.type = WIRE_MSG_WEIGHTS_REQUEST};
        m.u.weights_request = (wire_weights_request_t){.have_version = 0, .det_target = v};
        wire_encode(&m, &b);
        o.u.weights_request.have_version = 99; // must be overwritten
        ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
        ck_assert_int_eq(o.type, WIRE_MSG_WEIGHTS_REQUEST);
        ck_assert_uint_eq(o.u.weights_request.det_target, v);
        ck_assert_uint_eq(o.u.weights_request.have_version, 0);
        m.u.weights_request = (wire_weights_request_t){.have_version = v, .det_target = 3};
        wire_encode(&m, &b);
        ck_assert_int_eq(wire_decode(d, b.data, b.len, &o), APEX_OK);
        ck_assert_uint_eq(o.u.weights_request.det_target, 3);
        ck_assert_uint_eq(o.u.weights_request.have_version, v);
    }
    wire_decoder_destroy(&d);
    wire_buf_fini(&b);
}
END_TEST

// Encodes m (every det field 0) and expects exactly old's bytes, written by the independent
// writer without the det fields; then that det (m with det fields set) encodes longer by at
// least min_extra bytes. The callers then decode old's bytes: det fields 0.
static void s_expect_old_bytes(const wire_msg_t *m, const pb_t *old, const wire_msg_t *det,
                               size_t min_extra, const char *what) {
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_encode(m, &b);
    ck_assert_msg(b.len == old->n, "%s: %zu bytes, before the det fields %zu", what, b.len, old->n);
    ck_assert_msg(memcmp(b.data, old->b, b.len) == 0, "%s: not the bytes sent before", what);
    size_t len0 = b.len;
    wire_encode(det, &b);
    ck_assert_msg(b.len >= len0 + min_extra, "%s: %zu bytes with det fields, %zu without", what,
                  b.len, len0);
    wire_buf_fini(&b);
}

START_TEST(test_det_zero_fields_old_bytes_batch) {
    pb_t env, body;
    wire_msg_t o;
    // TransitionBatch with rows (whole observations).
    wire_msg_t m = s_det_batch(0, 0, ROWS), det = s_det_batch(3, 1, ROWS);
    s_forge_det_batch(&env, ROWS, 0, 0);
    s_expect_old_bytes(&m, &env, &det, 4, "TransitionBatch");
    ck_assert_int_eq(s_decode_raw(env.b, env.n, &o), APEX_OK);
    ck_assert_uint_eq(o.u.batch.det_period, 0);
    ck_assert_int_eq(o.u.batch.det_period_end, 0);
    // TransitionBatch in frame mode.
    m = s_frame_msg(WIRE_OBS_FLOAT32);
    det = m;
    det.u.batch.det_period = 1;
    body.n = 0;
    pb_uint(&body, 1, 3);
    pb_uint(&body, 2, 77);
    pb_uint(&body, 3, 9);
    pb_uint(&body, 4, ROWS);
    pb_uint(&body, 5, OBS);
    pb_bytes(&body, 7, s_act, sizeof s_act);
    pb_bytes(&body, 8, s_rew, sizeof s_rew);
    pb_bytes(&body, 9, s_disc, sizeof s_disc);
    pb_bytes(&body, 11, s_prio, sizeof s_prio);
    pb_uint(&body, 12, 1ull << 60);
    pb_uint(&body, 15, K);
    pb_uint(&body, 16, FIRST);
    pb_uint(&body, 17, NF);
    pb_bytes(&body, 18, s_frames, (size_t)NF * FD * 4);
    pb_bytes(&body, 19, s_fprev, NF * 4);
    pb_bytes(&body, 20, s_ofr, ROWS * 8);
    pb_bytes(&body, 21, s_nfr, ROWS * 8);
    pb_envelope(&env, 2, &body);
    s_expect_old_bytes(&m, &env, &det, 2, "TransitionBatch (frames)");
    wire_decoder_t *df = wire_decoder_new(&s_limf);
    ck_assert_int_eq(wire_decode(df, env.b, env.n, &o), APEX_OK);
    ck_assert_uint_eq(o.u.batch.det_period, 0);
    wire_decoder_destroy(&df);
}
END_TEST

START_TEST(test_det_zero_fields_old_bytes_requests) {
    pb_t env, body;
    wire_msg_t o;
    // SampleRequest for rows, and a stats request.
    wire_msg_t m = {.type = WIRE_MSG_SAMPLE_REQUEST}, det;
    m.u.sample_request = (wire_sample_request_t){
        .id = 21, .batch_size = 32, .beta = 0.75f, .batches = 2, .min_priority = 0.5};
    det = m;
    det.u.sample_request.det_index = 1;
    body.n = 0;
    pb_uint(&body, 1, 21);
    pb_uint(&body, 2, 32);
    pb_fixed32(&body, 3, 0.75f);
    pb_uint(&body, 4, 2);
    pb_fixed64(&body, 5, 0.5);
    pb_envelope(&env, 3, &body);
    s_expect_old_bytes(&m, &env, &det, 2, "SampleRequest");
    ck_assert_int_eq(s_decode_raw(env.b, env.n, &o), APEX_OK);
    ck_assert_uint_eq(o.u.sample_request.det_index, 0);
    ck_assert_uint_eq(o.u.sample_request.det_horizon, 0);
    m.u.sample_request = (wire_sample_request_t){.id = 22, .stats_only = 1, .stats_after = 300};
    det = m;
    det.u.sample_request.stats_after = 0;
    det.u.sample_request.det_horizon = 300;
    body.n = 0;
    pb_uint(&body, 1, 22);
    pb_uint(&body, 6, 1);
    pb_uint(&body, 7, 300);
    pb_envelope(&env, 3, &body);
    s_expect_old_bytes(&m, &env, &det, 0, "SampleRequest (stats)");
    ck_assert_int_eq(s_decode_raw(env.b, env.n, &o), APEX_OK);
    ck_assert_uint_eq(o.u.sample_request.stats_after, 300);
    ck_assert_uint_eq(o.u.sample_request.det_horizon, 0);
    // SampleReply's ReplayStats (a reply without rows).
    m = (wire_msg_t){.type = WIRE_MSG_SAMPLE_REPLY};
    m.u.sample_reply = (wire_sample_reply_t){
        .id = 5,
        .status = WIRE_SAMPLE_NOT_READY,
        .stats = {.size = 9, .capacity = 16, .inserted = 40, .total_priority = 7.5}};
    det = m;
    det.u.sample_reply.stats.det_horizon = 2;
    det.u.sample_reply.stats.det_served = 1;
    pb_t stats = {.n = 0};
    pb_uint(&stats, 1, 9);
    pb_uint(&stats, 2, 16);
    pb_uint(&stats, 3, 40);
    pb_fixed64(&stats, 9, 7.5);
    body.n = 0;
    pb_uint(&body, 1, 5);
    pb_uint(&body, 2, WIRE_SAMPLE_NOT_READY);
    pb_bytes(&body, 12, stats.b, stats.n);
    pb_envelope(&env, 4, &body);
    s_expect_old_bytes(&m, &env, &det, 4, "SampleReply");
    ck_assert_int_eq(s_decode_raw(env.b, env.n, &o), APEX_OK);
    ck_assert_uint_eq(o.u.sample_reply.stats.det_horizon, 0);
    ck_assert_uint_eq(o.u.sample_reply.stats.det_served, 0);
}
END_TEST

START_TEST(test_det_zero_fields_old_bytes_updates) {
    pb_t env, body;
    wire_msg_t o, m, det;
    // PriorityUpdate.
    uint64_t keys[2] = {WIRE_KEY(4, 1), WIRE_KEY(9, 2)};
    float pr[2] = {0.25f, 8.0f};
    m = (wire_msg_t){.type = WIRE_MSG_PRIORITY_UPDATE};
    m.u.priority_update = (wire_priority_update_t){.count = 2, .keys = keys, .priorities = pr};
    det = m;
    det.u.priority_update.det_index = 9;
    body.n = 0;
    pb_uint(&body, 1, 2);
    pb_bytes(&body, 2, keys, sizeof keys);
    pb_bytes(&body, 3, pr, sizeof pr);
    pb_envelope(&env, 5, &body);
    s_expect_old_bytes(&m, &env, &det, 2, "PriorityUpdate");
    ck_assert_int_eq(s_decode_raw(env.b, env.n, &o), APEX_OK);
    ck_assert_uint_eq(o.u.priority_update.det_index, 0);
    // Weights.
    float params[10];
    for (int i = 0; i < 10; i++) {
        params[i] = 0.5f * (float)i;
    }
    m = (wire_msg_t){.type = WIRE_MSG_WEIGHTS};
    m.u.weights = (wire_weights_t){
        .version = 7, .learner_step = 70, .env_frames = 700, .num_params = 10, .params = params};
    det = m;
    det.u.weights.det_target = 4;
    body.n = 0;
    pb_uint(&body, 1, 7);
    pb_uint(&body, 2, 70);
    pb_uint(&body, 3, 10);
    pb_bytes(&body, 4, params, sizeof params);
    pb_uint(&body, 5, 700);
    pb_envelope(&env, 6, &body);
    s_expect_old_bytes(&m, &env, &det, 2, "Weights");
    ck_assert_int_eq(s_decode_raw(env.b, env.n, &o), APEX_OK);
    ck_assert_uint_eq(o.u.weights.det_target, 0);
    // WeightsRequest.
    m = (wire_msg_t){.type = WIRE_MSG_WEIGHTS_REQUEST};
    m.u.weights_request = (wire_weights_request_t){.have_version = 5};
    det = m;
    det.u.weights_request.det_target = 2;
    body.n = 0;
    pb_uint(&body, 1, 5);
    pb_envelope(&env, 9, &body);
    s_expect_old_bytes(&m, &env, &det, 2, "WeightsRequest");
    ck_assert_int_eq(s_decode_raw(env.b, env.n, &o), APEX_OK);
    ck_assert_uint_eq(o.u.weights_request.det_target, 0);
}
END_TEST

// wire_weights_encode_hole with det_target set (the weights server builds a target's message
// with it) is byte for byte wire_encode's message, at every varint size of det_target.
START_TEST(test_det_weights_hole_equals_encode) {
    const uint32_t counts[] = {1, 10, 4095};
    const uint64_t targets[] = {0, 1, 127, 128, 300, (uint64_t)1 << 40, UINT64_MAX};
    float *params = xmalloc(4095 * sizeof(float));
    for (uint32_t i = 0; i < 4095; i++) {
        params[i] = (float)i * 0.25f - 3.0f;
    }
    wire_buf_t ref;
    wire_buf_init(&ref, 0);
    wire_limits_t lim = s_lim;
    lim.num_params = 4095;
    for (size_t c = 0; c < APEX_ARRAY_LEN(counts); c++) {
        lim.num_params = counts[c];
        wire_decoder_t *d = wire_decoder_new(&lim);
        for (size_t k = 0; k < APEX_ARRAY_LEN(targets); k++) {
            wire_weights_t w = {.version = (2ull << 32) | 5,
                                .learner_step = 1000,
                                .env_frames = k * 1000,
                                .num_params = counts[c],
                                .params = params,
                                .det_target = targets[k]};
            wire_msg_t m = {.type = WIRE_MSG_WEIGHTS}, o;
            m.u.weights = w;
            wire_encode(&m, &ref);
            w.params = NULL;
            size_t n = wire_weights_size(&w);
            ck_assert_uint_eq(n, ref.len);
            uint8_t *out = xmalloc(n);
            memset(out, 0xCD, n);
            size_t at = wire_weights_encode_hole(&w, out, n);
            ck_assert_uint_le(at + (size_t)counts[c] * 4, n);
            memcpy(out + at, params, (size_t)counts[c] * 4);
            ck_assert_msg(memcmp(out, ref.data, n) == 0, "det_target %llu, %u params",
                          (unsigned long long)targets[k], counts[c]);
            ck_assert_int_eq(wire_decode(d, out, n, &o), APEX_OK);
            ck_assert_uint_eq(o.u.weights.det_target, targets[k]);
            ck_assert_mem_eq(o.u.weights.params, params, (size_t)counts[c] * 4);
            xfree(out);
        }
        wire_decoder_destroy(&d);
    }
    xfree(params);
    wire_buf_fini(&ref);
}
END_TEST

Suite *wire_suite(void) {
    Suite *s = suite_create("wire");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_batch_round_trip);
    tcase_add_test(tc, test_weights_hole_equals_encode);
    tcase_add_test(tc, test_small_messages_round_trip);
    tcase_add_test(tc, test_batched_ack);
    tcase_add_test(tc, test_sample_reply_round_trip);
    tcase_add_test(tc, test_continuous_actions);
    tcase_add_test(tc, test_every_truncation_rejected);
    tcase_add_test(tc, test_wrong_version);
    tcase_add_test(tc, test_non_finite_and_ranges);
    tcase_add_test(tc, test_counts_and_dims);
    tcase_add_test(tc, test_forged_mismatched_counts);
    tcase_add_test(tc, test_garbage_and_empty);
    tcase_add_test(tc, test_oversized);
    tcase_add_test(tc, test_uint8_batch_round_trip);
    tcase_add_test(tc, test_obs_dtype_mismatch_refused);
    tcase_add_test(tc, test_obs_dtype_length_mismatch);
    tcase_add_test(tc, test_uint8_sample_reply_round_trip);
    tcase_add_test(tc, test_uint8_max_message_bytes);
    tcase_add_test(tc, test_sharding_fields);
    tcase_add_test(tc, test_weights_judge);
    tcase_add_test(tc, test_weights_request);
    tcase_add_test(tc, test_frame_batch_round_trip);
    tcase_add_test(tc, test_frame_layout_refused);
    tcase_add_test(tc, test_frame_lengths_refused);
    tcase_add_test(tc, test_frame_values_refused);
    tcase_add_test(tc, test_frame_max_message_bytes);
    tcase_add_test(tc, test_frame_codec);
    tcase_add_test(tc, test_det_batch_round_trip);
    tcase_add_test(tc, test_det_frame_batch_round_trip);
    tcase_add_test(tc, test_det_refusals);
    tcase_add_test(tc, test_det_actor_columns);
    tcase_add_test(tc, test_det_requests_round_trip);
    tcase_add_test(tc, test_det_updates_weights_round_trip);
    tcase_add_test(tc, test_det_zero_fields_old_bytes_batch);
    tcase_add_test(tc, test_det_zero_fields_old_bytes_requests);
    tcase_add_test(tc, test_det_zero_fields_old_bytes_updates);
    tcase_add_test(tc, test_det_weights_hole_equals_encode);
    suite_add_tcase(s, tc);
    return s;
}
