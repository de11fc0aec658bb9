// check_pyenv_cont.c: the Python env bridge (envs/pyenv.c) with continuous actions (issue #28)
// and the real worker (python/apex_env.py under /usr/bin/python3): Gymnasium Box action
// spaces of shape (action_dim,), float32 actions on the wire.
//
// - Gymnasium's Pendulum-v1 in numpy (tests/pyenv_pendulum.py) over the bridge gives the
//   observations, rewards and truncations of apex's built-in Pendulum-v1 (envs/env_pendulum.c)
//   for the same actions from the same states, bit for bit (the seeding differs: apex's env
//   streams are its own, so the Python env is started from given states);
// - Counter (tests/pyenv_faults.py) with a Box(0, 4, (2,)) action space: every action vector
//   reaches its env whole, and the env faults (raise, NaN, shapes, dtypes, bad returns,
//   failing resets) are reported as for discrete actions;
// - spaces that do not fit the run are refused at start-up naming both sides: a Discrete env
//   in a continuous run and a Box in a discrete one, another action_dim, a Box of integers,
//   other bounds; a worker of another bridge version fails the start-up at once;
// - a worker ignores STEPs whose actions are not finite or outside its Box (a fake actor, a
//   ROUTER here).
// Tests run from the repo root (as `make unit` does); waits are bounded and wait for
// conditions.
#include "check_apex.h"
#include "pyenv_counter.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <zmq.h>

#include "child.h"
#include "ckpt.h"
#include "config.h"
#include "env.h"
#include "log.h"
#include "nn.h"
#include "pyenv.h"

#define PYTHON "/usr/bin/python3"
#define FAULTS "tests/pyenv_faults.py"
#define PENDULUM "tests/pyenv_pendulum.py"
#define STEP_MS 30000 // a recv's timeout where every worker is meant to answer
#define WAIT_MS 60000 // the bound on a worker's start
#define SEED 1000
#define D 2 // Counter's action_dim here

// ---------------------------------------------------------------------------------------
// Helpers

// Options for W workers of N envs in G groups of MODULE:factory with continuous actions of
// dim floats in [lo, hi], observations of obs_dim float32s.
static void s_opts(pyenv_opts_t *o, int transport, const char *make, const char *kwargs, int W,
                   int N, int G, int obs_dim, int dim, float lo, float hi) {
    pyenv_opts_defaults(o);
    o->transport = transport;
    snprintf(o->python, sizeof o->python, PYTHON);
    snprintf(o->make, sizeof o->make, "%s", make);
    snprintf(o->kwargs, sizeof o->kwargs, "%.1000s", kwargs ? kwargs : "");
    o->workers = W;
    o->envs_per_worker = N;
    o->groups = G;
    o->obs_dim = obs_dim;
    o->action_dim = dim;
    for (int i = 0; i < dim; i++) {
        o->action_low[i] = lo;
        o->action_high[i] = hi;
    }
    o->seed = SEED;
    o->hello_timeout_ms = WAIT_MS;
}

// One group's output arrays and continuous actions (GE, D).
typedef struct {
    float *next_obs, *obs, *rewards, *actions;
    uint8_t *terminated, *truncated, *status;
    pyenv_results_t r;
} s_res;

static void s_res_init(s_res *s, int GE, int obs_dim, int dim) {
    s->next_obs = calloc((size_t)GE * (size_t)obs_dim, sizeof(float));
    s->obs = calloc((size_t)GE * (size_t)obs_dim, sizeof(float));
    s->rewards = calloc((size_t)GE, sizeof(float));
    s->actions = calloc((size_t)GE * (size_t)dim, sizeof(float));
    s->terminated = calloc((size_t)GE, 1);
    s->truncated = calloc((size_t)GE, 1);
    s->status = calloc((size_t)GE, 1);
    s->r = (pyenv_results_t){s->next_obs,   s->obs,       s->rewards,
                             s->terminated, s->truncated, s->status};
}

static void s_res_fini(s_res *s) {
    free(s->next_obs);
    free(s->obs);
    free(s->rewards);
    free(s->actions);
    free(s->terminated);
    free(s->truncated);
    free(s->status);
}

// ---------------------------------------------------------------------------------------
// Pendulum over the bridge against the built-in Pendulum-v1

// The start state of worker-local env i (pyenv_pendulum.py: start + 0.25 i).
#define TH0 1.0
#define THDOT0 0.5

// Env e's action at step t: a swing through the bounds, exactly +-2 now and then (the
// bounds are in the Box and in the run).
static float s_torque(int e, int t) {
    if (t % 17 == 5) {
        return e % 2 ? -2.0f : 2.0f;
    }
    return (float)(2.0 * sin(0.37 * t + e));
}

// 1 worker of 2 envs in 2 groups (pool env e is the worker's env e), 210 steps: past the
// TimeLimit's truncation at 200, whose reset puts the env back at its start state.
START_TEST(test_pendulum_matches_builtin) {
    pyenv_opts_t o;
    s_opts(&o, _i, PENDULUM ":pendulum", "{\"start\": [1.0, 0.5]}", 1, 2, 2, 3, 1, -2.0f, 2.0f);
    pyenv_t *p = pyenv_new(&o);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(pyenv_group_size(p), 1);
    const env_spec_t *spec = env_find("Pendulum-v1");
    ck_assert_ptr_nonnull(spec);
    double st[2][2];
    float want[2][3];
    s_res res[2];
    for (int e = 0; e < 2; e++) {
        s_res_init(&res[e], 1, 3, 1);
        st[e][0] = TH0 + 0.25 * e;
        st[e][1] = THDOT0;
        spec->observe(st[e], want[e]);
        ck_assert_int_eq(pyenv_recv_results(p, e, STEP_MS, &res[e].r), 0);
        ck_assert_int_eq(res[e].status[0], PYENV_NO_STEP);
        ck_assert_msg(memcmp(res[e].obs, want[e], sizeof want[e]) == 0, "env %d: start", e);
    }
    int truncations = 0;
    for (int t = 0; t < 210; t++) {
        for (int e = 0; e < 2; e++) {
            res[e].actions[0] = s_torque(e, t);
            ck_assert_int_eq(pyenv_send_cont(p, e, res[e].actions), 1);
        }
        for (int e = 0; e < 2; e++) {
            s_res *r = &res[e];
            ck_assert_int_eq(pyenv_recv_results(p, e, STEP_MS, &r->r), 1);
            float reward;
            uint8_t term;
            spec->step_cont(st[e], r->actions, want[e], &reward, &term);
            ck_assert_msg(memcmp(r->next_obs, want[e], sizeof want[e]) == 0,
                          "env %d step %d: obs %.9g %.9g %.9g, built-in %.9g %.9g %.9g", e, t,
                          (double)r->next_obs[0], (double)r->next_obs[1], (double)r->next_obs[2],
                          (double)want[e][0], (double)want[e][1], (double)want[e][2]);
            ck_assert_msg(r->rewards[0] == reward, "env %d step %d: reward %.9g, built-in %.9g", e,
                          t, (double)r->rewards[0], (double)reward);
            ck_assert(!r->terminated[0] && !term);
            ck_assert_int_eq(r->truncated[0], t + 1 == 200);
            if (t + 1 == 200) { // the reset: back at the start state
                truncations++;
                st[e][0] = TH0 + 0.25 * e;
                st[e][1] = THDOT0;
                spec->observe(st[e], want[e]);
            }
            ck_assert_msg(memcmp(r->obs, want[e], sizeof want[e]) == 0, "env %d step %d: act obs",
                          e, t);
        }
    }
    ck_assert_int_eq(truncations, 2);
    pyenv_stats_t ps;
    pyenv_get_stats(p, &ps);
    ck_assert_uint_eq(ps.steps, 420);
    ck_assert_uint_eq(ps.episodes, 2);
    ck_assert_uint_eq(ps.env_faults + ps.bad_frames + ps.workers_lost, 0);
    pyenv_destroy(&p);
    s_res_fini(&res[0]);
    s_res_fini(&res[1]);
}
END_TEST

// ---------------------------------------------------------------------------------------
// Counter with a Box action space: whole vectors, and every env fault

// Checks element j against Counter's model for the action value a = a0 + 4 a1 (mode: the
// env's fault or NULL, at step 2) and advances the model. Returns 1 for a fault.
static int s_check_counter(pyenv_t *p, int g, int j, const s_res *s, s_ctr *c, double a,
                           const char *mode) {
    const float *nx = s->next_obs + 4 * j, *ao = s->obs + 4 * j;
    const char *err = pyenv_env_error(p, g, j);
    if (c->broken) { // the retried reset succeeds
        ck_assert_msg(s->status[j] == PYENV_ENV_FAULT && strstr(err, "reset again after"),
                      "status %d '%s'", s->status[j], err);
        c->broken = 0;
        c->ep++;
        c->t = 0;
        return 1;
    }
    c->t++;
    if (mode && c->t == 2) {
        ck_assert_msg(s->status[j] == PYENV_ENV_FAULT && strstr(err, s_fault_text(mode)),
                      "%s: status %d '%s'", mode, s->status[j], err);
        ck_assert(s_obs_is(nx, 0, 0, 0, 0) && s->rewards[j] == 0.0f);
        if (strcmp(mode, "reset_raise") == 0) {
            c->broken = 1;
        } else {
            ck_assert(s_obs_is(ao, c->seed, c->ep + 1, 0, -1));
            c->ep++;
            c->t = 0;
        }
        return 1;
    }
    ck_assert_msg(s->status[j] == PYENV_OK, "status %d '%s'", s->status[j], err);
    ck_assert_msg(s_obs_is(nx, c->seed, c->ep, c->t, a), "obs %g %g %g %g, action %g",
                  (double)nx[0], (double)nx[1], (double)nx[2], (double)nx[3], a);
    ck_assert(s->rewards[j] == (float)(c->t + 0.5 * a));
    int L = 3 + (int)fmod(c->seed, 5.0), end = c->t >= L, even = fmod(c->seed, 2.0) == 0.0;
    ck_assert_int_eq(s->terminated[j], end && even);
    ck_assert_int_eq(s->truncated[j], end && !even);
    if (end) {
        c->ep++;
        c->t = 0;
        ck_assert(s_obs_is(ao, c->seed, c->ep, 0, -1));
    }
    return 0;
}

// 1 worker of 8 envs in 2 groups (pool env e is the worker's env e), actions (a0, a1) with
// a0 in {0, 1, 2, 4} and a1 in {0, 0.5} (exact in float32), bounds [0, 4]; envs 1..7 fault
// in each of the ways the discrete bridge reports, env 0 never.
START_TEST(test_counter_box_and_faults) {
    static const char *const modes[8] = {NULL,    "raise",      "nan",        "shape",
                                         "dtype", "reward_nan", "bad_return", "reset_raise"};
    char kw[1024];
    snprintf(kw, sizeof kw,
             "{\"action_dim\": 2, \"faults\": {\"0.1\": \"raise\", \"0.2\": \"nan\", \"0.3\": "
             "\"shape\", \"0.4\": \"dtype\", \"0.5\": \"reward_nan\", \"0.6\": \"bad_return\", "
             "\"0.7\": \"reset_raise\"}}");
    const int N = 8, G = 2, GE = 4;
    pyenv_opts_t o;
    s_opts(&o, _i, FAULTS ":counter", kw, 1, N, G, 4, D, 0.0f, 4.0f);
    pyenv_t *p = pyenv_new(&o);
    ck_assert_ptr_nonnull(p);
    s_res res[2];
    s_ctr ctr[8];
    for (int e = 0; e < N; e++) {
        ctr[e] = (s_ctr){.seed = SEED + e};
    }
    for (int g = 0; g < G; g++) {
        s_res_init(&res[g], GE, 4, D);
        ck_assert_int_eq(pyenv_recv_results(p, g, STEP_MS, &res[g].r), 0);
    }
    static const float a0s[4] = {0.0f, 1.0f, 2.0f, 4.0f};
    uint64_t faults = 0, ok = 0;
    for (int t = 0; t < 20; t++) {
        for (int g = 0; g < G; g++) {
            for (int j = 0; j < GE; j++) {
                res[g].actions[D * j] = a0s[(t + j) % 4];
                res[g].actions[D * j + 1] = (t + g) % 2 ? 0.5f : 0.0f;
            }
            ck_assert_int_eq(pyenv_send_cont(p, g, res[g].actions), GE);
        }
        for (int g = 0; g < G; g++) {
            ok += (uint64_t)pyenv_recv_results(p, g, STEP_MS, &res[g].r);
            for (int j = 0; j < GE; j++) {
                int e = g * GE + j;
                double a = (double)res[g].actions[D * j] + 4.0 * (double)res[g].actions[D * j + 1];
                faults += (uint64_t)s_check_counter(p, g, j, &res[g], &ctr[e], a, modes[e]);
            }
        }
    }
    pyenv_stats_t st;
    pyenv_get_stats(p, &st);
    ck_assert_uint_ge(faults, 7 * 2); // every faulty env faulted in several episodes
    ck_assert_uint_eq(st.env_faults, faults);
    ck_assert_uint_eq(st.steps, ok);
    ck_assert_uint_eq(st.steps + faults, 20 * (uint64_t)N);
    ck_assert_uint_eq(st.bad_frames + st.workers_lost + st.worker_deaths, 0);
    pyenv_destroy(&p);
    s_res_fini(&res[0]);
    s_res_fini(&res[1]);
}
END_TEST

// ---------------------------------------------------------------------------------------
// Spaces that do not fit, and a worker of another version: refused at start-up, saying why

START_TEST(test_spaces_refused) {
    const char *dir = check_tmpdir();
    char logpath[600];
    snprintf(logpath, sizeof logpath, "%s/log", dir);
    ck_assert_int_eq(log_open_file(logpath), 0);
    pyenv_opts_t o;
    // A Discrete(3) env in a continuous run.
    s_opts(&o, PYENV_LOCAL, FAULTS ":counter", NULL, 1, 2, 1, 4, D, 0.0f, 4.0f);
    ck_assert_ptr_null(pyenv_new(&o));
    // A Box env in a discrete run.
    s_opts(&o, PYENV_LOCAL, FAULTS ":counter", "{\"action_dim\": 2}", 1, 2, 1, 4, 0, 0, 0);
    o.n_actions = 3;
    ck_assert_ptr_null(pyenv_new(&o));
    // A Box of shape (1,) where the run has 2 floats.
    s_opts(&o, PYENV_LOCAL, FAULTS ":counter", "{\"action_dim\": 1}", 1, 2, 1, 4, D, 0.0f, 4.0f);
    ck_assert_ptr_null(pyenv_new(&o));
    // A Box of int32 actions.
    s_opts(&o, PYENV_LOCAL, FAULTS ":counter", "{\"action_dim\": 2, \"action_dtype\": \"int32\"}",
           1, 2, 1, 4, D, 0.0f, 4.0f);
    ck_assert_ptr_null(pyenv_new(&o));
    // Pendulum's [-2, 2] where the run has [-1, 2] (over ZeroMQ: the same refusal).
    s_opts(&o, PYENV_ZMQ, PENDULUM ":pendulum", NULL, 1, 2, 1, 3, 1, -1.0f, 2.0f);
    ck_assert_ptr_null(pyenv_new(&o));
    // A Discrete Pendulum in a continuous run.
    s_opts(&o, PYENV_LOCAL, PENDULUM ":discrete_pendulum", NULL, 1, 1, 1, 3, 1, -2.0f, 2.0f);
    ck_assert_ptr_null(pyenv_new(&o));
    // A worker of bridge version 2: the start-up fails at once, not at hello_timeout_ms.
    ck_assert_int_eq(setenv("APEX_PYENV_HOSTILE", "version", 1), 0);
    s_opts(&o, PYENV_LOCAL, PENDULUM ":pendulum", NULL, 1, 1, 1, 3, 1, -2.0f, 2.0f);
    snprintf(o.script, sizeof o.script, "tests/pyenv_hostile.py");
    o.hello_timeout_ms = 600000;
    ck_assert_ptr_null(pyenv_new(&o));
    ck_assert_int_eq(unsetenv("APEX_PYENV_HOSTILE"), 0);
    log_close_file();
    const char *log = check_read_file(logpath);
    const char *want[] = {
        "action_space=Discrete(3)) does not fit this run: it has float32 observations of shape "
        "(4,) (4 elements) and 3 discrete actions; the run expects 4 float32 elements per "
        "observation ([env] obs_dim, obs_dtype) and continuous actions of 2 floats ([env] "
        "action_dim)",
        "action_space=Box(low=[0. 0.], high=[4. 4.], shape=(2,), dtype=float32)) does not fit "
        "this run: it has float32 observations of shape (4,) (4 elements) and continuous "
        "actions of 2 floats; the run expects 4 float32 elements per observation ([env] obs_dim, "
        "obs_dtype) and 3 actions ([env] n_actions)",
        "and continuous actions of 1 float; the run expects 4 float32 elements per observation "
        "([env] obs_dim, obs_dtype) and continuous actions of 2 floats ([env] action_dim)",
        "action_space=Box(shape (2,), dtype int32) (apex takes a Box of shape (D,) with 1 <= D "
        "<= 64 and dtype float32 or float64)) does not fit this run: it has float32 observations "
        "of shape (4,) (4 elements) and 0 discrete actions",
        "its action_space is a Box with low [-2] and high [2] (as float32); the run has [env] "
        "action_low = [-1] and action_high = [2]",
        "---> HINT: set [env] action_low and action_high to the env's bounds",
        "make=" PENDULUM ":discrete_pendulum",
        "and 3 discrete actions; the run expects 3 float32 elements per observation ([env] "
        "obs_dim, obs_dtype) and continuous actions of 1 float ([env] action_dim)",
        "python env worker 0 (" PYTHON " tests/pyenv_hostile.py) sent a message of version 2 "
        "(this bridge speaks 1: python/apex_env.py and apex must be of one version)"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        ck_assert_msg(strstr(log, want[i]) != NULL, "log lacks \"%s\":\n%s", want[i], log);
    }
    check_rmtree(dir);
}
END_TEST

// ---------------------------------------------------------------------------------------
// A fake actor (a ROUTER here) against a real Pendulum worker: bad actions are ignored

// Receives one message of at most 8 frames from the ROUTER into f: returns the frame count.
static int s_router_recv(void *r, zmq_msg_t *f) {
    int n = 0, more = 1;
    while (more && n < 8) {
        zmq_msg_init(&f[n]);
        if (zmq_msg_recv(&f[n], r, 0) < 0) {
            zmq_msg_close(&f[n]);
            return -1;
        }
        more = zmq_msg_more(&f[n++]);
    }
    return n;
}

static void s_close_all(zmq_msg_t *f, int n) {
    for (int i = 0; i < n; i++) {
        zmq_msg_close(&f[i]);
    }
}

// Sends [rid][hdr with type and seq][payload].
static void s_send(void *r, const uint8_t *rid, size_t rid_len, uint8_t *h, uint16_t type,
                   uint64_t seq, const void *payload, size_t len) {
    memcpy(h + 6, &type, 2);
    memcpy(h + 16, &seq, 8);
    zmq_send(r, rid, rid_len, ZMQ_SNDMORE);
    zmq_send(r, h, 72, ZMQ_SNDMORE);
    zmq_send(r, payload, len, 0);
}

// The HELLO carries action_dim 1, n_actions 0 and the Box's bounds [-2] [2]. STEPs with a NaN,
// an inf, an action beyond either bound, or a payload of int32s' size are ignored: the first
// answer after them is the valid STEP's RESULT, with its observation.
START_TEST(test_worker_ignores_bad_actions) {
    void *ctx = zmq_ctx_new(), *r = zmq_socket(ctx, ZMQ_ROUTER);
    int zero = 0, timeout = STEP_MS;
    zmq_setsockopt(r, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(r, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    ck_assert_int_eq(zmq_bind(r, "tcp://127.0.0.1:*"), 0);
    char ep[256];
    size_t len = sizeof ep;
    zmq_getsockopt(r, ZMQ_LAST_ENDPOINT, ep, &len);
    char *argv[] = {
        PYTHON,     "python/apex_env.py",      "--connect",  ep,  "--make", PENDULUM ":pendulum",
        "--kwargs", "{\"start\": [1.0, 0.5]}", "--num-envs", "1", NULL};
    pid_t pid = child_start(argv);
    ck_assert_int_gt(pid, 0);
    zmq_msg_t f[8];
    int nf = s_router_recv(r, f);
    ck_assert_int_eq(nf, 4); // routing id, header, text, bounds
    uint8_t rid[256], h[72];
    size_t rid_len = zmq_msg_size(&f[0]);
    memcpy(rid, zmq_msg_data(&f[0]), rid_len);
    ck_assert_uint_eq(zmq_msg_size(&f[1]), 72);
    memcpy(h, zmq_msg_data(&f[1]), 72);
    uint32_t n_actions;
    uint16_t action_dim;
    memcpy(&n_actions, h + 36, 4);
    memcpy(&action_dim, h + 42, 2);
    ck_assert_uint_eq(n_actions, 0);
    ck_assert_uint_eq(action_dim, 1);
    float bounds[2];
    ck_assert_uint_eq(zmq_msg_size(&f[3]), sizeof bounds);
    memcpy(bounds, zmq_msg_data(&f[3]), sizeof bounds);
    ck_assert(bounds[0] == -2.0f && bounds[1] == 2.0f);
    s_close_all(f, nf);
    uint64_t seed = 3;
    s_send(r, rid, rid_len, h, 2, 1, &seed, 8); // RESET
    nf = s_router_recv(r, f);
    ck_assert_int_eq(nf, 7);
    s_close_all(f, nf);
    const float bad[] = {NAN, INFINITY, -INFINITY, 2.0001f, -2.5f, 1e30f};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        s_send(r, rid, rid_len, h, 3, 10 + k, &bad[k], 4);
    }
    int32_t two[2] = {1, 1};
    s_send(r, rid, rid_len, h, 3, 20, two, 8); // two actions' bytes for one env
    float good = 2.0f;
    s_send(r, rid, rid_len, h, 3, 42, &good, 4);
    nf = s_router_recv(r, f);
    ck_assert_int_eq(nf, 7);
    uint16_t type;
    uint64_t seq;
    memcpy(&type, (uint8_t *)zmq_msg_data(&f[1]) + 6, 2);
    memcpy(&seq, (uint8_t *)zmq_msg_data(&f[1]) + 16, 8);
    ck_assert_int_eq(type, 4);
    ck_assert_uint_eq(seq, 42);
    double st[2] = {TH0, THDOT0};
    float want[3], reward;
    uint8_t term;
    env_find("Pendulum-v1")->step_cont(st, &good, want, &reward, &term);
    ck_assert_uint_eq(zmq_msg_size(&f[2]), sizeof want);
    ck_assert(memcmp(zmq_msg_data(&f[2]), want, sizeof want) == 0);
    s_close_all(f, nf);
    s_send(r, rid, rid_len, h, 6, 0, "test over", 9); // REFUSE: the worker exits 3
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 3);
    zmq_close(r);
    zmq_ctx_term(ctx);
}
END_TEST

// apex-eval --checkpoint on a continuous Python env (its own env workers, actor/evaluator.h):
// configs/pendulum.ini on tests/pyenv_pendulum.py without eval_id, a policy of zeros (mu(s)
// = 0, the middle of [-2, 2]) sent with envsrc_send_cont, against the returns the same
// module computes in plain Python for the same seeds (tests/pyenv_pendulum.py N SEED FIRST).
START_TEST(test_eval_checkpoint_cont) {
    const char *bin = getenv("APEX_BIN");
    if (!bin) {
        return; // the binaries are needed
    }
    enum { EPISODES = 4 };
#define PEND_SETS                                                                                  \
    "env.id=python", "env.make=tests/pyenv_pendulum.py:pendulum", "env.obs_dim=3",                 \
        "env.action_dim=1", "env.action_low=-2", "env.action_high=2", "env.eval_id="
    const char *sets[] = {PEND_SETS};
    apex_config_t cfg;
    char err[512];
    ck_assert_msg(config_load(&cfg, "configs/pendulum.ini", sets, 7, err, sizeof err) == 0, "%s",
                  err);
    nn_config_t nc;
    nn_config_from_run(&nc, &cfg); // the policy mu(s)
    nn_params_t p;
    nn_params_init(&p, &nc);
    memset(p.data, 0, p.num_params * sizeof(float));
    const char *dir = check_tmpdir();
    char path[600], cmd[2400], line[1024];
    snprintf(path, sizeof path, "%s/policy.ckpt", dir);
    ckpt_header_t h;
    ckpt_header_init(&h, &nc);
    const float *one[1] = {p.data};
    ck_assert_int_eq(ckpt_write(path, &h, one, 1), APEX_OK);

    snprintf(cmd, sizeof cmd, PYTHON " tests/pyenv_pendulum.py %d %lld 1000000000", EPISODES,
             (long long)cfg.run.seed);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    int ref_n = -1;
    double ref_mean = NAN;
    ck_assert(fgets(line, sizeof line, f) && sscanf(line, "%d %lf", &ref_n, &ref_mean) == 2);
    ck_assert_int_eq(pclose(f), 0);
    ck_assert_int_eq(ref_n, EPISODES);

    int n = snprintf(cmd, sizeof cmd, "%s/apex-eval -c configs/pendulum.ini", bin);
    for (int i = 0; i < 7; i++) {
        n += snprintf(cmd + n, sizeof cmd - (size_t)n, " --set %s", sets[i]);
    }
    snprintf(cmd + n, sizeof cmd - (size_t)n, " --checkpoint %s --episodes %d 2>&1", path,
             EPISODES);
    f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    double got = NAN;
    long got_n = -1;
    while (fgets(line, sizeof line, f)) {
        const char *m = strstr(line, "  mean "), *e = strstr(line, "episodes ");
        if (m && e && strstr(line, "python checkpoint") && strstr(line, "greedy mu(s)")) {
            got = strtod(m + 7, NULL);
            got_n = strtol(e + 9, NULL, 10);
        }
    }
    ck_assert_int_eq(pclose(f), 0);
    ck_assert_int_eq(got_n, EPISODES);
    ck_assert_msg(fabs(got - ref_mean) < 0.006, "apex-eval printed mean %.2f, Python %.4f", got,
                  ref_mean);
    check_rmtree(dir);
    nn_params_fini(&p);
#undef PEND_SETS
}
END_TEST

Suite *pyenv_cont_suite(void) {
    Suite *s = suite_create("pyenv_cont");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_pendulum_matches_builtin, PYENV_LOCAL, PYENV_ZMQ + 1);
    tcase_add_loop_test(tc, test_counter_box_and_faults, PYENV_LOCAL, PYENV_ZMQ + 1);
    tcase_add_test(tc, test_spaces_refused);
    tcase_add_test(tc, test_worker_ignores_bad_actions);
    tcase_add_test(tc, test_eval_checkpoint_cont);
    suite_add_tcase(s, tc);
    return s;
}
