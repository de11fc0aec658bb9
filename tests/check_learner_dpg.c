// check_learner_dpg.c: apex-learner with continuous actions (the DPG learner, learner/algo.h,
// issue #28) against a real apex-replay over ZeroMQ on loopback, as check_learner.c does for
// DQN: both daemons in threads of this process, observed through their real interfaces (the
// replay's stats, the Weights on the learner's weights endpoint, learner_updates, the
// checkpoint and metrics.csv it leaves, and learner_dpg for the trainer's state).
//
// The data set is a continuous contextual bandit: 4 one-hot-like states of Pendulum-v1's
// obs_dim 3 (the fourth is the zero vector), a uniform grid of actions in Pendulum's bounds
// [-2, 2], reward -(a - a*(s))^2, discount 0.
#include "check_apex.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "ckpt.h"
#include "clock.h"
#include "config.h"
#include "learner.h"
#include "nn.h"
#include "server.h"
#include "train_dpg.h"
#include "wire.h"

#define OBS 3 // Pendulum-v1
#define STATES 4
#define GRID 16 // actions per state
#define ROWS (STATES * GRID)
#define WAIT_MS 20000 // bound on waiting for a condition; never a timing assertion

static const float s_best[STATES] = {1.5f, -1.0f, 0.25f, -1.75f};

static void s_set(apex_config_t *cfg, const char *fmt, ...) {
    char kv[CONFIG_STR_LEN + 64], err[CONFIG_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(kv, sizeof kv, fmt, ap);
    va_end(ap);
    ck_assert_msg(config_set(cfg, kv, err, sizeof err) == 0, "%s: %s", kv, err);
}

// continuous: Pendulum-v1 (DPG); else CartPole-v1 (DQN) in the same run directory.
static void s_config(apex_config_t *cfg, const char *dir, int continuous) {
    const char *sets[] = {continuous ? "env.id=Pendulum-v1" : "env.id=CartPole-v1",
                          "run.name=t",
                          "run.seed=7",
                          "network.hidden=32",
                          "replay.capacity=256",
                          "replay.min_size_to_sample=64",
                          "replay.max_batch=64",
                          "replay.sample_timeout_ms=200",
                          "learner.batch_size=32",
                          "learner.lr=0.001",
                          "learner.publish_every=10",
                          "learner.prefetch=2",
                          "learner.request_timeout_ms=300",
                          "learner.checkpoint_interval_s=600",
                          "learner.metrics_interval_ms=200",
                          "learner.threads=1",
                          "endpoints.replay_insert_bind=tcp://127.0.0.1:*",
                          "endpoints.replay_sample_bind=tcp://127.0.0.1:*",
                          "endpoints.learner_weights_bind=tcp://127.0.0.1:*",
                          "endpoints.learner_stats_bind=tcp://127.0.0.1:*"};
    char err[CONFIG_ERR_LEN];
    int n = (int)(sizeof sets / sizeof sets[0]);
    ck_assert_msg(config_load(cfg, NULL, sets, n, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(cfg->env.action_dim, continuous ? 1 : 0);
    s_set(cfg, "run.out_dir=%s", dir);
}

// What the learner publishes: nn_config_from_run's network for the run (the policy), then
// one critic over [obs, action] with a scalar head, counted here layer by layer.
static size_t s_published_params(const apex_config_t *cfg) {
    nn_config_t n;
    nn_config_from_run(&n, cfg);
    size_t critic = 0, in = (size_t)cfg->env.obs_dim + (size_t)cfg->env.action_dim;
    for (int l = 0; l < cfg->network.n_hidden; l++) {
        critic += (in + 1) * (size_t)cfg->network.hidden[l];
        in = (size_t)cfg->network.hidden[l];
    }
    critic += in + 1;
    return nn_num_params(&n) + critic;
}

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

static void s_wait_updates(const learner_t *l, int64_t target) {
    int64_t deadline = clock_now_ms() + WAIT_MS;
    while (learner_updates(l) < target) {
        ck_assert_msg(clock_now_ms() < deadline, "learner stuck at %lld updates (want %lld)",
                      (long long)learner_updates(l), (long long)target);
        s_sleep_ms(10);
    }
}

// The data set as one TransitionBatch with continuous actions, as an actor sends it.
static void s_fill(void *ctx, const char *insert_ep) {
    void *d = check_dealer(ctx, insert_ep, "actor-0", 5000);
    static float obs[ROWS * OBS], next[ROWS * OBS], act[ROWS], rew[ROWS], disc[ROWS];
    memset(obs, 0, sizeof obs);
    memset(next, 0, sizeof next);
    int i = 0;
    for (int s = 0; s < STATES; s++) {
        for (int g = 0; g < GRID; g++, i++) {
            if (s < OBS) {
                obs[i * OBS + s] = 1.0f;
            }
            act[i] = -2.0f + 4.0f * (float)g / (GRID - 1);
            rew[i] = -(act[i] - s_best[s]) * (act[i] - s_best[s]);
            disc[i] = 0.0f;
        }
    }
    wire_msg_t m = {.type = WIRE_MSG_TRANSITION_BATCH};
    m.u.batch = (wire_batch_t){.actor_id = 0,
                               .seq = 0,
                               .count = ROWS,
                               .obs_dim = OBS,
                               .obs_dtype = WIRE_OBS_FLOAT32,
                               .obs = obs,
                               .action_dim = 1,
                               .cont_actions = act,
                               .rewards = rew,
                               .discounts = disc,
                               .next_obs = next};
    check_send_msg(d, &m);
    char ack[256];
    ck_assert_int_gt(zmq_recv(d, ack, sizeof ack, 0), 0);
    zmq_close(d);
}

typedef struct {
    uint64_t version, learner_step;
    uint32_t num_params;
} s_weights_info;

// A WeightsRequest with have, and the answer's params (num_params floats) into params.
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
    w->num_params = m.u.weights.num_params;
    memcpy(params, m.u.weights.params, m.u.weights.num_params * sizeof(float));
    zmq_msg_close(&msg);
    return 0;
}

// The actors' decoder: it refuses Weights of any size but the policy's.
static wire_decoder_t *s_weights_decoder(size_t policy_params) {
    static const float low[1] = {-2.0f}, high[1] = {2.0f};
    wire_limits_t lim = {.obs_dim = OBS,
                         .action_dim = 1,
                         .action_low = low,
                         .action_high = high,
                         .num_params = (uint32_t)policy_params,
                         .max_count = 64};
    return wire_decoder_new(&lim);
}

static void *s_weights_client(void *ctx, const learner_t *l) {
    void *sock = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0, rcvtimeo = 3000;
    zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(sock, ZMQ_RCVTIMEO, &rcvtimeo, sizeof rcvtimeo);
    ck_assert_int_eq(zmq_connect(sock, learner_weights_endpoint(l)), 0);
    return sock;
}

// The line of metrics.csv that starts with prefix ("wall_time" for the header) or, for
// prefix NULL, the last line; into buf.
static void s_metrics_line(const char *tmp, const char *prefix, char *buf, size_t n) {
    char path[600];
    snprintf(path, sizeof path, "%s/t/metrics.csv", tmp);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char line[4096];
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        if (!prefix || strncmp(line, prefix, strlen(prefix)) == 0) {
            snprintf(buf, n, "%s", line);
            found = 1;
        }
    }
    fclose(f);
    ck_assert_msg(found, "no line %s in %s", prefix ? prefix : "(any)", path);
}

// The value of column name in the CSV line row under header.
static double s_column(const char *header, const char *row, const char *name) {
    char h[4096], r[4096];
    snprintf(h, sizeof h, "%s", header);
    snprintf(r, sizeof r, "%s", row);
    char *sh = NULL, *sr = NULL;
    char *a = strtok_r(h, ",\n", &sh), *b = strtok_r(r, ",\n", &sr);
    while (a && b) {
        if (strcmp(a, name) == 0) {
            return strtod(b, NULL);
        }
        a = strtok_r(NULL, ",\n", &sh), b = strtok_r(NULL, ",\n", &sr);
    }
    ck_abort_msg("no column %s in %s", name, header);
    return 0;
}

// Trains over a real replay server: the policy's weights are published and change, updates
// happen, priorities go back, metrics.csv has the DPG columns; then the checkpoint resumes
// exactly (steps, every parameter, optimizer step), --no-resume starts afresh, and a DQN
// checkpoint is refused (and the DPG one by a DQN learner).
START_TEST(test_dpg_learner_trains_publishes_resumes) {
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", check_tmpdir());
    apex_config_t cfg;
    s_config(&cfg, tmp, 1);
    const size_t PP = s_published_params(&cfg);
    ck_assert_uint_eq(PP, nn_run_weights_params(&cfg));
    check_replay_t r;
    check_replay_start(&r, &cfg); // empty: the learner waits for min_size_to_sample
    s_set(&cfg, "endpoints.replay_sample=%s", replay_server_sample_endpoint(r.server));
    s_learner x;
    s_learner_start(&x, &cfg, 0);
    train_dpg_t *t = learner_dpg(x.learner);
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_null(learner_trainer(x.learner));
    ck_assert_uint_eq(train_dpg_policy(t)->num_params + train_dpg_critic(t, 0)->num_params, PP);
    ck_assert_uint_gt(train_dpg_num_params(t), PP); // the twin critic is not published
    void *ctx = zmq_ctx_new();
    void *sock = s_weights_client(ctx, x.learner);
    wire_decoder_t *dec = s_weights_decoder(PP);
    float *p0 = malloc(PP * sizeof(float)), *p1 = malloc(PP * sizeof(float));
    s_weights_info w0, w;
    ck_assert_int_eq(s_recv_weights(sock, dec, 0, &w0, p0), 0); // the initial policy
    ck_assert_uint_eq(w0.num_params, PP);
    ck_assert_uint_eq(w0.learner_step, 0);
    s_fill(ctx, replay_server_insert_endpoint(r.server));
    // max_steps 0: the learner runs until stopped, so every held request is answered.
    int newer = 0;
    while (newer < 3) {
        ck_assert_int_eq(s_recv_weights(sock, dec, w0.version, &w, p1), 0);
        if (w.version > w0.version) {
            newer++;
            ck_assert_uint_eq(w.num_params, PP);
            ck_assert_uint_gt(w.learner_step, w0.learner_step);
            ck_assert_uint_eq(w.learner_step % 10, 0); // publish_every
            w0 = w;
        }
    }
    double moved = 0;
    for (size_t i = 0; i < PP; i++) {
        moved += fabs((double)p1[i] - (double)p0[i]);
    }
    ck_assert_msg(moved > 0, "the published policy did not change");
    s_wait_updates(x.learner, 100);
    learner_stop(x.learner);
    s_learner_join(&x);
    const int64_t K = learner_updates(x.learner);
    ck_assert_int_ge(K, 100);
    ck_assert_int_eq(train_dpg_steps(t), K);
    const size_t N = train_dpg_num_params(t);
    float *on = malloc(N * sizeof(float)), *tg = malloc(N * sizeof(float));
    memcpy(on, train_dpg_online(t), N * sizeof(float));
    memcpy(tg, train_dpg_target(t), N * sizeof(float));
    const int64_t actor_step = train_dpg_actor_optim(t)->step;
    const int64_t critic_step = train_dpg_critic_optim(t)->step;
    ck_assert_int_eq(critic_step, K);
    ck_assert_int_eq(actor_step, (K + 1) / 2); // policy_delay 2, from step 0
    learner_destroy(&x.learner);
    wire_replay_stats_t st;
    check_replay_stop(&r, &st);
    ck_assert_uint_eq(st.inserted, ROWS);
    ck_assert_uint_ge(st.sampled, (uint64_t)K * 32);
    ck_assert_uint_gt(st.updated, 0); // priorities went back
    ck_assert_uint_eq(st.bad_messages, 0);

    // metrics.csv: the DPG columns, and the final row's values.
    char header[4096], row[4096];
    s_metrics_line(tmp, "wall_time", header, sizeof header);
    ck_assert_ptr_nonnull(strstr(header, ",loss,"));
    ck_assert_ptr_nonnull(strstr(header, ",critic_loss,actor_loss,q_mean,critic_grad_norm,"
                                         "actor_grad_norm,policy_updates,skipped_steps\n"));
    s_metrics_line(tmp, NULL, row, sizeof row);
    ck_assert_double_eq(s_column(header, row, "updates"), (double)K);
    ck_assert_double_gt(s_column(header, row, "critic_loss"), 0);
    ck_assert_double_eq(s_column(header, row, "critic_loss"), s_column(header, row, "loss"));
    ck_assert_double_ne(s_column(header, row, "actor_loss"), 0);
    ck_assert_double_ne(s_column(header, row, "q_mean"), 0);
    ck_assert_double_gt(s_column(header, row, "critic_grad_norm"), 0);
    ck_assert_double_gt(s_column(header, row, "actor_grad_norm"), 0);
    ck_assert_double_eq(s_column(header, row, "policy_updates"), (double)actor_step);
    ck_assert_double_eq(s_column(header, row, "skipped_steps"), 0);

    // Resume: the same step, every parameter and target, both optimizers' steps; the first
    // Weights it publishes are the saved policy.
    s_set(&cfg, "endpoints.replay_sample=tcp://127.0.0.1:1"); // nothing to sample
    s_learner_start(&x, &cfg, 1);
    t = learner_dpg(x.learner);
    ck_assert_int_eq(learner_updates(x.learner), K);
    ck_assert_int_eq(train_dpg_steps(t), K);
    ck_assert_int_eq(memcmp(train_dpg_online(t), on, N * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(train_dpg_target(t), tg, N * sizeof(float)), 0);
    ck_assert_int_eq(train_dpg_actor_optim(t)->step, actor_step);
    ck_assert_int_eq(train_dpg_critic_optim(t)->step, critic_step);
    zmq_close(sock);
    sock = s_weights_client(ctx, x.learner);
    ck_assert_int_eq(s_recv_weights(sock, dec, 0, &w, p1), 0);
    ck_assert_uint_eq(w.learner_step, (uint64_t)K);
    ck_assert_uint_gt(w.version, w0.version);                // a new incarnation
    ck_assert_int_eq(memcmp(p1, on, PP * sizeof(float)), 0); // [ mu | Q_1 ] is the prefix
    learner_stop(x.learner);
    s_learner_join(&x);
    learner_destroy(&x.learner);

    // --no-resume: afresh over the same file.
    x.learner = learner_new(&cfg, 0);
    ck_assert_ptr_nonnull(x.learner);
    ck_assert_int_eq(learner_updates(x.learner), 0);
    learner_destroy(&x.learner);

    // The DPG checkpoint is no DQN learner's, and a DQN checkpoint no DPG learner's.
    apex_config_t dqn;
    s_config(&dqn, tmp, 0);
    s_set(&dqn, "endpoints.replay_sample=tcp://127.0.0.1:1");
    ck_assert_ptr_null(learner_new(&dqn, 1));
    s_learner_start(&x, &dqn, 0); // writes a DQN checkpoint over it
    learner_stop(x.learner);
    s_learner_join(&x);
    learner_destroy(&x.learner);
    ck_assert_ptr_null(learner_new(&cfg, 1));
    x.learner = learner_new(&dqn, 1); // sanity: that file is a good DQN checkpoint
    ck_assert_ptr_nonnull(x.learner);
    learner_destroy(&x.learner);

    free(on);
    free(tg);
    free(p0);
    free(p1);
    wire_decoder_destroy(&dec);
    zmq_close(sock);
    zmq_ctx_term(ctx);
    check_rmtree(tmp);
}
END_TEST

// max_steps stops a DPG learner after exactly that many updates, and its checkpoint says so.
START_TEST(test_dpg_learner_max_steps) {
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", check_tmpdir());
    apex_config_t cfg;
    s_config(&cfg, tmp, 1);
    s_set(&cfg, "learner.max_steps=40");
    check_replay_t r;
    check_replay_start(&r, &cfg);
    s_set(&cfg, "endpoints.replay_sample=%s", replay_server_sample_endpoint(r.server));
    s_learner x;
    s_learner_start(&x, &cfg, 0);
    void *ctx = zmq_ctx_new();
    s_fill(ctx, replay_server_insert_endpoint(r.server));
    zmq_ctx_term(ctx);
    s_learner_join(&x); // returns by itself
    ck_assert_int_eq(learner_updates(x.learner), 40);
    learner_destroy(&x.learner);
    check_replay_stop(&r, NULL);
    char path[600];
    learner_checkpoint_path(&cfg, path, sizeof path);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    ckpt_header_t hdr;
    ck_assert_int_eq(fread(&hdr, sizeof hdr, 1, f), 1);
    fclose(f);
    ck_assert_int_eq(memcmp(hdr.magic, CKPT_DPG_MAGIC, 8), 0);
    ck_assert_uint_eq(hdr.learner_step, 40);
    check_rmtree(tmp);
}
END_TEST

Suite *learner_dpg_suite(void) {
    Suite *s = suite_create("learner_dpg");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_dpg_learner_trains_publishes_resumes);
    tcase_add_test(tc, test_dpg_learner_max_steps);
    suite_add_tcase(s, tc);
    return s;
}
