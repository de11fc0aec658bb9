// check_keys.c: every key of the config schema changes what apex does (issue #13: "a config
// key that changes nothing is a defect").
//
// s_rows has one row per schema key: a perturbation (a --set assignment), an optional base
// (assignments applied to both loads, on top of s_common), and an observer that builds the
// real module(s) from the loaded config and reports what they do. test_key loads the config
// without and with the perturbation, observes each, and asserts that the observations
// differ, and where the row says so, in which direction (UP: the perturbed value is larger).
// test_every_key_has_a_row walks the schema itself (config_key_at) and fails for a key
// with no row, so a key added later without a row here fails CI. Keys only the launcher
// reads (scripts/apex-local) are covered by a smoke script instead: the row names it, and
// test_smoke_tags checks that the script holds the line "# key: section.key" above the
// command that sets the key and a check of its effect that names it (key_ok section.key);
// the script's own finish fails a tagged key whose key_ok did not run.
//
// Adding a row is one line: {"section.key", "section.key=VALUE", BASE or NULL, observer,
// what, direction, smoke script or NULL}. The observers (one per module, `what` picks the
// quantity):
//   s_net       nn_config_from_run + nn_num_params                 [network], [env] shape
//   s_mujoco    env_mujoco_load: the MuJoCo model loaded               [env] model_xml
//   s_train     learner_new's trainer: 3 updates on a fixed batch   [learner] optimisation
//   s_dpg       the same with continuous actions (the DPG trainer)  [learner] TD3's options
//   s_precision s_train where the CPU runs bf16, else learner_new's  [learner] precision
//               refusal and its message
//   s_learner   learner_new: BLAS threads, loop timers, bound endpoints, run directories
//   s_lrun      learner_run against a fake replay server that records the SampleRequests
//   s_ltimeout  learner_run with requests left unanswered: request_timeout_ms
//   s_replay    replay_server_new: store, limiter, decoder, sockets, loop timers
//   s_rserve    the replay server's loop in a thread: min_size_to_sample, sample_timeout_ms
//   s_actor     actor_run without a replay server: steps, dropped batches, weight syncs,
//               timers, the rate limit
//   s_abatch    actor_run against a fake replay server that keeps its first batches (their
//               hash, sizes, discounts, re-sends, continuous actions' spread)
//   s_connect   which of two bound peers a module connects to (socket monitor events)
//   s_security  a CURVE server and client built by security_new, and the ZAP verdict
//   s_cli       cli_startup (the log level)
// Nothing waits for a period to pass. Periods are read off the module's loop timers
// (loop_timer_intervals, and accessors for the learner's and actor's loops). A timeout is
// observed through the module's own decision once the test has let 100 ms pass by the clock
// (the condition it waits for), against a base of an hour ([learner] request_timeout_ms,
// [actor] ack_timeout_ms), or through the deadline the module computed ([replay]
// sample_timeout_ms). The one exception is [actor] max_steps_per_s, a rate: its observer
// times 2 vector steps, which at 4 steps/s cannot take less than 249 ms (uncapped, a few ms).
#include "check_apex.h"

#include <cblas.h>
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "actor.h"
#include "bf16.h"
#include "ckpt.h"
#include "cli.h"
#include "clock.h"
#include "config.h"
#include "config_shard.h"
#include "cpu.h"
#include "env.h"
#include "env_mujoco.h"
#include "envsrc.h"
#include "evaluator.h"
#include "learner.h"
#include "log.h"
#include "loop.h"
#include "nn.h"
#include "security.h"
#include "server.h"
#include "server_int.h"
#include "store.h"
#include "train.h"
#include "train_dpg.h"
#include "wire.h"
#include "xalloc.h"

#define WAIT_MS 20000 // bound on every wait for a condition (a failure, not a timing)
#define SIG_LEN 2048

// What an observer saw: v for the direction check, sig for "differs" (empty: v itself).
typedef struct {
    double v;
    char sig[SIG_LEN];
} s_obs;

// root: this observation's fresh temp directory (what @TMP@ stands for in the sets).
typedef void (*s_observer)(const char *root, const apex_config_t *cfg, int what, s_obs *o);

typedef enum { DIFF = 0, UP, DOWN } s_dir;

typedef struct {
    const char *key;  // "section.key"
    const char *set;  // the perturbation, "section.key=value"
    const char *base; // ';'-separated assignments for both loads, or NULL
    s_observer obs;   // NULL for a key only a smoke script covers
    int what;         // the observer's quantity
    s_dir dir;
    const char *smoke; // tests/smoke/<script> holding "# key: section.key", or NULL
} s_row;

static void s_sig(s_obs *o, const char *fmt, ...) {
    size_t n = strlen(o->sig);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->sig + n, sizeof o->sig - n, fmt, ap);
    va_end(ap);
}

// Replaces root in s by "@TMP@" and, for a tcp endpoint, drops the (ephemeral) port.
static void s_normalize(const char *root, const char *s, char *out, size_t n) {
    const char *p = strstr(s, root);
    if (p) {
        snprintf(out, n, "%.*s@TMP@%s", (int)(p - s), s, p + strlen(root));
    } else {
        snprintf(out, n, "%s", s);
    }
    char *colon = strrchr(out, ':');
    if (strncmp(out, "tcp://", 6) == 0 && colon) {
        colon[1] = '\0';
    }
}

static uint64_t s_fnv(uint64_t h, const void *data, size_t n) {
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ p[i]) * 1099511628211ULL;
    }
    return h;
}

static void s_timers(const loop_t *loop, s_obs *o) {
    int64_t iv[LOOP_MAX_TIMERS];
    int n = loop_timer_intervals(loop, iv, LOOP_MAX_TIMERS);
    for (int i = 0; i < n; i++) {
        s_sig(o, "%s%lld", i ? "," : "timers=", (long long)iv[i]);
    }
}

static int s_recv_frame(void *sock, zmq_msg_t *m, int flags) {
    zmq_msg_init(m);
    return zmq_msg_recv(m, sock, flags) >= 0;
}

// Sends [id][payload] on a ROUTER.
static void s_send_routed(void *sock, const zmq_msg_t *id, const wire_buf_t *b) {
    ck_assert_int_ge(zmq_send(sock, zmq_msg_data((zmq_msg_t *)id), zmq_msg_size(id), ZMQ_SNDMORE),
                     0);
    ck_assert_int_ge(zmq_send(sock, b->data, b->len, 0), 0);
}

static void *s_socket(void *ctx, int type) {
    void *s = zmq_socket(ctx, type);
    ck_assert_ptr_nonnull(s);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    return s;
}

static void *s_bound(void *ctx, int type, const char *ep) {
    void *s = s_socket(ctx, type);
    ck_assert_msg(zmq_bind(s, ep) == 0, "bind %s: %s", ep, zmq_strerror(errno));
    return s;
}

// Waits up to ms for input on sock. 1 when readable.
static int s_poll(void *sock, long ms) {
    zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
    return zmq_poll(&it, 1, ms) > 0 && (it.revents & ZMQ_POLLIN);
}

static wire_decoder_t *s_decoder(const apex_config_t *cfg, uint32_t num_params) {
    wire_limits_t lim = {.obs_dim = (uint32_t)cfg->env.obs_dim,
                         .obs_dtype = (uint32_t)cfg->env.obs_dtype,
                         .n_actions = (uint32_t)cfg->env.n_actions,
                         .action_dim = (uint32_t)cfg->env.action_dim,
                         .action_low = cfg->env.action_dim ? cfg->env.action_low : NULL,
                         .action_high = cfg->env.action_dim ? cfg->env.action_high : NULL,
                         .num_params = num_params,
                         .max_count = (uint32_t)cfg->replay.max_batch,
                         .max_episodes = 4096,
                         // frame mode's batches, as the replay server takes them
                         .frame_stack = config_frame_mode(cfg) ? (uint32_t)cfg->env.frame_stack : 0,
                         .frame_codec = config_frame_mode(cfg) ? (uint32_t)cfg->replay.compress
                                                               : 0};
    return wire_decoder_new(&lim);
}

// A TransitionBatch of n rows of the run's observation shape (zero observations), with
// discrete actions cycling through the run's, or continuous ones of +-0.75 (alternating by
// row, every component), inside the default bounds [-1, 1].
static void s_encode_batch(const apex_config_t *cfg, uint32_t n, uint64_t seq, wire_buf_t *b) {
    size_t ob = (size_t)cfg->env.obs_dim * wire_obs_elem_bytes((uint32_t)cfg->env.obs_dtype);
    uint32_t D = (uint32_t)cfg->env.action_dim;
    void *obs = xcalloc(n, ob), *next = xcalloc(n, ob);
    int32_t *act = xcalloc(n, sizeof *act);
    float *cont = xcalloc((size_t)n * (D ? D : 1), sizeof *cont);
    float *rew = xcalloc(n, sizeof *rew), *disc = xcalloc(n, sizeof *disc);
    for (uint32_t i = 0; i < n; i++) {
        act[i] = D ? 0 : (int32_t)(i % (uint32_t)cfg->env.n_actions);
        for (uint32_t j = 0; j < D; j++) {
            cont[i * D + j] = i % 2 ? -0.75f : 0.75f;
        }
        disc[i] = 0.9f;
    }
    wire_msg_t m = {.type = WIRE_MSG_TRANSITION_BATCH};
    m.u.batch = (wire_batch_t){.actor_id = 0,
                               .seq = seq,
                               .count = n,
                               .obs_dim = (uint32_t)cfg->env.obs_dim,
                               .obs_dtype = (uint32_t)cfg->env.obs_dtype,
                               .obs = obs,
                               .actions = D ? NULL : act,
                               .action_dim = D,
                               .cont_actions = D ? cont : NULL,
                               .rewards = rew,
                               .discounts = disc,
                               .next_obs = next};
    wire_encode(&m, b);
    free(obs);
    free(next);
    free(act);
    free(cont);
    free(rew);
    free(disc);
}

// ---------------------------------------------------------------------------------------
// [network], [env]: the network the run describes.

static void s_net(const char *root, const apex_config_t *cfg, int what, s_obs *o) {
    (void)root, (void)what;
    nn_config_t n;
    nn_config_from_run(&n, cfg);
    o->v = (double)nn_num_params(&n);
}

// [env] model_xml: the model a MuJoCo task loads at start-up (env_mujoco_load, as apex-actor
// and apex-eval do): its first actuator's gear, which the test models differ in.
static void s_mujoco(const char *root, const apex_config_t *cfg, int what, s_obs *o) {
    (void)root, (void)what;
    const env_spec_t *spec = env_find(cfg->env.id);
    char err[512] = "";
    ck_assert_msg(env_mujoco_load(spec, cfg->env.model_xml, err, sizeof err) == 0, "%s", err);
    const mjModel *m = mjenv_model(env_mujoco_task(spec));
    ck_assert_ptr_nonnull(m);
    o->v = m->actuator_gear[0];
    mjenv_unload(env_mujoco_task(spec));
}

// [env] obs_layout: the Python env bridge as apex-actor and apex-eval build it (envsrc_new,
// the real worker): 1 when it started and took the first observations (their first bytes in
// the signature), 0 when it refused the workers' observation_space at start-up.
static void s_pybridge(const char *root, const apex_config_t *cfg, int what, s_obs *o) {
    (void)root, (void)what;
    envsrc_t *s = envsrc_new(cfg, 1, 0, 0);
    o->v = s != NULL;
    if (s) {
        envsrc_result_t r;
        envsrc_recv(s, 0, &r);
        const uint8_t *b = r.obs;
        s_sig(o, "%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4]);
        envsrc_destroy(&s);
    }
}

// ---------------------------------------------------------------------------------------
// [eval]: the evaluator's own evaluation of one fixed random network on the run's env
// (apex-eval --follow and apex-local's final evaluation both run evaluator_run with
// evaluator_opts_from_run). The one exception is interval_s, a pause: eval_follow.sh.

enum { EV_EPISODES, EV_MEAN, EV_TRUNCATED };

static void s_eval(const char *root, const apex_config_t *cfg, int what, s_obs *o) {
    (void)root;
    const env_spec_t *spec = env_find(cfg->env.id);
    ck_assert_ptr_nonnull(spec);
    eval_opts_t opts;
    evaluator_opts_from_run(&opts, cfg);
    nn_config_t net;
    nn_config_from_run(&net, cfg);
    nn_params_t p;
    nn_params_init(&p, &net);
    rng_t rng;
    rng_init(&rng, 7);
    nn_params_init_random(&p, &rng);
    nn_state_t st;
    nn_state_init(&st, &net, opts.parallel, 0);
    eval_result_t r;
    evaluator_run(spec, &p, &st, &opts, &r);
    double values[] = {[EV_EPISODES] = (double)r.episodes,
                       [EV_MEAN] = r.mean,
                       [EV_TRUNCATED] = (double)r.truncated};
    o->v = values[what];
    nn_state_fini(&st);
    nn_params_fini(&p);
}

// ---------------------------------------------------------------------------------------
// [learner] optimisation: the learner's own trainer, three updates on one fixed batch.

enum { TR_DELTA, TR_LOSS, TR_PRIO, TR_TARGET, TR_Q };

static double s_dist(const float *a, const float *b, size_t n, int l1) {
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        s += l1 ? fabs(d) : d * d;
    }
    return l1 ? s : sqrt(s);
}

static void s_train(const char *root, const apex_config_t *cfg, int what, s_obs *o) {
    (void)root;
    learner_t *l = learner_new(cfg, 0);
    ck_assert_ptr_nonnull(l);
    trainer_t *t = learner_trainer(l);
    const train_config_t *tc = trainer_config(t);
    const nn_config_t *net = &tc->net;
    ck_assert_int_eq(net->in_dtype, NN_INPUT_F32);
    enum { B = 8 };
    const int O = net->obs_dim, A = net->n_actions;
    ck_assert_int_ge(tc->batch_size, B);
    size_t P = trainer_num_params(t);
    float *obs = xmalloc((size_t)B * O * sizeof(float)), *next = xmalloc((size_t)B * O * 4);
    for (int i = 0; i < B * O; i++) {
        obs[i] = sinf(1.0f + (float)i);
        next[i] = cosf(2.0f + (float)i);
    }
    int32_t act[B];
    float rew[B], disc[B], w[B], prio[B], q[64];
    for (int i = 0; i < B; i++) {
        act[i] = i % A, rew[i] = 10.0f, disc[i] = 0.9f, w[i] = 1.0f;
    }
    float *on0 = xmalloc(P * sizeof(float)), *tg0 = xmalloc(P * sizeof(float));
    memcpy(on0, trainer_online(t)->data, P * sizeof(float));
    memcpy(tg0, trainer_target(t)->data, P * sizeof(float));
    nn_state_t st;
    nn_state_init(&st, net, 1, 0);
    nn_forward(&st, trainer_online(t), obs, 1, q);
    train_batch_t b = {.obs = obs,
                       .actions = act,
                       .rewards = rew,
                       .discounts = disc,
                       .next_obs = next,
                       .is_weights = w,
                       .size = B};
    double loss0 = trainer_step(t, &b, prio, NULL), prio0 = 0;
    for (int i = 0; i < B; i++) {
        prio0 += prio[i] / B;
    }
    trainer_step(t, &b, prio, NULL);
    trainer_step(t, &b, prio, NULL);
    double values[] = {[TR_DELTA] = s_dist(trainer_online(t)->data, on0, P, 0),
                       [TR_LOSS] = loss0,
                       [TR_PRIO] = prio0,
                       [TR_TARGET] = s_dist(trainer_target(t)->data, tg0, P, 1),
                       [TR_Q] = q[0]};
    o->v = values[what];
    nn_state_fini(&st);
    free(obs);
    free(next);
    free(on0);
    free(tg0);
    learner_destroy(&l);
}

// [learner] precision: bf16 where this CPU runs it, refused where it does not (CI's CPUs may
// lack AVX512_BF16). Runs: s_train's first loss, which bf16 moves off fp32's (the products'
// inputs rounded, the weights the same). Refused: learner_new fails, and its error line names
// the key, the missing feature and the remedy.
static void s_precision(const char *root, const apex_config_t *cfg, int what, s_obs *o) {
    cpu_features_t f;
    cpu_detect(&f);
    if (cfg->learner.precision == CONFIG_PRECISION_FP32 || bf16_gemm_supported(&f)) {
        s_train(root, cfg, what, o);
        return;
    }
    char path[1024], text[4096] = "";
    snprintf(path, sizeof path, "%s/learner.log", root);
    ck_assert_int_eq(log_open_file(path), 0);
    learner_t *l = learner_new(cfg, 0);
    log_close_file();
    ck_assert_ptr_null(l);
    FILE *in = fopen(path, "r");
    ck_assert_ptr_nonnull(in);
    size_t n = fread(text, 1, sizeof text - 1, in);
    text[n] = '\0';
    fclose(in);
    ck_assert_msg(strstr(text, "[learner] precision = bf16") && strstr(text, "AVX512_BF16") &&
                      strstr(text, "set [learner] precision = fp32"),
                  "the refusal: %s", text);
    s_sig(o, "refused");
}

// The DPG learner (continuous actions) as learner_new builds it: 3 updates on a fixed batch
// through its trainer (learner_dpg). What: updates that stepped the policy, the policy's
// distance from its initial parameters, the first update's critic loss, the targets' L1
// distance from their initial values, the model's size.
enum { DP_POLICY_STEPS, DP_ACTOR_DELTA, DP_LOSS, DP_TARGET, DP_PARAMS };

static void s_dpg(const char *root, const apex_config_t *cfg, int what, s_obs *o) {
    (void)root;
    learner_t *l = learner_new(cfg, 0);
    ck_assert_ptr_nonnull(l);
    train_dpg_t *t = learner_dpg(l);
    ck_assert_ptr_nonnull(t);
    const nn_config_t *net = &train_dpg_config(t)->actor;
    enum { B = 8 };
    const int O = net->obs_dim, A = net->n_actions;
    ck_assert_int_le(A, 4);
    const size_t N = train_dpg_num_params(t), PP = train_dpg_policy(t)->num_params;
    float *obs = xmalloc((size_t)B * O * sizeof(float)), *next = xmalloc((size_t)B * O * 4);
    for (int i = 0; i < B * O; i++) {
        obs[i] = sinf(1.0f + (float)i);
        next[i] = cosf(2.0f + (float)i);
    }
    float act[B * 4], rew[B], disc[B], w[B], prio[B];
    for (int i = 0; i < B * A; i++) {
        act[i] = sinf(3.0f * (float)i) * net->out_high[i % A];
    }
    for (int i = 0; i < B; i++) {
        rew[i] = 10.0f, disc[i] = 0.9f, w[i] = 1.0f;
    }
    float *pol0 = xmalloc(PP * sizeof(float)), *tg0 = xmalloc(N * sizeof(float));
    memcpy(pol0, train_dpg_policy(t)->data, PP * sizeof(float));
    memcpy(tg0, train_dpg_target(t), N * sizeof(float));
    train_dpg_batch_t b = {.obs = obs,
                           .actions = act,
                           .rewards = rew,
                           .discounts = disc,
                           .next_obs = next,
                           .is_weights = w,
                           .size = B};
    int policy_steps = 0;
    double loss0 = 0;
    for (int k = 0; k < 3; k++) {
        train_dpg_stats_t st;
        float loss = train_dpg_step(t, &b, prio, &st);
        loss0 = k == 0 ? loss : loss0;
        policy_steps += st.policy_step;
    }
    double values[] = {[DP_POLICY_STEPS] = policy_steps,
                       [DP_ACTOR_DELTA] = s_dist(train_dpg_policy(t)->data, pol0, PP, 0),
                       [DP_LOSS] = loss0,
                       [DP_TARGET] = s_dist(train_dpg_target(t), tg0, N, 1),
                       [DP_PARAMS] = (double)N};
    o->v = values[what];
    free(obs);
    free(next);
    free(pol0);
    free(tg0);
    learner_destroy(&l);
}

// ---------------------------------------------------------------------------------------
// The learner as learner_new builds it.

enum { LN_THREADS, LN_TIMERS, LN_PUB_EP, LN_STATS_EP, LN_DIRS };

// Appends the directories under dir (relative to root) to list[*n].
static void s_walk(const char *root, const char *dir, char (*list)[256], int *n, int max) {
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    for (struct dirent *e; (e = readdir(d));) {
        char path[1024];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (e->d_name[0] == '.' || lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) || *n == max) {
            continue;
        }
        snprintf(list[(*n)++], 256, "%s", path + strlen(root) + 1);
        s_walk(root, path, list, n, max);
    }
    closedir(d);
}

static int s_cmp_str(const void *a, const void *b) { return strcmp(a, b); }

// The directories under root (relative, sorted): where a module put its outputs.
static void s_dirs(const char *root, s_obs *o) {
    static char list[64][256];
    int n = 0;
    s_walk(root, root, list, &n, 64);
    qsort(list, (size_t)n, sizeof list[0], s_cmp_str);
    for (int i = 0; i < n; i++) {
        s_sig(o, "%s%s", i ? "," : "dirs=", list[i]);
    }
    o->v = n;
}

static void s_learner(const char *root, const apex_config_t *cfg, int what, s_obs *o) {
    learner_t *l = learner_new(cfg, 0);
    ck_assert_ptr_nonnull(l);
    char ep[CONFIG_STR_LEN + 32];
    switch (what) {
    case LN_THREADS:
        o->v = openblas_get_num_threads();
        break;
    case LN_TIMERS:
        s_timers(learner_loop(l), o);
        break;
    case LN_PUB_EP:
    case LN_STATS_EP:
        s_normalize(root,
                    what == LN_PUB_EP ? learner_weights_endpoint(l) : learner_stats_endpoint(l), ep,
                    sizeof ep);
        s_sig(o, "bound=%s", ep);
        break;
    case LN_DIRS:
        s_dirs(root, o);
        break;
    }
    learner_destroy(&l);
}

// ---------------------------------------------------------------------------------------
// The learner's loop against a fake replay server on [endpoints] replay_sample, which
// answers every SampleRequest with a batch and records the first ones.

enum { LR_STEPS, LR_VERSION, LR_BETA0, LR_BETA1, LR_REQ_BATCH, LR_REQ_BATCHES, LR_PREFETCH };

typedef struct {
    learner_t *learner;
    pthread_t thread;
    atomic_int done;
    int rc;
} s_lthread;

static void *s_learner_main(void *arg) {
    s_lthread *x = arg;
    x->rc = learner_run(x->learner);
    atomic_store(&x->done, 1);
    return NULL;
}

static void s_lthread_start(s_lthread *x, const apex_config_t *cfg) {
    x->learner = learner_new(cfg, 0);
    ck_assert_ptr_nonnull(x->learner);
    atomic_init(&x->done, 0);
    ck_assert_int_eq(pthread_create(&x->thread, NULL, s_learner_main, x), 0);
}

// A SampleReply OK of the request's rows (zero observations, reward 1, discount 0.9).
static void s_encode_reply(const apex_config_t *cfg, const wire_sample_request_t *req,
                           wire_buf_t *b) {
    uint32_t n = req->batch_size * req->batches;
    size_t ob = (size_t)cfg->env.obs_dim * wire_obs_elem_bytes((uint32_t)cfg->env.obs_dtype);
    uint64_t *keys = xcalloc(n, sizeof *keys);
    float *w = xcalloc(n, sizeof *w), *rew = xcalloc(n, sizeof *rew),
          *disc = xcalloc(n, sizeof *disc);
    int32_t *act = xcalloc(n, sizeof *act);
    void *obs = xcalloc(n, ob), *next = xcalloc(n, ob);
    for (uint32_t i = 0; i < n; i++) {
        keys[i] = i, w[i] = 1.0f, rew[i] = 1.0f, disc[i] = 0.9f;
        act[i] = (int32_t)(i % (uint32_t)cfg->env.n_actions);
    }
    wire_msg_t m = {.type = WIRE_MSG_SAMPLE_REPLY};
    m.u.sample_reply = (wire_sample_reply_t){.id = req->id,
                                             .status = WIRE_SAMPLE_OK,
                                             .count = n,
                                             .obs_dim = (uint32_t)cfg->env.obs_dim,
                                             .obs_dtype = (uint32_t)cfg->env.obs_dtype,
                                             .keys = keys,
                                             .is_weights = w,
                                             .obs = obs,
                                             .actions = act,
                                             .rewards = rew,
                                             .discounts = disc,
                                             .next_obs = next};
    wire_encode(&m, b);
    free(keys);
    free(w);
    free(rew);
    free(disc);
    free(act);
    free(obs);
    free(next);
}

static void s_lrun(const char *root, const apex_config_t *cfg, int what, s_obs *o) {
    (void)root;
    void *ctx = zmq_ctx_new();
    void *router = s_bound(ctx, ZMQ_ROUTER, cfg->endpoints.replay_sample);
    wire_decoder_t *dec = s_decoder(cfg, 0);
    wire_buf_t out;
    wire_buf_init(&out, 0);
    s_lthread x;
    s_lthread_start(&x, cfg);
    wire_sample_request_t req[2] = {{0}};
    int n_req = 0, req_before_update = -1;
    int64_t deadline = clock_now_ms() + WAIT_MS;
    // Until the learner stopped and what it sent before (its socket is still open) is here.
    while (!atomic_load(&x.done) || n_req < 2 || req_before_update < 0) {
        ck_assert_msg(clock_now_ms() < deadline, "the learner did not reach max_steps");
        if (!s_poll(router, 20)) {
            continue;
        }
        zmq_msg_t id, payload;
        ck_assert(s_recv_frame(router, &id, 0) && s_recv_frame(router, &payload, 0));
        wire_msg_t m;
        ck_assert_int_eq(wire_decode(dec, zmq_msg_data(&payload), zmq_msg_size(&payload), &m),
                         APEX_OK);
        if (m.type == WIRE_MSG_SAMPLE_REQUEST) {
            if (n_req < 2) {
                req[n_req] = m.u.sample_request;
            }
            n_req++;
            s_encode_reply(cfg, &m.u.sample_request, &out);
            s_send_routed(router, &id, &out);
        } else if (m.type == WIRE_MSG_PRIORITY_UPDATE && req_before_update < 0) {
            req_before_update = n_req;
        }
        zmq_msg_close(&id);
        zmq_msg_close(&payload);
    }
    ck_assert_int_eq(pthread_join(x.thread, NULL), 0);
    ck_assert_int_eq(x.rc, 0);
    // The final checkpoint holds the last weights version published.
    char path[CONFIG_STR_LEN + 96];
    learner_checkpoint_path(cfg, path, sizeof path);
    const train_config_t *tc = trainer_config(learner_trainer(x.learner));
    float *online = xmalloc(trainer_num_params(learner_trainer(x.learner)) * sizeof(float));
    ckpt_header_t hdr;
    ck_assert_int_eq(ckpt_read_online(path, &tc->net, &hdr, online), APEX_OK);
    double values[] = {[LR_STEPS] = (double)learner_updates(x.learner),
                       [LR_VERSION] = (double)(hdr.extra.weights_version & 0xffffffffu),
                       [LR_BETA0] = req[0].beta,
                       [LR_BETA1] = req[1].beta,
                       [LR_REQ_BATCH] = req[0].batch_size,
                       [LR_REQ_BATCHES] = req[0].batches,
                       [LR_PREFETCH] = req_before_update};
    o->v = values[what];
    free(online);
    learner_destroy(&x.learner);
    wire_buf_fini(&out);
    wire_decoder_destroy(&dec);
    zmq_close(router);
    zmq_ctx_term(ctx);
}

// [learner] request_timeout_ms: the fake replay server never answers. Once 100 ms have
// passed since it received the first request the learner is asked to stop; its last
// request tick runs after that (the stop is seen there, after the timeout check), so a
// timeout of 10 ms has expired by then and one of an hour has not.
static void s_ltimeout(const char *root, const apex_config_t *cfg, int what, s_obs *o) {
    (void)root, (void)what;
    void *ctx = zmq_ctx_new();
    void *router = s_bound(ctx, ZMQ_ROUTER, cfg->endpoints.replay_sample);
    s_lthread x;
    s_lthread_start(&x, cfg);
    int64_t deadline = clock_now_ms() + WAIT_MS, first = 0;
    while (!atomic_load(&x.done)) {
        ck_assert_msg(clock_now_ms() < deadline, "the learner did not stop");
        if (s_poll(router, 10)) {
            zmq_msg_t m;
            while (s_recv_frame(router, &m, ZMQ_DONTWAIT)) {
                zmq_msg_close(&m);
            }
            zmq_msg_close(&m);
            first = first ? first : clock_now_ms();
        }
        if (first && clock_now_ms() >= first + 100) {
            learner_stop(x.learner);
        }
    }
    ck_assert_int_eq(pthread_join(x.thread, NULL), 0);
    o->v = (double)learner_request_timeouts(x.learner);
    learner_destroy(&x.learner);
    zmq_close(router);
    zmq_ctx_term(ctx);
}

// ---------------------------------------------------------------------------------------
// The replay server as replay_server_new builds it (server_int.h shows its parts).

enum {
    RP_SIZE,
    RP_ALPHA,
    RP_SPI,
    RP_DECODE,
    RP_MAXMSG,
    RP_TIMERS,
    RP_INSERT_EP,
    RP_SAMPLE_EP,
    RP_ELEM,
    RP_FRAMES
};

static void s_replay(const char *root, const apex_config_t *cfg, int what, s_obs *o) {
    replay_server_t *s = replay_server_new(cfg, 1);
    ck_assert_ptr_nonnull(s);
    char ep[CONFIG_STR_LEN + 32];
    switch (what) {
    case RP_FRAMES: // frame mode's store: frames held
        o->v = (double)store_frame_capacity(s->store);
        break;
    case RP_SIZE:
    case RP_ALPHA: {
        // 64 rows with raw priorities 1, 2, 3, 4, 1, ...: the store keeps p^alpha.
        enum { N = 64 };
        size_t ob = (size_t)store_obs_dim(s->store) * store_obs_elem_bytes(s->store);
        void *obs = xcalloc(N, ob);
        int32_t act[N] = {0};
        float rew[N] = {0}, disc[N] = {0}, prio[N];
        for (int i = 0; i < N; i++) {
            prio[i] = (float)(1 + i % 4);
        }
        store_add(s->store, N, obs, act, rew, disc, obs, prio);
        o->v = what == RP_SIZE ? (double)store_size(s->store) : store_slot_priority(s->store, 3);
        free(obs);
        break;
    }
    case RP_SPI: {
        // The largest sample the server's limiter allows after 32 inserted transitions.
        limiter_inserted(&s->limiter, 32);
        uint64_t n = 0;
        while (n < (uint64_t)cfg->replay.max_batch && limiter_can_sample(&s->limiter, n + 1)) {
            n++;
        }
        o->v = (double)n;
        break;
    }
    case RP_DECODE: {
        // A batch of 100 rows through the server's decoder.
        wire_buf_t b;
        wire_buf_init(&b, 0);
        s_encode_batch(cfg, 100, 0, &b);
        wire_msg_t m;
        o->v = wire_decode(s->dec, b.data, b.len, &m);
        wire_buf_fini(&b);
        break;
    }
    case RP_MAXMSG: {
        int64_t v = 0;
        size_t len = sizeof v;
        ck_assert_int_eq(zmq_getsockopt(s->insert_sock, ZMQ_MAXMSGSIZE, &v, &len), 0);
        o->v = (double)v;
        break;
    }
    case RP_TIMERS:
        s_timers(s->loop, o);
        break;
    case RP_INSERT_EP:
    case RP_SAMPLE_EP:
        s_normalize(root,
                    what == RP_INSERT_EP ? replay_server_insert_endpoint(s)
                                         : replay_server_sample_endpoint(s),
                    ep, sizeof ep);
        s_sig(o, "bound=%s", ep);
        break;
    case RP_ELEM:
        o->v = store_obs_elem_bytes(s->store);
        break;
    }
    replay_server_destroy(&s);
}

// The replay server's loop in a thread, over real sockets.
enum { RS_STATUS, RS_DEADLINE };

static void *s_replay_main(void *arg) {
    replay_server_run(arg);
    return NULL;
}

static void s_send_request(void *sock, uint64_t id, uint32_t batch_size) {
    wire_msg_t m = {.type = WIRE_MSG_SAMPLE_REQUEST};
    m.u.sample_request =
        (wire_sample_request_t){.id = id, .batch_size = batch_size, .beta = 0.5f, .batches = 1};
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_encode(&m, &b);
    ck_assert_int_ge(zmq_send(sock, b.data, b.len, 0), 0);
    wire_buf_fini(&b);
}

// Receives messages on sock until one of the given type (and, for a SampleReply, id)
// arrives; returns it decoded (views into dec).
static wire_msg_t s_await(void *sock, wire_decoder_t *dec, wire_msg_type type, uint64_t id) {
    int64_t deadline = clock_now_ms() + WAIT_MS;
    while (1) {
        ck_assert_msg(clock_now_ms() < deadline, "no %s arrived", wire_msg_name(type));
        if (!s_poll(sock, 20)) {
            continue;
        }
        zmq_msg_t msg;
        ck_assert(s_recv_frame(sock, &msg, 0));
        wire_msg_t m;
        int rc = wire_decode(dec, zmq_msg_data(&msg), zmq_msg_size(&msg), &m);
        zmq_msg_close(&msg); // the decoded views live in dec's arena
        if (rc == APEX_OK && m.type == type &&
            (type != WIRE_MSG_SAMPLE_REPLY || m.u.sample_reply.id == id)) {
            return m;
        }
    }
}

static void s_rserve(const char *root, const apex_config_t *cfg, int what, s_obs *o) {
    (void)root;
    replay_server_t *s = replay_server_new(cfg, 1);
    ck_assert_ptr_nonnull(s);
    pthread_t thread;
    ck_assert_int_eq(pthread_create(&thread, NULL, s_replay_main, s), 0);
    void *ctx = zmq_ctx_new();
    void *learner = s_socket(ctx, ZMQ_DEALER);
    ck_assert_int_eq(zmq_connect(learner, replay_server_sample_endpoint(s)), 0);
    wire_decoder_t *dec = s_decoder(cfg, 0);
    if (what == RS_STATUS) {
        // 32 transitions in (acknowledged, so stored), then a sample of 8.
        void *actor = s_socket(ctx, ZMQ_DEALER);
        zmq_setsockopt(actor, ZMQ_ROUTING_ID, "actor-0", 7);
        ck_assert_int_eq(zmq_connect(actor, replay_server_insert_endpoint(s)), 0);
        wire_buf_t b;
        wire_buf_init(&b, 0);
        s_encode_batch(cfg, 32, 0, &b);
        ck_assert_int_ge(zmq_send(actor, b.data, b.len, 0), 0);
        wire_buf_fini(&b);
        s_await(actor, dec, WIRE_MSG_INSERT_ACK, 0);
        s_send_request(learner, 1, 8);
        o->v = s_await(learner, dec, WIRE_MSG_SAMPLE_REPLY, 1).u.sample_reply.status;
        zmq_close(actor);
    }
    int64_t t0 = clock_now_ms();
    if (what == RS_DEADLINE) {
        // Request 1 cannot be served (min_size_to_sample) and is held; request 2, larger
        // than the capacity, is refused at once: once its answer is here, request 1 was
        // handled (one socket, in order).
        s_send_request(learner, 1, 8);
        s_send_request(learner, 2, (uint32_t)cfg->replay.capacity + 1);
        s_await(learner, dec, WIRE_MSG_SAMPLE_REPLY, 2);
    }
    replay_server_stop(s);
    ck_assert_int_eq(pthread_join(thread, NULL), 0);
    if (what == RS_DEADLINE) {
        // The held request's deadline, from when it was sent (0: already answered).
        o->v = s->pending_len ? (double)(s->pending[s->pending_head].deadline_ms - t0) : 0.0;
    }
    wire_decoder_destroy(&dec);
    zmq_close(learner);
    zmq_ctx_term(ctx);
    replay_server_destroy(&s);
}

// ---------------------------------------------------------------------------------------
// The actor, stepped by actor_run in this thread.

enum { AS_STEPS, AS_DROPPED, AS_SYNCS, AS_TIMERS, AS_RATE };
#define ACTOR_STEPS 8 // vector steps: with 16 envs, n-step 3 and batches of 16, 6 batches

static void s_actor(const char *root, const apex_config_t *cfg, int what, s_obs *o) {
    (void)root;
    actor_t *a = actor_new(cfg, 0);
    ck_assert_ptr_nonnull(a);
    actor_stats_t st;
    if (what == AS_TIMERS) {
        s_timers(actor_loop(a), o);
    } else if (what == AS_RATE) {
        // Two vector steps: at 4 per second the second waits until 249 ms after the first.
        int64_t t0 = clock_now_ms();
        actor_run(a, 2);
        o->v = clock_now_ms() - t0 >= 240;
    } else {
        // No replay server: batches stay in the window (or are dropped from a full one).
        actor_run(a, ACTOR_STEPS);
        actor_get_stats(a, &st);
        o->v = (double)(what == AS_STEPS     ? st.steps
                        : what == AS_DROPPED ? st.batches_dropped
                                             : st.weight_syncs);
    }
    actor_destroy(&a);
}

// The actor against a fake replay server on [endpoints] replay_insert that never acks.
// actor_run(a, n) again with the same n takes no step but flushes the window, which sends
// what could not go out before the connection was up. AB_SPREAD (continuous actions): the
// mean squared deviation of the first batches' actions from their mean.
enum { AB_HASH, AB_COUNT, AB_DISC, AB_RESENT, AB_SPREAD, AB_FRAME_BYTES };
#define AB_BATCHES 4

static void s_abatch(const char *root, const apex_config_t *cfg, int what, s_obs *o) {
    (void)root;
    void *ctx = zmq_ctx_new();
    void *router = s_bound(ctx, ZMQ_ROUTER, cfg->endpoints.replay_insert);
    actor_t *a = actor_new(cfg, 0);
    ck_assert_ptr_nonnull(a);
    wire_decoder_t *dec = s_decoder(cfg, 0);
    uint64_t hash[AB_BATCHES] = {0};
    uint32_t count = 0;
    double max_disc = 0, sum_a = 0, sum_a2 = 0, n_a = 0, frame_bytes = 0;
    int got = 0; // bit k: batch seq k arrived
    int64_t deadline = clock_now_ms() + WAIT_MS, first = 0;
    actor_run(a, ACTOR_STEPS);
    while (got != (1 << AB_BATCHES) - 1 || (what == AB_RESENT && clock_now_ms() < first + 100)) {
        ck_assert_msg(clock_now_ms() < deadline, "the actor's first batches did not arrive");
        if (!s_poll(router, 10)) {
            actor_run(a, ACTOR_STEPS);
            continue;
        }
        zmq_msg_t id, payload;
        ck_assert(s_recv_frame(router, &id, 0) && s_recv_frame(router, &payload, 0));
        wire_msg_t m;
        ck_assert_int_eq(wire_decode(dec, zmq_msg_data(&payload), zmq_msg_size(&payload), &m),
                         APEX_OK);
        ck_assert_int_eq(m.type, WIRE_MSG_TRANSITION_BATCH);
        const wire_batch_t *b = &m.u.batch;
        if (b->seq < AB_BATCHES && !(got & (1 << b->seq))) {
            // Everything but the epoch, which is not a function of the seed (actor.c).
            size_t ob = (size_t)b->count * b->obs_dim * wire_obs_elem_bytes(b->obs_dtype);
            uint64_t h = 1469598103934665603ULL;
            if (b->frame_stack) { // frame mode: the frames (raw or blobs) and the rows' refs
                size_t fb = 0;
                for (uint32_t i = 0; i < b->frame_count; i++) {
                    fb += b->frame_codec ? b->frame_sizes[i]
                                         : (size_t)b->obs_dim / b->frame_stack *
                                               wire_obs_elem_bytes(b->obs_dtype);
                }
                h = s_fnv(h, b->frames, fb);
                h = s_fnv(h, b->obs_frames, b->count * sizeof(uint64_t));
                frame_bytes += (double)fb;
            } else {
                h = s_fnv(h, b->obs, ob);
                h = s_fnv(h, b->next_obs, ob);
                frame_bytes += 2.0 * (double)ob; // what carries the observations
            }
            if (b->action_dim) {
                h = s_fnv(h, b->cont_actions, b->count * b->action_dim * sizeof(float));
                for (uint32_t i = 0; i < b->count * b->action_dim; i++) {
                    sum_a += b->cont_actions[i];
                    sum_a2 += (double)b->cont_actions[i] * b->cont_actions[i];
                    n_a++;
                }
            } else {
                h = s_fnv(h, b->actions, b->count * sizeof(int32_t));
            }
            h = s_fnv(h, b->rewards, b->count * sizeof(float));
            h = s_fnv(h, b->discounts, b->count * sizeof(float));
            hash[b->seq] = b->priorities ? s_fnv(h, b->priorities, b->count * sizeof(float)) : h;
            if (b->seq == 0) {
                count = b->count;
                for (uint32_t i = 0; i < b->count; i++) {
                    max_disc = fmax(max_disc, b->discounts[i]);
                }
                first = clock_now_ms();
            }
            got |= 1 << b->seq;
        }
        zmq_msg_close(&id);
        zmq_msg_close(&payload);
    }
    actor_run(a, ACTOR_STEPS); // a flush after the wait
    actor_stats_t st;
    actor_get_stats(a, &st);
    switch (what) {
    case AB_HASH:
        for (int k = 0; k < AB_BATCHES; k++) {
            s_sig(o, "%016llx ", (unsigned long long)hash[k]);
        }
        break;
    case AB_COUNT:
        o->v = count;
        break;
    case AB_DISC:
        o->v = max_disc;
        break;
    case AB_RESENT:
        o->v = (double)st.batches_resent;
        break;
    case AB_SPREAD:
        ck_assert(n_a > 0);
        o->v = sum_a2 / n_a - (sum_a / n_a) * (sum_a / n_a);
        break;
    case AB_FRAME_BYTES: // bytes carrying observations in the first batches
        o->v = frame_bytes;
        break;
    }
    wire_decoder_destroy(&dec);
    actor_destroy(&a);
    zmq_close(router);
    zmq_ctx_term(ctx);
}

// ---------------------------------------------------------------------------------------
// Connect endpoints: two peers bound at ipc://@TMP@/peer_a and peer_b, each watched by a
// socket monitor; the row points the key at peer_a and its perturbation at peer_b. The
// observation is which peer saw the module's connection.

enum { CN_REPLAY_INSERT, CN_REPLAY_SAMPLE, CN_LEARNER_WEIGHTS, CN_LEARNER_STATS };

static void s_connect(const char *root, const apex_config_t *cfg, int what, s_obs *o) {
    static const int types[] = {ZMQ_ROUTER, ZMQ_ROUTER, ZMQ_ROUTER,
                                ZMQ_PULL}; // as the daemons bind
    void *ctx = zmq_ctx_new();
    void *peer[2], *mon[2];
    for (int k = 0; k < 2; k++) {
        char ep[600], mep[64];
        snprintf(ep, sizeof ep, "ipc://%s/peer_%c", root, 'a' + k);
        snprintf(mep, sizeof mep, "inproc://keys-monitor-%d", k);
        peer[k] = s_bound(ctx, types[what], ep);
        ck_assert_int_eq(zmq_socket_monitor(peer[k], mep, ZMQ_EVENT_ACCEPTED), 0);
        mon[k] = s_socket(ctx, ZMQ_PAIR);
        ck_assert_int_eq(zmq_connect(mon[k], mep), 0);
    }
    actor_t *a = NULL;
    learner_t *l = NULL;
    if (what == CN_REPLAY_SAMPLE) {
        l = learner_new(cfg, 0);
        ck_assert_ptr_nonnull(l);
    } else {
        a = actor_new(cfg, 0);
        ck_assert_ptr_nonnull(a);
    }
    zmq_pollitem_t it[2] = {{mon[0], 0, ZMQ_POLLIN, 0}, {mon[1], 0, ZMQ_POLLIN, 0}};
    int64_t deadline = clock_now_ms() + WAIT_MS;
    while (zmq_poll(it, 2, 20) <= 0) {
        ck_assert_msg(clock_now_ms() < deadline, "neither peer saw a connection");
    }
    o->v = (it[1].revents & ZMQ_POLLIN) ? 1 : 0;
    s_sig(o, "peer_%c", (it[1].revents & ZMQ_POLLIN) ? 'b' : 'a');
    actor_destroy(&a);
    learner_destroy(&l);
    for (int k = 0; k < 2; k++) {
        zmq_socket_monitor(peer[k], NULL, 0);
        zmq_close(mon[k]);
        zmq_close(peer[k]);
    }
    zmq_ctx_term(ctx);
}

// ---------------------------------------------------------------------------------------
// [security]: key pairs in @TMP@/keys and @TMP@/keys2 (each with its authorized_keys), and
// @TMP@/other_authorized holding only keys2's actor key. A server built by security_new for
// "replay" and a client for actor 0, each in its own context; the observation is the
// server's public key and whether the client's message arrives or the ZAP handler refuses it.

// Makes the key pairs of dir and its authorized_keys; returns the replay and actor public keys.
static void s_keyset(const char *root, const char *dir, char *replay_pub, char *actor_pub) {
    static const char *const names[] = {"replay", "learner", "actor"};
    char path[600], pub[SECURITY_KEY_Z85_LEN + 1], err[512];
    snprintf(path, sizeof path, "%s/%s", root, dir);
    char list[640];
    snprintf(list, sizeof list, "%s/authorized_keys", path);
    ck_assert_int_eq(mkdir(path, 0700), 0);
    FILE *f = fopen(list, "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 3; i++) {
        ck_assert_msg(security_keygen(path, names[i], pub, err, sizeof err) == 0, "%s", err);
        if (i == 0) {
            memcpy(replay_pub, pub, sizeof pub);
        } else {
            fprintf(f, "%s %s\n", pub, names[i]);
        }
    }
    fclose(f);
    memcpy(actor_pub, pub, sizeof pub);
}

static void s_security(const char *root, const apex_config_t *cfg, int what, s_obs *o) {
    (void)what;
    char replay1[SECURITY_KEY_Z85_LEN + 1], replay2[SECURITY_KEY_Z85_LEN + 1],
        pub[SECURITY_KEY_Z85_LEN + 1], path[600];
    s_keyset(root, "keys", replay1, pub);
    s_keyset(root, "keys2", replay2, pub);
    snprintf(path, sizeof path, "%s/other_authorized", root);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%s actor\n", pub);
    fclose(f);
    void *sctx = zmq_ctx_new(), *cctx = zmq_ctx_new();
    security_t *server = security_new(sctx, cfg, "replay", -1, 1);
    security_t *client = security_new(cctx, cfg, "actor", 0, 0);
    ck_assert_ptr_nonnull(server);
    ck_assert_ptr_nonnull(client);
    char ep[600];
    snprintf(ep, sizeof ep, "ipc://%s/secure", root);
    void *router = s_socket(sctx, ZMQ_ROUTER), *dealer = s_socket(cctx, ZMQ_DEALER);
    ck_assert_int_eq(security_server(server, router), 0);
    ck_assert_int_eq(zmq_bind(router, ep), 0);
    ck_assert_int_eq(security_client(client, dealer, "replay"), 0);
    ck_assert_int_eq(zmq_connect(dealer, ep), 0);
    ck_assert_int_eq(zmq_send(dealer, "hello", 5, 0), 5);
    zmq_pollitem_t it[2] = {{router, 0, ZMQ_POLLIN, 0}, {security_zap_socket(server), 0, 0, 0}};
    it[1].events = it[1].socket ? ZMQ_POLLIN : 0;
    int64_t deadline = clock_now_ms() + WAIT_MS;
    while (!(it[0].revents & ZMQ_POLLIN) && security_denied(server) == 0) {
        ck_assert_msg(clock_now_ms() < deadline, "the client was neither accepted nor refused");
        zmq_poll(it, it[1].socket ? 2 : 1, 20);
        if (it[1].revents & ZMQ_POLLIN) {
            security_zap_handle(server);
        }
    }
    // Keys are made afresh for every observation: name the set, not the key.
    const char *key = security_public_key(server);
    s_sig(o, "server key %s, client %s",
          !key[0]                 ? "none"
          : !strcmp(key, replay1) ? "of keys/"
          : !strcmp(key, replay2) ? "of keys2/"
                                  : "unknown",
          security_denied(server) ? "refused" : "accepted");
    zmq_close(router);
    zmq_close(dealer);
    security_destroy(&client);
    security_destroy(&server);
    zmq_ctx_term(sctx);
    zmq_ctx_term(cctx);
}

// ---------------------------------------------------------------------------------------
// The command line every daemon starts with, on the resolved config written back as a file.

static void s_cli(const char *root, const apex_config_t *cfg, int what, s_obs *o) {
    (void)what;
    char path[600];
    snprintf(path, sizeof path, "%s/resolved.ini", root);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    config_print(cfg, f);
    fclose(f);
    char *argv[] = {"apex-check", "-c", path, NULL};
    cli_args_t args;
    apex_config_t loaded;
    ck_assert_int_eq(cli_startup("apex-check", 0, "", 3, argv, &args, &loaded), -1);
    o->v = log_level_current;
    log_set_level(LOG_ERROR);
}

// ---------------------------------------------------------------------------------------
// The table. s_common applies to every load: small sizes, and every endpoint, output and
// key directory inside the observation's temp directory (ipc endpoints: no ports to
// collide). A row's base and perturbation come after it.

static const char *const s_common[] = {
    "network.hidden=16",
    "replay.capacity=4096",
    "learner.batch_size=32",
    "actor.send_batch=16",
    "run.out_dir=@TMP@/runs",
    "endpoints.replay_insert_bind=ipc://@TMP@/replay_insert",
    "endpoints.replay_insert=ipc://@TMP@/replay_insert",
    "endpoints.replay_sample_bind=ipc://@TMP@/replay_sample",
    "endpoints.replay_sample=ipc://@TMP@/replay_sample",
    "endpoints.learner_weights_bind=ipc://@TMP@/learner_weights",
    "endpoints.learner_weights=ipc://@TMP@/learner_weights",
    "endpoints.learner_stats_bind=ipc://@TMP@/learner_stats",
    "endpoints.learner_stats=ipc://@TMP@/learner_stats",
    "security.key_dir=@TMP@/keys",
    "security.authorized_keys=@TMP@/keys/authorized_keys",
};

// Bases shared by several rows.
#define EXT "env.id=external;env.obs_dim=4;env.n_actions=2"
// Frame storage (issue #27): stacks of MinAtar frames.
#define FRAMES "env.id=MinAtar/Breakout-v0;env.frame_stack=2"
// id = external with continuous actions of 2 floats in [-1, 1].
#define CONT "env.id=external;env.obs_dim=4;env.action_dim=2;env.action_low=-1;env.action_high=1"
#define LRUN                                                                                       \
    "learner.max_steps=4;learner.prefetch=1;learner.batches_per_request=1;learner.beta_steps=2;"   \
    "learner.request_timeout_ms=3600000"
#define CURVE "security.mode=curve"
#define PEER_A(key) "endpoints." key "=ipc://@TMP@/peer_a"
#define PEER_B(key) "endpoints." key "=ipc://@TMP@/peer_b"

static const s_row s_rows[] = {
    {"run.name", "run.name=other", NULL, s_learner, LN_DIRS, DIFF, NULL},
    {"run.seed", "run.seed=2", NULL, s_train, TR_Q, DIFF, NULL},
    {"run.out_dir", "run.out_dir=@TMP@/elsewhere", NULL, s_learner, LN_DIRS, DIFF, NULL},
    {"run.max_seconds", NULL, NULL, NULL, 0, DIFF, "launcher.sh"},
    // The kernel is chosen at a daemon's start, by restarting the process: a smoke script.
    {"run.blas_kernel", NULL, NULL, NULL, 0, DIFF, "blas_kernel.sh"},
    {"run.blas_library", NULL, NULL, NULL, 0, DIFF, "blas_kernel.sh"},
    {"run.target_return", NULL, NULL, NULL, 0, DIFF, "launcher.sh"},
    {"run.log_level", "run.log_level=debug", NULL, s_cli, 0, UP, NULL},
    {"run.deterministic", NULL, NULL, NULL, 0, DIFF, "deterministic.sh"},

    {"env.id", "env.id=Acrobot-v1", NULL, s_net, 0, UP, NULL},
    {"env.obs_dim", "env.obs_dim=9", EXT, s_net, 0, UP, NULL},
    {"env.n_actions", "env.n_actions=5", EXT, s_net, 0, UP, NULL},
    {"env.action_dim", "env.action_dim=6", CONT, s_replay, RP_MAXMSG, UP, NULL},
    // Actions of +-0.75 pass the replay's decoder in [-1, 1], not with either bound at 0.5.
    {"env.action_low", "env.action_low=-0.5", CONT, s_replay, RP_DECODE, DIFF, NULL},
    {"env.action_high", "env.action_high=0.5", CONT, s_replay, RP_DECODE, DIFF, NULL},
    {"env.obs_dtype", "env.obs_dtype=uint8", EXT, s_replay, RP_ELEM, DOWN, NULL},
    {"env.obs_shape", "env.obs_shape=2x8x1",
     "env.id=external;env.obs_dim=16;env.n_actions=2;env.obs_shape=4x4x1;network.conv=2x2s1", s_net,
     0, DOWN, NULL},
    {"env.obs_scale", "env.obs_scale=0.5", EXT, s_train, TR_Q, DIFF, NULL},

    // id = python: the bridge's keys, through the real apex-actor and its workers.
    // The network reads K frames: its first layer grows (the stacks: check_dpg_actor.c).
    {"env.frame_stack", "env.frame_stack=2", NULL, s_net, 0, UP, NULL},
    {"env.make", NULL, NULL, NULL, 0, DIFF, "python_env.sh"},
    // (4, 84, 84) channels-first stacks (tests/pyenv_frames.py): refused as 84x84x4 channels
    // last, transposed by the worker and taken with chw.
    {"env.obs_layout", "env.obs_layout=chw",
     "env.id=python;env.make=tests/pyenv_frames.py:square;env.kwargs={\"layout\": \"chwk\"};"
     "env.obs_shape=84x84x4;env.obs_dtype=uint8;env.n_actions=3;python.workers=1;"
     "python.groups=1;python.interpreter=/usr/bin/python3;actor.envs_per_actor=1",
     s_pybridge, 0, UP, NULL},
    {"env.kwargs", NULL, NULL, NULL, 0, DIFF, "python_env.sh"},
    {"env.eval_id", NULL, NULL, NULL, 0, DIFF, "python_env.sh"},
    // The evaluator's envs only: their episodes truncated at 50 steps, the actors' at 500.
    {"env.eval_kwargs", NULL, NULL, NULL, 0, DIFF, "python_eval.sh"},
    // A MuJoCo task's model: the test models' motors have gears 100 and 1e12.
    {"env.model_xml", "env.model_xml=tests/fixtures/mujoco/diverge.xml",
     "env.id=InvertedPendulum-v4;env.model_xml=tests/fixtures/mujoco/pendulum.xml", s_mujoco, 0, UP,
     NULL},

    {"network.conv", "network.conv=16x3s1", "env.id=MinAtar/Breakout-v0", s_net, 0, UP, NULL},
    {"network.hidden", "network.hidden=8", NULL, s_net, 0, DOWN, NULL},
    {"network.dueling", "network.dueling=false", NULL, s_net, 0, DOWN, NULL},

    {"replay.capacity", "replay.capacity=32", "replay.min_size_to_sample=1", s_replay, RP_SIZE,
     DOWN, NULL},
    {"replay.alpha", "replay.alpha=1", NULL, s_replay, RP_ALPHA, UP, NULL},
    {"replay.min_size_to_sample", "replay.min_size_to_sample=1000",
     "replay.min_size_to_sample=1;replay.sample_timeout_ms=1", s_rserve, RS_STATUS, UP, NULL},
    {"replay.samples_per_insert", "replay.samples_per_insert=1", "replay.spi_tolerance=0", s_replay,
     RP_SPI, DOWN, NULL},
    {"replay.spi_tolerance", "replay.spi_tolerance=100",
     "replay.samples_per_insert=1;replay.spi_tolerance=0", s_replay, RP_SPI, UP, NULL},
    {"replay.sample_timeout_ms", "replay.sample_timeout_ms=3600000",
     "replay.capacity=64;replay.min_size_to_sample=64", s_rserve, RS_DEADLINE, UP, NULL},
    // K apex-replay processes, the learner's choice among them, the actors' shard: through
    // the real daemons (tests/check_shards.c has the sampling and weights).
    {"replay.shards", NULL, NULL, NULL, 0, DIFF, "shard_kill.sh"},
    {"replay.max_batch", "replay.max_batch=64", NULL, s_replay, RP_DECODE, DIFF, NULL},
    {"replay.stats_interval_ms", "replay.stats_interval_ms=1000", NULL, s_replay, RP_TIMERS, DIFF,
     NULL},
    {"replay.max_message_bytes", "replay.max_message_bytes=100000", NULL, s_replay, RP_MAXMSG, DIFF,
     NULL},
    {"replay.durability", "replay.durability=snapshot", NULL, s_replay, RP_TIMERS, DIFF, NULL},
    {"replay.snapshot_interval_s", "replay.snapshot_interval_s=10", "replay.durability=snapshot",
     s_replay, RP_TIMERS, DIFF, NULL},
    {"replay.frame_storage", "replay.frame_storage=false", FRAMES, s_abatch, AB_FRAME_BYTES, UP,
     NULL},
    {"replay.frame_capacity", "replay.frame_capacity=100000", FRAMES, s_replay, RP_FRAMES, UP,
     NULL},
    {"replay.compress", "replay.compress=zstd", FRAMES, s_abatch, AB_FRAME_BYTES, DOWN, NULL},
    {"replay.compress_level", "replay.compress_level=65537", FRAMES ";replay.compress=lz4",
     s_abatch, AB_FRAME_BYTES, UP, NULL},
    {"replay.wal_sync_ms", "replay.wal_sync_ms=200", "replay.durability=wal", s_replay, RP_TIMERS,
     DIFF, NULL},

    {"learner.batch_size", "learner.batch_size=16", LRUN, s_lrun, LR_REQ_BATCH, DOWN, NULL},
    {"learner.lr", "learner.lr=0.01", NULL, s_train, TR_DELTA, UP, NULL},
    {"learner.lr_end", "learner.lr_end=1e-6", "learner.lr_steps=1", s_train, TR_DELTA, DOWN, NULL},
    {"learner.lr_steps", "learner.lr_steps=1", "learner.lr_end=1e-6", s_train, TR_DELTA, DOWN,
     NULL},
    {"learner.optimizer", "learner.optimizer=rmsprop", NULL, s_train, TR_DELTA, DIFF, NULL},
    {"learner.adam_beta1", "learner.adam_beta1=0.5", NULL, s_train, TR_DELTA, DIFF, NULL},
    {"learner.adam_beta2", "learner.adam_beta2=0.5", NULL, s_train, TR_DELTA, DIFF, NULL},
    {"learner.adam_eps", "learner.adam_eps=1", NULL, s_train, TR_DELTA, DOWN, NULL},
    {"learner.rms_decay", "learner.rms_decay=0.5", "learner.optimizer=rmsprop", s_train, TR_DELTA,
     DIFF, NULL},
    {"learner.rms_eps", "learner.rms_eps=1", "learner.optimizer=rmsprop", s_train, TR_DELTA, DOWN,
     NULL},
    // Adam's step hardly depends on the gradient's scale unless its epsilon is large.
    {"learner.grad_clip", "learner.grad_clip=0.001", "learner.adam_eps=1", s_train, TR_DELTA, DOWN,
     NULL},
    {"learner.huber_delta", "learner.huber_delta=100", NULL, s_train, TR_LOSS, UP, NULL},
    {"learner.target_update", "learner.target_update=1", NULL, s_train, TR_TARGET, UP, NULL},
    {"learner.publish_every", "learner.publish_every=1", LRUN, s_lrun, LR_VERSION, UP, NULL},
    {"learner.prefetch", "learner.prefetch=3", LRUN, s_lrun, LR_PREFETCH, UP, NULL},
    {"learner.batches_per_request", "learner.batches_per_request=2", LRUN, s_lrun, LR_REQ_BATCHES,
     UP, NULL},
    {"learner.beta_start", "learner.beta_start=0.1", LRUN, s_lrun, LR_BETA0, DOWN, NULL},
    {"learner.beta_end", "learner.beta_end=0.5", LRUN, s_lrun, LR_BETA1, DOWN, NULL},
    {"learner.beta_steps", "learner.beta_steps=4", LRUN, s_lrun, LR_BETA1, DOWN, NULL},
    {"learner.priority_eps", "learner.priority_eps=0.5", NULL, s_train, TR_PRIO, UP, NULL},
    {"learner.checkpoint_interval_s", "learner.checkpoint_interval_s=120", NULL, s_learner,
     LN_TIMERS, DIFF, NULL},
    {"learner.max_steps", "learner.max_steps=6", LRUN, s_lrun, LR_STEPS, UP, NULL},
    {"learner.threads", "learner.threads=2", NULL, s_learner, LN_THREADS, UP, NULL},
    {"learner.precision", "learner.precision=bf16", NULL, s_precision, TR_LOSS, DIFF, NULL},
    {"learner.request_timeout_ms", "learner.request_timeout_ms=10",
     "learner.request_timeout_ms=3600000;learner.prefetch=1", s_ltimeout, 0, UP, NULL},
    // Only in a learner group (mpirun); check_group tests each stage's sharding.
    {"learner.zero_stage", NULL, NULL, NULL, 0, DIFF, "learner_group_stop.sh"},
    {"learner.policy_delay", "learner.policy_delay=1", CONT, s_dpg, DP_POLICY_STEPS, UP, NULL},
    {"learner.target_noise", "learner.target_noise=0", CONT, s_dpg, DP_LOSS, DIFF, NULL},
    {"learner.target_noise_clip", "learner.target_noise_clip=0.01", CONT, s_dpg, DP_LOSS, DIFF,
     NULL},
    {"learner.tau", "learner.tau=0.5", CONT, s_dpg, DP_TARGET, UP, NULL},
    {"learner.twin_critics", "learner.twin_critics=false", CONT, s_dpg, DP_PARAMS, DOWN, NULL},
    {"learner.actor_lr", "learner.actor_lr=0.01", CONT, s_dpg, DP_ACTOR_DELTA, UP, NULL},
    {"learner.actor_grad_clip", "learner.actor_grad_clip=1e-6", CONT ";learner.adam_eps=1", s_dpg,
     DP_ACTOR_DELTA, DOWN, NULL},
    {"learner.ranks", NULL, NULL, NULL, 0, DIFF, "learner_group.sh"},
    {"learner.metrics_interval_ms", "learner.metrics_interval_ms=2000", NULL, s_learner, LN_TIMERS,
     DIFF, NULL},
    {"learner.metrics_every_updates", NULL, NULL, NULL, 0, DIFF, "deterministic.sh"},

    // Also the launcher's number of actor processes: tests/smoke/launcher.sh.
    {"actor.num_actors", "actor.num_actors=64", NULL, s_abatch, AB_HASH, DIFF, "launcher.sh"},
    {"actor.envs_per_actor", "actor.envs_per_actor=4", NULL, s_actor, AS_STEPS, DOWN, NULL},
    {"actor.n_step", "actor.n_step=1", NULL, s_abatch, AB_DISC, UP, NULL},
    {"actor.gamma", "actor.gamma=0.5", NULL, s_abatch, AB_DISC, DOWN, NULL},
    {"actor.eps_base", "actor.eps_base=1", NULL, s_abatch, AB_HASH, DIFF, NULL},
    {"actor.eps_alpha", "actor.eps_alpha=0", NULL, s_abatch, AB_HASH, DIFF, NULL},
    // Continuous actions (Pendulum-v1): no noise at all, or the same noise in every env.
    {"actor.noise_sigma", "actor.noise_sigma=0", "env.id=Pendulum-v1", s_abatch, AB_SPREAD, DOWN,
     NULL},
    {"actor.noise_alpha", "actor.noise_alpha=0", "env.id=Pendulum-v1", s_abatch, AB_SPREAD, UP,
     NULL},
    {"actor.noise_theta", "actor.noise_theta=0.15", "env.id=Pendulum-v1", s_abatch, AB_HASH, DIFF,
     NULL},
    {"actor.random_steps", "actor.random_steps=100000", "env.id=Pendulum-v1;actor.noise_sigma=0.01",
     s_abatch, AB_SPREAD, UP, NULL},
    {"actor.send_batch", "actor.send_batch=8", NULL, s_abatch, AB_COUNT, DOWN, NULL},
    {"actor.weight_sync_steps", "actor.weight_sync_steps=16", NULL, s_actor, AS_SYNCS, UP, NULL},
    {"actor.max_pending_batches", "actor.max_pending_batches=1", NULL, s_actor, AS_DROPPED, UP,
     NULL},
    {"actor.ack_timeout_ms", "actor.ack_timeout_ms=10", "actor.ack_timeout_ms=3600000", s_abatch,
     AB_RESENT, UP, NULL},
    {"actor.stats_interval_ms", "actor.stats_interval_ms=50", NULL, s_actor, AS_TIMERS, DIFF, NULL},
    {"actor.max_steps_per_s", "actor.max_steps_per_s=4", NULL, s_actor, AS_RATE, UP, NULL},

    {"eval.episodes", "eval.episodes=7", "eval.episodes=3", s_eval, EV_EPISODES, UP, NULL},
    // A random network on CartPole: always pushing one way ends in ~10 steps, random pushes
    // last longer.
    {"eval.epsilon", "eval.epsilon=1", "eval.epsilon=0;eval.episodes=50", s_eval, EV_MEAN, DIFF,
     NULL},
    {"eval.max_episode_steps", "eval.max_episode_steps=3", "eval.episodes=5;eval.epsilon=1", s_eval,
     EV_TRUNCATED, UP, NULL},
    {"eval.interval_s", NULL, NULL, NULL, 0, DIFF, "eval_follow.sh"},
    {"eval.every_updates", NULL, NULL, NULL, 0, DIFF, "eval_follow.sh"},

    {"python.workers", NULL, NULL, NULL, 0, DIFF, "python_env.sh"},
    {"python.groups", NULL, NULL, NULL, 0, DIFF, "python_env.sh"},
    {"python.spawn", NULL, NULL, NULL, 0, DIFF, "python_env.sh"},
    {"python.transport", NULL, NULL, NULL, 0, DIFF, "python_env.sh"},
    {"python.bind", NULL, NULL, NULL, 0, DIFF, "python_env.sh"},
    {"python.interpreter", NULL, NULL, NULL, 0, DIFF, "python_env.sh"},
    {"python.script", NULL, NULL, NULL, 0, DIFF, "python_env.sh"},
    {"python.step_timeout_ms", NULL, NULL, NULL, 0, DIFF, "python_env.sh"},
    {"python.hello_timeout_ms", NULL, NULL, NULL, 0, DIFF, "python_env.sh"},

    {"endpoints.replay_insert_bind", "endpoints.replay_insert_bind=tcp://127.0.0.1:*", NULL,
     s_replay, RP_INSERT_EP, DIFF, NULL},
    {"endpoints.replay_insert", PEER_B("replay_insert"), PEER_A("replay_insert"), s_connect,
     CN_REPLAY_INSERT, UP, NULL},
    {"endpoints.replay_sample_bind", "endpoints.replay_sample_bind=tcp://127.0.0.1:*", NULL,
     s_replay, RP_SAMPLE_EP, DIFF, NULL},
    {"endpoints.replay_sample", PEER_B("replay_sample"), PEER_A("replay_sample"), s_connect,
     CN_REPLAY_SAMPLE, UP, NULL},
    {"endpoints.learner_weights_bind", "endpoints.learner_weights_bind=tcp://127.0.0.1:*", NULL,
     s_learner, LN_PUB_EP, DIFF, NULL},
    {"endpoints.learner_weights", PEER_B("learner_weights"), PEER_A("learner_weights"), s_connect,
     CN_LEARNER_WEIGHTS, UP, NULL},
    {"endpoints.learner_stats_bind", "endpoints.learner_stats_bind=tcp://127.0.0.1:*", NULL,
     s_learner, LN_STATS_EP, DIFF, NULL},
    {"endpoints.learner_stats", PEER_B("learner_stats"), PEER_A("learner_stats"), s_connect,
     CN_LEARNER_STATS, UP, NULL},
    // Set: the actor asks its host's relay (peer b) for weights instead of the learner (a).
    {"endpoints.relay", PEER_B("relay"), PEER_A("learner_weights"), s_connect, CN_LEARNER_WEIGHTS,
     UP, NULL},

    {"security.mode", "security.mode=none", CURVE, s_security, 0, DIFF, NULL},
    {"security.key_dir", "security.key_dir=@TMP@/keys2", CURVE, s_security, 0, DIFF, NULL},
    {"security.authorized_keys", "security.authorized_keys=@TMP@/other_authorized", CURVE,
     s_security, 0, DIFF, NULL},
};
#define N_ROWS ((int)(sizeof s_rows / sizeof s_rows[0]))

// ---------------------------------------------------------------------------------------
// The harness

static const s_row *s_find_row(const char *section, const char *key) {
    size_t ls = strlen(section);
    for (int i = 0; i < N_ROWS; i++) {
        const char *k = s_rows[i].key;
        if (strncmp(k, section, ls) == 0 && k[ls] == '.' && strcmp(k + ls + 1, key) == 0) {
            return &s_rows[i];
        }
    }
    return NULL;
}

static int s_in_schema(const char *dotted) {
    for (int i = 0; i < config_key_count(); i++) {
        const char *section, *key;
        ck_assert_int_eq(config_key_at(i, &section, &key), 0);
        size_t ls = strlen(section);
        if (strncmp(dotted, section, ls) == 0 && dotted[ls] == '.' &&
            strcmp(dotted + ls + 1, key) == 0) {
            return 1;
        }
    }
    return 0;
}

// Copies s into out with every @TMP@ replaced by root.
static void s_subst(const char *s, const char *root, char *out, size_t n) {
    size_t o = 0;
    while (*s && o + 1 < n) {
        if (strncmp(s, "@TMP@", 5) == 0) {
            o += (size_t)snprintf(out + o, n - o, "%s", root);
            s += 5;
        } else {
            out[o++] = *s++;
        }
    }
    out[o < n ? o : n - 1] = '\0';
}

// Loads s_common, the row's base and (perturbed) its perturbation, with @TMP@ = root.
static void s_load(const s_row *r, int perturbed, const char *root, apex_config_t *cfg) {
    enum { MAX_SETS = 64, SET_LEN = 640 };
    static char buf[MAX_SETS][SET_LEN];
    const char *sets[MAX_SETS];
    int n = 0;
    for (size_t i = 0; i < sizeof s_common / sizeof s_common[0]; i++, n++) {
        s_subst(s_common[i], root, buf[n], SET_LEN);
    }
    char base[1024];
    snprintf(base, sizeof base, "%s", r->base ? r->base : "");
    for (char *save = NULL, *t = strtok_r(base, ";", &save); t; t = strtok_r(NULL, ";", &save)) {
        ck_assert_int_lt(n, MAX_SETS - 1);
        s_subst(t, root, buf[n++], SET_LEN);
    }
    if (perturbed) {
        s_subst(r->set, root, buf[n++], SET_LEN);
    }
    for (int i = 0; i < n; i++) {
        sets[i] = buf[i];
    }
    char err[CONFIG_ERR_LEN];
    ck_assert_msg(config_load(cfg, NULL, sets, n, err, sizeof err) == 0, "%s (%s): %s", r->key,
                  perturbed ? "perturbed" : "base", err);
}

// The line "key = value" of the row's key in config_print's output, with root as @TMP@.
static void s_printed_value(const apex_config_t *cfg, const s_row *r, const char *root, char *out,
                            size_t n) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    config_print(cfg, f);
    fclose(f);
    const char *dot = strchr(r->key, '.');
    char header[80], line[80];
    snprintf(header, sizeof header, "\n[%.*s]\n", (int)(dot - r->key), r->key);
    snprintf(line, sizeof line, "\n%s = ", dot + 1);
    const char *sec = strstr(text, header);
    ck_assert_ptr_nonnull(sec);
    const char *p = strstr(sec + 1, line);
    ck_assert_ptr_nonnull(p);
    char raw[CONFIG_STR_LEN + 64];
    snprintf(raw, sizeof raw, "%.*s", (int)strcspn(p + 1, "\n"), p + 1);
    s_normalize(root, raw, out, n);
    free(text);
}

static void s_observe(const s_row *r, int perturbed, s_obs *o, char *printed, size_t n) {
    const char *tmp = check_tmpdir();
    char root[512];
    snprintf(root, sizeof root, "%s", tmp);
    apex_config_t cfg;
    s_load(r, perturbed, root, &cfg);
    s_printed_value(&cfg, r, root, printed, n);
    memset(o, 0, sizeof *o);
    r->obs(root, &cfg, r->what, o);
    if (!o->sig[0]) {
        s_sig(o, "%.17g", o->v);
    }
    check_rmtree(root);
}

START_TEST(test_key) {
    const s_row *r = &s_rows[_i];
    if (!r->obs) {
        return; // covered by its smoke script (test_smoke_tags)
    }
    log_set_level(LOG_ERROR);
    s_obs base, pert;
    char pv0[CONFIG_STR_LEN + 64], pv1[CONFIG_STR_LEN + 64];
    s_observe(r, 0, &base, pv0, sizeof pv0);
    s_observe(r, 1, &pert, pv1, sizeof pv1);
    if (getenv("APEX_KEYS_VERBOSE")) {
        printf("%-32s %-40s %s  ->  %s\n", r->key, pv1, base.sig, pert.sig);
    }
    ck_assert_msg(strcmp(pv0, pv1) != 0, "%s: the perturbation %s leaves the value at %s", r->key,
                  r->set, pv0);
    ck_assert_msg(strcmp(base.sig, pert.sig) != 0,
                  "%s: %s changes nothing the observer sees (%s both times)", r->key, r->set,
                  base.sig);
    ck_assert_msg(r->dir != UP || pert.v > base.v, "%s: %s should raise %g, gave %g", r->key,
                  r->set, base.v, pert.v);
    ck_assert_msg(r->dir != DOWN || pert.v < base.v, "%s: %s should lower %g, gave %g", r->key,
                  r->set, base.v, pert.v);
}
END_TEST

// Every key of the schema has a row: a key added without one fails here.
START_TEST(test_every_key_has_a_row) {
    char missing[4096] = "";
    int n = 0;
    ck_assert_int_gt(config_key_count(), 0);
    for (int i = 0; i < config_key_count(); i++) {
        const char *section, *key;
        ck_assert_int_eq(config_key_at(i, &section, &key), 0);
        if (!s_find_row(section, key)) {
            size_t o = strlen(missing);
            snprintf(missing + o, sizeof missing - o, " %s.%s", section, key);
            n++;
        }
    }
    ck_assert_int_eq(
        config_key_at(config_key_count(), &(const char *){NULL}, &(const char *){NULL}), -1);
    ck_assert_msg(n == 0,
                  "%d schema keys have no row in tests/check_keys.c's s_rows (a perturbation and "
                  "an observer that shows the key changes behaviour):%s",
                  n, missing);
}
END_TEST

// Every row is a schema key (a removed key's row goes with it), once, and well formed.
START_TEST(test_every_row_is_a_key) {
    for (int i = 0; i < N_ROWS; i++) {
        const s_row *r = &s_rows[i];
        ck_assert_msg(s_in_schema(r->key), "row %s is not a schema key", r->key);
        for (int j = 0; j < i; j++) {
            ck_assert_msg(strcmp(s_rows[j].key, r->key) != 0, "two rows for %s", r->key);
        }
        ck_assert_msg(r->obs || r->smoke, "row %s has neither an observer nor a smoke script",
                      r->key);
        if (r->obs) {
            size_t n = strlen(r->key);
            ck_assert_msg(r->set && strncmp(r->set, r->key, n) == 0 && r->set[n] == '=',
                          "row %s: the perturbation must assign its own key", r->key);
        }
    }
}
END_TEST

// The file tests/smoke/<script>, from the repository root (the working directory of
// make unit) or from $APEX_BIN/.. (NULL when neither exists).
static FILE *s_open_smoke(const char *script) {
    char path[1024];
    snprintf(path, sizeof path, "tests/smoke/%s", script);
    FILE *f = fopen(path, "r");
    const char *bin = getenv("APEX_BIN");
    if (!f && bin) {
        snprintf(path, sizeof path, "%s/../tests/smoke/%s", bin, script);
        f = fopen(path, "r");
    }
    return f;
}

// Whether a check names key: a line that is not a comment with "key_ok " or "--keys " (the
// python_env.sh refused helper's) followed by a comma-separated list that holds key.
static int s_line_checks_key(const char *line, const char *key) {
    const char *t = line + strspn(line, " \t");
    if (*t == '#') {
        return 0;
    }
    const char *markers[] = {"key_ok ", "--keys "};
    for (size_t m = 0; m < APEX_ARRAY_LEN(markers); m++) {
        for (const char *p = strstr(t, markers[m]); p; p = strstr(p + 1, markers[m])) {
            const char *k = p + strlen(markers[m]);
            size_t n = strcspn(k, " \t\n\"'");
            for (const char *e = k; e < k + n;) { // the comma-separated entries of k[0, n)
                size_t len = strcspn(e, ",");
                len = APEX_MIN(len, (size_t)(k + n - e));
                if (len == strlen(key) && strncmp(e, key, len) == 0) {
                    return 1;
                }
                e += len + 1;
            }
        }
    }
    return 0;
}

// A smoke row's script (1) holds the tag "# key: section.key", (2) the first line after it
// that is not another tag is a command (not a comment) that assigns the key
// ("section.key="), and (3) a check names the key (key_ok section.key, tests/smoke/lib.sh).
// When the script runs, lib.sh's finish fails a tagged key that no key_ok showed, so the tag
// stands for a check that can fail, not only for a comment.
START_TEST(test_smoke_tags) {
    for (int i = 0; i < N_ROWS; i++) {
        const s_row *r = &s_rows[i];
        if (!r->smoke) {
            continue;
        }
        FILE *f = s_open_smoke(r->smoke);
        ck_assert_msg(f != NULL, "%s: cannot open tests/smoke/%s", r->key, r->smoke);
        char tag[128], assign[128], line[4096];
        snprintf(tag, sizeof tag, "# key: %s\n", r->key);
        snprintf(assign, sizeof assign, "%s=", r->key);
        int tagged = 0, after_tag = 0, assigned = 0, checked = 0;
        while (fgets(line, sizeof line, f)) {
            const char *t = line + strspn(line, " ");
            if (strcmp(t, tag) == 0) {
                tagged = after_tag = 1;
            } else if (after_tag && strncmp(t, "# key: ", 7) != 0) {
                assigned = *t != '#' && strstr(t, assign) != NULL;
                after_tag = 0;
            }
            checked |= s_line_checks_key(line, r->key);
        }
        fclose(f);
        ck_assert_msg(tagged, "tests/smoke/%s has no line '# key: %s'", r->smoke, r->key);
        ck_assert_msg(assigned,
                      "tests/smoke/%s: the line after '# key: %s' is not a command that sets %s",
                      r->smoke, r->key, assign);
        ck_assert_msg(checked, "tests/smoke/%s: no check names %s (key_ok %s \"...\")", r->smoke,
                      r->key, r->key);
    }
}
END_TEST

Suite *keys_suite(void) {
    Suite *s = suite_create("keys");
    TCase *tc = tcase_create("schema");
    tcase_add_test(tc, test_every_key_has_a_row);
    tcase_add_test(tc, test_every_row_is_a_key);
    tcase_add_test(tc, test_smoke_tags);
    suite_add_tcase(s, tc);
    TCase *keys = tcase_create("key");
    tcase_add_loop_test(keys, test_key, 0, N_ROWS);
    suite_add_tcase(s, keys);
    return s;
}
