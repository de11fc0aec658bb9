// check_learner.c: apex-learner trained against a real apex-replay over ZeroMQ on loopback.
//
// Both daemons run in threads of this process (replay_server_run, learner_run), talk over
// ephemeral tcp ports, and are observed only through their real interfaces: the replay's
// sockets and stats, the learner's Weights on its weights endpoint, learner_updates(), and the
// checkpoint file it leaves behind.
//
// The data set is a contextual bandit with a known answer: 4 states whose observations are
// the one-hot vectors of CartPole's obs_dim 4, 2 actions, a fixed reward per (state, action),
// and discount 0, so the double-DQN target is the reward itself and Q(s, a) must converge to
// the reward table below.
#include "check_apex.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <zmq.h>

#include "ckpt.h"
#include "clock.h"
#include "config.h"
#include "learner.h"
#include "nn.h"
#include "rng.h"
#include "server.h"
#include "wire.h"

#define OBS 4     // CartPole-v1 obs_dim (from [env] id via envinfo)
#define ACTIONS 2 // CartPole-v1 n_actions
#define STATES 4
#define REPEATS 8 // copies of each (state, action) in the data set
#define ROWS (STATES * ACTIONS * REPEATS)
#define HIDDEN 32
#define WAIT_MS 10000 // generous bound on waiting for a condition; never a timing assertion

// Q*(s, a) = r(s, a) since discounts are 0.
static const float s_reward[STATES][ACTIONS] = {
    {1.0f, -0.5f}, {0.0f, 0.8f}, {-1.0f, 0.3f}, {0.5f, -0.25f}};

// ---------------------------------------------------------------------------------------
// Config

static void s_set(apex_config_t *cfg, const char *fmt, ...) {
    char kv[CONFIG_STR_LEN + 64], err[CONFIG_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(kv, sizeof kv, fmt, ap);
    va_end(ap);
    ck_assert_msg(config_set(cfg, kv, err, sizeof err) == 0, "%s: %s", kv, err);
}

// One config for both daemons: a tiny network, small batches, short timeouts, ephemeral
// binds. endpoints.replay_sample is set once the replay server has bound.
// extra: more assignments (n_extra of them) applied after these, at load.
static void s_config_with(apex_config_t *cfg, const char *dir, int64_t max_steps,
                          const char *const *extra, int n_extra) {
    const char *sets[32] = {"run.name=t",
                            "run.seed=7",
                            "network.hidden=32",
                            "network.dueling=true",
                            "replay.capacity=256",
                            "replay.min_size_to_sample=64",
                            "replay.max_batch=64",
                            "replay.sample_timeout_ms=200",
                            "learner.batch_size=32",
                            "learner.lr=0.01",
                            "learner.target_update=50",
                            "learner.publish_every=10",
                            "learner.prefetch=2",
                            "learner.request_timeout_ms=300",
                            "learner.checkpoint_interval_s=600",
                            "learner.metrics_interval_ms=200",
                            "learner.threads=1",
                            "actor.send_batch=16",
                            "endpoints.replay_insert_bind=tcp://127.0.0.1:*",
                            "endpoints.replay_sample_bind=tcp://127.0.0.1:*",
                            "endpoints.learner_weights_bind=tcp://127.0.0.1:*",
                            "endpoints.learner_stats_bind=tcp://127.0.0.1:*"};
    char err[CONFIG_ERR_LEN];
    int n = 0;
    while (sets[n]) {
        n++;
    }
    ck_assert_int_le(n + n_extra, (int)(sizeof sets / sizeof sets[0]));
    for (int i = 0; i < n_extra; i++) {
        sets[n++] = extra[i];
    }
    ck_assert_msg(config_load(cfg, NULL, sets, n, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(cfg->env.obs_dim, OBS);
    ck_assert_int_eq(cfg->env.n_actions, ACTIONS);
    s_set(cfg, "run.out_dir=%s", dir);
    s_set(cfg, "learner.max_steps=%lld", (long long)max_steps);
}

static void s_config(apex_config_t *cfg, const char *dir, int64_t max_steps) {
    s_config_with(cfg, dir, max_steps, NULL, 0);
}

static void s_net_config(nn_config_t *n) {
    *n = (nn_config_t){
        .obs_dim = OBS, .n_actions = ACTIONS, .n_hidden = 1, .hidden = {HIDDEN}, .dueling = 1};
}

// ---------------------------------------------------------------------------------------
// Daemons in threads

typedef struct {
    learner_t *learner;
    pthread_t thread;
    int rc;
} s_learner;

static void *s_learner_main(void *arg) {
    s_learner *x = arg;
    x->rc = learner_run(x->learner);
    return NULL;
}

static void s_learner_start(s_learner *x, const apex_config_t *cfg, int resume) {
    x->learner = learner_new(cfg, resume);
    ck_assert_ptr_nonnull(x->learner);
    x->rc = -2;
    ck_assert_int_eq(pthread_create(&x->thread, NULL, s_learner_main, x), 0);
}

static void s_learner_join(s_learner *x) {
    ck_assert_int_eq(pthread_join(x->thread, NULL), 0);
    ck_assert_int_eq(x->rc, 0); // the final checkpoint was written
}

static void s_sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

// Polls learner_updates until it reaches target; fails the test after WAIT_MS.
static void s_wait_updates(const learner_t *l, int64_t target) {
    int64_t deadline = clock_now_ms() + WAIT_MS;
    while (learner_updates(l) < target) {
        ck_assert_msg(clock_now_ms() < deadline, "learner stuck at %lld updates (want %lld)",
                      (long long)learner_updates(l), (long long)target);
        s_sleep_ms(10);
    }
}

// ---------------------------------------------------------------------------------------
// Sockets on the test's side

static void *s_socket(void *ctx, int type, int rcvtimeo_ms) {
    void *s = zmq_socket(ctx, type);
    ck_assert_ptr_nonnull(s);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &rcvtimeo_ms, sizeof rcvtimeo_ms);
    return s;
}

// Inserts the whole data set as one TransitionBatch, as an actor would, and waits for the
// InsertAck.
// uint8: the same data set as byte observations (one-hot 255, which the learner scales to
// 1.0, so the learned Q must be the same function of the float one-hot vectors).
static void s_fill_dtype(void *ctx, const char *insert_ep, int uint8) {
    void *d = s_socket(ctx, ZMQ_DEALER, 5000);
    zmq_setsockopt(d, ZMQ_ROUTING_ID, "actor-0", 7);
    ck_assert_int_eq(zmq_connect(d, insert_ep), 0);
    static float obs[ROWS * OBS], next[ROWS * OBS], rew[ROWS], disc[ROWS];
    static int32_t act[ROWS];
    memset(obs, 0, sizeof obs);
    memset(next, 0, sizeof next);
    int i = 0;
    for (int rep = 0; rep < REPEATS; rep++) {
        for (int s = 0; s < STATES; s++) {
            for (int a = 0; a < ACTIONS; a++, i++) {
                obs[i * OBS + s] = 1.0f;
                next[i * OBS + (s + 1) % STATES] = 1.0f; // irrelevant: discount 0
                act[i] = a;
                rew[i] = s_reward[s][a];
                disc[i] = 0.0f;
            }
        }
    }
    static uint8_t obs8[ROWS * OBS], next8[ROWS * OBS];
    for (int k = 0; k < ROWS * OBS; k++) {
        obs8[k] = (uint8_t)(obs[k] * 255.0f);
        next8[k] = (uint8_t)(next[k] * 255.0f);
    }
    wire_msg_t m = {.type = WIRE_MSG_TRANSITION_BATCH};
    m.u.batch = (wire_batch_t){.actor_id = 0,
                               .seq = 0,
                               .count = ROWS,
                               .obs_dim = OBS,
                               .obs_dtype = uint8 ? WIRE_OBS_UINT8 : WIRE_OBS_FLOAT32,
                               .obs = uint8 ? (const void *)obs8 : obs,
                               .actions = act,
                               .rewards = rew,
                               .discounts = disc,
                               .next_obs = uint8 ? (const void *)next8 : next};
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_encode(&m, &b);
    ck_assert_int_eq(zmq_send(d, b.data, b.len, 0), (int)b.len);
    wire_buf_fini(&b);
    char ack[256];
    ck_assert_int_gt(zmq_recv(d, ack, sizeof ack, 0), 0);
    zmq_close(d);
}

static void s_fill(void *ctx, const char *insert_ep) { s_fill_dtype(ctx, insert_ep, 0); }

typedef struct {
    uint64_t version, learner_step;
} s_weights_info;

// Asks the learner for weights newer than have (a WeightsRequest, as an actor does) and
// receives the answer (decoded and validated by wire_decode against the learner's
// num_params) into *w, and its params into params (num_params floats) when not NULL.
// Returns 0, or -1 after the socket's receive timeout.
static int s_recv_weights(void *sock, wire_decoder_t *dec, uint64_t have, s_weights_info *w,
                          float *params) {
    wire_msg_t req = {.type = WIRE_MSG_WEIGHTS_REQUEST};
    req.u.weights_request.have_version = have;
    check_send_msg(sock, &req);
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, sock, 0) < 0) {
        zmq_msg_close(&msg);
        return -1;
    }
    wire_msg_t m;
    int rc = wire_decode(dec, zmq_msg_data(&msg), zmq_msg_size(&msg), &m);
    ck_assert_msg(rc == APEX_OK, "bad Weights: %s", wire_decoder_last_error(dec));
    ck_assert_int_eq(m.type, WIRE_MSG_WEIGHTS);
    w->version = m.u.weights.version;
    w->learner_step = m.u.weights.learner_step;
    if (params) {
        memcpy(params, m.u.weights.params, m.u.weights.num_params * sizeof(float));
    }
    zmq_msg_close(&msg);
    return 0;
}

static wire_decoder_t *s_weights_decoder(void) {
    nn_config_t n;
    s_net_config(&n);
    wire_limits_t lim = {.obs_dim = OBS,
                         .n_actions = ACTIONS,
                         .num_params = (uint32_t)nn_num_params(&n),
                         .max_count = 64};
    return wire_decoder_new(&lim);
}

// A DEALER on the learner's weights endpoint, as an actor's weights client.
static void *s_weights_client(void *ctx, const learner_t *l) {
    void *sock = s_socket(ctx, ZMQ_DEALER, 3000); // > REPUBLISH_MS: a held request's answer
    const char *ep = learner_weights_endpoint(l);
    ck_assert_msg(strncmp(ep, "tcp://127.0.0.1:", 16) == 0 && strchr(ep, '*') == NULL,
                  "unresolved weights endpoint '%s'", ep);
    ck_assert_int_eq(zmq_connect(sock, ep), 0);
    return sock;
}

// ---------------------------------------------------------------------------------------
// Checkpoint inspection

// Largest |Q(s, a) - r(s, a)| over the table for the online params p.
static double s_q_error(const nn_params_t *p) {
    nn_config_t n;
    s_net_config(&n);
    nn_state_t st;
    nn_state_init(&st, &n, STATES, 1);
    float obs[STATES * OBS] = {0}, q[STATES * ACTIONS];
    for (int s = 0; s < STATES; s++) {
        obs[s * OBS + s] = 1.0f;
    }
    nn_forward(&st, p, obs, STATES, q);
    double worst = 0;
    for (int s = 0; s < STATES; s++) {
        for (int a = 0; a < ACTIONS; a++) {
            double e = fabs((double)q[s * ACTIONS + a] - (double)s_reward[s][a]);
            worst = e > worst ? e : worst;
        }
    }
    nn_state_fini(&st);
    return worst;
}

// Reads the online network of the checkpoint at path into p (initialised here; caller
// calls nn_params_fini) and its header into *hdr.
static void s_read_online(const char *path, nn_params_t *p, ckpt_header_t *hdr) {
    nn_config_t n;
    s_net_config(&n);
    nn_params_init(p, &n);
    ck_assert_int_eq(ckpt_read_online(path, &n, hdr, p->data), APEX_OK);
}

// The whole file at path, malloc'ed; *len its size.
static unsigned char *s_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    ck_assert_int_gt(n, (long)sizeof(ckpt_header_t));
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)n);
    ck_assert_int_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void s_spew(const char *path, const void *buf, size_t len) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fwrite(buf, 1, len, f), len);
    fclose(f);
}

// A full run: an empty replay server and a fresh (or resumed) learner, the data set inserted,
// training to cfg's max_steps. Returns the replay's final counters.
static void s_train_to_max_steps(apex_config_t *cfg, int resume, wire_replay_stats_t *st) {
    check_replay_t r;
    check_replay_start(&r, cfg);
    s_set(cfg, "endpoints.replay_sample=%s", replay_server_sample_endpoint(r.server));
    s_learner x;
    s_learner_start(&x, cfg, resume);
    void *ctx = zmq_ctx_new();
    s_fill(ctx, replay_server_insert_endpoint(r.server));
    zmq_ctx_term(ctx);
    s_learner_join(&x); // returns by itself at max_steps
    ck_assert_int_eq(learner_updates(x.learner), cfg->learner.max_steps);
    learner_destroy(&x.learner);
    check_replay_stop(&r, st);
}

// ---------------------------------------------------------------------------------------
// Tests

// Learning happens, priorities flow back to the replay, weight versions advance on the weights endpoint
// socket, and the final checkpoint holds the learned network.
START_TEST(test_learns_from_replay_over_zmq) {
    const char *dir = check_tmpdir();
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", dir);
    apex_config_t cfg;
    s_config(&cfg, tmp, 300);
    check_replay_t r;
    check_replay_start(&r, &cfg); // empty: the learner is held back by min_size_to_sample
    s_set(&cfg, "endpoints.replay_sample=%s", replay_server_sample_endpoint(r.server));
    s_learner x;
    s_learner_start(&x, &cfg, 0);
    void *ctx = zmq_ctx_new();
    void *sub = s_weights_client(ctx, x.learner);
    wire_decoder_t *dec = s_weights_decoder();
    // Before any data: the initial weights (asked for with no version: answered at once),
    // no update yet.
    s_weights_info w, prev;
    ck_assert_int_eq(s_recv_weights(sub, dec, 0, &prev, NULL), 0);
    ck_assert_uint_ge(prev.version, 1);
    ck_assert_uint_eq(prev.learner_step, 0);
    ck_assert_int_eq(learner_updates(x.learner), 0);
    // Asked with the current version and nothing new to give: answered all the same, with
    // the same weights (the heartbeat that tells a live learner from a dead link; without it
    // the receive times out). That the request was held first, not answered at once, is a
    // matter of timing that no assertion here looks at.
    ck_assert_int_eq(s_recv_weights(sub, dec, prev.version, &w, NULL), 0);
    ck_assert_uint_eq(w.version, prev.version);
    ck_assert_uint_eq(w.learner_step, 0);
    // Data in: training starts, and new versions are published every publish_every updates;
    // a request with the newest version held is answered by the next one.
    s_fill(ctx, replay_server_insert_endpoint(r.server));
    int increases = 0;
    while (increases < 3 && s_recv_weights(sub, dec, prev.version, &w, NULL) == 0) {
        ck_assert_uint_ge(w.version, prev.version);
        ck_assert_uint_ge(w.learner_step, prev.learner_step);
        if (w.version > prev.version) {
            increases++;
            ck_assert_uint_gt(w.learner_step, prev.learner_step); // new version = new params
            ck_assert_uint_eq(w.learner_step % 10, 0);            // publish_every = 10
        }
        prev = w;
    }
    ck_assert_int_ge(increases, 3);
    s_learner_join(&x); // max_steps = 300
    ck_assert_int_eq(learner_updates(x.learner), 300);
    wire_replay_stats_t st;
    check_replay_stop(&r, &st);
    ck_assert_uint_eq(st.inserted, ROWS);
    ck_assert_uint_ge(st.sampled, 300 * 32); // every update trained on a sampled batch...
    ck_assert_uint_gt(st.updated, 0);        // ...and sent its priorities back
    ck_assert_uint_eq(st.bad_messages, 0);
    // The checkpoint holds the learned Q, close to the reward table; the initial network
    // (same seed, same stream as trainer_new) was far from it.
    char path[600];
    learner_checkpoint_path(&cfg, path, sizeof path);
    nn_params_t p;
    ckpt_header_t hdr;
    s_read_online(path, &p, &hdr);
    ck_assert_uint_eq(hdr.learner_step, 300);
    ck_assert_uint_ge(hdr.extra.weights_version, prev.version);
    double err_final = s_q_error(&p);
    rng_t init;
    rng_init_stream(&init, 7, RNG_ROLE_NET_INIT, 0);
    nn_params_init_random(&p, &init);
    double err_init = s_q_error(&p);
    ck_assert_msg(err_final < 0.05, "max |Q - r| = %g after 300 updates (initially %g)", err_final,
                  err_init);
    ck_assert_msg(err_init > 0.5, "the initial network already fits (max |Q - r| = %g)", err_init);
    nn_params_fini(&p);
    // metrics.csv was written next to it.
    snprintf(path, sizeof path, "%s/t/metrics.csv", tmp);
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_int_gt(sb.st_size, 0);
    wire_decoder_destroy(&dec);
    zmq_close(sub);
    zmq_ctx_term(ctx);
    learner_destroy(&x.learner);
    check_rmtree(tmp);
}
END_TEST

// Trains 300 updates on the bandit with the given extra config, over a real replay server,
// and checks the checkpoint's Q table and what the replay saw. uint8: the data set is sent as
// byte observations (the config must say so).
static void s_learn_bandit(const char *const *extra, int n_extra, int uint8) {
    const char *dir = check_tmpdir();
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", dir);
    apex_config_t cfg;
    s_config_with(&cfg, tmp, 300, extra, n_extra);
    ck_assert_int_eq(cfg.learner.batches_per_request, uint8 ? 2 : 1); // see the callers
    ck_assert_int_eq(cfg.env.obs_dtype, uint8 ? CONFIG_OBS_UINT8 : CONFIG_OBS_FLOAT32);
    check_replay_t r;
    check_replay_start(&r, &cfg);
    s_set(&cfg, "endpoints.replay_sample=%s", replay_server_sample_endpoint(r.server));
    s_learner x;
    s_learner_start(&x, &cfg, 0);
    void *ctx = zmq_ctx_new();
    s_fill_dtype(ctx, replay_server_insert_endpoint(r.server), uint8);
    s_learner_join(&x); // max_steps = 300
    ck_assert_int_eq(learner_updates(x.learner), 300);
    wire_replay_stats_t st;
    check_replay_stop(&r, &st);
    ck_assert_uint_eq(st.inserted, ROWS);
    // Every batch a reply brought was trained: sampled rows exceed trained ones only by the
    // requests in flight at the stop (and a rare late reply), never by a factor.
    ck_assert_uint_ge(st.sampled, 300 * 32);
    ck_assert_uint_lt(st.sampled, 300 * 32 * 3 / 2);
    ck_assert_uint_ge(st.updated, 300 * 32 - 4 * 32 * cfg.learner.batches_per_request);
    ck_assert_uint_eq(st.bad_messages, 0);
    char path[600];
    learner_checkpoint_path(&cfg, path, sizeof path);
    nn_params_t p;
    ckpt_header_t hdr;
    s_read_online(path, &p, &hdr);
    double err_final = s_q_error(&p);
    ck_assert_msg(err_final < 0.05, "max |Q - r| = %g after 300 updates", err_final);
    nn_params_fini(&p);
    zmq_ctx_term(ctx);
    learner_destroy(&x.learner);
    check_rmtree(tmp);
}

// [env] id = external with uint8 observations: replay and learner agree on the dtype, and
// the network's input scale (1/255 for external uint8, the default) makes byte
// observations the same inputs as the float ones, so the network learns the same reward
// table (evaluated on float one-hot vectors). model/nn's own test checks the scaling.
START_TEST(test_learns_from_uint8_observations) {
    const char *ext[] = {"env.id=external", "env.obs_dim=4", "env.n_actions=2",
                         "env.obs_dtype=uint8"};
    s_learn_bandit(ext, 4, 1);
}
END_TEST

// The default batches_per_request (0 = auto) resolves to 2 here (max_batch 64 / batch 32),
// so test_learns_from_uint8_observations trains two batches per reply, one after the other,
// each with its own priority update (the replay's `updated` count covers every update).
// This one pins 1.
START_TEST(test_learns_with_one_batch_per_request) {
    const char *one[] = {"learner.batches_per_request=1"};
    s_learn_bandit(one, 1, 0);
}
END_TEST

// resume = 1 restores the whole trainer state: the counters, the published parameters, and
// (byte for byte) online, target and optimizer moments; max_steps then continues from the
// saved count. resume = 0 ignores the checkpoint.
START_TEST(test_resume_restores_state) {
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", check_tmpdir());
    apex_config_t cfg;
    s_config(&cfg, tmp, 200);
    wire_replay_stats_t st;
    s_train_to_max_steps(&cfg, 0, &st);
    char path[600];
    learner_checkpoint_path(&cfg, path, sizeof path);
    size_t len_a;
    unsigned char *file_a = s_slurp(path, &len_a);
    ckpt_header_t hdr_a;
    memcpy(&hdr_a, file_a, sizeof hdr_a);
    ck_assert_uint_eq(hdr_a.learner_step, 200);
    nn_config_t n;
    s_net_config(&n);
    size_t P = nn_num_params(&n);
    ck_assert_uint_eq(hdr_a.num_params, P);

    // 1. Resume with max_steps already reached: the learner loads, publishes the loaded
    //    online params, stops at once, and rewrites an identical trainer state.
    s_set(&cfg, "endpoints.replay_sample=tcp://127.0.0.1:1"); // nothing to sample
    s_learner x;
    x.learner = learner_new(&cfg, 1);
    ck_assert_ptr_nonnull(x.learner);
    ck_assert_int_eq(learner_updates(x.learner), 200);
    x.rc = -2;
    ck_assert_int_eq(pthread_create(&x.thread, NULL, s_learner_main, &x), 0);
    s_learner_join(&x);
    learner_destroy(&x.learner);
    size_t len_b;
    unsigned char *file_b = s_slurp(path, &len_b);
    ckpt_header_t hdr_b;
    memcpy(&hdr_b, file_b, sizeof hdr_b);
    ck_assert_uint_eq(len_b, len_a);
    ck_assert_uint_eq(hdr_b.learner_step, hdr_a.learner_step);
    ck_assert_uint_eq(hdr_b.optim_step, hdr_a.optim_step);
    ck_assert_int_eq(memcmp(hdr_b.rng_state, hdr_a.rng_state, sizeof hdr_a.rng_state), 0);
    ck_assert_uint_eq(hdr_b.payload_crc32c, hdr_a.payload_crc32c);
    ck_assert_msg(memcmp(file_b + sizeof hdr_b, file_a + sizeof hdr_a, len_a - sizeof hdr_a) == 0,
                  "online/target/optimizer arrays changed across a resume");

    // 2. Resume with room to train: the first Weights carry exactly the saved online params
    //    and step, and training continues from 200 to max_steps = 260.
    s_set(&cfg, "learner.max_steps=260");
    check_replay_t r;
    check_replay_start(&r, &cfg); // empty until the loaded weights were seen
    s_set(&cfg, "endpoints.replay_sample=%s", replay_server_sample_endpoint(r.server));
    s_learner_start(&x, &cfg, 1);
    void *ctx = zmq_ctx_new();
    void *sub = s_weights_client(ctx, x.learner);
    wire_decoder_t *dec = s_weights_decoder();
    float *params = malloc(P * sizeof(float));
    s_weights_info w;
    ck_assert_int_eq(s_recv_weights(sub, dec, 0, &w, params), 0);
    ck_assert_uint_eq(w.learner_step, 200);
    ck_assert_uint_gt(w.version, hdr_a.extra.weights_version); // versions keep increasing
    ck_assert_int_eq(memcmp(params, file_a + sizeof hdr_a, P * sizeof(float)), 0);
    s_fill(ctx, replay_server_insert_endpoint(r.server));
    s_learner_join(&x);
    ck_assert_int_eq(learner_updates(x.learner), 260);
    learner_destroy(&x.learner);
    check_replay_stop(&r, &st);
    ck_assert_uint_ge(st.sampled, 60 * 32); // 60 more updates, not 260
    ck_assert_uint_lt(st.sampled, 260 * 32);
    ckpt_header_t hdr_c;
    nn_params_t p;
    s_read_online(path, &p, &hdr_c);
    ck_assert_uint_eq(hdr_c.learner_step, 260);
    ck_assert_uint_eq(hdr_c.optim_step, 260);
    nn_params_fini(&p);

    // 3. resume = 0: the checkpoint is ignored, the learner starts from update 0 with the
    //    freshly initialised network.
    x.learner = learner_new(&cfg, 0);
    ck_assert_ptr_nonnull(x.learner);
    ck_assert_int_eq(learner_updates(x.learner), 0);
    learner_destroy(&x.learner);

    free(params);
    free(file_a);
    free(file_b);
    wire_decoder_destroy(&dec);
    zmq_close(sub);
    zmq_ctx_term(ctx);
    check_rmtree(tmp);
}
END_TEST

// A damaged, truncated, foreign or mis-shaped checkpoint makes learner_new(resume = 1) fail
// cleanly (NULL, nothing left running); resume = 0 starts afresh over the same file.
START_TEST(test_bad_checkpoint_refused) {
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", check_tmpdir());
    apex_config_t cfg;
    s_config(&cfg, tmp, 0);
    s_set(&cfg, "endpoints.replay_sample=tcp://127.0.0.1:1"); // never answers: no training
    // A valid checkpoint at update 0: run a learner and stop it.
    s_learner x;
    s_learner_start(&x, &cfg, 0);
    learner_stop(x.learner);
    s_learner_join(&x);
    learner_destroy(&x.learner);
    char path[600];
    learner_checkpoint_path(&cfg, path, sizeof path);
    size_t len;
    unsigned char *good = s_slurp(path, &len);
    x.learner = learner_new(&cfg, 1); // sanity: the intact file loads
    ck_assert_ptr_nonnull(x.learner);
    learner_destroy(&x.learner);

    // One flipped payload bit (payload CRC), a truncation, and a file that is no checkpoint.
    unsigned char *bad = malloc(len);
    memcpy(bad, good, len);
    bad[len - 5] ^= 0x10;
    s_spew(path, bad, len);
    ck_assert_ptr_null(learner_new(&cfg, 1));
    s_spew(path, good, len - 100);
    ck_assert_ptr_null(learner_new(&cfg, 1));
    s_spew(path, "hello, not a checkpoint", 23);
    ck_assert_ptr_null(learner_new(&cfg, 1));
    // A sound file for another network shape.
    s_spew(path, good, len);
    apex_config_t other = cfg;
    s_set(&other, "network.hidden=16");
    ck_assert_ptr_null(learner_new(&other, 1));
    // The failed attempts released their ports and files: a learner can start again, and
    // resume = 0 ignores even a damaged checkpoint.
    s_spew(path, bad, len);
    x.learner = learner_new(&cfg, 0);
    ck_assert_ptr_nonnull(x.learner);
    ck_assert_int_eq(learner_updates(x.learner), 0);
    learner_destroy(&x.learner);
    free(bad);
    free(good);
    check_rmtree(tmp);
}
END_TEST

// The replay server goes away mid-run and a new one comes up on the same endpoints: the
// learner's requests time out and are re-issued, and training resumes against the new one.
START_TEST(test_survives_replay_restart) {
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", check_tmpdir());
    apex_config_t cfg;
    s_config(&cfg, tmp, 0); // no max_steps: stopped by learner_stop
    check_replay_t r;
    check_replay_start(&r, &cfg);
    // Pin the ports the first server got, so that its successor binds the same ones.
    s_set(&cfg, "endpoints.replay_insert_bind=%s", replay_server_insert_endpoint(r.server));
    s_set(&cfg, "endpoints.replay_sample_bind=%s", replay_server_sample_endpoint(r.server));
    s_set(&cfg, "endpoints.replay_sample=%s", replay_server_sample_endpoint(r.server));
    void *ctx = zmq_ctx_new();
    s_fill(ctx, cfg.endpoints.replay_insert_bind);
    s_learner x;
    s_learner_start(&x, &cfg, 0);
    s_wait_updates(x.learner, 50);
    wire_replay_stats_t st1, st2;
    check_replay_stop(&r, &st1);
    ck_assert_uint_gt(st1.updated, 0);
    int64_t at_stop = learner_updates(x.learner);
    s_sleep_ms(400); // > request_timeout_ms: in-flight requests time out while nobody listens
    int64_t before_restart = learner_updates(x.learner);
    // At most the batches already received: prefetch replies of batches_per_request each.
    ck_assert_int_le(before_restart,
                     at_stop + cfg.learner.prefetch * cfg.learner.batches_per_request);
    check_replay_start(&r, &cfg);
    s_fill(ctx, cfg.endpoints.replay_insert_bind);
    s_wait_updates(x.learner, before_restart + 50);
    learner_stop(x.learner);
    s_learner_join(&x);
    learner_destroy(&x.learner);
    check_replay_stop(&r, &st2);
    ck_assert_uint_ge(st2.sampled, 50 * 32); // the new server served the new updates
    ck_assert_uint_gt(st2.updated, 0);       // and got their priorities back
    zmq_ctx_term(ctx);
    check_rmtree(tmp);
}
END_TEST

Suite *learner_suite(void) {
    Suite *s = suite_create("learner");
    TCase *tc = tcase_create("zmq");
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, test_learns_from_replay_over_zmq);
    tcase_add_test(tc, test_learns_from_uint8_observations);
    tcase_add_test(tc, test_learns_with_one_batch_per_request);
    tcase_add_test(tc, test_resume_restores_state);
    tcase_add_test(tc, test_bad_checkpoint_refused);
    tcase_add_test(tc, test_survives_replay_restart);
    suite_add_tcase(s, tc);
    return s;
}
