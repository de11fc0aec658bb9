// check_actor.c: apex-actor through its real interfaces, run in a thread of this process:
// against a real replay server (batches stored and acknowledged, a replay restart survived),
// a stub learner weights endpoint (a ROUTER here that reads the actor's WeightsRequests and
// answers with Weights, check_apex.h), a stub replay (a ROUTER here, to capture the first
// TransitionBatch bytes: same seed, same bytes) and a stub learner stats sink (a PULL here,
// to read ActorStats and their per-episode epsilons).
// Everything binds ephemeral loopback ports; waits are bounded by WAIT_MS and poll for a
// condition, never assert on how long something took.
#include "check_apex.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "actor.h"
#include "clock.h"
#include "config.h"
#include "nn.h"
#include "rng.h"
#include "server.h"
#include "wire.h"

#define OBS 4 // CartPole-v1
#define ACTIONS 2
#define ENVS 4   // [actor] envs_per_actor
#define ACTORS 2 // [actor] num_actors
#define BATCH 16 // [actor] send_batch
#define WAIT_MS 10000

// ---------------------------------------------------------------------------------------
// Config and helpers

static void s_set(apex_config_t *cfg, const char *fmt, ...) {
    char kv[CONFIG_STR_LEN + 64], err[CONFIG_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(kv, sizeof kv, fmt, ap);
    va_end(ap);
    ck_assert_msg(config_set(cfg, kv, err, sizeof err) == 0, "%s: %s", kv, err);
}

// Small network and batches; the actor is rate-limited so that it does not take a whole
// core of the (shared) machine or flood the replay server.
static void s_config(apex_config_t *cfg, int64_t seed) {
    const char *sets[] = {"network.hidden=16",
                          "network.dueling=true",
                          "actor.num_actors=2",
                          "actor.envs_per_actor=4",
                          "actor.n_step=3",
                          "actor.gamma=0.99",
                          "actor.send_batch=16",
                          "actor.weight_sync_steps=40",
                          "actor.max_pending_batches=64",
                          "actor.stats_interval_ms=50",
                          "actor.max_steps_per_s=500",
                          "actor.eps_base=0.4",
                          "actor.eps_alpha=7",
                          "replay.capacity=4096",
                          "replay.min_size_to_sample=1",
                          "replay.max_batch=64",
                          "replay.sample_timeout_ms=200",
                          "learner.batch_size=32",
                          "endpoints.replay_insert_bind=tcp://127.0.0.1:*",
                          "endpoints.replay_sample_bind=tcp://127.0.0.1:*"};
    char err[CONFIG_ERR_LEN];
    int n = (int)(sizeof sets / sizeof sets[0]);
    ck_assert_msg(config_load(cfg, NULL, sets, n, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(cfg->env.obs_dim, OBS);
    ck_assert_int_eq(cfg->env.n_actions, ACTIONS);
    s_set(cfg, "run.seed=%lld", (long long)seed);
}

static void s_net_config(nn_config_t *n) {
    *n = (nn_config_t){
        .obs_dim = OBS, .n_actions = ACTIONS, .n_hidden = 1, .hidden = {16}, .dueling = 1};
}

static wire_decoder_t *s_decoder(void) {
    nn_config_t n;
    s_net_config(&n);
    wire_limits_t lim = {.obs_dim = OBS,
                         .n_actions = ACTIONS,
                         .num_params = (uint32_t)nn_num_params(&n),
                         .max_count = 64,
                         .max_episodes = 4096};
    return wire_decoder_new(&lim);
}

static void s_sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

// A socket of the test's, bound to an ephemeral loopback port whose endpoint goes to ep.
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

// ---------------------------------------------------------------------------------------
// Daemons in threads

typedef struct {
    actor_t *actor;
    pthread_t thread;
    int rc;
} s_actor;

static void *s_actor_main(void *arg) {
    s_actor *x = arg;
    x->rc = actor_run(x->actor, 0);
    return NULL;
}

static void s_actor_start(s_actor *x, const apex_config_t *cfg, int index) {
    x->actor = actor_new(cfg, index);
    ck_assert_ptr_nonnull(x->actor);
    x->rc = -2;
    ck_assert_int_eq(pthread_create(&x->thread, NULL, s_actor_main, x), 0);
}

// Stops and joins the actor (which must have been running all along: actor_run returns
// only because it was asked to), leaving its final stats in *st; destroys it.
static void s_actor_stop(s_actor *x, actor_stats_t *st) {
    actor_stop(x->actor);
    ck_assert_int_eq(pthread_join(x->thread, NULL), 0);
    ck_assert_int_eq(x->rc, 0);
    actor_get_stats(x->actor, st);
    actor_destroy(&x->actor);
}

// Stub learner: Weights{version} with the num_params floats of p, encoded into *b (which
// this initialises; the caller frees it with wire_buf_fini).
static void s_weights(wire_buf_t *b, uint64_t version, const nn_params_t *p) {
    wire_buf_init(b, 0);
    check_encode_weights(b, version, p->data, (uint32_t)p->num_params);
}

// Polls the actor's stats until pred holds (answering every waiting weights request on
// router with the encoded Weights in answer every round, when router is not NULL); fails
// the test after WAIT_MS. Returns the last snapshot.
typedef int (*s_pred)(const actor_stats_t *st, const actor_stats_t *ref);

static actor_stats_t s_wait(const s_actor *x, s_pred pred, const actor_stats_t *ref,
                            const char *what, void *router, const wire_buf_t *answer) {
    int64_t deadline = clock_now_ms() + WAIT_MS;
    actor_stats_t st;
    for (;;) {
        if (router) {
            check_weights_answer(router, answer, NULL);
        }
        actor_get_stats(x->actor, &st);
        if (pred(&st, ref)) {
            return st;
        }
        ck_assert_msg(clock_now_ms() < deadline,
                      "waited in vain for %s: steps %llu acked %llu dropped %llu weights v%llu "
                      "bad %llu",
                      what, (unsigned long long)st.steps, (unsigned long long)st.batches_acked,
                      (unsigned long long)st.batches_dropped,
                      (unsigned long long)st.weights_version, (unsigned long long)st.bad_messages);
        s_sleep_ms(20);
    }
}

static int s_acked_more(const actor_stats_t *st, const actor_stats_t *ref) {
    return st->batches_acked >= ref->batches_acked + 3;
}
static int s_dropped_more(const actor_stats_t *st, const actor_stats_t *ref) {
    return st->batches_dropped > ref->batches_dropped && st->steps > ref->steps;
}
static int s_has_version(const actor_stats_t *st, const actor_stats_t *ref) {
    return st->weights_version == ref->weights_version;
}
static int s_has_version_and_bad(const actor_stats_t *st, const actor_stats_t *ref) {
    return st->weights_version == ref->weights_version && st->bad_messages >= ref->bad_messages;
}

// ---------------------------------------------------------------------------------------
// Tests

// A real replay server, a stub learner (ROUTER answering weights requests, PULL of stats)
// and a running actor 0 wired to them; w holds random weights for the stub to answer with.
typedef struct {
    apex_config_t cfg;
    check_replay_t r;
    void *ctx, *weights, *pull;
    nn_params_t w;
    s_actor x;
} s_upstream;

static void s_upstream_start(s_upstream *u) {
    s_config(&u->cfg, 7);
    check_replay_start(&u->r, &u->cfg);
    u->ctx = zmq_ctx_new();
    char weights_ep[256], stats_ep[256];
    u->weights = check_weights_router(u->ctx, weights_ep, sizeof weights_ep);
    u->pull = s_bound(u->ctx, ZMQ_PULL, stats_ep, sizeof stats_ep);
    s_set(&u->cfg, "endpoints.replay_insert=%s", replay_server_insert_endpoint(u->r.server));
    s_set(&u->cfg, "endpoints.learner_weights=%s", weights_ep);
    s_set(&u->cfg, "endpoints.learner_stats=%s", stats_ep);
    nn_config_t n;
    s_net_config(&n);
    nn_params_init(&u->w, &n);
    rng_t rng;
    rng_init_stream(&rng, 1234, RNG_ROLE_TEST, 0);
    nn_params_init_random(&u->w, &rng);
    s_actor_start(&u->x, &u->cfg, 0);
}

// After s_actor_stop: stops the replay (its final stats in *rs) and frees the rest.
static void s_upstream_fini(s_upstream *u, wire_replay_stats_t *rs) {
    check_replay_stop(&u->r, rs);
    nn_params_fini(&u->w);
    zmq_close(u->weights);
    zmq_close(u->pull);
    zmq_ctx_term(u->ctx);
}

// Batches reach a real replay server and are acknowledged; weights the learner answers
// with are taken, and newer versions replace older ones.
START_TEST(test_feeds_replay_and_takes_weights) {
    s_upstream u;
    s_upstream_start(&u);
    s_actor *x = &u.x;
    wire_buf_t v5, v6;
    s_weights(&v5, 5, &u.w);
    s_weights(&v6, 6, &u.w);
    actor_stats_t zero = {0}, want = {.weights_version = 5};
    s_wait(x, s_acked_more, &zero, "acknowledged batches", NULL, NULL);
    s_wait(x, s_has_version, &want, "weights v5", u.weights, &v5);
    want.weights_version = 6;
    s_wait(x, s_has_version, &want, "weights v6", u.weights, &v6);
    wire_buf_fini(&v5);
    wire_buf_fini(&v6);
    actor_stats_t st;
    s_actor_stop(x, &st);
    ck_assert_uint_eq(st.weights_version, 6);
    ck_assert_uint_ge(st.weight_updates, 2);
    ck_assert_uint_gt(st.batches_acked, 0);
    ck_assert_uint_le(st.batches_acked, st.batches_sent);
    ck_assert_uint_eq(st.bad_messages, 0);
    ck_assert_uint_gt(st.steps, 0);
    wire_replay_stats_t rs;
    s_upstream_fini(&u, &rs);
    // Stopping, the actor shipped its last rows and waited for their acks: every batch sent
    // was acknowledged, and the replay holds exactly the rows acknowledged; nothing was
    // malformed.
    ck_assert_uint_eq(st.batches_acked, st.batches_sent);
    ck_assert_uint_eq(rs.inserted, st.rows_acked);
    ck_assert_uint_le(rs.inserted, st.batches_sent * BATCH);
    ck_assert_uint_eq(rs.bad_messages, 0);
}
END_TEST

// Weights go forward only: an older version arriving after a newer one (a killed learner's
// last answer, still queued at the actor when its successor's arrive: each request is
// answered here with the live learner's weights followed by the straggler) is ignored while
// the newer one is still heard; once it has not been for 3 s (a learner started afresh,
// counting from zero again), the older one is taken.
static int s_synced_more(const actor_stats_t *st, const actor_stats_t *ref) {
    return st->weight_syncs >= ref->weight_syncs + 5;
}

START_TEST(test_weights_never_go_back) {
    s_upstream u;
    s_upstream_start(&u);
    const uint64_t newer = (2ull << 32) | 7, older = (1ull << 32) | 900;
    wire_buf_t b_newer, b_older;
    s_weights(&b_newer, newer, &u.w);
    s_weights(&b_older, older, &u.w);
    actor_stats_t want = {.weights_version = newer}, st;
    s_wait(&u.x, s_has_version, &want, "the newer weights", u.weights, &b_newer);
    actor_get_stats(u.x.actor, &st);
    actor_stats_t from = st;
    int64_t deadline = clock_now_ms() + WAIT_MS;
    // Each round waits for a request: the actor asks again only after it has read an answer,
    // so every straggler but the last has reached it before the next round. The pause only
    // keeps the rounds from running at network speed (no assertion depends on it).
    for (int rounds = 0; rounds < 5 || !s_synced_more(&st, &from); rounds++) {
        check_weights_request_t q;
        ck_assert_msg(check_weights_wait_request(u.weights, deadline, &q), "no weights request");
        ck_assert_uint_eq(q.have_version, newer);
        check_weights_send(u.weights, &q, b_newer.data, b_newer.len, 0);
        check_weights_send(u.weights, &q, b_older.data, b_older.len, 0);
        actor_get_stats(u.x.actor, &st);
        ck_assert_msg(st.weights_version == newer, "went back to v%llu",
                      (unsigned long long)st.weights_version);
        ck_assert_msg(clock_now_ms() < deadline, "no weight syncs");
        s_sleep_ms(20);
    }
    // Only the older version now: taken after the newer one has been quiet for 3 s.
    want.weights_version = older;
    s_wait(&u.x, s_has_version, &want, "the older weights, once the newer went quiet", u.weights,
           &b_older);
    s_actor_stop(&u.x, &st);
    ck_assert_uint_eq(st.weights_version, older);
    wire_buf_fini(&b_newer);
    wire_buf_fini(&b_older);
    wire_replay_stats_t rs;
    s_upstream_fini(&u, &rs);
}
END_TEST

// The holding protocol (the learner answers a request whose have_version is its current
// version only when a newer one exists, common/weights_client.h) rests on this: the actor's
// first request says it holds nothing (0); every request after an answer names the newest
// version it holds, not the last one that arrived (a straggler older than the held one is
// no reason to ask for anything else).
START_TEST(test_asks_with_newest_version) {
    s_upstream u;
    s_upstream_start(&u);
    wire_buf_t v5, v7, v3;
    s_weights(&v5, 5, &u.w);
    s_weights(&v7, 7, &u.w);
    s_weights(&v3, 3, &u.w);
    int64_t deadline = clock_now_ms() + WAIT_MS;
    check_weights_request_t q;
    ck_assert(check_weights_wait_request(u.weights, deadline, &q));
    ck_assert_uint_eq(q.have_version, 0);
    check_weights_send(u.weights, &q, v5.data, v5.len, 0);
    // The next request goes out as soon as the answer is read. One naming the previous
    // version again can only be a re-send of the request already answered (after
    // WEIGHTS_RESEND_MS on a loaded machine): skipped.
    do {
        ck_assert_msg(check_weights_wait_request(u.weights, deadline, &q), "no request after v5");
    } while (q.have_version == 0);
    ck_assert_uint_eq(q.have_version, 5);
    check_weights_send(u.weights, &q, v7.data, v7.len, 0);
    check_weights_send(u.weights, &q, v3.data, v3.len, 0); // an older straggler
    do {
        ck_assert_msg(check_weights_wait_request(u.weights, deadline, &q), "no request after v7");
    } while (q.have_version == 5);
    ck_assert_uint_eq(q.have_version, 7);
    // The requests that answering the straggler brings still name 7.
    check_weights_send(u.weights, &q, v3.data, v3.len, 0);
    ck_assert(check_weights_wait_request(u.weights, deadline, &q));
    ck_assert_uint_eq(q.have_version, 7);
    actor_stats_t want = {.weights_version = 7}, st;
    s_wait(&u.x, s_has_version, &want, "weights v7", u.weights, &v7);
    s_actor_stop(&u.x, &st);
    ck_assert_uint_eq(st.weights_version, 7);
    ck_assert_uint_eq(st.bad_messages, 0);
    wire_buf_fini(&v5);
    wire_buf_fini(&v7);
    wire_buf_fini(&v3);
    wire_replay_stats_t rs;
    s_upstream_fini(&u, &rs);
}
END_TEST

// A learner that answers with multipart messages and garbage around valid weights (anyone
// bound where the actor connects can), and with a message of another kind (a
// WeightsRequest, as a confused peer would echo): the actor counts the bad ones, keeps
// stepping and takes the valid weights. (With ZMQ_CONFLATE on the old SUB, libzmq 4.3.4
// asserted on a multipart message.)
START_TEST(test_weights_amid_multipart_and_garbage) {
    s_upstream u;
    s_upstream_start(&u);
    s_actor *x = &u.x;
    wire_buf_t v9, req;
    s_weights(&v9, 9, &u.w);
    wire_buf_init(&req, 0);
    wire_msg_t m = {.type = WIRE_MSG_WEIGHTS_REQUEST};
    m.u.weights_request.have_version = 9;
    wire_encode(&m, &req);
    actor_stats_t zero = {0};
    s_wait(x, s_acked_more, &zero, "acknowledged batches", NULL, NULL);
    int64_t deadline = clock_now_ms() + WAIT_MS;
    // One answer: [junk][junk], then a lone junk frame, then valid weights v9, then junk
    // again. A queue is decoded in order, so the valid message in the middle must still
    // count. Nothing else is answered: v9 can only come from there.
    check_weights_request_t q;
    ck_assert_msg(check_weights_wait_request(u.weights, deadline, &q), "no weights request");
    const char junk[] = "not a protobuf at all";
    check_weights_send(u.weights, &q, junk, sizeof junk, ZMQ_SNDMORE);
    ck_assert_int_eq(zmq_send(u.weights, junk, sizeof junk, 0), (int)sizeof junk);
    check_weights_send(u.weights, &q, junk, sizeof junk, 0);
    check_weights_send(u.weights, &q, v9.data, v9.len, 0);
    check_weights_send(u.weights, &q, junk, 3, 0);
    actor_stats_t want = {.weights_version = 9, .bad_messages = 3};
    actor_stats_t st = s_wait(x, s_has_version_and_bad, &want, "weights v9 amid 3 bad messages",
                              NULL, NULL);
    ck_assert_uint_eq(st.bad_messages, 3); // each counted once, the multipart one too
    // A well-formed message of the wrong kind is refused and counted too, and changes nothing
    // (sent to the same peer: a ROUTER may send to a routing id whenever it likes).
    check_weights_send(u.weights, &q, req.data, req.len, 0);
    want.bad_messages = 4;
    st = s_wait(x, s_has_version_and_bad, &want, "a WeightsRequest counted as bad", NULL, NULL);
    ck_assert_uint_eq(st.bad_messages, 4);
    actor_stats_t before = st;
    ck_assert_uint_eq(st.weights_version, 9);
    s_wait(x, s_acked_more, &before, "more acknowledged batches", NULL, NULL);
    s_actor_stop(x, &st);
    ck_assert_uint_eq(st.weights_version, 9);
    ck_assert_uint_eq(st.weight_updates, 1);
    ck_assert_uint_gt(st.steps, before.steps);
    wire_buf_fini(&v9);
    wire_buf_fini(&req);
    wire_replay_stats_t rs;
    s_upstream_fini(&u, &rs);
}
END_TEST

// A learner that takes the requests but never answers (hung, or its answers lost): the
// actor keeps stepping, and once its weights link has been silent for 5 s
// (SILENT_RECONNECT_MS in actor.c) it reconnects, so its next request comes over a new
// connection, which the ROUTER names with a new routing id. Every request says it holds
// nothing. Takes those 5 s.
START_TEST(test_silent_learner_reconnected) {
    s_upstream u;
    s_upstream_start(&u);
    actor_stats_t st0;
    actor_get_stats(u.x.actor, &st0);
    check_weights_request_t q;
    check_weights_wait_reconnect(u.weights, clock_now_ms() + WAIT_MS, 0, &q);
    actor_stats_t st = s_wait(&u.x, s_acked_more, &st0, "batches acked all along", NULL, NULL);
    ck_assert_uint_gt(st.steps, st0.steps);
    s_actor_stop(&u.x, &st);
    ck_assert_uint_eq(st.weights_version, 0);
    ck_assert_uint_eq(st.bad_messages, 0);
    wire_replay_stats_t rs;
    s_upstream_fini(&u, &rs);
}
END_TEST

// The replay server goes away: the actor keeps stepping, buffers up to max_pending_batches
// and then drops the oldest, counted. A new server on the same endpoint gets batches again.
// The actor never exits on its own.
START_TEST(test_survives_replay_restart) {
    apex_config_t cfg;
    s_config(&cfg, 7);
    s_set(&cfg, "actor.max_pending_batches=4");
    check_replay_t r;
    check_replay_start(&r, &cfg);
    s_set(&cfg, "endpoints.replay_insert_bind=%s", replay_server_insert_endpoint(r.server));
    s_set(&cfg, "endpoints.replay_sample_bind=%s", replay_server_sample_endpoint(r.server));
    s_set(&cfg, "endpoints.replay_insert=%s", replay_server_insert_endpoint(r.server));
    void *ctx = zmq_ctx_new();
    char weights_ep[256], stats_ep[256];
    void *weights = check_weights_router(ctx, weights_ep, sizeof weights_ep); // never answers
    void *pull = s_bound(ctx, ZMQ_PULL, stats_ep, sizeof stats_ep);
    s_set(&cfg, "endpoints.learner_weights=%s", weights_ep);
    s_set(&cfg, "endpoints.learner_stats=%s", stats_ep);
    s_actor x;
    s_actor_start(&x, &cfg, 0);
    actor_stats_t zero = {0};
    s_wait(&x, s_acked_more, &zero, "acknowledged batches", NULL, NULL);
    wire_replay_stats_t rs1, rs2;
    check_replay_stop(&r, &rs1);
    ck_assert_uint_gt(rs1.inserted, 0);
    actor_stats_t down;
    actor_get_stats(x.actor, &down);
    actor_stats_t dropping = s_wait(&x, s_dropped_more, &down, "drops while replay is down", NULL,
                                    NULL);
    check_replay_start(&r, &cfg); // same ports
    actor_stats_t back = s_wait(&x, s_acked_more, &dropping, "acks from the new replay", NULL,
                                NULL);
    ck_assert_uint_gt(back.steps, dropping.steps);
    actor_stats_t st;
    s_actor_stop(&x, &st);
    check_replay_stop(&r, &rs2);
    ck_assert_uint_gt(rs2.inserted, 0);
    ck_assert_uint_eq(rs2.bad_messages, 0);
    ck_assert_uint_gt(st.batches_dropped, 0);
    zmq_close(weights);
    zmq_close(pull);
    zmq_ctx_term(ctx);
}
END_TEST

// Runs actor `index` with seed against a ROUTER of the test's, standing in for the replay
// server (and with a learner that never answers a weights request), and returns its first n
// TransitionBatch payloads (malloc'ed, *lens their sizes).
static void s_first_batches(int64_t seed, int index, int n, unsigned char **bufs, size_t *lens) {
    apex_config_t cfg;
    s_config(&cfg, seed);
    // (the stand-in never acknowledges: the stopping actor waits this long for its acks)
    s_set(&cfg, "actor.ack_timeout_ms=1000");
    void *ctx = zmq_ctx_new();
    char ins_ep[256], weights_ep[256], stats_ep[256];
    void *router = s_bound(ctx, ZMQ_ROUTER, ins_ep, sizeof ins_ep);
    void *weights = check_weights_router(ctx, weights_ep, sizeof weights_ep); // silent
    void *pull = s_bound(ctx, ZMQ_PULL, stats_ep, sizeof stats_ep);
    s_set(&cfg, "endpoints.replay_insert=%s", ins_ep);
    s_set(&cfg, "endpoints.learner_weights=%s", weights_ep);
    s_set(&cfg, "endpoints.learner_stats=%s", stats_ep);
    s_actor x;
    s_actor_start(&x, &cfg, index);
    wire_decoder_t *dec = s_decoder();
    int64_t deadline = clock_now_ms() + WAIT_MS;
    for (int k = 0; k < n;) {
        ck_assert_msg(clock_now_ms() < deadline, "no batch %d from the actor", k);
        zmq_msg_t id, msg;
        zmq_msg_init(&id);
        if (zmq_msg_recv(&id, router, 0) < 0) {
            zmq_msg_close(&id);
            continue; // receive timeout: look at the deadline again
        }
        ck_assert(zmq_msg_more(&id));
        zmq_msg_init(&msg);
        ck_assert_int_ge(zmq_msg_recv(&msg, router, 0), 0);
        wire_msg_t m;
        ck_assert_int_eq(wire_decode(dec, zmq_msg_data(&msg), zmq_msg_size(&msg), &m), APEX_OK);
        ck_assert_int_eq(m.type, WIRE_MSG_TRANSITION_BATCH);
        ck_assert_uint_eq(m.u.batch.actor_id, (uint32_t)index);
        ck_assert_uint_eq(m.u.batch.seq, (uint64_t)k); // none lost: these are the first
        ck_assert_uint_eq(m.u.batch.count, BATCH);
        ck_assert_uint_eq(m.u.batch.weights_version, 0);
        ck_assert_ptr_nonnull(m.u.batch.priorities);
        // Everything but the epoch (which names the process run, by design not a function of
        // the seed) must repeat: compare the re-encoded batch with the epoch zeroed.
        ck_assert_uint_ne(m.u.batch.epoch, 0);
        m.u.batch.epoch = 0;
        wire_buf_t canon;
        wire_buf_init(&canon, 0);
        wire_encode(&m, &canon);
        lens[k] = canon.len;
        bufs[k] = malloc(lens[k]);
        memcpy(bufs[k], canon.data, lens[k]);
        wire_buf_fini(&canon);
        zmq_msg_close(&id);
        zmq_msg_close(&msg);
        k++;
    }
    actor_stats_t st;
    s_actor_stop(&x, &st);
    ck_assert_uint_eq(st.weights_version, 0);
    wire_decoder_destroy(&dec);
    zmq_close(router);
    zmq_close(weights);
    zmq_close(pull);
    zmq_ctx_term(ctx);
}

// Same config, seed and index: the first batches are identical byte for byte (STYLE S11),
// apart from the epoch that names the actor process's run.
// Another seed: different bytes.
START_TEST(test_deterministic_batches) {
    enum { N = 3 };
    unsigned char *a[N], *b[N], *c[N];
    size_t la[N], lb[N], lc[N];
    s_first_batches(7, 1, N, a, la);
    s_first_batches(7, 1, N, b, lb);
    s_first_batches(8, 1, N, c, lc);
    for (int k = 0; k < N; k++) {
        ck_assert_uint_eq(la[k], lb[k]);
        ck_assert_msg(memcmp(a[k], b[k], la[k]) == 0, "batch %d differs between two runs", k);
    }
    ck_assert_msg(la[0] != lc[0] || memcmp(a[0], c[0], la[0]) != 0,
                  "seed 8 produced the same first batch as seed 7");
    for (int k = 0; k < N; k++) {
        free(a[k]);
        free(b[k]);
        free(c[k]);
    }
}
END_TEST

// ActorStats carry each finished episode's epsilon: for actor 1 of 2 with 4 envs (N = 8
// envs in all), Ape-X's eps_i = 0.4^(1 + 7 i / 7) = 0.4^(1 + i) for global i = 4..7.
// CartPole pays 1 per step, so every return equals its episode's length.
START_TEST(test_stats_carry_apex_epsilons) {
    apex_config_t cfg;
    s_config(&cfg, 7);
    s_set(&cfg, "actor.max_steps_per_s=2000");
    s_set(&cfg, "actor.ack_timeout_ms=1000"); // (an unread stand-in: the stop waits this long)
    void *ctx = zmq_ctx_new();
    char ins_ep[256], weights_ep[256], stats_ep[256];
    void *router = s_bound(ctx, ZMQ_ROUTER, ins_ep, sizeof ins_ep); // unread replay stand-in
    void *weights = check_weights_router(ctx, weights_ep, sizeof weights_ep); // never answers
    void *pull = s_bound(ctx, ZMQ_PULL, stats_ep, sizeof stats_ep);
    s_set(&cfg, "endpoints.replay_insert=%s", ins_ep);
    s_set(&cfg, "endpoints.learner_weights=%s", weights_ep);
    s_set(&cfg, "endpoints.learner_stats=%s", stats_ep);
    double want[ENVS];
    for (int k = 0; k < ENVS; k++) {
        want[k] = pow(0.4, 1.0 + (double)(1 * ENVS + k));
    }
    s_actor x;
    s_actor_start(&x, &cfg, 1);
    wire_decoder_t *dec = s_decoder();
    int seen[ENVS] = {0}, n_seen = 0, episodes = 0;
    uint64_t frames = 0;
    int64_t deadline = clock_now_ms() + WAIT_MS;
    while (n_seen < ENVS) {
        ck_assert_msg(clock_now_ms() < deadline, "only %d of %d epsilons seen in %d episodes",
                      n_seen, ENVS, episodes);
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, pull, 0) < 0) {
            zmq_msg_close(&msg);
            continue;
        }
        wire_msg_t m;
        ck_assert_int_eq(wire_decode(dec, zmq_msg_data(&msg), zmq_msg_size(&msg), &m), APEX_OK);
        ck_assert_int_eq(m.type, WIRE_MSG_ACTOR_STATS);
        const wire_actor_stats_t *s = &m.u.actor_stats;
        ck_assert_uint_eq(s->actor_id, 1);
        ck_assert_uint_ge(s->frames, frames);
        ck_assert_uint_eq(s->weights_version, 0);
        frames = s->frames;
        for (uint32_t e = 0; e < s->n_episodes; e++) {
            int match = -1;
            for (int k = 0; k < ENVS; k++) {
                if (fabs((double)s->epsilons[e] - want[k]) <= 1e-6 * want[k]) {
                    match = k;
                }
            }
            ck_assert_msg(match >= 0, "episode epsilon %.9g is none of actor 1's",
                          (double)s->epsilons[e]);
            n_seen += !seen[match];
            seen[match] = 1;
            ck_assert_uint_ge(s->lengths[e], 1);
            ck_assert_float_eq(s->returns[e], (float)s->lengths[e]);
            episodes++;
        }
        zmq_msg_close(&msg);
    }
    actor_stats_t st;
    s_actor_stop(&x, &st);
    ck_assert_uint_ge(st.episodes, (uint64_t)episodes);
    wire_decoder_destroy(&dec);
    zmq_close(router);
    zmq_close(weights);
    zmq_close(pull);
    zmq_ctx_term(ctx);
}
END_TEST

// [run] deterministic: the period's last batch carries the actor's totals through it and the
// returns of its episodes (TransitionBatch.det_*), for the replay to count in its schedule.
// One period of 400 frames (4 envs x 100 steps; the stand-in learner never sends target 1, so
// the actor stops there): the earlier batches carry none of it; the last one says 400 frames,
// its episodes, and returns that are CartPole's (a whole number of steps each) and end as the
// ActorStats that reached the learner's stand-in by the other socket end, in the same order.
START_TEST(test_det_period_end_carries_actor_columns) {
    apex_config_t cfg;
    s_config(&cfg, 7);
    s_set(&cfg, "run.deterministic=true");
    s_set(&cfg, "replay.samples_per_insert=8");
    s_set(&cfg, "actor.weight_sync_steps=400");
    s_set(&cfg, "actor.max_steps_per_s=0");
    void *ctx = zmq_ctx_new();
    char ins_ep[256], weights_ep[256], stats_ep[256];
    void *router = s_bound(ctx, ZMQ_ROUTER, ins_ep, sizeof ins_ep);
    void *weights = check_weights_router(ctx, weights_ep, sizeof weights_ep); // silent
    void *pull = s_bound(ctx, ZMQ_PULL, stats_ep, sizeof stats_ep);
    s_set(&cfg, "endpoints.replay_insert=%s", ins_ep);
    s_set(&cfg, "endpoints.learner_weights=%s", weights_ep);
    s_set(&cfg, "endpoints.learner_stats=%s", stats_ep);
    s_actor x;
    s_actor_start(&x, &cfg, 0);
    wire_decoder_t *dec = s_decoder();
    static float want[WIRE_DET_RETURNS_MAX];
    uint64_t episodes = 0;
    uint32_t n_ret = 0;
    int ended = 0, batches = 0;
    int64_t deadline = clock_now_ms() + WAIT_MS;
    while (!ended) {
        ck_assert_msg(clock_now_ms() < deadline, "no period end in %d batches", batches);
        zmq_msg_t id, msg;
        zmq_msg_init(&id);
        if (zmq_msg_recv(&id, router, 0) < 0) {
            zmq_msg_close(&id);
            continue;
        }
        zmq_msg_init(&msg);
        ck_assert_int_ge(zmq_msg_recv(&msg, router, 0), 0);
        wire_msg_t m;
        ck_assert_int_eq(wire_decode(dec, zmq_msg_data(&msg), zmq_msg_size(&msg), &m), APEX_OK);
        const wire_batch_t *b = &m.u.batch;
        ck_assert_uint_eq(b->det_period, 1);
        if (b->det_period_end) {
            ended = 1;
            ck_assert_uint_eq(b->det_frames, 400);
            episodes = b->det_episodes;
            n_ret = b->det_n_returns;
            ck_assert_uint_ge(episodes, 1);
            ck_assert_uint_eq(n_ret, APEX_MIN(episodes, WIRE_DET_RETURNS_MAX));
            for (uint32_t i = 0; i < n_ret; i++) {
                want[i] = b->det_returns[i];
                ck_assert(want[i] >= 1.0f && want[i] <= 500.0f && want[i] == floorf(want[i]));
            }
        } else {
            ck_assert_uint_eq(b->det_frames + b->det_episodes + b->det_n_returns, 0);
        }
        batches++;
        zmq_msg_close(&id);
        zmq_msg_close(&msg);
    }
    // The ActorStats, up to the first that counts the period's 400 frames (it carries the
    // period's last episodes: the actor took them all at the period's end and steps no more).
    // Stats are best effort (one sent before the connection is up is lost), so the tails are
    // compared: the last returns the learner heard are the batch's last ones.
    static float got[4096];
    uint64_t n_got = 0, frames = 0;
    deadline = clock_now_ms() + WAIT_MS;
    while (frames < 400) {
        ck_assert_msg(clock_now_ms() < deadline, "no ActorStats with 400 frames (%llu)",
                      (unsigned long long)frames);
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, pull, 0) >= 0) {
            wire_msg_t m;
            ck_assert_int_eq(wire_decode(dec, zmq_msg_data(&msg), zmq_msg_size(&msg), &m), APEX_OK);
            for (uint32_t e = 0; e < m.u.actor_stats.n_episodes && n_got < 4096; e++) {
                got[n_got++] = m.u.actor_stats.returns[e];
            }
            frames = m.u.actor_stats.frames;
        }
        zmq_msg_close(&msg);
    }
    ck_assert_uint_eq(frames, 400);
    ck_assert_uint_le(n_got, episodes);
    uint64_t k = APEX_MIN(n_got, (uint64_t)n_ret);
    ck_assert_uint_ge(k, 1);
    ck_assert_mem_eq(got + (n_got - k), want + (n_ret - k), k * sizeof(float));
    printf("# actor: a deterministic period of 400 frames ended %llu episodes, returns %g .. %g\n",
           (unsigned long long)episodes, (double)want[0], (double)want[n_ret - 1]);
    actor_stats_t st;
    s_actor_stop(&x, &st);
    ck_assert_uint_eq(st.episodes, episodes);
    wire_decoder_destroy(&dec);
    zmq_close(router);
    zmq_close(weights);
    zmq_close(pull);
    zmq_ctx_term(ctx);
}
END_TEST

Suite *actor_suite(void) {
    Suite *s = suite_create("actor");
    TCase *tc = tcase_create("zmq");
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, test_feeds_replay_and_takes_weights);
    tcase_add_test(tc, test_weights_amid_multipart_and_garbage);
    tcase_add_test(tc, test_weights_never_go_back);
    tcase_add_test(tc, test_asks_with_newest_version);
    tcase_add_test(tc, test_silent_learner_reconnected);
    tcase_add_test(tc, test_survives_replay_restart);
    tcase_add_test(tc, test_deterministic_batches);
    tcase_add_test(tc, test_det_period_end_carries_actor_columns);
    tcase_add_test(tc, test_stats_carry_apex_epsilons);
    suite_add_tcase(s, tc);
    return s;
}
