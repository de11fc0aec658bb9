// check_prefetch.c: learner/prefetch.h against a stand-in replay server (a ROUTER of the
// test's on an ephemeral loopback port) that reads the requests and answers what each test
// chooses: the requests in flight and their ids, batches trained oldest arrival first, the
// priority update of each batch, slots re-asking after the last batch, NOT_READY, REFUSED,
// timeouts, and every kind of reply that must be dropped without touching a slot (late, wrong
// rows, wrong kind, garbage, several frames), and priorities a NaN loss makes.
// Every wait is for a condition, with a generous deadline.
#include "check_apex.h"

#include <math.h>
#include <string.h>
#include <zmq.h>

#include "clock.h"
#include "config.h"
#include "prefetch.h"
#include "security.h"
#include "shards.h"
#include "wire.h"

#define OBS 3
#define BATCH 4
#define BATCHES 2
#define SLOTS 3
#define WAIT_MS 20000

typedef struct {
    apex_config_t cfg;
    void *ctx, *replay; // the stand-in replay's ROUTER
    security_t *sec;
    shards_t *shards;
    prefetch_t *p;
    wire_decoder_t *dec; // what the stand-in reads (requests, updates)
    wire_buf_t out;
} s_fix;

static void s_setup_det(s_fix *f, const char *timeout_ms, int det) {
    memset(f, 0, sizeof *f);
    f->ctx = zmq_ctx_new();
    char ep[256], set_ep[300], set_to[64];
    f->replay = check_weights_router(f->ctx, ep, sizeof ep); // a plain bound ROUTER
    snprintf(set_ep, sizeof set_ep, "endpoints.replay_sample=%s", ep);
    snprintf(set_to, sizeof set_to, "learner.request_timeout_ms=%s", timeout_ms);
    char b[64], k[64], s[64];
    snprintf(b, sizeof b, "learner.batch_size=%d", BATCH);
    snprintf(k, sizeof k, "learner.batches_per_request=%d", BATCHES);
    snprintf(s, sizeof s, "learner.prefetch=%d", SLOTS);
    const char *sets[] = {"env.id=external",
                          "env.obs_dim=3",
                          "env.n_actions=2",
                          "replay.max_batch=64",
                          b,
                          k,
                          s,
                          set_ep,
                          set_to,
                          det ? "run.deterministic=true" : "run.deterministic=false",
                          "replay.samples_per_insert=4"};
    char err[CONFIG_ERR_LEN];
    ck_assert_msg(config_load(&f->cfg, NULL, sets, APEX_ARRAY_LEN(sets), err, sizeof err) == 0,
                  "%s", err);
    f->sec = security_new(f->ctx, &f->cfg, "learner", -1, 0);
    ck_assert_ptr_nonnull(f->sec);
    net_opts_t o = {.max_msg_bytes = 1 << 20};
    f->shards = shards_new(&f->cfg, 0, f->ctx, f->sec, &o);
    ck_assert_ptr_nonnull(f->shards);
    f->p = prefetch_new(&f->cfg, f->shards, clock_now_ms());
    wire_limits_t lim = {.obs_dim = OBS, .n_actions = 2, .max_count = 64};
    f->dec = wire_decoder_new(&lim);
    wire_buf_init(&f->out, 0);
}

static void s_setup(s_fix *f, const char *timeout_ms) { s_setup_det(f, timeout_ms, 0); }

static void s_teardown(s_fix *f) {
    prefetch_destroy(&f->p);
    ck_assert_ptr_null(f->p);
    shards_destroy(&f->shards);
    zmq_close(f->replay);
    security_destroy(&f->sec);
    zmq_ctx_term(f->ctx);
    wire_decoder_destroy(&f->dec);
    wire_buf_fini(&f->out);
}

// One message the stand-in replay read: who sent it (the learner's DEALER) and what.
typedef struct {
    uint8_t id[256];
    size_t id_len;
    wire_msg_t m;
} s_got;

// Waits for the next message on the stand-in's ROUTER; 0 when none came before the deadline.
static int s_recv(s_fix *f, s_got *g, int wait_ms) {
    zmq_pollitem_t it = {.socket = f->replay, .events = ZMQ_POLLIN};
    if (zmq_poll(&it, 1, wait_ms) <= 0) {
        return 0;
    }
    zmq_msg_t id, body;
    zmq_msg_init(&id);
    zmq_msg_init(&body);
    ck_assert_int_ge(zmq_msg_recv(&id, f->replay, 0), 0);
    ck_assert(zmq_msg_more(&id));
    ck_assert_int_ge(zmq_msg_recv(&body, f->replay, 0), 0);
    ck_assert(!zmq_msg_more(&body));
    g->id_len = zmq_msg_size(&id);
    memcpy(g->id, zmq_msg_data(&id), g->id_len);
    ck_assert_int_eq(wire_decode(f->dec, zmq_msg_data(&body), zmq_msg_size(&body), &g->m), APEX_OK);
    zmq_msg_close(&id);
    zmq_msg_close(&body);
    return 1;
}

// Issues requests (a send needs the connection up: retried until one arrives) and reads the
// n requests the free slots send, checking each; ids[i] gets the i-th id.
static void s_expect_requests(s_fix *f, int n, uint64_t *ids, s_got *last) {
    for (int i = 0; i < n; i++) {
        s_got g;
        int64_t deadline = clock_now_ms() + WAIT_MS;
        while (!s_recv(f, &g, 10)) {
            ck_assert_int_lt(clock_now_ms(), deadline);
            prefetch_issue(f->p, 0.5f, clock_now_ms());
        }
        ck_assert_int_eq(g.m.type, WIRE_MSG_SAMPLE_REQUEST);
        ck_assert_uint_eq(g.m.u.sample_request.batch_size, BATCH);
        ck_assert_uint_eq(g.m.u.sample_request.batches, BATCHES);
        ck_assert_float_eq(g.m.u.sample_request.beta, 0.5f);
        ids[i] = g.m.u.sample_request.id;
        *last = g;
    }
}

// Encodes a reply to request id with rows rows (status OK), row r's reward = base + r.
static void s_reply_ok(s_fix *f, uint64_t id, uint32_t rows, float base) {
    static uint64_t keys[64];
    static float w[64], obs[64 * OBS], next[64 * OBS], rew[64], disc[64];
    static int32_t act[64];
    for (uint32_t r = 0; r < rows; r++) {
        keys[r] = 1000 * (uint64_t)base + r;
        w[r] = 1.0f;
        rew[r] = base + (float)r;
        disc[r] = 0.9f;
        act[r] = (int32_t)(r % 2);
        for (int j = 0; j < OBS; j++) {
            obs[r * OBS + j] = base + (float)j;
            next[r * OBS + j] = -base - (float)j;
        }
    }
    wire_msg_t m = {.type = WIRE_MSG_SAMPLE_REPLY};
    m.u.sample_reply = (wire_sample_reply_t){.id = id,
                                             .status = WIRE_SAMPLE_OK,
                                             .count = rows,
                                             .obs_dim = OBS,
                                             .keys = keys,
                                             .is_weights = w,
                                             .obs = obs,
                                             .actions = act,
                                             .rewards = rew,
                                             .discounts = disc,
                                             .next_obs = next,
                                             .stats = {.size = 100, .shards = 1}};
    wire_encode(&m, &f->out);
}

static void s_reply_status(s_fix *f, uint64_t id, wire_sample_status st) {
    wire_msg_t m = {.type = WIRE_MSG_SAMPLE_REPLY};
    m.u.sample_reply = (wire_sample_reply_t){.id = id, .status = st, .stats = {.shards = 1}};
    wire_encode(&m, &f->out);
}

// Hands the encoded reply in f->out to the prefetch, as prefetch_read does for each message.
static prefetch_result s_deliver(s_fix *f) {
    return prefetch_handle(f->p, 0, f->out.data, f->out.len, clock_now_ms());
}

START_TEST(test_requests_batches_updates) {
    s_fix f;
    s_setup(&f, "60000");
    uint64_t ids[SLOTS];
    s_got g;
    s_expect_requests(&f, SLOTS, ids, &g);
    ck_assert_uint_eq(ids[0], 1);
    ck_assert_uint_eq(ids[2], 3);
    // Every slot is in flight: nothing more goes out.
    prefetch_issue(f.p, 0.5f, clock_now_ms());
    ck_assert_int_eq(s_recv(&f, &g, 50), 0);
    prefetch_batch_t b;
    ck_assert_int_eq(prefetch_next(f.p, &b), 0);
    // Replies arrive out of order: the first to arrive is trained first.
    s_reply_ok(&f, ids[2], BATCH * BATCHES, 30.0f);
    ck_assert_int_eq(s_deliver(&f), PREFETCH_TAKEN);
    s_reply_ok(&f, ids[0], BATCH * BATCHES, 10.0f);
    ck_assert_int_eq(s_deliver(&f), PREFETCH_TAKEN);
    ck_assert(prefetch_stats(f.p)->started);
    float prio[BATCH];
    for (int batch = 0; batch < 2 * BATCHES; batch++) {
        float base = batch < BATCHES ? 30.0f : 10.0f;
        uint32_t r0 = (uint32_t)(batch % BATCHES) * BATCH;
        ck_assert_int_eq(prefetch_next(f.p, &b), 1);
        ck_assert_int_eq(b.batch.size, BATCH);
        ck_assert_int_eq(b.shard, 0);
        for (int r = 0; r < BATCH; r++) {
            ck_assert_float_eq(b.batch.rewards[r], base + (float)(r0 + r));
            ck_assert_uint_eq(b.keys[r], 1000 * (uint64_t)base + r0 + r);
            ck_assert_float_eq(((const float *)b.batch.obs)[r * OBS + 2], base + 2.0f);
            ck_assert_float_eq(((const float *)b.batch.next_obs)[r * OBS], -base);
            prio[r] = 0.5f + (float)r;
        }
        prefetch_trained(f.p, prio, 0.5f, clock_now_ms());
        // The update of this batch's keys, to the replay.
        ck_assert_int_eq(s_recv(&f, &g, WAIT_MS), 1);
        ck_assert_int_eq(g.m.type, WIRE_MSG_PRIORITY_UPDATE);
        ck_assert_uint_eq(g.m.u.priority_update.count, BATCH);
        ck_assert_uint_eq(g.m.u.priority_update.keys[3], 1000 * (uint64_t)base + r0 + 3);
        ck_assert_float_eq(g.m.u.priority_update.priorities[3], 3.5f);
        if (batch % BATCHES == BATCHES - 1) {
            // The slot's last batch: its request goes out again, with a new id.
            ck_assert_int_eq(s_recv(&f, &g, WAIT_MS), 1);
            ck_assert_int_eq(g.m.type, WIRE_MSG_SAMPLE_REQUEST);
            ck_assert_uint_eq(g.m.u.sample_request.id, batch < BATCHES ? 4 : 5);
        }
    }
    ck_assert_int_eq(prefetch_next(f.p, &b), 0);
    ck_assert_uint_eq(prefetch_stats(f.p)->bad_messages, 0);
    s_teardown(&f);
}
END_TEST

// What must be dropped without taking a slot's place, and the slot's request re-asked where
// its reply was unusable.
START_TEST(test_bad_replies_are_dropped) {
    s_fix f;
    s_setup(&f, "60000");
    uint64_t ids[SLOTS];
    s_got g;
    s_expect_requests(&f, SLOTS, ids, &g);
    prefetch_batch_t b;
    // A reply to an id never sent (or already timed out): late, dropped.
    s_reply_ok(&f, 99, BATCH * BATCHES, 1.0f);
    ck_assert_int_eq(s_deliver(&f), PREFETCH_LATE);
    // Garbage, a message of another kind, an empty frame.
    const char junk[] = "\x0a\x03not a message";
    ck_assert_int_eq(prefetch_handle(f.p, 0, junk, sizeof junk, clock_now_ms()), PREFETCH_BAD);
    ck_assert_int_eq(prefetch_handle(f.p, 0, junk, 0, clock_now_ms()), PREFETCH_BAD);
    wire_msg_t m = {.type = WIRE_MSG_WEIGHTS_REQUEST};
    wire_encode(&m, &f.out);
    ck_assert_int_eq(s_deliver(&f), PREFETCH_BAD);
    // Rows the decoder takes but the slot did not ask for: dropped, and the slot re-asks.
    s_reply_ok(&f, ids[0], BATCH * BATCHES - 1, 1.0f);
    ck_assert_int_eq(s_deliver(&f), PREFETCH_BAD);
    ck_assert_int_eq(s_recv(&f, &g, 50), 0); // re-asked at the next issue, not at once
    prefetch_issue(f.p, 0.5f, clock_now_ms());
    ck_assert_int_eq(s_recv(&f, &g, WAIT_MS), 1);
    ck_assert_uint_eq(g.m.u.sample_request.id, 4);
    // The reply to the old id comes after all: late.
    s_reply_ok(&f, ids[0], BATCH * BATCHES, 1.0f);
    ck_assert_int_eq(s_deliver(&f), PREFETCH_LATE);
    // NOT_READY and REFUSED free the slot, which asks again.
    s_reply_status(&f, ids[1], WIRE_SAMPLE_NOT_READY);
    ck_assert_int_eq(s_deliver(&f), PREFETCH_NOT_SERVED);
    s_reply_status(&f, ids[2], WIRE_SAMPLE_REFUSED);
    ck_assert_int_eq(s_deliver(&f), PREFETCH_NOT_SERVED);
    prefetch_issue(f.p, 0.5f, clock_now_ms());
    uint64_t again[2];
    s_expect_requests(&f, 2, again, &g);
    ck_assert_uint_eq(again[0], 5);
    ck_assert_uint_eq(again[1], 6);
    ck_assert_int_eq(prefetch_next(f.p, &b), 0); // nothing was taken
    const prefetch_stats_t *st = prefetch_stats(f.p);
    ck_assert_uint_eq(st->bad_messages, 4);
    ck_assert_uint_eq(st->late_replies, 2);
    ck_assert_uint_eq(st->not_ready, 1);
    ck_assert_uint_eq(st->refused, 1);
    ck_assert(!st->started);
    s_teardown(&f);
}
END_TEST

// A request unanswered for request_timeout_ms is forgotten and asked again.
START_TEST(test_timeout_reissues) {
    s_fix f;
    s_setup(&f, "100");
    uint64_t ids[SLOTS];
    s_got g;
    s_expect_requests(&f, SLOTS, ids, &g);
    prefetch_tick(f.p, 0.5f, clock_now_ms()); // not yet past the timeout
    ck_assert_int_eq(s_recv(&f, &g, 10), 0);
    prefetch_tick(f.p, 0.5f, clock_now_ms() + 1000);
    uint64_t again[SLOTS];
    s_expect_requests(&f, SLOTS, again, &g);
    ck_assert_uint_eq(again[0], 4);
    ck_assert_uint_eq(prefetch_stats(f.p)->timeouts, SLOTS);
    s_reply_ok(&f, ids[0], BATCH * BATCHES, 1.0f);
    ck_assert_int_eq(s_deliver(&f), PREFETCH_LATE);
    s_teardown(&f);
}
END_TEST

// A deterministic run (learner/prefetch.h): each request carries its place (det_index 1, 2,
// ... in order of issue) and the id WIRE_DET_ID(place, ask); a timed-out request asks for the
// same place again (the next ask), and a reply to the first ask, coming late, fills the slot
// all the same (the replay serves a place once); the updates carry the place; the slot's next
// request takes the next place, as a first ask.
START_TEST(test_det_places_and_late_reply) {
    s_fix f;
    s_setup_det(&f, "100", 1);
    s_got g;
    for (int i = 0; i < SLOTS; i++) {
        int64_t deadline = clock_now_ms() + WAIT_MS;
        while (!s_recv(&f, &g, 10)) {
            ck_assert_int_lt(clock_now_ms(), deadline);
            prefetch_issue(f.p, 0.5f, clock_now_ms());
        }
        ck_assert_int_eq(g.m.type, WIRE_MSG_SAMPLE_REQUEST);
        ck_assert_uint_eq(g.m.u.sample_request.det_index, (uint64_t)i + 1);
        ck_assert_uint_eq(g.m.u.sample_request.id, WIRE_DET_ID(i + 1, 0));
        // The beta of the place (the schedule's start), not the caller's 0.5.
        ck_assert_float_eq(g.m.u.sample_request.beta, (float)f.cfg.learner.beta_start);
    }
    prefetch_tick(f.p, 0.5f, clock_now_ms() + 1000);
    for (int i = 0; i < SLOTS; i++) {
        ck_assert_int_eq(s_recv(&f, &g, WAIT_MS), 1);
        ck_assert_uint_eq(g.m.u.sample_request.det_index, (uint64_t)i + 1);
        ck_assert_uint_eq(g.m.u.sample_request.id, WIRE_DET_ID(i + 1, 1));
    }
    s_reply_ok(&f, WIRE_DET_ID(1, 0), BATCH * BATCHES, 1.0f); // the first ask's, late
    ck_assert_int_eq(s_deliver(&f), PREFETCH_TAKEN);
    s_reply_ok(&f, WIRE_DET_ID(1, 1), BATCH * BATCHES, 2.0f); // no second reply is taken
    ck_assert_int_eq(s_deliver(&f), PREFETCH_LATE);
    float prio[BATCH];
    for (int k = 0; k < BATCHES; k++) {
        prefetch_batch_t b;
        ck_assert_int_eq(prefetch_next(f.p, &b), 1);
        ck_assert_float_eq(b.batch.rewards[0], 1.0f + (float)(k * BATCH));
        for (int r = 0; r < BATCH; r++) {
            prio[r] = 1.0f;
        }
        prefetch_trained(f.p, prio, 0.5f, clock_now_ms());
        ck_assert_int_eq(s_recv(&f, &g, WAIT_MS), 1);
        ck_assert_int_eq(g.m.type, WIRE_MSG_PRIORITY_UPDATE);
        ck_assert_uint_eq(g.m.u.priority_update.det_index, 1);
    }
    ck_assert_int_eq(s_recv(&f, &g, WAIT_MS), 1);
    ck_assert_int_eq(g.m.type, WIRE_MSG_SAMPLE_REQUEST);
    ck_assert_uint_eq(g.m.u.sample_request.det_index, SLOTS + 1);
    ck_assert_uint_eq(g.m.u.sample_request.id, WIRE_DET_ID(SLOTS + 1, 0));
    s_teardown(&f);
}
END_TEST

// Priorities the replay would refuse (a loss gone NaN, or past the wire's bound) are left out
// of the update; a batch with none left sends none.
START_TEST(test_bad_priorities_left_out) {
    s_fix f;
    s_setup(&f, "60000");
    uint64_t ids[SLOTS];
    s_got g;
    s_expect_requests(&f, SLOTS, ids, &g);
    s_reply_ok(&f, ids[0], BATCH * BATCHES, 7.0f);
    ck_assert_int_eq(s_deliver(&f), PREFETCH_TAKEN);
    prefetch_batch_t b;
    ck_assert_int_eq(prefetch_next(f.p, &b), 1);
    float prio[BATCH] = {NAN, 2.0f, INFINITY, nextafterf(WIRE_PRIORITY_MAX, INFINITY)};
    prefetch_trained(f.p, prio, 0.5f, clock_now_ms());
    ck_assert_int_eq(s_recv(&f, &g, WAIT_MS), 1);
    ck_assert_int_eq(g.m.type, WIRE_MSG_PRIORITY_UPDATE);
    ck_assert_uint_eq(g.m.u.priority_update.count, 1);
    ck_assert_uint_eq(g.m.u.priority_update.keys[0], 7001);
    ck_assert_float_eq(g.m.u.priority_update.priorities[0], 2.0f);
    ck_assert_int_eq(prefetch_next(f.p, &b), 1);
    float nan4[BATCH] = {NAN, NAN, -1.0f, NAN};
    prefetch_trained(f.p, nan4, 0.5f, clock_now_ms());
    // No update; the slot's request goes out again (it was its last batch).
    ck_assert_int_eq(s_recv(&f, &g, WAIT_MS), 1);
    ck_assert_int_eq(g.m.type, WIRE_MSG_SAMPLE_REQUEST);
    ck_assert_uint_eq(prefetch_stats(f.p)->bad_priorities, 7);
    s_teardown(&f);
}
END_TEST

Suite *prefetch_suite(void) {
    Suite *s = suite_create("prefetch");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_requests_batches_updates);
    tcase_add_test(tc, test_bad_replies_are_dropped);
    tcase_add_test(tc, test_timeout_reissues);
    tcase_add_test(tc, test_det_places_and_late_reply);
    tcase_add_test(tc, test_bad_priorities_left_out);
    suite_add_tcase(s, tc);
    return s;
}
