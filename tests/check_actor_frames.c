// check_actor_frames.c: the lossless round trip of frame mode (issue #27) through the real
// daemons' code: an actor run in a thread sends its batches to a stub replay (a ROUTER here);
// the same actor (same config and seed: the same episodes, actions and rows, check_actor's
// test_deterministic_batches) runs once with [replay] frame_storage = false, whose batches
// carry every row's obs and next_obs stacks whole, as the actor acted on them, and once with
// frame_storage = true, whose batches carry each frame once and go through the replay server's
// own insert handler (replay_server_handle) into its store. Every row the store holds must
// equal, byte for byte, the whole-stack run's row of the same insertion number, when read back
// and when sampled. Episodes end often (MinAtar Breakout under a random policy; CartPole) so
// the first frames of episodes, repeated in the stacks, and the final frames are covered.
#include "check_apex.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "actor.h"
#include "clock.h"
#include "config.h"
#include "config_shard.h"
#include "rng.h"
#include "server.h"
#include "server_int.h"
#include "store.h"
#include "wire.h"

#define WAIT_MS 20000
#define ROWS 600 // rows compared per env

typedef struct {
    actor_t *actor;
    pthread_t thread;
} s_actor;

static void *s_actor_main(void *arg) {
    actor_run(((s_actor *)arg)->actor, 0);
    return NULL;
}

static void s_load(apex_config_t *cfg, const char *env, int k, int frames, const char *codec) {
    char kv[4][128];
    snprintf(kv[0], sizeof kv[0], "env.id=%s", env);
    snprintf(kv[1], sizeof kv[1], "env.frame_stack=%d", k);
    snprintf(kv[2], sizeof kv[2], "replay.frame_storage=%s", frames ? "true" : "false");
    snprintf(kv[3], sizeof kv[3], "replay.compress=%s", frames ? codec : "none");
    const char *sets[] = {kv[0], kv[1], kv[2], kv[3], "run.seed=3", "network.hidden=16",
                          "actor.num_actors=2", "actor.envs_per_actor=4", "actor.n_step=3",
                          "actor.send_batch=16", "actor.max_pending_batches=4096",
                          // Paced, so that the window cannot fill (and drop batch 0, which
                          // s_collect waits for) before a loaded machine connects the socket.
                          "actor.max_steps_per_s=2000", "actor.eps_base=1", "replay.capacity=4096",
                          "replay.max_batch=64", "learner.batch_size=32",
                          "endpoints.replay_insert_bind=tcp://127.0.0.1:*",
                          "endpoints.replay_sample_bind=tcp://127.0.0.1:*"};
    char err[CONFIG_ERR_LEN];
    ck_assert_msg(
        config_load(cfg, NULL, sets, (int)(sizeof sets / sizeof sets[0]), err, sizeof err) == 0,
        "%s", err);
}

static void *s_bound(void *ctx, int type, char *ep, size_t ep_len) {
    void *s = zmq_socket(ctx, type);
    ck_assert_ptr_nonnull(s);
    int zero = 0, timeout = 200;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    ck_assert_int_eq(zmq_bind(s, "tcp://127.0.0.1:*"), 0);
    ck_assert_int_eq(zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &ep_len), 0);
    return s;
}

// What one run of actor 1 sent, until `rows` rows: whole-stack rows (frame_storage false)
// or, in frame mode, every batch handed to the replay server `into` as it arrived.
typedef struct {
    uint8_t *obs, *next; // (rows, OB) whole-stack runs only
    int32_t *action;
    float *reward, *discount;
    uint32_t n;
    // Frame mode with into == NULL: the batches' payloads as received (malloc'ed).
    uint8_t *raw[64];
    size_t raw_len[64];
    int n_raw;
} s_rows;

static void s_collect(const apex_config_t *base, uint32_t rows, s_rows *out,
                      replay_server_t *into) {
    apex_config_t cfg = *base;
    void *ctx = zmq_ctx_new();
    char ins_ep[256], weights_ep[256], stats_ep[256], err[CONFIG_ERR_LEN], kv[320];
    void *router = s_bound(ctx, ZMQ_ROUTER, ins_ep, sizeof ins_ep);
    void *weights = check_weights_router(ctx, weights_ep, sizeof weights_ep); // silent
    void *pull = s_bound(ctx, ZMQ_PULL, stats_ep, sizeof stats_ep);
    snprintf(kv, sizeof kv, "endpoints.replay_insert=%s", ins_ep);
    ck_assert_int_eq(config_set(&cfg, kv, err, sizeof err), 0);
    snprintf(kv, sizeof kv, "endpoints.learner_weights=%s", weights_ep);
    ck_assert_int_eq(config_set(&cfg, kv, err, sizeof err), 0);
    snprintf(kv, sizeof kv, "endpoints.learner_stats=%s", stats_ep);
    ck_assert_int_eq(config_set(&cfg, kv, err, sizeof err), 0);
    s_actor x = {.actor = actor_new(&cfg, 1)};
    ck_assert_ptr_nonnull(x.actor);
    ck_assert_int_eq(pthread_create(&x.thread, NULL, s_actor_main, &x), 0);
    wire_limits_t lim = {.obs_dim = (uint32_t)cfg.env.obs_dim,
                         .obs_dtype = (uint32_t)cfg.env.obs_dtype,
                         .n_actions = (uint32_t)cfg.env.n_actions,
                         .max_count = 64,
                         .max_actors = 2,
                         .max_frames = 64};
    size_t OB = (size_t)cfg.env.obs_dim * (cfg.env.obs_dtype == CONFIG_OBS_UINT8 ? 1 : 4);
    int frames_mode = config_frame_mode(&cfg);
    lim.frame_stack = frames_mode ? (uint32_t)cfg.env.frame_stack : 0;
    lim.frame_codec = frames_mode ? (uint32_t)cfg.replay.compress : 0;
    wire_decoder_t *dec = wire_decoder_new(&lim);
    out->n_raw = 0;
    if (!frames_mode) {
        out->obs = malloc((rows + 64) * OB);
        out->next = malloc((rows + 64) * OB);
        out->action = malloc((rows + 64) * sizeof(int32_t));
        out->reward = malloc((rows + 64) * sizeof(float));
        out->discount = malloc((rows + 64) * sizeof(float));
    }
    out->n = 0;
    uint64_t seq = 0, frames = 0;
    int64_t deadline = clock_now_ms() + WAIT_MS;
    while (out->n < rows) {
        ck_assert_msg(clock_now_ms() < deadline, "only %u rows from the actor", out->n);
        zmq_msg_t id, msg;
        zmq_msg_init(&id);
        if (zmq_msg_recv(&id, router, 0) < 0) {
            zmq_msg_close(&id);
            continue;
        }
        zmq_msg_init(&msg);
        ck_assert_int_ge(zmq_msg_recv(&msg, router, 0), 0);
        wire_msg_t m;
        int rc = wire_decode(dec, zmq_msg_data(&msg), zmq_msg_size(&msg), &m);
        ck_assert_msg(rc == APEX_OK, "%s", wire_decoder_last_error(dec));
        const wire_batch_t *b = &m.u.batch;
        if (b->seq == seq) { // never acked, the actor re-sends: take each batch once
            seq++;
            if (frames_mode) {
                ck_assert_uint_eq(b->frame_stack, (uint32_t)cfg.env.frame_stack);
                ck_assert_uint_eq(b->first_frame, frames); // each frame once, in order
                frames += b->frame_count;
                if (into) {
                    replay_server_handle(into, REPLAY_SOCK_INSERT, "actor-1", 7, zmq_msg_data(&msg),
                                         zmq_msg_size(&msg), clock_now_ms());
                } else {
                    ck_assert_int_lt(out->n_raw, 64);
                    out->raw_len[out->n_raw] = zmq_msg_size(&msg);
                    out->raw[out->n_raw] = malloc(zmq_msg_size(&msg));
                    memcpy(out->raw[out->n_raw++], zmq_msg_data(&msg), zmq_msg_size(&msg));
                }
            } else {
                ck_assert_uint_eq(b->frame_stack, 0);
                memcpy(out->obs + out->n * OB, b->obs, b->count * OB);
                memcpy(out->next + out->n * OB, b->next_obs, b->count * OB);
                memcpy(out->action + out->n, b->actions, b->count * sizeof(int32_t));
                memcpy(out->reward + out->n, b->rewards, b->count * sizeof(float));
                memcpy(out->discount + out->n, b->discounts, b->count * sizeof(float));
            }
            out->n += b->count;
        }
        zmq_msg_close(&id);
        zmq_msg_close(&msg);
    }
    actor_stop(x.actor);
    pthread_join(x.thread, NULL);
    actor_destroy(&x.actor);
    wire_decoder_destroy(&dec);
    zmq_close(router);
    zmq_close(weights);
    zmq_close(pull);
    zmq_ctx_term(ctx);
}

static void s_round_trip(const char *env, int k, const char *codec) {
    apex_config_t whole, framed;
    s_load(&whole, env, k, 0, codec);
    s_load(&framed, env, k, 1, codec);
    s_rows ref, got;
    s_collect(&whole, ROWS, &ref, NULL);
    replay_server_t *srv = replay_server_new(&framed, 0);
    ck_assert_ptr_nonnull(srv);
    s_collect(&framed, ROWS, &got, srv);
    store_t *st = srv->store;
    ck_assert_uint_eq(store_frame_stack(st), (uint32_t)k);
    ck_assert_uint_eq(store_frame_codec(st), (uint32_t)framed.replay.compress);
    ck_assert_uint_eq(store_frames_missing(st), 0);
    ck_assert_uint_eq(srv->bad_total, 0); // every compressed frame decompressed
    ck_assert_uint_ge(store_size(st), ROWS);
    // Each frame once: about one frame per row (plus the first frame of each episode).
    ck_assert_uint_lt(store_frames_inserted(st), 2 * store_size(st));
    size_t OB = (size_t)framed.env.obs_dim * (framed.env.obs_dtype == CONFIG_OBS_UINT8 ? 1 : 4);
    uint8_t *o = malloc(OB), *nx = malloc(OB);
    for (uint32_t i = 0; i < ROWS; i++) {
        int32_t a;
        float r, d;
        ck_assert_int_eq(store_read_slot(st, i, o, &a, &r, &d, nx), 0);
        ck_assert_msg(memcmp(o, ref.obs + i * OB, OB) == 0, "%s: row %u's obs differs", env, i);
        ck_assert_msg(memcmp(nx, ref.next + i * OB, OB) == 0, "%s: row %u's next_obs differs", env,
                      i);
        ck_assert_int_eq(a, ref.action[i]);
        ck_assert_float_eq(r, ref.reward[i]);
        ck_assert_float_eq(d, ref.discount[i]);
    }
    // Some episodes ended within the rows compared (terminal rows have discount 0).
    int terminal = 0;
    for (uint32_t i = 0; i < ROWS; i++) {
        terminal += ref.discount[i] == 0.0f;
    }
    ck_assert_int_gt(terminal, 5);
    // Sampled rows are the same stacks (the key's slot is the insertion number here).
    enum { N = 64 };
    uint64_t keys[N];
    float w[N], rr[N], dd[N];
    int32_t aa[N];
    uint8_t *so = malloc(N * OB), *sn = malloc(N * OB);
    rng_t rng;
    rng_init(&rng, 4);
    ck_assert_int_eq(store_sample(st, &rng, N, 0.4f, keys, w, so, aa, rr, dd, sn), APEX_OK);
    for (int i = 0; i < N; i++) {
        uint32_t slot = WIRE_KEY_SLOT(keys[i]);
        if (slot < ROWS) {
            ck_assert(memcmp(so + i * OB, ref.obs + (size_t)slot * OB, OB) == 0);
            ck_assert(memcmp(sn + i * OB, ref.next + (size_t)slot * OB, OB) == 0);
        }
    }
    free(so);
    free(sn);
    free(o);
    free(nx);
    free(ref.obs);
    free(ref.next);
    free(ref.action);
    free(ref.reward);
    free(ref.discount);
    replay_server_destroy(&srv);
}

// Batches that arrive before one they depend on (after a replay restart the actor sends new
// batches at once and re-sends the lost ones at their ack timeout) are held back unacknowledged
// until the missing one is stored, then taken when re-sent: nothing is lost. A gap that is
// never filled is given up after 4 ack timeouts: the batch is stored, its rows that name the
// lost frames refused.
START_TEST(test_frames_out_of_order_held_back) {
    apex_config_t cfg;
    s_load(&cfg, "MinAtar/Breakout-v0", 4, 1, "none");
    s_rows got;
    s_collect(&cfg, 120, &got, NULL);
    ck_assert_int_ge(got.n_raw, 5);
    replay_server_t *srv = replay_server_new(&cfg, 0);
    ck_assert_ptr_nonnull(srv);
    int64_t t = 1000000;
#define FEED(i, now)                                                                               \
    replay_server_handle(srv, REPLAY_SOCK_INSERT, "actor-1", 7, got.raw[i], got.raw_len[i], now)
    FEED(0, t);
    uint64_t after0 = store_inserted(srv->store);
    FEED(2, t); // before 1: held back
    ck_assert_uint_eq(store_inserted(srv->store), after0);
    ck_assert_uint_eq(srv->frames_deferred, 1);
    FEED(1, t + 100);
    FEED(2, t + 3100); // the re-send: taken
    ck_assert_uint_gt(store_inserted(srv->store), after0);
    ck_assert_uint_eq(store_frames_missing(srv->store), 0);
    // 3 never comes: 4 is held back until 4 ack timeouts have passed since it first came.
    uint64_t before4 = store_inserted(srv->store);
    FEED(4, t + 4000);
    FEED(4, t + 4000 + 4 * cfg.actor.ack_timeout_ms - 1);
    ck_assert_uint_eq(store_inserted(srv->store), before4);
    FEED(4, t + 4000 + 4 * cfg.actor.ack_timeout_ms);
    ck_assert_uint_eq(srv->frame_gaps_skipped, 1);
    ck_assert_uint_gt(store_frames_inserted(srv->store), 0);
    ck_assert_uint_gt(store_frames_missing(srv->store), 0); // rows naming batch 3's frames
#undef FEED
    for (int i = 0; i < got.n_raw; i++) {
        free(got.raw[i]);
    }
    replay_server_destroy(&srv);
}
END_TEST

START_TEST(test_frames_lossless_minatar) { s_round_trip("MinAtar/Breakout-v0", 4, "none"); }
END_TEST

START_TEST(test_frames_lossless_cartpole_float) { s_round_trip("CartPole-v1", 3, "none"); }
END_TEST

// Compressed frames ([replay] compress): the same rows byte for byte, zstd on MinAtar's bytes
// (stacks of 4, and single frames, where compression alone turns frame storage on), LZ4 on
// CartPole's floats.
START_TEST(test_frames_lossless_compressed) {
    s_round_trip("MinAtar/Breakout-v0", 4, "zstd");
    s_round_trip("MinAtar/Breakout-v0", 1, "zstd");
    s_round_trip("CartPole-v1", 3, "lz4");
}
END_TEST

Suite *actor_frames_suite(void) {
    Suite *s = suite_create("actor_frames");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_frames_lossless_minatar);
    tcase_add_test(tc, test_frames_lossless_cartpole_float);
    tcase_add_test(tc, test_frames_lossless_compressed);
    tcase_add_test(tc, test_frames_out_of_order_held_back);
    suite_add_tcase(s, tc);
    return s;
}
