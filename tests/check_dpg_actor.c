// check_dpg_actor.c: apex-actor and apex-eval on continuous actions (issue #28), through
// their real interfaces: an actor in a thread of this process against a stub replay (a
// ROUTER here that decodes its TransitionBatches) and a stub learner (a ROUTER answering
// its WeightsRequests with weights made here, check_apex.h), and the evaluator on a DPG
// trainer's checkpoint written here with train_dpg_save.
// Everything the actor does before and between weights is a function of the seed, so the
// checks compare with a reference stepped here (the same env streams, the same initial
// policy) exactly; waits poll for a condition, bounded by WAIT_MS.
#include "check_apex.h"
#include "check_nn_ref.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "actor.h"
#include "blas.h"
#include "ckpt.h"
#include "clock.h"
#include "config.h"
#include "env.h"
#include "env_mujoco.h"
#include "evaluator.h"
#include "log.h"
#include "nn.h"
#include "rng.h"
#include "train_dpg.h"
#include "weights_client.h"
#include "wire.h"

#define ENVS 4 // [actor] envs_per_actor, and send_batch: batch k holds step k's windows
#define OBS_MAX 12
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

// Pendulum-v1 (or env, with its model_xml) with small sizes; extra: more assignments.
static void s_config(apex_config_t *cfg, const char *env, const char *xml, int num_actors,
                     const char *extra1, const char *extra2) {
    char id[96], model[160];
    snprintf(id, sizeof id, "env.id=%s", env);
    snprintf(model, sizeof model, "env.model_xml=%s", xml ? xml : "");
    const char *sets[] = {
        id, model, "network.hidden=16",
        num_actors == 1 ? "actor.num_actors=1" : "actor.num_actors=2", "actor.envs_per_actor=4",
        "actor.n_step=3", "actor.gamma=0.9", "actor.send_batch=4", "actor.weight_sync_steps=40",
        "actor.max_pending_batches=64", "actor.stats_interval_ms=50", "actor.max_steps_per_s=1000",
        "replay.max_batch=1024",
        // rows with whole stacks, which these tests read (frame storage's
        // rows: check_actor_frames.c)
        "replay.frame_storage=false", "run.seed=7", extra1 ? extra1 : "actor.noise_alpha=7",
        extra2 ? extra2 : "actor.noise_alpha=7"};
    char err[CONFIG_ERR_LEN];
    int n = (int)(sizeof sets / sizeof sets[0]);
    ck_assert_msg(config_load(cfg, NULL, sets, n, err, sizeof err) == 0, "%s", err);
    ck_assert_int_gt(cfg->env.action_dim, 0);
    ck_assert_int_le(cfg->env.obs_dim, OBS_MAX);
}

static void s_sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void *s_bound(void *ctx, int type, char *ep, size_t ep_len) {
    void *s = zmq_socket(ctx, type);
    ck_assert_ptr_nonnull(s);
    int zero = 0, timeout = 100;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    ck_assert_int_eq(zmq_bind(s, "tcp://127.0.0.1:*"), 0);
    ck_assert_int_eq(zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &ep_len), 0);
    return s;
}

// The run's policy with the actor's initial parameters ([run] seed's NET_INIT stream), and
// when q is not NULL its critic, drawn next from the same stream (the actor's order).
static void s_initial_policy(const apex_config_t *cfg, nn_config_t *nc, nn_params_t *p,
                             nn_config_t *qc, nn_params_t *q) {
    nn_config_from_run(nc, cfg);
    nn_params_init(p, nc);
    rng_t init;
    rng_init_stream(&init, (uint64_t)cfg->run.seed, RNG_ROLE_NET_INIT, 0);
    nn_params_init_random(p, &init);
    if (q) {
        nn_critic_config(qc, nc);
        nn_params_init(q, qc);
        nn_params_init_random(q, &init);
    }
}

// The weights message of a continuous run, [ mu | Q_1 ], into a fresh array (free it).
static float *s_weights_of(const nn_params_t *mu, const nn_params_t *q, size_t *n) {
    *n = mu->num_params + q->num_params;
    float *w = malloc(*n * sizeof(float));
    memcpy(w, mu->data, mu->num_params * sizeof(float));
    memcpy(w + mu->num_params, q->data, q->num_params * sizeof(float));
    return w;
}

// What the actor's critic should give row e of a batch: |R + disc Q(s', mu(s')) - Q(s, a)|
// + priority_eps, through the double-precision reference networks.
static double s_ref_priority(const apex_config_t *cfg, const nn_config_t *nc, const nn_params_t *mu,
                             const nn_config_t *qc, const nn_params_t *q, const float *obs,
                             const float *act, float rew, float disc, const float *next_obs) {
    const int D = cfg->env.action_dim;
    double tmu[4096], tq[4096], a[8], da[8], qn, qs;
    ck_assert_uint_le(mu->num_params, 4096);
    ck_assert_uint_le(q->num_params, 4096);
    for (size_t i = 0; i < mu->num_params; i++) {
        tmu[i] = mu->data[i];
    }
    for (size_t i = 0; i < q->num_params; i++) {
        tq[i] = q->data[i];
    }
    for (int k = 0; k < D; k++) {
        da[k] = act[k];
    }
    nnref_forward(a, nc, tmu, next_obs, 1);
    nnref_forward_sa(&qn, qc, tq, next_obs, a, 1);
    nnref_forward_sa(&qs, qc, tq, obs, da, 1);
    double y = disc != 0.0f ? (double)rew + (double)disc * qn : rew;
    return fabs(y - qs) + cfg->learner.priority_eps;
}

// ---------------------------------------------------------------------------------------
// An actor in a thread, a stub replay and a stub learner

typedef struct {
    uint32_t count, weights_version, action_dim;
    uint64_t seq;
    int has_priorities;
    float prio[ENVS];
    float obs[ENVS * OBS_MAX], next_obs[ENVS * OBS_MAX], act[ENVS * 8], rew[ENVS], disc[ENVS];
} s_batch;

typedef struct {
    apex_config_t cfg;
    void *ctx, *replay, *weights, *pull;
    wire_decoder_t *dec;
    actor_t *actor;
    pthread_t thread;
    int rc;
} s_rig;

static void *s_actor_main(void *arg) {
    s_rig *x = arg;
    x->rc = actor_run(x->actor, 0);
    return NULL;
}

static void s_rig_start(s_rig *x, int index) {
    x->ctx = zmq_ctx_new();
    char ins_ep[256], weights_ep[256], stats_ep[256];
    x->replay = s_bound(x->ctx, ZMQ_ROUTER, ins_ep, sizeof ins_ep);
    x->weights = check_weights_router(x->ctx, weights_ep, sizeof weights_ep);
    x->pull = s_bound(x->ctx, ZMQ_PULL, stats_ep, sizeof stats_ep);
    s_set(&x->cfg, "endpoints.replay_insert=%s", ins_ep);
    s_set(&x->cfg, "endpoints.learner_weights=%s", weights_ep);
    s_set(&x->cfg, "endpoints.learner_stats=%s", stats_ep);
    const config_env_t *e = &x->cfg.env;
    wire_limits_t lim = {.obs_dim = (uint32_t)e->obs_dim,
                         .obs_dtype = (uint32_t)e->obs_dtype,
                         .action_dim = (uint32_t)e->action_dim,
                         .action_low = e->action_low,
                         .action_high = e->action_high,
                         .max_count = 64,
                         .max_episodes = 4096};
    x->dec = wire_decoder_new(&lim);
    x->actor = actor_new(&x->cfg, index);
    ck_assert_ptr_nonnull(x->actor);
    x->rc = -2;
    ck_assert_int_eq(pthread_create(&x->thread, NULL, s_actor_main, x), 0);
}

static void s_rig_stop(s_rig *x, actor_stats_t *st) {
    actor_stop(x->actor);
    ck_assert_int_eq(pthread_join(x->thread, NULL), 0);
    ck_assert_int_eq(x->rc, 0);
    actor_get_stats(x->actor, st);
    actor_destroy(&x->actor);
    wire_decoder_destroy(&x->dec);
    zmq_close(x->replay);
    zmq_close(x->weights);
    zmq_close(x->pull);
    zmq_ctx_term(x->ctx);
}

// The next TransitionBatch the actor sends (answering weights requests with answer, when not
// NULL, while waiting), decoded and copied into *b. The decoder already refused actions
// outside the bounds or not finite.
static void s_next_batch(s_rig *x, const wire_buf_t *answer, s_batch *b) {
    int64_t deadline = clock_now_ms() + WAIT_MS;
    for (;;) {
        ck_assert_msg(clock_now_ms() < deadline, "no batch from the actor");
        if (answer) {
            check_weights_answer(x->weights, answer, NULL);
        }
        zmq_msg_t id, msg;
        zmq_msg_init(&id);
        if (zmq_msg_recv(&id, x->replay, 0) < 0) {
            zmq_msg_close(&id);
            continue;
        }
        zmq_msg_init(&msg);
        ck_assert_int_ge(zmq_msg_recv(&msg, x->replay, 0), 0);
        wire_msg_t m;
        ck_assert_int_eq(wire_decode(x->dec, zmq_msg_data(&msg), zmq_msg_size(&msg), &m), APEX_OK);
        ck_assert_int_eq(m.type, WIRE_MSG_TRANSITION_BATCH);
        const wire_batch_t *w = &m.u.batch;
        const int O = x->cfg.env.obs_dim, D = x->cfg.env.action_dim;
        ck_assert_uint_eq(w->count, ENVS);
        ck_assert_uint_eq(w->action_dim, (uint32_t)D);
        ck_assert_ptr_null(w->actions);
        ck_assert_ptr_nonnull(w->cont_actions);
        *b = (s_batch){.count = w->count,
                       .weights_version = (uint32_t)w->weights_version,
                       .action_dim = w->action_dim,
                       .seq = w->seq,
                       .has_priorities = w->priorities != NULL};
        memcpy(b->obs, w->obs, (size_t)ENVS * (size_t)O * sizeof(float));
        memcpy(b->next_obs, w->next_obs, (size_t)ENVS * (size_t)O * sizeof(float));
        memcpy(b->act, w->cont_actions, (size_t)ENVS * (size_t)D * sizeof(float));
        memcpy(b->rew, w->rewards, ENVS * sizeof(float));
        memcpy(b->disc, w->discounts, ENVS * sizeof(float));
        if (w->priorities) {
            memcpy(b->prio, w->priorities, ENVS * sizeof(float));
        }
        zmq_msg_close(&id);
        zmq_msg_close(&msg);
        return;
    }
}

// ---------------------------------------------------------------------------------------
// The actor

// noise_sigma = 0: every action is the initial policy's mu(s) exactly, and every row is the
// n-step transition a reference computes by stepping the same envs (the same streams:
// actor 1's envs 4..7) with that policy and folding n = 3 steps by hand. Batches carry
// continuous actions in the bounds and initial priorities from the actor's initial critic
// (drawn after the policy from the same stream), as the reference networks compute them.
START_TEST(test_sigma0_acts_mu_and_folds_nstep) {
    s_rig x;
    s_config(&x.cfg, "Pendulum-v1", NULL, 2, "actor.noise_sigma=0", NULL);
    const int O = x.cfg.env.obs_dim, D = x.cfg.env.action_dim, K = 6, T = K + 3;
    ck_assert_int_eq(O, 3);
    ck_assert_int_eq(D, 1);
    // The reference: T steps of the 4 envs, acting mu(s).
    nn_config_t nc, qc;
    nn_params_t p, q;
    s_initial_policy(&x.cfg, &nc, &p, &qc, &q);
    nn_state_t st;
    nn_state_init(&st, &nc, ENVS, 0);
    blas_set_threads(1);
    vecenv_t v;
    vecenv_init(&v, env_find("Pendulum-v1"), ENVS, 7, 1 * ENVS, 64);
    float obs[16][ENVS * 3], act[16][ENVS], rew[16][ENVS];
    uint8_t term[ENVS], trunc[ENVS];
    for (int t = 0; t <= T; t++) {
        memcpy(obs[t], v.obs, sizeof obs[t]);
        nn_forward(&st, &p, v.obs, ENVS, act[t]);
        vecenv_step_cont(&v, act[t], rew[t], term, trunc, NULL);
        for (int e = 0; e < ENVS; e++) {
            ck_assert(!term[e] && !trunc[e]); // 200-step episodes
        }
    }
    vecenv_fini(&v);
    s_rig_start(&x, 1);
    for (int k = 0; k < K; k++) {
        s_batch b;
        s_next_batch(&x, NULL, &b);
        ck_assert_uint_eq(b.seq, (uint64_t)k);
        ck_assert_uint_eq(b.weights_version, 0);
        ck_assert(b.has_priorities);
        for (int e = 0; e < ENVS; e++) {
            double want = s_ref_priority(&x.cfg, &nc, &p, &qc, &q, b.obs + e * O, b.act + e * D,
                                         b.rew[e], b.disc[e], b.next_obs + e * O);
            ck_assert_msg(fabs((double)b.prio[e] - want) <= 1e-5 * want + 1e-6,
                          "batch %d env %d: priority %.9g, the reference %.9g", k, e,
                          (double)b.prio[e], want);
            ck_assert_msg(memcmp(b.obs + e * O, obs[k] + e * O, (size_t)O * 4) == 0,
                          "batch %d env %d: s_t", k, e);
            ck_assert_msg(memcmp(b.next_obs + e * O, obs[k + 3] + e * O, (size_t)O * 4) == 0,
                          "batch %d env %d: s_t+3", k, e);
            ck_assert_msg(b.act[e] == act[k][e], "batch %d env %d: action %.9g, mu(s) %.9g", k, e,
                          (double)b.act[e], (double)act[k][e]);
            ck_assert(b.act[e] >= -2.0f && b.act[e] <= 2.0f);
            double R = (double)rew[k][e] + 0.9 * (double)rew[k + 1][e] +
                       0.81 * (double)rew[k + 2][e];
            ck_assert_msg(fabs((double)b.rew[e] - R) <= 1e-5 * fabs(R) + 1e-6,
                          "batch %d env %d: R %.9g, by hand %.9g", k, e, (double)b.rew[e], R);
            ck_assert_double_eq_tol(b.disc[e], 0.729, 1e-6);
        }
    }
    actor_stats_t as;
    s_rig_stop(&x, &as);
    ck_assert_uint_eq(as.bad_priorities, 0);
    ck_assert_uint_eq(as.void_steps, 0);
    nn_state_fini(&st);
    nn_params_fini(&p);
    nn_params_fini(&q);
}
END_TEST

// [actor] random_steps = 8 (TD3's start_steps) with noise_sigma = 0: the actor's first 8 env
// steps (2 vector steps of its 4 envs) take uniformly random actions in the bounds, not mu(s);
// from the third on, every action is mu(s_t) exactly (checked against the initial policy run
// on the batch's own s_t). Rows of step k travel in batch k.
START_TEST(test_random_steps_then_policy) {
    s_rig x;
    s_config(&x.cfg, "Pendulum-v1", NULL, 2, "actor.noise_sigma=0", "actor.random_steps=8");
    nn_config_t nc, qc;
    nn_params_t p, q;
    s_initial_policy(&x.cfg, &nc, &p, &qc, &q);
    nn_state_t st;
    nn_state_init(&st, &nc, ENVS, 0);
    blas_set_threads(1);
    s_rig_start(&x, 1);
    double lo = 2.0, hi = -2.0;
    for (int k = 0; k < 6; k++) {
        s_batch b;
        s_next_batch(&x, NULL, &b);
        float mu[ENVS];
        nn_forward(&st, &p, b.obs, ENVS, mu);
        for (int e = 0; e < ENVS; e++) {
            ck_assert(b.act[e] >= -2.0f && b.act[e] <= 2.0f);
            if (k < 2) {
                ck_assert_msg(b.act[e] != mu[e], "batch %d env %d: mu(s) in a random step", k, e);
                lo = fmin(lo, b.act[e]), hi = fmax(hi, b.act[e]);
            } else {
                ck_assert_msg(b.act[e] == mu[e], "batch %d env %d: action %.9g, mu(s) %.9g", k, e,
                              (double)b.act[e], (double)mu[e]);
            }
        }
    }
    ck_assert_msg(hi - lo > 1.0, "8 uniform actions in [-2, 2] spread over %.3g only", hi - lo);
    actor_stats_t as;
    s_rig_stop(&x, &as);
    nn_state_fini(&st);
    nn_params_fini(&p);
    nn_params_fini(&q);
}
END_TEST

// [actor] noise_theta 0.15: Ornstein-Uhlenbeck noise per env. Everything the actor does is
// a function of the seed, so a reference here replays it: the same envs (actor 1's streams),
// the same initial policy, the actor's RNG stream (one normal per env per step, env by env),
// x <- 0.85 x + sigma z with x = 0 at each episode's start, a = clip(mu(s) + 2 x, -2, 2). It
// runs past Pendulum's 200-step truncation, so the actions after it show that x restarted
// from 0 there; every row the actor sends must be the reference's step with that s_t.
START_TEST(test_ou_noise_follows_the_process) {
    s_rig x;
    s_config(&x.cfg, "Pendulum-v1", NULL, 2, "actor.noise_sigma=0.3", "actor.noise_alpha=0");
    s_set(&x.cfg, "actor.noise_theta=0.15");
    enum { T = 212 };
    const int O = 3;
    nn_config_t nc;
    nn_params_t p;
    s_initial_policy(&x.cfg, &nc, &p, NULL, NULL);
    nn_state_t st;
    nn_state_init(&st, &nc, ENVS, 0);
    blas_set_threads(1);
    vecenv_t v;
    vecenv_init(&v, env_find("Pendulum-v1"), ENVS, 7, 1 * ENVS, 64);
    rng_t rng;
    rng_init_stream(&rng, 7, RNG_ROLE_ACTOR, 1);
    static float obs[T][ENVS * 3], act[T][ENVS];
    double ou[ENVS] = {0}, sigma = (double)0.3f;
    float mu[ENVS], rew[ENVS];
    uint8_t term[ENVS], trunc[ENVS];
    int boundary = -1;
    for (int t = 0; t < T; t++) {
        memcpy(obs[t], v.obs, sizeof obs[t]);
        nn_forward(&st, &p, v.obs, ENVS, mu);
        for (int e = 0; e < ENVS; e++) {
            ou[e] = 0.85 * ou[e] + sigma * rng_normal(&rng);
            double a = (double)mu[e] + 2.0 * ou[e];
            act[t][e] = (float)(a < -2.0 ? -2.0 : a > 2.0 ? 2.0 : a);
        }
        vecenv_step_cont(&v, act[t], rew, term, trunc, NULL);
        for (int e = 0; e < ENVS; e++) {
            if (term[e] || trunc[e]) {
                ou[e] = 0.0;
                boundary = t;
            }
        }
    }
    vecenv_fini(&v);
    ck_assert_int_eq(boundary, 199);
    s_rig_start(&x, 1);
    int matched = 0, after = 0;
    while (after < ENVS * 8) {
        s_batch b;
        s_next_batch(&x, NULL, &b);
        for (int e = 0; e < (int)b.count; e++) {
            int t = -1;
            for (int k = 0; k < T - 3 && t < 0; k++) {
                t = memcmp(b.obs + e * O, obs[k] + e * O, (size_t)O * 4) == 0 ? k : -1;
            }
            if (t < 0) {
                // Rows are env-ordered within a step, but a truncation flushes short windows:
                // find the env too.
                for (int k = 0; k < T - 3 && t < 0; k++) {
                    for (int f = 0; f < ENVS && t < 0; f++) {
                        if (memcmp(b.obs + e * O, obs[k] + f * O, (size_t)O * 4) == 0) {
                            ck_assert_msg(b.act[e] == act[k][f],
                                          "step %d env %d: action %.9g, the OU reference %.9g", k,
                                          f, (double)b.act[e], (double)act[k][f]);
                            t = k;
                        }
                    }
                }
            } else {
                ck_assert_msg(b.act[e] == act[t][e],
                              "step %d env %d: action %.9g, the OU "
                              "reference %.9g",
                              t, e, (double)b.act[e], (double)act[t][e]);
            }
            ck_assert_msg(t >= 0, "a row whose s_t the reference never saw");
            matched++;
            after += t > boundary;
        }
    }
    actor_stats_t as;
    s_rig_stop(&x, &as);
    ck_assert_int_gt(matched, ENVS * 200);
    nn_state_fini(&st);
    nn_params_fini(&p);
}
END_TEST

// [env] frame_stack = 3 (issue #27) through the actor: Pendulum-v1 with noise_sigma 0, so
// every action is the initial policy's mu of the stack it acted on. A reference steps the
// same envs, building each stack from the definition (frames t-2, t-1, t of the episode, the
// first frame standing in for those before it) and acting mu of it. Every row the actor
// sends has s_t = a reference stack and s_t+3 = the stack 3 steps on, or, for the windows cut
// by Pendulum's 200-step truncation, the stack ending with the final frame; rows after the
// truncation start the next episode's stacks from its first frame. Frame-major: the network
// reads 9 inputs, the 3 frames oldest first. The evaluator reads stacks the same way.
START_TEST(test_frame_stack_rows) {
    s_rig x;
    s_config(&x.cfg, "Pendulum-v1", NULL, 2, "actor.noise_sigma=0", "env.frame_stack=3");
    enum { T = 212, K = 3, F = 3, S = K * F };
    ck_assert_int_eq(x.cfg.env.obs_dim, S);
    ck_assert_int_eq(x.cfg.env.frame_dim, F);
    nn_config_t nc;
    nn_params_t p;
    s_initial_policy(&x.cfg, &nc, &p, NULL, NULL);
    ck_assert_int_eq(nc.obs_dim, S);
    nn_state_t st;
    nn_state_init(&st, &nc, ENVS, 0);
    blas_set_threads(1);
    vecenv_t v;
    vecenv_init(&v, env_find("Pendulum-v1"), ENVS, 7, 1 * ENVS, 64);
    // frames[t][e]: what env e showed at time t (at t = 200 the next episode's first frame).
    static float frames[T + 1][ENVS][F], stacks[T][ENVS][S], final_stack[ENVS][S];
    int start = 0; // the current episode's first time step (every env truncates together)
    for (int t = 0; t < T; t++) {
        for (int e = 0; e < ENVS; e++) {
            memcpy(frames[t][e], v.obs + (size_t)e * F * 4, sizeof frames[t][e]);
        }
        float stk[ENVS * S], act[ENVS], rew[ENVS];
        for (int e = 0; e < ENVS; e++) {
            for (int j = 0; j < K; j++) {
                int u = t - (K - 1) + j;
                memcpy(stacks[t][e] + j * F, frames[u < start ? start : u][e], F * sizeof(float));
            }
            memcpy(stk + e * S, stacks[t][e], sizeof stacks[t][e]);
        }
        nn_forward(&st, &p, stk, ENVS, act);
        uint8_t term[ENVS], trunc[ENVS];
        vecenv_step_cont(&v, act, rew, term, trunc, NULL);
        if (trunc[0]) {
            ck_assert_int_eq(t, 199);
            for (int e = 0; e < ENVS; e++) {
                ck_assert(trunc[e]);
                memcpy(final_stack[e], stacks[t][e] + F, (K - 1) * F * sizeof(float));
                memcpy(final_stack[e] + (K - 1) * F,
                       (const uint8_t *)v.final_obs + (size_t)e * F * 4, F * sizeof(float));
            }
            start = t + 1;
        }
    }
    vecenv_fini(&v);
    s_rig_start(&x, 1);
    int rows = 0, cut = 0, after = 0;
    while (after < ENVS * 4) {
        s_batch b;
        s_next_batch(&x, NULL, &b);
        for (int r = 0; r < (int)b.count; r++) {
            int t = -1, e = -1;
            for (int k = 0; k < T - 3 && t < 0; k++) {
                for (int f = 0; f < ENVS && t < 0; f++) {
                    if (memcmp(b.obs + r * S, stacks[k][f], sizeof stacks[k][f]) == 0) {
                        t = k, e = f;
                    }
                }
            }
            ck_assert_msg(t >= 0, "row %d of batch %llu: a stack the reference never acted on", r,
                          (unsigned long long)b.seq);
            const float *want = t < 200 && t + 3 >= 200 ? final_stack[e] : stacks[t + 3][e];
            ck_assert_msg(memcmp(b.next_obs + r * S, want, S * sizeof(float)) == 0,
                          "step %d env %d: s_t+3 is not the reference's stack", t, e);
            rows++;
            cut += t < 200 && t + 3 >= 200;
            after += t >= 200;
        }
    }
    actor_stats_t as;
    s_rig_stop(&x, &as);
    ck_assert_int_ge(cut, ENVS * 3); // the windows the truncation cut
    // The evaluator: its first round's returns, from the reference's stacking of its envs.
    eval_opts_t o;
    evaluator_opts_from_run(&o, &x.cfg);
    ck_assert_int_eq(o.frame_stack, K);
    o.episodes = 2, o.parallel = 2;
    eval_result_t got;
    evaluator_run(env_find("Pendulum-v1"), &p, &st, &o, &got);
    vecenv_init(&v, env_find("Pendulum-v1"), 2, o.seed, EVALUATOR_STREAM_BASE, 2);
    double ret[2] = {0, 0};
    static float ef[201][2][F];
    for (int t = 0; t < 200; t++) {
        memcpy(ef[t], v.obs, sizeof ef[t]);
        float stk[2 * S], act[2], rew[2];
        for (int e = 0; e < 2; e++) {
            for (int j = 0; j < K; j++) {
                int u = t - (K - 1) + j;
                memcpy(stk + e * S + j * F, ef[u < 0 ? 0 : u][e], F * sizeof(float));
            }
        }
        nn_forward(&st, &p, stk, 2, act);
        uint8_t term[2], trunc[2];
        vecenv_step_cont(&v, act, rew, term, trunc, NULL);
        ret[0] += rew[0], ret[1] += rew[1];
    }
    vecenv_fini(&v);
    ck_assert_msg(fabs(got.mean - 0.5 * (ret[0] + ret[1])) <= 1e-3,
                  "evaluator mean %.6f, reference %.6f", got.mean, 0.5 * (ret[0] + ret[1]));
    nn_state_fini(&st);
    nn_params_fini(&p);
}
END_TEST

// Ape-X's per-env noise: actor 0 of 2 (N = 8 envs), noise_sigma 0.5, noise_alpha 7: env i
// adds sigma_i = 0.5^(1 + i) half ranges (Pendulum: 2) of Gaussian noise to mu(s). The mean
// squared deviation of the actions from mu(s) falls env by env, env 3's near (0.0625 * 2)^2
// (env 0's is clipped at the bounds). Every action is in [-2, 2].
START_TEST(test_noise_follows_env_schedule) {
    s_rig x;
    s_config(&x.cfg, "Pendulum-v1", NULL, 2, "actor.noise_sigma=0.5", NULL);
    nn_config_t nc;
    nn_params_t p;
    s_initial_policy(&x.cfg, &nc, &p, NULL, NULL);
    nn_state_t st;
    nn_state_init(&st, &nc, ENVS, 0);
    blas_set_threads(1);
    s_rig_start(&x, 0);
    double msd[ENVS] = {0};
    const int K = 60;
    for (int k = 0; k < K; k++) {
        s_batch b;
        float mu[ENVS];
        s_next_batch(&x, NULL, &b);
        // Batch k's rows are the 4 envs' windows from one step: the batch of observations
        // the actor's policy ran on.
        nn_forward(&st, &p, b.obs, ENVS, mu);
        for (int e = 0; e < ENVS; e++) {
            ck_assert(b.act[e] >= -2.0f && b.act[e] <= 2.0f);
            double d = (double)b.act[e] - (double)mu[e];
            msd[e] += d * d / K;
        }
    }
    actor_stats_t as;
    s_rig_stop(&x, &as);
    for (int e = 1; e < ENVS; e++) {
        ck_assert_msg(msd[e] < msd[e - 1], "env %d: msd %.3g not below env %d's %.3g", e, msd[e],
                      e - 1, msd[e - 1]);
    }
    double want3 = pow(0.0625 * 2.0, 2);
    ck_assert_msg(msd[3] > 0.5 * want3 && msd[3] < 2.0 * want3, "env 3: msd %.4g, sigma^2 %.4g",
                  msd[3], want3);
    nn_state_fini(&st);
    nn_params_fini(&p);
}
END_TEST

// New weights change the actions: once the actor acts with weights v1 (random, from another
// stream), with sigma 0 its actions are mu_v1(s) exactly, no longer the initial mu(s).
START_TEST(test_weights_change_actions) {
    s_rig x;
    s_config(&x.cfg, "Pendulum-v1", NULL, 2, "actor.noise_sigma=0", NULL);
    nn_config_t nc, qc;
    nn_params_t p0, p1, q1;
    s_initial_policy(&x.cfg, &nc, &p0, NULL, NULL);
    nn_params_init(&p1, &nc);
    nn_critic_config(&qc, &nc);
    nn_params_init(&q1, &qc);
    rng_t rng;
    rng_init_stream(&rng, 1234, RNG_ROLE_TEST, 0);
    nn_params_init_random(&p1, &rng);
    nn_params_init_random(&q1, &rng);
    size_t nw;
    float *w1 = s_weights_of(&p1, &q1, &nw);
    ck_assert_uint_eq(nw, nn_run_weights_params(&x.cfg));
    wire_buf_t v1, policy_only;
    wire_buf_init(&v1, 0);
    wire_buf_init(&policy_only, 0);
    check_encode_weights(&v1, 1, w1, (uint32_t)nw);
    check_encode_weights(&policy_only, 1, p1.data, (uint32_t)p1.num_params);
    nn_state_t st;
    nn_state_init(&st, &nc, ENVS, 0);
    blas_set_threads(1);
    s_rig_start(&x, 0);
    // A weights message of the policy alone (a learner of an older build) is refused.
    actor_stats_t as;
    int64_t deadline = clock_now_ms() + WAIT_MS;
    do {
        ck_assert_msg(clock_now_ms() < deadline, "policy-only weights not refused");
        check_weights_answer(x.weights, &policy_only, NULL);
        actor_get_stats(x.actor, &as);
    } while (as.bad_messages == 0);
    ck_assert_uint_eq(as.weights_version, 0);
    s_batch b;
    do {
        s_next_batch(&x, &v1, &b);
    } while (b.weights_version != 1);
    // A window's action is its first step's: 3 batches on, every row was acted with v1.
    for (uint64_t seq = b.seq; b.seq < seq + 3;) {
        s_next_batch(&x, &v1, &b);
    }
    float mu0[ENVS], mu1[ENVS];
    nn_forward(&st, &p0, b.obs, ENVS, mu0);
    nn_forward(&st, &p1, b.obs, ENVS, mu1);
    int differ = 0;
    for (int e = 0; e < ENVS; e++) {
        ck_assert_msg(b.act[e] == mu1[e], "env %d: action %.9g, mu_v1(s) %.9g", e, (double)b.act[e],
                      (double)mu1[e]);
        differ += mu0[e] != mu1[e];
        // ... and prioritized with v1's critic.
        double want = s_ref_priority(&x.cfg, &nc, &p1, &qc, &q1, b.obs + e * 3, b.act + e, b.rew[e],
                                     b.disc[e], b.next_obs + e * 3);
        ck_assert_msg(fabs((double)b.prio[e] - want) <= 1e-5 * want + 1e-6,
                      "env %d: priority %.9g, v1's critic %.9g", e, (double)b.prio[e], want);
    }
    ck_assert_int_gt(differ, 0);
    s_rig_stop(&x, &as);
    ck_assert_uint_eq(as.weights_version, 1);
    wire_buf_fini(&v1);
    wire_buf_fini(&policy_only);
    free(w1);
    nn_state_fini(&st);
    nn_params_fini(&p0);
    nn_params_fini(&p1);
    nn_params_fini(&q1);
}
END_TEST

// ActorStats carry each finished episode's sigma_i where a discrete run's carry epsilon_i:
// actor 1 of 2 (N = 8), noise_sigma 0.5, noise_alpha 7: 0.5^(1 + i) for its envs i = 4..7.
// Pendulum pays costs: every return is negative, every episode 200 steps long.
START_TEST(test_stats_carry_sigmas) {
    s_rig x;
    s_config(&x.cfg, "Pendulum-v1", NULL, 2, "actor.noise_sigma=0.5", "actor.max_steps_per_s=4000");
    s_rig_start(&x, 1);
    int seen[ENVS] = {0}, n_seen = 0;
    int64_t deadline = clock_now_ms() + WAIT_MS;
    while (n_seen < ENVS) {
        ck_assert_msg(clock_now_ms() < deadline, "only %d of %d sigmas seen", n_seen, ENVS);
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, x.pull, 0) < 0) {
            zmq_msg_close(&msg);
            continue;
        }
        wire_msg_t m;
        ck_assert_int_eq(wire_decode(x.dec, zmq_msg_data(&msg), zmq_msg_size(&msg), &m), APEX_OK);
        ck_assert_int_eq(m.type, WIRE_MSG_ACTOR_STATS);
        const wire_actor_stats_t *st = &m.u.actor_stats;
        for (uint32_t e = 0; e < st->n_episodes; e++) {
            int match = -1;
            for (int k = 0; k < ENVS; k++) {
                double want = pow(0.5, 1.0 + (double)(ENVS + k));
                match = fabs((double)st->epsilons[e] - want) <= 1e-6 * want ? k : match;
            }
            ck_assert_msg(match >= 0, "episode sigma %.9g is none of actor 1's",
                          (double)st->epsilons[e]);
            n_seen += !seen[match];
            seen[match] = 1;
            ck_assert_uint_eq(st->lengths[e], 200);
            ck_assert_float_lt(st->returns[e], 0.0f);
        }
        zmq_msg_close(&msg);
    }
    actor_stats_t as;
    s_rig_stop(&x, &as);
    ck_assert_uint_ge(as.episodes, ENVS);
}
END_TEST

// Void steps (tests/fixtures/mujoco/diverge.xml: a gear of 1e12 makes any action but ~0 a
// bad qacc, tests/check_mujoco.c): the initial random policy voids every step, so nothing is
// stored until weights v1 (all zeros: mu(s) = 0, the bounds' middle) arrive. Then env 0
// (sigma 0.5: noisy) still voids every step while envs 1..3 (sigma 0.5^34 and less: actions
// ~1e-10 and below) step. Every stored row is a real n-step transition: InvertedPendulum pays
// 1 per step, so R = (1 - g^m) / (1 - g) for the window's m (a folded void step would add a
// 0), m = n with discount g^n mid-episode. The void steps are counted, and taking weights
// did not wait for real steps (void ones count toward weight_sync_steps).
START_TEST(test_void_steps_dropped) {
    s_rig x;
    s_config(&x.cfg, "InvertedPendulum-v4", "tests/fixtures/mujoco/diverge.xml", 1,
             "actor.noise_sigma=0.5", "actor.noise_alpha=100");
    ck_assert_int_eq(x.cfg.env.action_dim, 1);
    const size_t nw = nn_run_weights_params(&x.cfg);
    float *zeros = calloc(nw, sizeof(float));
    wire_buf_t v1;
    wire_buf_init(&v1, 0);
    check_encode_weights(&v1, 1, zeros, (uint32_t)nw);
    s_rig_start(&x, 0);
    const double g = 0.9;
    int rows = 0, short_rows = 0;
    for (int k = 0; k < 20; k++) {
        s_batch b;
        s_next_batch(&x, &v1, &b);
        ck_assert_uint_eq(b.weights_version, 1); // nothing stored before
        for (int e = 0; e < ENVS; e++) {
            ck_assert(fabsf(b.act[e]) < 1e-6f);
            int m = 0;
            for (int j = 1; j <= 3; j++) {
                if (fabs((double)b.rew[e] - (1.0 - pow(g, j)) / (1.0 - g)) < 1e-5) {
                    m = j;
                }
            }
            ck_assert_msg(m > 0, "row %d of batch %d: R %.9g is no run of 1s", e, k,
                          (double)b.rew[e]);
            ck_assert_msg(b.disc[e] == 0.0f || fabs((double)b.disc[e] - pow(g, m)) < 1e-6,
                          "row %d of batch %d: R %.9g (m %d) with discount %.9g", e, k,
                          (double)b.rew[e], m, (double)b.disc[e]);
            // A zero critic: Q = 0 everywhere, so the priority is |R| + eps.
            ck_assert_double_eq_tol(b.prio[e], fabs((double)b.rew[e]) + x.cfg.learner.priority_eps,
                                    1e-6);
            short_rows += m < 3;
            rows++;
        }
    }
    actor_stats_t as;
    int64_t deadline = clock_now_ms() + WAIT_MS;
    do {
        ck_assert_msg(clock_now_ms() < deadline, "no void steps counted");
        s_sleep_ms(20);
        actor_get_stats(x.actor, &as);
    } while (as.void_steps == 0);
    s_rig_stop(&x, &as);
    ck_assert_uint_gt(as.void_steps, as.steps / 8); // env 0's, at least
    ck_assert_int_eq(rows, 80);
    (void)short_rows;
    wire_buf_fini(&v1);
    free(zeros);
}
END_TEST

// ---------------------------------------------------------------------------------------
// The actor on a Python env (id = python): Gymnasium's Pendulum-v1 in numpy over the bridge

// The config of a python run on tests/pyenv_pendulum.py (obs_dim 3, action_dim 1) in [python]
// groups; make and bounds as given (the env's are [-2, 2]).
static void s_config_python(apex_config_t *cfg, const char *make, const char *low, int groups) {
    char mk[128], lo[64], gr[64];
    snprintf(mk, sizeof mk, "env.make=tests/pyenv_pendulum.py:%s", make);
    snprintf(lo, sizeof lo, "env.action_low=%s", low);
    snprintf(gr, sizeof gr, "python.groups=%d", groups);
    const char *sets[] = {"env.id=python",
                          mk,
                          "env.kwargs={\"start\": [1.0, 0.5]}",
                          "env.obs_dim=3",
                          "env.action_dim=1",
                          lo,
                          "env.action_high=2",
                          "python.workers=1",
                          gr,
                          "python.interpreter=/usr/bin/python3",
                          "network.hidden=16",
                          "actor.num_actors=1",
                          "actor.envs_per_actor=4",
                          "actor.n_step=3",
                          "actor.gamma=0.9",
                          "actor.send_batch=4",
                          "actor.weight_sync_steps=40",
                          "actor.max_pending_batches=64",
                          "actor.stats_interval_ms=50",
                          "actor.max_steps_per_s=1000",
                          "actor.noise_sigma=0",
                          "replay.max_batch=1024",
                          "run.seed=7"};
    char err[CONFIG_ERR_LEN];
    int n = (int)(sizeof sets / sizeof sets[0]);
    ck_assert_msg(config_load(cfg, NULL, sets, n, err, sizeof err) == 0, "%s", err);
}

// noise_sigma = 0 on the Python Pendulum, in [python] groups 1 (lock step) and 2 (Python
// steps one group while the actor infers for the other): every action is the initial
// policy's mu(s), and every batch row is one of the n-step transitions of a reference that
// steps the built-in Pendulum-v1 (envs/env_pendulum.c, which the Python env equals bit for
// bit: check_pyenv_cont.c) from the same start states (pyenv_pendulum.py's start + 0.25 i for
// env i) with mu(s) inferred group by group as the actor does. With groups 1 the rows come in
// step order, as with the built-in env.
START_TEST(test_python_env_acts_mu_and_folds_nstep) {
    enum { T = 16 };
    const int G = _i, GE = ENVS / G;
    s_rig x;
    s_config_python(&x.cfg, "pendulum", "-2", G);
    ck_assert_int_eq(x.cfg.env.action_dim, 1);
    nn_config_t nc;
    nn_params_t p;
    s_initial_policy(&x.cfg, &nc, &p, NULL, NULL);
    nn_state_t st;
    nn_state_init(&st, &nc, ENVS, 0);
    blas_set_threads(1);
    const env_spec_t *spec = env_find("Pendulum-v1");
    double state[ENVS][2];
    float obs[T + 4][ENVS * 3], act[T + 4][ENVS], rew[T + 4][ENVS];
    for (int e = 0; e < ENVS; e++) {
        state[e][0] = 1.0 + 0.25 * e;
        state[e][1] = 0.5;
        spec->observe(state[e], obs[0] + 3 * e);
    }
    for (int t = 0; t < T + 3; t++) {
        for (int g = 0; g < G; g++) {
            nn_forward(&st, &p, obs[t] + 3 * g * GE, GE, act[t] + g * GE);
        }
        for (int e = 0; e < ENVS; e++) {
            uint8_t term;
            spec->step_cont(state[e], &act[t][e], obs[t + 1] + 3 * e, &rew[t][e], &term);
        }
    }
    s_rig_start(&x, 0);
    int seen[T][ENVS] = {{0}};
    for (int k = 0; k < T / 2; k++) {
        s_batch b;
        s_next_batch(&x, NULL, &b);
        ck_assert_uint_eq(b.weights_version, 0);
        ck_assert(
            b.has_priorities); // the initial critic's (test_sigma0_acts_mu_and_folds_nstep checks values)
        for (int r = 0; r < ENVS; r++) {
            int found = 0;
            for (int t = 0; t < T && !found; t++) {
                for (int e = 0; e < ENVS && !found; e++) {
                    if (memcmp(b.obs + 3 * r, obs[t] + 3 * e, 12) != 0 ||
                        memcmp(b.next_obs + 3 * r, obs[t + 3] + 3 * e, 12) != 0) {
                        continue;
                    }
                    found = 1;
                    seen[t][e]++;
                    ck_assert_msg(b.act[r] == act[t][e],
                                  "batch %d row %d (env %d, t %d): action "
                                  "%.9g, mu(s) %.9g",
                                  k, r, e, t, (double)b.act[r], (double)act[t][e]);
                    double R = (double)rew[t][e] + 0.9 * (double)rew[t + 1][e] +
                               0.81 * (double)rew[t + 2][e];
                    ck_assert_msg(fabs((double)b.rew[r] - R) <= 1e-5 * fabs(R) + 1e-6,
                                  "batch %d row %d: R %.9g, by hand %.9g", k, r, (double)b.rew[r],
                                  R);
                    ck_assert(fabsf(b.disc[r] - 0.729f) < 1e-6f);
                    ck_assert_msg(G > 1 || (t == k && e == r), "batch %d row %d is env %d t %d", k,
                                  r, e, t);
                }
            }
            ck_assert_msg(found, "batch %d row %d: no transition of the reference", k, r);
        }
    }
    for (int t = 0; t < T; t++) {
        for (int e = 0; e < ENVS; e++) {
            ck_assert_int_le(seen[t][e], 1); // no transition twice
        }
    }
    actor_stats_t as;
    s_rig_stop(&x, &as);
    ck_assert_uint_eq(as.env_faults + as.episodes_dropped + as.void_steps, 0);
    nn_state_fini(&st);
    nn_params_fini(&p);
}
END_TEST

// A Python env that does not fit the continuous run: actor_new fails at start-up, and the log
// names both sides: bounds [-2, 2] where the run says [-1, 2], and a Discrete(3) action space.
START_TEST(test_python_env_mismatch_refused) {
    const char *dir = check_tmpdir();
    char logpath[600];
    snprintf(logpath, sizeof logpath, "%s/log", dir);
    ck_assert_int_eq(log_open_file(logpath), 0);
    apex_config_t cfg;
    s_config_python(&cfg, "pendulum", "-1", 1);
    ck_assert_ptr_null(actor_new(&cfg, 0));
    s_config_python(&cfg, "discrete_pendulum", "-2", 1);
    ck_assert_ptr_null(actor_new(&cfg, 0));
    log_close_file();
    const char *log = check_read_file(logpath);
    const char *want[] = {
        "its action_space is a Box with low [-2] and high [2] (as float32); the run has [env] "
        "action_low = [-1] and action_high = [2]",
        "action_space=Discrete(3)) does not fit this run: it has float32 observations of shape "
        "(3,) (3 elements) and 3 discrete actions; the run expects 3 float32 elements per "
        "observation ([env] obs_dim, obs_dtype) and continuous actions of 1 float ([env] "
        "action_dim)"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        ck_assert_msg(strstr(log, want[i]) != NULL, "log lacks \"%s\":\n%s", want[i], log);
    }
    check_rmtree(dir);
}
END_TEST

// ---------------------------------------------------------------------------------------
// The evaluator

// A DPG trainer's checkpoint (header shape = the policy, array 0 = [mu | Q1 | Q2]): the
// policy reader takes exactly mu's parameters, and evaluating them greedily gives the return
// of stepping the same evaluation envs here with nn_forward's actions (a best.bin of the
// policy alone reads as well). apex-eval
// --checkpoint (when APEX_BIN names the binaries) prints that mean.
START_TEST(test_eval_dpg_checkpoint) {
    apex_config_t cfg;
    s_config(&cfg, "Pendulum-v1", NULL, 1, NULL, NULL);
    nn_config_t nc;
    nn_config_from_run(&nc, &cfg);
    train_dpg_config_t tc;
    train_dpg_config_default(&tc);
    tc.actor = nc;
    tc.batch_size = 8;
    tc.seed = 11;
    train_dpg_t *tr = train_dpg_new(&tc);
    ck_assert_ptr_nonnull(tr);
    const char *dir = check_tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/dpg.ckpt", dir);
    ck_assert_int_eq(train_dpg_save(tr, path, NULL), APEX_OK);
    const nn_params_t *mu = train_dpg_policy(tr);
    ck_assert_uint_eq(mu->num_params, nn_num_params(&nc));
    ck_assert_uint_gt(train_dpg_num_params(tr), mu->num_params);
    nn_params_t p;
    nn_params_init(&p, &nc);
    ckpt_header_t h;
    ck_assert_int_eq(ckpt_read_policy(path, &nc, &h, p.data), APEX_OK);
    ck_assert(memcmp(p.data, mu->data, p.num_params * sizeof(float)) == 0);
    // A one-network checkpoint of the policy (apex-eval --follow's best.bin) reads too.
    char best[620];
    snprintf(best, sizeof best, "%s/best.bin", dir);
    ckpt_header_t bh;
    ckpt_header_init(&bh, &nc);
    const float *one[1] = {mu->data};
    ck_assert_int_eq(ckpt_write(best, &bh, one, 1), APEX_OK);
    memset(p.data, 0, p.num_params * sizeof(float));
    ck_assert_int_eq(ckpt_read_policy(best, &nc, &h, p.data), APEX_OK);
    ck_assert(memcmp(p.data, mu->data, p.num_params * sizeof(float)) == 0);
    // Another policy shape: refused, naming both.
    nn_config_t other = nc;
    other.hidden[0] = 8;
    nn_params_t q;
    nn_params_init(&q, &other);
    ck_assert_int_eq(ckpt_read_policy(path, &other, &h, q.data), APEX_EINVAL);
    nn_params_fini(&q);
    // The evaluator: 3 episodes, 3 envs at once.
    enum { N = 3 };
    eval_opts_t o;
    evaluator_opts_from_run(&o, &cfg);
    o.episodes = N;
    o.parallel = N;
    o.max_episode_steps = 0;
    nn_state_t st;
    nn_state_init(&st, &nc, N, 0);
    blas_set_threads(1);
    eval_result_t r;
    evaluator_run(env_find("Pendulum-v1"), &p, &st, &o, &r);
    ck_assert_int_eq(r.episodes, N);
    // By hand: the evaluation streams, mu(s), each env's first episode (200 steps).
    vecenv_t v;
    vecenv_init(&v, env_find("Pendulum-v1"), N, o.seed, EVALUATOR_STREAM_BASE, 2 * N);
    double ret[N] = {0};
    int done[N] = {0}, left = N;
    while (left > 0) {
        float a[N], rew[N];
        uint8_t term[N], trunc[N];
        nn_forward(&st, &p, v.obs, N, a);
        vecenv_step_cont(&v, a, rew, term, trunc, NULL);
        for (int e = 0; e < N; e++) {
            if (!done[e]) {
                ret[e] += (double)rew[e];
                if (term[e] || trunc[e]) {
                    done[e] = 1;
                    left--;
                }
            }
        }
    }
    vecenv_fini(&v);
    double mean = (ret[0] + ret[1] + ret[2]) / N;
    ck_assert_msg(fabs(r.mean - mean) <= 1e-9 * fabs(mean), "evaluator %.9g, by hand %.9g", r.mean,
                  mean);
    ck_assert_double_lt(r.mean, 0.0); // Pendulum's costs
    const char *bin = getenv("APEX_BIN");
    if (bin) {
        char cmd[2048], line[512];
        snprintf(cmd, sizeof cmd,
                 "%s/apex-eval -c configs/smoke.ini --set env.id=Pendulum-v1 --set "
                 "network.hidden=16 --set run.seed=7 "
                 "--set eval.max_episode_steps=0 --checkpoint %s --episodes %d 2>&1",
                 bin, path, N);
        FILE *f = popen(cmd, "r");
        ck_assert_ptr_nonnull(f);
        double got = NAN;
        while (fgets(line, sizeof line, f)) {
            const char *m = strstr(line, "  mean ");
            if (m && strstr(line, "greedy mu(s)")) {
                got = strtod(m + 7, NULL);
            }
        }
        ck_assert_int_eq(pclose(f), 0);
        ck_assert_msg(fabs(got - mean) < 0.006, "apex-eval printed mean %.2f, by hand %.4f", got,
                      mean);
    }
    nn_state_fini(&st);
    nn_params_fini(&p);
    train_dpg_destroy(&tr);
    check_rmtree(dir);
}
END_TEST

// apex-eval --follow on a continuous run: weights v1 (a random policy) from a stub learner
// are evaluated greedily, one row goes to eval.csv with the mean evaluator_run gives those
// parameters, and best.bin holds the policy (ckpt_read_policy reads it back).
typedef struct {
    apex_config_t cfg;
    int rc;
    atomic_int done;
} s_follow_arg;

static void *s_follow_main(void *arg) {
    s_follow_arg *f = arg;
    f->rc = evaluator_follow(&f->cfg, 1);
    atomic_store(&f->done, 1);
    return NULL;
}

// The follow tests' setup: f's config (Pendulum-v1, episodes evaluations a version, no
// pause) with a stub learner's ROUTER as the weights endpoint, and weights v1 (random
// policy p and critic) encoded into v1; f's thread started on evaluator_follow(1).
typedef struct {
    s_follow_arg *f;
    const char *dir;
    void *ctx, *router;
    nn_config_t nc;
    nn_params_t p, q;
    float *w1;
    wire_buf_t v1;
    pthread_t t;
} s_follow_rig;

static void s_follow_start(s_follow_rig *g, s_follow_arg *f, const char *episodes) {
    g->f = f;
    s_config(&f->cfg, "Pendulum-v1", NULL, 1, episodes, "eval.interval_s=0");
    g->dir = check_tmpdir();
    s_set(&f->cfg, "run.out_dir=%s", g->dir);
    s_set(&f->cfg, "run.name=follow");
    g->ctx = zmq_ctx_new();
    char ep[256];
    g->router = check_weights_router(g->ctx, ep, sizeof ep);
    s_set(&f->cfg, "endpoints.learner_weights=%s", ep);
    nn_config_t qc;
    nn_config_from_run(&g->nc, &f->cfg);
    nn_params_init(&g->p, &g->nc);
    nn_critic_config(&qc, &g->nc);
    nn_params_init(&g->q, &qc);
    rng_t rng;
    rng_init_stream(&rng, 99, RNG_ROLE_TEST, 0);
    nn_params_init_random(&g->p, &rng);
    nn_params_init_random(&g->q, &rng);
    size_t nw;
    g->w1 = s_weights_of(&g->p, &g->q, &nw); // the evaluator runs the policy, its prefix
    wire_buf_init(&g->v1, 0);
    check_encode_weights(&g->v1, 1, g->w1, (uint32_t)nw);
    f->rc = -1;
    atomic_store(&f->done, 0);
    ck_assert_int_eq(pthread_create(&g->t, NULL, s_follow_main, f), 0);
}

// Joins the evaluator (which must have returned 0) and returns eval.csv's first row in line.
static void s_follow_join(s_follow_rig *g, char *line, size_t len) {
    ck_assert_int_eq(pthread_join(g->t, NULL), 0);
    ck_assert_int_eq(g->f->rc, 0);
    char path[700];
    snprintf(path, sizeof path, "%s/follow/eval.csv", g->dir);
    FILE *csv = fopen(path, "r");
    ck_assert_ptr_nonnull(csv);
    ck_assert_ptr_nonnull(fgets(line, (int)len, csv)); // header
    ck_assert_ptr_nonnull(fgets(line, (int)len, csv));
    fclose(csv);
}

static void s_follow_fini(s_follow_rig *g) {
    nn_params_fini(&g->p);
    nn_params_fini(&g->q);
    free(g->w1);
    wire_buf_fini(&g->v1);
    zmq_close(g->router);
    zmq_ctx_term(g->ctx);
    check_rmtree(g->dir);
}

START_TEST(test_follow_continuous) {
    static s_follow_arg f;
    s_follow_rig g;
    s_follow_start(&g, &f, "eval.episodes=2");
    int64_t deadline = clock_now_ms() + WAIT_MS;
    while (!atomic_load(&f.done)) {
        ck_assert_msg(clock_now_ms() < deadline, "no evaluation");
        check_weights_answer(g.router, &g.v1, NULL);
        s_sleep_ms(10);
    }
    char line[1024], want[64], path[700];
    s_follow_join(&g, line, sizeof line);
    // The mean of the same evaluation, run here.
    eval_opts_t o;
    evaluator_opts_from_run(&o, &f.cfg);
    ck_assert_double_eq(o.epsilon, 0.0);
    nn_state_t st;
    nn_state_init(&st, &g.nc, o.parallel, 0);
    eval_result_t r;
    evaluator_run(env_find("Pendulum-v1"), &g.p, &st, &o, &r);
    snprintf(want, sizeof want, ",2,%.4f,", r.mean); // episodes, eval_mean
    ck_assert_msg(strstr(line, want) != NULL, "eval.csv row %s lacks %s", line, want);
    snprintf(path, sizeof path, "%s/follow/best.bin", g.dir);
    nn_params_t b;
    nn_params_init(&b, &g.nc);
    ckpt_header_t h;
    ck_assert_int_eq(ckpt_read_policy(path, &g.nc, &h, b.data), APEX_OK);
    ck_assert(memcmp(b.data, g.p.data, g.p.num_params * sizeof(float)) == 0);
    nn_params_fini(&b);
    nn_state_fini(&st);
    s_follow_fini(&g);
}
END_TEST

// A learner that takes the evaluator's requests and never answers (hung, or cut off by an
// oversized message libzmq took for a protocol error): once the link has been silent for
// WEIGHTS_SILENT_MS the evaluator reconnects, so a request comes over a new connection,
// which the ROUTER names with a new routing id; answered there, the evaluation runs. Takes
// those 5 s.
START_TEST(test_follow_silent_learner_reconnected) {
    static s_follow_arg f;
    s_follow_rig g;
    s_follow_start(&g, &f, "eval.episodes=1");
    int64_t t0 = clock_now_ms(), deadline = t0 + WAIT_MS;
    check_weights_request_t q;
    check_weights_wait_reconnect(g.router, deadline, 0, &q);
    ck_assert_int_ge(clock_now_ms() - t0, WEIGHTS_SILENT_MS);
    check_weights_send(g.router, &q, g.v1.data, g.v1.len, 0);
    while (!atomic_load(&f.done)) {
        ck_assert_msg(clock_now_ms() < deadline, "no evaluation after the reconnect");
        s_sleep_ms(10);
    }
    char line[1024];
    s_follow_join(&g, line, sizeof line);
    ck_assert_msg(strstr(line, ",1,") != NULL, "eval.csv row %s: not one episode", line);
    s_follow_fini(&g);
}
END_TEST

Suite *dpg_actor_suite(void) {
    Suite *s = suite_create("dpg_actor");
    TCase *tc = tcase_create("actor");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_sigma0_acts_mu_and_folds_nstep);
    tcase_add_test(tc, test_random_steps_then_policy);
    tcase_add_test(tc, test_noise_follows_env_schedule);
    tcase_add_test(tc, test_ou_noise_follows_the_process);
    tcase_add_test(tc, test_frame_stack_rows);
    tcase_add_test(tc, test_weights_change_actions);
    tcase_add_test(tc, test_stats_carry_sigmas);
    tcase_add_test(tc, test_void_steps_dropped);
    suite_add_tcase(s, tc);
    tc = tcase_create("python");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_python_env_acts_mu_and_folds_nstep, 1, 3);
    tcase_add_test(tc, test_python_env_mismatch_refused);
    suite_add_tcase(s, tc);
    tc = tcase_create("eval");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_eval_dpg_checkpoint);
    tcase_add_test(tc, test_follow_continuous);
    tcase_add_test(tc, test_follow_silent_learner_reconnected);
    suite_add_tcase(s, tc);
    return s;
}
