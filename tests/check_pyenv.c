// check_pyenv.c: the Python env bridge (envs/pyenv.c) with the real worker
// (python/apex_env.py under /usr/bin/python3; env factories in tests/pyenv_faults.py) and,
// for malformed input, a fake worker in a thread of this process written from the wire
// format in pyenv.h (not from pyenv.c's structs).
//
// The CartPole test compares the bridge with a CartPole stepped in plain Python
// (tests/pyenv_faults.py reference_trajectory): the peer's independent one at
// $APEX_PYENV_CARTPOLE (default ../shared/peers/cartpole_env.py) when it is there, else
// python/apex_cartpole.py, which test_apex_cartpole_matches_gymnasium checks against
// Gymnasium's own trajectories (tests/fixtures) on every run. Other tests
// use Counter, whose observations are a closed form checked
// here. Tests run from the repo root (as `make unit` does). Waits are bounded by WAIT_MS and
// wait for conditions; the only short timeouts are where a reply is meant never to come.
#include "check_apex.h"
#include "pyenv_counter.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "child.h"
#include "ckpt.h"
#include "clock.h"
#include "config.h"
#include "envsrc.h"
#include "evaluator.h"
#include "log.h"
#include "nn.h"
#include "pyenv.h"
#include "security.h"
#include "fixtures/env_trajectories.h"

#define PYTHON "/usr/bin/python3"
#define FAULTS "tests/pyenv_faults.py"
#define STEP_MS 30000 // a recv's timeout where every worker is meant to answer
#define WAIT_MS 60000 // the bound on waiting for a condition
#define SEED 1000
#define COUNTER_ACTIONS 3

// ---------------------------------------------------------------------------------------
// Helpers

// The transport of spawned workers in the test running: the loop tests run once over each
// (_i: 0 local pipes and shared memory, 1 ZeroMQ).
static int s_transport = PYENV_LOCAL;

static void s_opts(pyenv_opts_t *o, const char *factory, const char *kwargs, int W, int N, int G) {
    pyenv_opts_defaults(o);
    o->transport = s_transport;
    snprintf(o->python, sizeof o->python, PYTHON);
    snprintf(o->make, sizeof o->make, FAULTS ":%s", factory);
    snprintf(o->kwargs, sizeof o->kwargs, "%.1000s", kwargs ? kwargs : "");
    o->workers = W;
    o->envs_per_worker = N;
    o->groups = G;
    o->obs_dim = 4;
    o->n_actions = COUNTER_ACTIONS;
    o->seed = SEED;
    o->hello_timeout_ms = WAIT_MS;
}

// One group's output arrays.
typedef struct {
    int GE;
    size_t row;
    uint8_t *next_obs, *obs;
    float *rewards;
    uint8_t *terminated, *truncated, *status;
    int32_t *actions;
    pyenv_results_t r;
} s_res;

static void s_res_init(s_res *s, int GE, size_t row) {
    s->GE = GE;
    s->row = row;
    s->next_obs = calloc((size_t)GE, row);
    s->obs = calloc((size_t)GE, row);
    s->rewards = calloc((size_t)GE, sizeof(float));
    s->terminated = calloc((size_t)GE, 1);
    s->truncated = calloc((size_t)GE, 1);
    s->status = calloc((size_t)GE, 1);
    s->actions = calloc((size_t)GE, sizeof(int32_t));
    s->r = (pyenv_results_t){s->next_obs,   s->obs,       s->rewards,
                             s->terminated, s->truncated, s->status};
}

static void s_res_fini(s_res *s) {
    free(s->next_obs);
    free(s->obs);
    free(s->rewards);
    free(s->terminated);
    free(s->truncated);
    free(s->status);
    free(s->actions);
}

static const float *s_f(const uint8_t *rows, int j) { return (const float *)rows + 4 * j; }

// Pool env e's worker and worker-local env (the layout documented in pyenv.h).
static void s_where(int W, int N, int G, int e, int *w, int *i) {
    int n = N / G, GE = W * N / G, g = e / GE, j = e % GE;
    *w = j / n;
    *i = g * n + j % n;
}

// The model of tests/pyenv_faults.py Counter: seed, episode, step.
// Checks element j of a group's results against Counter's model for action a (mode: the
// env's fault or NULL, fault at step 2) and advances the model. Returns 1 for a fault.
static int s_check_counter(pyenv_t *p, int g, int j, const s_res *s, s_ctr *c, int32_t a,
                           const char *mode, int e) {
    const float *nx = s_f(s->next_obs, j), *ao = s_f(s->obs, j);
    const char *err = pyenv_env_error(p, g, j);
    if (c->broken) { // the retried reset succeeds
        ck_assert_msg(s->status[j] == PYENV_ENV_FAULT && strstr(err, "reset again after"),
                      "env %d: status %d '%s'", e, s->status[j], err);
        ck_assert(s_obs_is(ao, c->seed, c->ep + 1, 0, -1));
        c->broken = 0;
        c->ep++;
        c->t = 0;
        return 1;
    }
    c->t++;
    if (mode && c->t == 2) {
        ck_assert_msg(s->status[j] == PYENV_ENV_FAULT, "env %d (%s): status %d", e, mode,
                      s->status[j]);
        ck_assert_msg(strstr(err, s_fault_text(mode)) != NULL, "env %d (%s): error '%s'", e, mode,
                      err);
        ck_assert(s_obs_is(nx, 0, 0, 0, 0) && s->rewards[j] == 0.0f);
        ck_assert(!s->terminated[j] && !s->truncated[j]);
        if (strcmp(mode, "reset_raise") == 0) {
            ck_assert(s_obs_is(ao, 0, 0, 0, 0)); // the reset failed too: nothing to act on
            c->broken = 1;
        } else {
            ck_assert(s_obs_is(ao, c->seed, c->ep + 1, 0, -1));
            c->ep++;
            c->t = 0;
        }
        return 1;
    }
    ck_assert_msg(s->status[j] == PYENV_OK, "env %d: status %d '%s'", e, s->status[j], err);
    ck_assert_msg(s_obs_is(nx, c->seed, c->ep, c->t, a), "env %d: obs %g %g %g %g", e, nx[0], nx[1],
                  nx[2], nx[3]);
    ck_assert(s->rewards[j] == (float)(c->t + 0.5 * a));
    int end = c->t >= s_ctr_len(c), even = fmod(c->seed, 2.0) == 0.0;
    ck_assert_int_eq(s->terminated[j], end && even);
    ck_assert_int_eq(s->truncated[j], end && !even);
    if (end) {
        c->ep++;
        c->t = 0;
        ck_assert(s_obs_is(ao, c->seed, c->ep, 0, -1));
    } else {
        ck_assert(memcmp(ao, nx, 16) == 0);
    }
    return 0;
}

// The first recv of every group: no step, the start observations of Counter.
static void s_first_counter(pyenv_t *p, s_res *res, s_ctr *ctr) {
    int G = pyenv_groups(p), GE = pyenv_group_size(p);
    for (int g = 0; g < G; g++) {
        ck_assert_int_eq(pyenv_recv_results(p, g, STEP_MS, &res[g].r), 0);
        for (int j = 0; j < GE; j++) {
            s_ctr *c = &ctr[g * GE + j];
            ck_assert_int_eq(res[g].status[j], PYENV_NO_STEP);
            ck_assert_msg(s_obs_is(s_f(res[g].obs, j), c->seed, 0, 0, -1), "env %d: seed %g",
                          g * GE + j, (double)s_f(res[g].obs, j)[0]);
        }
    }
}

// Pool env e's mode in a {"W.I": mode} table, or NULL.
static const char *s_mode_of(const char *const (*faults)[2], int n, int w, int i) {
    char key[16];
    snprintf(key, sizeof key, "%d.%d", w, i);
    for (int k = 0; k < n; k++) {
        if (strcmp(faults[k][0], key) == 0) {
            return faults[k][1];
        }
    }
    return NULL;
}

// ---------------------------------------------------------------------------------------
// Spaces

START_TEST(test_spaces_refused) {
    const char *dir = check_tmpdir();
    char logpath[600];
    snprintf(logpath, sizeof logpath, "%s/log", dir);
    ck_assert_int_eq(log_open_file(logpath), 0);
    pyenv_opts_t o;
    s_opts(&o, "counter", NULL, 1, 2, 1);
    o.obs_dim = 5; // Counter has 4
    ck_assert_ptr_null(pyenv_new(&o));
    s_opts(&o, "counter", NULL, 1, 2, 1);
    o.n_actions = 2; // Counter has 3
    ck_assert_ptr_null(pyenv_new(&o));
    s_opts(&o, "image", NULL, 1, 2, 1);
    o.obs_dim = 12; // uint8 (3, 2, 2), expected as float32
    ck_assert_ptr_null(pyenv_new(&o));
    s_opts(&o, "no_discrete", NULL, 1, 2, 1);
    ck_assert_ptr_null(pyenv_new(&o));
    log_close_file();
    const char *log = check_read_file(logpath);
    const char *want[] = {
        "float32 observations of shape (4,) (4 elements) and 3 discrete actions; the run "
        "expects 5 float32 elements per observation ([env] obs_dim, obs_dtype) and 3 actions",
        "and 3 discrete actions; the run expects 4 float32 elements per observation ([env] "
        "obs_dim, obs_dtype) and 2 actions ([env] n_actions)",
        "uint8 observations of shape (3, 2, 2) (12 elements) and 3 discrete actions; the run "
        "expects 12 float32 elements",
        "action_space=Box (neither a Discrete (.n) nor a Box (.shape, .dtype, .low, .high): "
        "AttributeError: 'Box' object has no attribute 'low')) does not fit this run: it has "
        "float32 observations of shape (4,) (4 elements) and 0 discrete actions",
        "make=tests/pyenv_faults.py:counter pid="};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        ck_assert_msg(strstr(log, want[i]) != NULL, "log lacks \"%s\":\n%s", want[i], log);
    }
    check_rmtree(dir);
}
END_TEST

// ---------------------------------------------------------------------------------------
// The reference CartPole, bridge against plain Python

// The actions of reference_trajectory's policy (tests/pyenv_faults.py), in the same double
// arithmetic.
static int32_t s_policy(int e, int t, const float *obs) {
    if (e % 2 == 0) {
        double s = (double)obs[2] + 0.5 * (double)obs[3] + 0.01 * (double)obs[0] +
                   0.1 * (double)obs[1];
        return s > 0.0;
    }
    return (int32_t)((((uint64_t)t * 1103515245u + (uint64_t)e * 12345u) >> 16) & 1u);
}

#define CP_ENVS 4
#define CP_STEPS 1100
#define CP_REC 42 // "<4f4fdBB"

// The independent reference CartPole ($APEX_PYENV_CARTPOLE, default
// ../shared/peers/cartpole_env.py), or NULL when it is not there (a clean checkout).
static const char *s_peer_cartpole(void) {
    const char *ref = getenv("APEX_PYENV_CARTPOLE");
    ref = ref && *ref ? ref : "../shared/peers/cartpole_env.py";
    return access(ref, R_OK) == 0 ? ref : NULL;
}

// python/apex_cartpole.py (the shipped config's env) is Gymnasium's CartPole-v1: its steps from
// the start states and actions of the trajectories Gymnasium's own code recorded
// (tests/fixtures/env_trajectories.h, tests/fixtures/gen_env_trajectories.py) give the same
// observation bytes, rewards and terminations, and its TimeLimit truncates a balanced episode
// at step 500. The reference ships with the repo, so this check always runs.
START_TEST(test_apex_cartpole_matches_gymnasium) {
    const char *in = check_tmpdir();
    char path[1200], cmd[2600];
    snprintf(path, sizeof path, "%s/states.txt", in);
    FILE *w = fopen(path, "w");
    ck_assert_ptr_nonnull(w);
    int trajs = 0, steps = 0;
    for (size_t k = 0; k < APEX_ARRAY_LEN(ENV_FIX_TRAJS); k++) {
        const env_fix_traj_t *t = &ENV_FIX_TRAJS[k];
        if (strcmp(t->env_id, "CartPole-v1") != 0) {
            continue;
        }
        fprintf(w, "%.17g %.17g %.17g %.17g", t->start[0], t->start[1], t->start[2], t->start[3]);
        for (int i = 0; i < t->n_steps; i++) {
            fprintf(w, " %d", t->steps[i].action);
        }
        fputc('\n', w);
        trajs++;
        steps += t->n_steps;
    }
    fprintf(w, "LIMIT 0.01 0 0.02 0\n");
    ck_assert_int_eq(fclose(w), 0);
    ck_assert_int_ge(trajs, 3);
    snprintf(cmd, sizeof cmd, PYTHON " " FAULTS " --dynamics < '%.1200s'", path);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    for (size_t k = 0; k < APEX_ARRAY_LEN(ENV_FIX_TRAJS); k++) {
        const env_fix_traj_t *t = &ENV_FIX_TRAJS[k];
        if (strcmp(t->env_id, "CartPole-v1") != 0) {
            continue;
        }
        for (int i = 0; i < t->n_steps; i++) {
            uint8_t rec[22];
            ck_assert_uint_eq(fread(rec, 1, sizeof rec, f), sizeof rec);
            float obs[4], reward;
            memcpy(obs, rec, 16);
            memcpy(&reward, rec + 16, 4);
            const env_fix_step_t *want = &t->steps[i];
            ck_assert_msg(memcmp(obs, want->obs, sizeof obs) == 0,
                          "%s step %d: observation (%.9g %.9g %.9g %.9g), Gymnasium's (%.9g %.9g "
                          "%.9g %.9g)",
                          t->name, i, obs[0], obs[1], obs[2], obs[3], want->obs[0], want->obs[1],
                          want->obs[2], want->obs[3]);
            ck_assert_float_eq(reward, want->reward);
            ck_assert_int_eq(rec[20], want->terminated);
            ck_assert_int_eq(rec[21], 0); // no fixture reaches the TimeLimit
        }
    }
    uint8_t lim[6];
    ck_assert_uint_eq(fread(lim, 1, sizeof lim, f), sizeof lim);
    uint32_t len;
    memcpy(&len, lim, 4);
    ck_assert_int_eq(pclose(f), 0);
    ck_assert_uint_eq(len, 500);
    ck_assert_int_eq(lim[4], 0); // not terminated
    ck_assert_int_eq(lim[5], 1); // truncated
    check_rmtree(in);
    ck_assert_int_gt(steps, 100);
}
END_TEST

// The same module against the peer's independent CartPole over auto-reset episodes (which the
// fixtures do not cover: the seeded reset stream), when the peer is at hand. The peer lives
// outside the repository (../shared/peers), which a fresh checkout need not have: the check
// above is the one that always runs; this one says when it cannot.
START_TEST(test_apex_cartpole_matches_peer) {
    const char *ref = s_peer_cartpole();
    if (!ref) {
        printf("check_pyenv: test_apex_cartpole_matches_peer SKIPPED: no peer CartPole at %s "
               "(test_apex_cartpole_matches_gymnasium checks the dynamics without it)\n",
               getenv("APEX_PYENV_CARTPOLE") ? getenv("APEX_PYENV_CARTPOLE")
                                             : "../shared/peers/cartpole_env.py");
        return;
    }
    char cmd[1200], line[256] = "";
    snprintf(cmd, sizeof cmd, PYTHON " " FAULTS " --compare '%.1000s'", ref);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    ck_assert_int_eq(pclose(f), 0);
    ck_assert_msg(strncmp(line, "IDENTICAL", 9) == 0, "%s", line);
}
END_TEST

START_TEST(test_cartpole_matches_python) {
    s_transport = _i;
    // The bridge against the same envs stepped in plain Python: the peer's CartPole, or
    // without it the repo's own (the bridge's exactness does not need an independent env).
    const char *ref = s_peer_cartpole();
    ref = ref ? ref : "python/apex_cartpole.py";
    char cmd[1200];
    snprintf(cmd, sizeof cmd, PYTHON " " FAULTS " '%s' %d %d %d", ref, CP_ENVS, CP_STEPS, SEED);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    size_t want = (size_t)CP_ENVS * 16 + (size_t)CP_STEPS * CP_ENVS * CP_REC;
    uint8_t *trace = malloc(want + 1);
    size_t got = fread(trace, 1, want + 1, f);
    ck_assert_int_eq(pclose(f), 0);
    ck_assert_uint_eq(got, want);

    char kw[1100];
    snprintf(kw, sizeof kw, "{\"path\": \"%s\"}", ref);
    pyenv_opts_t o;
    s_opts(&o, "cartpole", kw, 2, 2, 2); // 4 envs: 2 groups of one env per worker
    o.n_actions = 2;
    pyenv_t *p = pyenv_new(&o);
    ck_assert_ptr_nonnull(p);
    const int G = 2, GE = 2;
    s_res res[2];
    for (int g = 0; g < G; g++) {
        s_res_init(&res[g], GE, 16);
        ck_assert_int_eq(pyenv_recv_results(p, g, STEP_MS, &res[g].r), 0);
        for (int j = 0; j < GE; j++) {
            ck_assert_int_eq(res[g].status[j], PYENV_NO_STEP);
            ck_assert(memcmp(s_f(res[g].obs, j), trace + 16 * (g * GE + j), 16) == 0);
        }
    }
    int terminations = 0, truncations = 0;
    for (int t = 0; t < CP_STEPS; t++) {
        for (int g = 0; g < G; g++) { // both groups in flight: the overlapped pattern
            for (int j = 0; j < GE; j++) {
                res[g].actions[j] = s_policy(g * GE + j, t, s_f(res[g].obs, j));
            }
            ck_assert_int_eq(pyenv_send_actions(p, g, res[g].actions), GE);
        }
        for (int g = 0; g < G; g++) {
            ck_assert_int_eq(pyenv_recv_results(p, g, STEP_MS, &res[g].r), GE);
            for (int j = 0; j < GE; j++) {
                int e = g * GE + j;
                const uint8_t *r = trace + CP_ENVS * 16 + ((size_t)t * CP_ENVS + e) * CP_REC;
                double rw;
                memcpy(&rw, r + 32, 8);
                ck_assert_msg(memcmp(s_f(res[g].next_obs, j), r, 16) == 0 &&
                                  memcmp(s_f(res[g].obs, j), r + 16, 16) == 0,
                              "step %d env %d: observations differ from plain Python", t, e);
                ck_assert(res[g].rewards[j] == (float)rw);
                ck_assert_int_eq(res[g].terminated[j], r[40]);
                ck_assert_int_eq(res[g].truncated[j], r[41]);
                terminations += r[40];
                truncations += r[41] && !r[40];
            }
        }
    }
    // Both ways an episode ends were compared: the controller's envs reach the 500-step
    // truncation, the others terminate.
    ck_assert_int_ge(truncations, 2);
    ck_assert_int_ge(terminations, 10);
    vecenv_episode_t ep[256];
    int n_ep = pyenv_drain_episodes(p, ep, 256);
    ck_assert_int_eq(n_ep, terminations + truncations);
    int full = 0;
    for (int i = 0; i < n_ep; i++) {
        full += ep[i].len == 500 && ep[i].ret == 500.0;
    }
    ck_assert_int_eq(full, truncations);
    pyenv_stats_t st;
    pyenv_get_stats(p, &st);
    ck_assert_uint_eq(st.steps, (uint64_t)CP_STEPS * CP_ENVS);
    ck_assert_uint_eq(st.bad_frames + st.env_faults + st.workers_lost, 0);
    pyenv_destroy(&p);
    for (int g = 0; g < G; g++) {
        s_res_fini(&res[g]);
    }
    free(trace);
}
END_TEST

// ---------------------------------------------------------------------------------------
// Env faults: each reported and reset, the other envs unaffected

START_TEST(test_env_faults) {
    s_transport = _i;
    static const char *const faults[][2] = {
        {"0.1", "raise"},      {"0.2", "nan"},        {"0.3", "shape"},      {"1.0", "dtype"},
        {"1.2", "reward_nan"}, {"1.3", "bad_return"}, {"1.4", "reset_raise"}};
    const int n_faults = 7, W = 2, N = 6, G = 2, E = W * N, GE = E / G;
    char kw[1024] = "{\"faults\": {";
    for (int k = 0; k < n_faults; k++) {
        snprintf(kw + strlen(kw), sizeof kw - strlen(kw), "%s\"%s\": \"%s\"", k ? ", " : "",
                 faults[k][0], faults[k][1]);
    }
    strcat(kw, "}}");
    pyenv_opts_t o;
    s_opts(&o, "counter", kw, W, N, G);
    pyenv_t *p = pyenv_new(&o);
    ck_assert_ptr_nonnull(p);
    s_res res[2];
    s_ctr ctr[12];
    const char *mode[12];
    for (int e = 0; e < E; e++) {
        ctr[e] = (s_ctr){.seed = SEED + e};
        int w, i;
        s_where(W, N, G, e, &w, &i);
        mode[e] = s_mode_of(faults, n_faults, w, i);
    }
    for (int g = 0; g < G; g++) {
        s_res_init(&res[g], GE, 16);
    }
    s_first_counter(p, res, ctr);
    uint64_t n_faulted = 0, n_ok = 0;
    for (int t = 0; t < 24; t++) {
        for (int g = 0; g < G; g++) {
            for (int j = 0; j < GE; j++) {
                res[g].actions[j] = (t + g * GE + j) % COUNTER_ACTIONS;
            }
            ck_assert_int_eq(pyenv_send_actions(p, g, res[g].actions), GE);
        }
        for (int g = 0; g < G; g++) {
            n_ok += (uint64_t)pyenv_recv_results(p, g, STEP_MS, &res[g].r);
            for (int j = 0; j < GE; j++) {
                int e = g * GE + j;
                n_faulted += (uint64_t)s_check_counter(p, g, j, &res[g], &ctr[e], res[g].actions[j],
                                                       mode[e], e);
            }
        }
    }
    pyenv_stats_t st;
    pyenv_get_stats(p, &st);
    ck_assert_uint_ge(n_faulted, 7 * 3); // every faulty env faulted in several episodes
    ck_assert_uint_eq(st.env_faults, n_faulted);
    ck_assert_uint_eq(st.steps, n_ok);
    ck_assert_uint_eq(st.steps + n_faulted, 24 * (uint64_t)E);
    ck_assert_uint_eq(st.bad_frames + st.workers_lost + st.worker_deaths, 0);
    pyenv_destroy(&p);
    for (int g = 0; g < G; g++) {
        s_res_fini(&res[g]);
    }
}
END_TEST

// uint8 image observations (3, 2, 2), and a fault in one env.
START_TEST(test_uint8_frames) {
    s_transport = _i;
    pyenv_opts_t o;
    s_opts(&o, "image", "{\"faults\": {\"0.1\": \"shape\"}}", 1, 2, 1);
    o.obs_dim = 12;
    o.obs_h = 3, o.obs_w = 2, o.obs_c = 2; // the env's shape is checked: 3x2x2 channels last
    o.obs_dtype = CONFIG_OBS_UINT8;
    pyenv_t *p = pyenv_new(&o);
    ck_assert_ptr_nonnull(p);
    s_res res;
    s_res_init(&res, 2, 12);
    ck_assert_int_eq(pyenv_recv_results(p, 0, STEP_MS, &res.r), 0);
    int ep[2] = {0, 0}, tt[2] = {0, 0}, faults = 0;
    for (int t = 0; t < 20; t++) {
        res.actions[0] = res.actions[1] = t % COUNTER_ACTIONS;
        ck_assert_int_eq(pyenv_send_actions(p, 0, res.actions), 2);
        pyenv_recv_results(p, 0, STEP_MS, &res.r);
        for (int j = 0; j < 2; j++) {
            int seed = SEED + j, L = 3 + seed % 5;
            tt[j]++;
            if (j == 1 && tt[j] == 2) {
                ck_assert_int_eq(res.status[j], PYENV_ENV_FAULT);
                ck_assert_ptr_nonnull(strstr(pyenv_env_error(p, 0, j), "float32(5,)"));
                faults++;
            } else {
                ck_assert_int_eq(res.status[j], PYENV_OK);
                for (int px = 0; px < 12; px++) {
                    ck_assert_int_eq(res.next_obs[12 * j + px],
                                     (seed + 16 * ep[j] + tt[j] + px) % 256);
                }
                if (tt[j] < L) {
                    continue;
                }
            }
            ep[j]++;
            tt[j] = 0;
            for (int px = 0; px < 12; px++) {
                ck_assert_int_eq(res.obs[12 * j + px], (seed + 16 * ep[j] + px) % 256);
            }
        }
    }
    ck_assert_int_ge(faults, 3);
    pyenv_destroy(&p);
    s_res_fini(&res);
}
END_TEST

// ---------------------------------------------------------------------------------------
// Workers that hang or die

// Steps a 2-worker pool (groups of n = N / G envs) until worker 0's envs have stepped again
// after `trigger` (which breaks worker 0 at step 3 when not NULL) and the loss was seen;
// worker 1's envs are checked against Counter's model at every step.
static void s_survive(pyenv_t *p, int N, int G, int64_t recv_ms, void (*trigger)(pyenv_t *)) {
    const int W = 2, E = W * N, GE = E / G;
    s_res res[4];
    s_ctr ctr[16];
    for (int e = 0; e < E; e++) {
        ctr[e] = (s_ctr){.seed = SEED + e};
    }
    for (int g = 0; g < G; g++) {
        s_res_init(&res[g], GE, 16);
    }
    s_first_counter(p, res, ctr);
    pid_t pid0 = pyenv_worker_pid(p, 0);
    int lost_seen = 0, back = 0;
    int64_t deadline = clock_now_ms() + WAIT_MS;
    for (int t = 0; !back; t++) {
        ck_assert_msg(clock_now_ms() < deadline, "worker 0 did not come back");
        if (t == 3 && trigger) {
            trigger(p);
        }
        for (int g = 0; g < G; g++) {
            for (int j = 0; j < GE; j++) {
                res[g].actions[j] = (t + j) % COUNTER_ACTIONS;
            }
            pyenv_send_actions(p, g, res[g].actions);
        }
        for (int g = 0; g < G; g++) {
            pyenv_recv_results(p, g, recv_ms, &res[g].r);
            for (int j = 0; j < GE; j++) {
                int e = g * GE + j, w, i;
                s_where(W, N, G, e, &w, &i);
                if (w == 1) { // the healthy worker never misses a step
                    s_check_counter(p, g, j, &res[g], &ctr[e], res[g].actions[j], NULL, e);
                } else if (res[g].status[j] != PYENV_OK) {
                    ck_assert_int_eq(res[g].status[j], PYENV_NO_STEP);
                    lost_seen = 1;
                } else if (lost_seen && pyenv_worker_pid(p, 0) != pid0) {
                    back = 1; // stepping again, in a new process
                }
            }
        }
    }
    pyenv_stats_t st;
    pyenv_get_stats(p, &st);
    ck_assert_uint_ge(st.workers_lost, 1);
    ck_assert_uint_ge(st.worker_deaths, 1);
    ck_assert_uint_ge(st.worker_spawns, 3);
    ck_assert_uint_eq(st.bad_frames, 0);
    for (int g = 0; g < G; g++) {
        s_res_fini(&res[g]);
    }
}

START_TEST(test_worker_hangs) {
    s_transport = _i;
    const char *dir = check_tmpdir();
    char kw[800];
    // Env 1 of worker 0 sleeps for ever at step 2, once (the restarted worker is healthy).
    snprintf(kw, sizeof kw, "{\"faults\": {\"0.1\": \"hang\"}, \"once_file\": \"%s/hung\"}", dir);
    pyenv_opts_t o;
    s_opts(&o, "counter", kw, 2, 2, 1);
    pyenv_t *p = pyenv_new(&o);
    ck_assert_ptr_nonnull(p);
    s_survive(p, 2, 1, 5000, NULL); // a reply 5 s late is a hung worker
    pyenv_destroy(&p);
    check_rmtree(dir);
}
END_TEST

static void s_sigkill_worker0(pyenv_t *p) {
    ck_assert_int_gt(pyenv_worker_pid(p, 0), 0);
    ck_assert_int_eq(kill(pyenv_worker_pid(p, 0), SIGKILL), 0);
}

START_TEST(test_worker_killed) {
    s_transport = _i;
    pyenv_opts_t o;
    s_opts(&o, "counter", NULL, 2, 2, 2);
    pyenv_t *p = pyenv_new(&o);
    ck_assert_ptr_nonnull(p);
    s_survive(p, 2, 2, STEP_MS, s_sigkill_worker0); // death is seen by waitpid, not a timeout
    pyenv_destroy(&p);
}
END_TEST

// ---------------------------------------------------------------------------------------
// A fake worker (spawn = 0) that sends garbage around valid messages

typedef struct {
    char ep[600];
    int rc; // 0, or the line of the first failed expectation
} s_fake_t;

#define FAKE_EXPECT(cond)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fake worker: expectation failed: %s\n", #cond);                       \
            f->rc = __LINE__;                                                                      \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

// The documented 72-byte header (pyenv.h), for worker 0 with float32 (4,) and 3 actions.
static void s_fake_hdr(uint8_t *h, uint16_t type, uint32_t n, uint64_t seq, uint32_t n_reset,
                       uint32_t n_error) {
    uint16_t version = 1;
    uint32_t worker = 0, first = 0, n_actions = 3, shape0 = 4;
    uint64_t nonce = 0x5eedf00dull;
    memset(h, 0, 72);
    memcpy(h, "APXE", 4);
    memcpy(h + 4, &version, 2);
    memcpy(h + 6, &type, 2);
    memcpy(h + 8, &worker, 4);
    memcpy(h + 12, &n, 4);
    memcpy(h + 16, &seq, 8);
    memcpy(h + 24, &nonce, 8);
    memcpy(h + 32, &first, 4);
    memcpy(h + 36, &n_actions, 4);
    h[40] = 1; // float32
    h[41] = 1; // ndim
    memcpy(h + 44, &shape0, 4);
    memcpy(h + 60, &n_reset, 4);
    memcpy(h + 64, &n_error, 4);
}

// Sends [hdr][obs][rewards][flags][reset_obs][errors] for 2 envs.
static void s_fake_result(void *s, uint16_t type, uint64_t seq, const float *obs, size_t obs_len,
                          const double *rw, const uint8_t *fl, const float *reset, uint32_t n_reset,
                          const void *err, size_t err_len, uint32_t n_err) {
    uint8_t h[72];
    s_fake_hdr(h, type, 2, seq, n_reset, n_err);
    zmq_send(s, h, 72, ZMQ_SNDMORE);
    zmq_send(s, obs, obs_len, ZMQ_SNDMORE);
    zmq_send(s, rw, 16, ZMQ_SNDMORE);
    zmq_send(s, fl, 2, ZMQ_SNDMORE);
    zmq_send(s, reset, n_reset * 16, ZMQ_SNDMORE);
    zmq_send(s, err, err_len, 0);
}

// Receives a message of the actor: returns its type and seq, or -1.
static int s_fake_recv(void *s, uint64_t *seq, uint8_t *payload, size_t cap, size_t *len) {
    uint8_t h[128];
    int n = zmq_recv(s, h, sizeof h, 0);
    int more = 0;
    size_t sz = sizeof more;
    zmq_getsockopt(s, ZMQ_RCVMORE, &more, &sz);
    if (n != 72 || !more) {
        return -1;
    }
    int m = zmq_recv(s, payload, cap, 0);
    if (m < 0) {
        return -1;
    }
    *len = (size_t)m;
    memcpy(seq, h + 16, 8);
    uint16_t type;
    memcpy(&type, h + 6, 2);
    return type;
}

static void *s_fake_main(void *arg) {
    s_fake_t *f = arg;
    void *ctx = zmq_ctx_new(), *s = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0, timeout = STEP_MS;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    zmq_connect(s, f->ep); // queued until the bridge binds
    uint8_t h[72], buf[256];
    // Garbage before the HELLO (6 messages): all bad.
    zmq_send(s, "hello world", 11, 0); // no header
    s_fake_hdr(h, 1, 2, 0, 0, 0);
    memcpy(h, "APXF", 4);
    zmq_send(s, h, 72, ZMQ_SNDMORE); // bad magic
    zmq_send(s, "x", 1, 0);
    s_fake_hdr(h, 1, 2, 0, 0, 0);
    h[4] = 2;
    zmq_send(s, h, 72, 0); // version 2
    s_fake_hdr(h, 1, 2, 0, 0, 0);
    h[8] = 7;
    zmq_send(s, h, 72, 0); // worker 7 of 1
    s_fake_hdr(h, 9, 2, 0, 0, 0);
    zmq_send(s, h, 72, 0); // type 9
    s_fake_hdr(h, 1, 2, 0, 0, 0);
    for (int i = 0; i < 9; i++) {
        zmq_send(s, h, 72, i < 8 ? ZMQ_SNDMORE : 0); // 9 frames
    }
    s_fake_hdr(h, 1, 2, 0, 0, 0);
    zmq_send(s, h, 72, ZMQ_SNDMORE);
    zmq_send(s, "fake worker", 11, 0);
    uint64_t seq, seeds[2];
    size_t len;
    FAKE_EXPECT(s_fake_recv(s, &seq, buf, sizeof buf, &len) == 2 && len == 16);
    memcpy(seeds, buf, 16);
    FAKE_EXPECT(seeds[0] == SEED && seeds[1] == SEED + 1);
    float start[8] = {1, 2, 3, 4, 5, 6, 7, 8}, none[8] = {0};
    double zr[2] = {0, 0};
    uint8_t fl0[2] = {0, 0};
    s_fake_result(s, 5, seq, start, 32, zr, fl0, none, 0, "", 0, 0);
    FAKE_EXPECT(s_fake_recv(s, &seq, buf, sizeof buf, &len) == 3 && len == 8);
    // Bad replies to the STEP (5), a late one (1), then the valid one.
    float nan_obs[8] = {NAN, 0, 0, 0, 0, 0, 0, 0}, obs[8] = {9, 9, 9, 9, 0, 0, 0, 0};
    float reset[8] = {0, 0, 0, 1, 7, 7, 7, 7};
    double rw[2] = {2.5, 0}, inf_rw[2] = {INFINITY, 0};
    uint8_t fl_bad[2] = {4, 0}, fl_err[2] = {0, 8}, fl[2] = {1 | 4, 8 | 4};
    uint8_t rec_bad[13] = {0, 0, 0, 0, 5, 0, 0, 0, 'k', 'a', 'p', 'u', 't'};
    uint8_t rec[13] = {1, 0, 0, 0, 5, 0, 0, 0, 'k', 'a', 'p', 'u', 't'};
    s_fake_result(s, 4, seq, nan_obs, 32, zr, fl0, none, 0, "", 0, 0);      // NaN
    s_fake_result(s, 4, seq, obs, 28, zr, fl0, none, 0, "", 0, 0);          // short obs
    s_fake_result(s, 4, seq, obs, 32, zr, fl_bad, reset, 1, "", 0, 0);      // RESET alone
    s_fake_result(s, 4, seq + 100, obs, 32, rw, fl, reset, 2, rec, 13, 1);  // stale
    s_fake_result(s, 4, seq, obs, 32, zr, fl_err, none, 0, rec_bad, 13, 1); // record env 0
    s_fake_result(s, 4, seq, obs, 32, inf_rw, fl0, none, 0, "", 0, 0);      // reward inf
    s_fake_result(s, 4, seq, obs, 32, rw, fl, reset, 2, rec, 13, 1);        // valid
    // The next STEP is never answered: the bridge must give up on it and send a RESET.
    FAKE_EXPECT(s_fake_recv(s, &seq, buf, sizeof buf, &len) == 3);
    FAKE_EXPECT(s_fake_recv(s, &seq, buf, sizeof buf, &len) == 2 && len == 16);
    memcpy(seeds, buf, 16);
    FAKE_EXPECT(seeds[0] != SEED && seeds[1] != SEED + 1); // a new life, new seeds
    float again[8] = {3, 3, 3, 3, 4, 4, 4, 4};
    s_fake_result(s, 5, seq, again, 32, zr, fl0, none, 0, "", 0, 0);
out:
    zmq_close(s);
    zmq_ctx_term(ctx);
    return NULL;
}

START_TEST(test_fake_worker_garbage) {
    const char *dir = check_tmpdir();
    s_fake_t fake = {.rc = 0};
    snprintf(fake.ep, sizeof fake.ep, "ipc://%s/bridge", dir);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, s_fake_main, &fake), 0);
    pyenv_opts_t o;
    s_opts(&o, "counter", NULL, 1, 2, 1);
    o.spawn = 0;
    o.transport = PYENV_ZMQ;
    snprintf(o.bind, sizeof o.bind, "%.200s", fake.ep);
    pyenv_t *p = pyenv_new(&o);
    ck_assert_ptr_nonnull(p);
    s_res r;
    s_res_init(&r, 2, 16);
    ck_assert_int_eq(pyenv_recv_results(p, 0, STEP_MS, &r.r), 0);
    ck_assert(s_obs_is(s_f(r.obs, 0), 1, 2, 3, 4) && s_obs_is(s_f(r.obs, 1), 5, 6, 7, 8));
    r.actions[0] = 1;
    r.actions[1] = 2;
    ck_assert_int_eq(pyenv_send_actions(p, 0, r.actions), 2);
    ck_assert_int_eq(pyenv_recv_results(p, 0, STEP_MS, &r.r), 1);
    ck_assert_int_eq(r.status[0], PYENV_OK);
    ck_assert(s_obs_is(s_f(r.next_obs, 0), 9, 9, 9, 9) && s_obs_is(s_f(r.obs, 0), 0, 0, 0, 1));
    ck_assert(r.rewards[0] == 2.5f && r.terminated[0] == 1 && r.truncated[0] == 0);
    ck_assert_int_eq(r.status[1], PYENV_ENV_FAULT);
    ck_assert_str_eq(pyenv_env_error(p, 0, 1), "kaput");
    ck_assert(s_obs_is(s_f(r.next_obs, 1), 0, 0, 0, 0) && s_obs_is(s_f(r.obs, 1), 7, 7, 7, 7));
    pyenv_stats_t st;
    pyenv_get_stats(p, &st);
    ck_assert_uint_eq(st.bad_frames, 6 + 5);
    ck_assert_uint_eq(st.stale_frames, 1);
    ck_assert_uint_eq(st.hellos, 1);
    // The unanswered STEP: the (remote) worker is lost and sent a RESET.
    ck_assert_int_eq(pyenv_send_actions(p, 0, r.actions), 2);
    ck_assert_int_eq(pyenv_recv_results(p, 0, 1000, &r.r), 0);
    ck_assert(r.status[0] == PYENV_NO_STEP && r.status[1] == PYENV_NO_STEP);
    ck_assert_int_eq(pyenv_send_actions(p, 0, r.actions), 0); // nothing to step yet
    ck_assert_int_eq(pyenv_recv_results(p, 0, STEP_MS, &r.r), 0);
    ck_assert(r.status[0] == PYENV_NO_STEP && s_obs_is(s_f(r.obs, 0), 3, 3, 3, 3));
    ck_assert(s_obs_is(s_f(r.obs, 1), 4, 4, 4, 4));
    pyenv_get_stats(p, &st);
    ck_assert_uint_eq(st.workers_lost, 1);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_int_eq(fake.rc, 0);
    pyenv_destroy(&p);
    s_res_fini(&r);
    check_rmtree(dir);
}
END_TEST

// ---------------------------------------------------------------------------------------
// Values that pass the wire's checks but not what the bridge does with them (1 worker x 1 env
// in 1 group, so a group's slice is one env)

// Sends a one-env reply: obs (4 floats), reward, flags, a reset row when RESET is set.
static void s_fake_one(void *s, uint16_t type, uint64_t seq, uint32_t first, const float *obs,
                       double rw, uint8_t fl, const float *reset) {
    uint8_t h[72];
    uint32_t n_reset = (fl & 4) != 0;
    s_fake_hdr(h, type, 1, seq, n_reset, 0);
    memcpy(h + 32, &first, 4);
    zmq_send(s, h, 72, ZMQ_SNDMORE);
    zmq_send(s, obs, 16, ZMQ_SNDMORE);
    zmq_send(s, &rw, 8, ZMQ_SNDMORE);
    zmq_send(s, &fl, 1, ZMQ_SNDMORE);
    zmq_send(s, reset, n_reset * 16, ZMQ_SNDMORE);
    zmq_send(s, "", 0, 0);
}

static void *s_fake_values_main(void *arg) {
    s_fake_t *f = arg;
    void *ctx = zmq_ctx_new(), *s = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0, timeout = STEP_MS;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    zmq_connect(s, f->ep);
    uint8_t h[72], buf[256];
    s_fake_hdr(h, 1, 1, 0, 0, 0);
    zmq_send(s, h, 72, ZMQ_SNDMORE);
    zmq_send(s, "fake worker", 11, 0);
    uint64_t seq;
    size_t len;
    FAKE_EXPECT(s_fake_recv(s, &seq, buf, sizeof buf, &len) == 2 && len == 8);
    float start[4] = {1, 2, 3, 4}, obs[4] = {5, 6, 7, 8}, reset[4] = {9, 9, 9, 9};
    s_fake_one(s, 5, seq, 0, start, 0.0, 0, NULL);
    FAKE_EXPECT(s_fake_recv(s, &seq, buf, sizeof buf, &len) == 3 && len == 4);
    // A slice at first 2^31 (a negative group index as an int) and at 2^32-1 (-1): bad.
    s_fake_one(s, 4, seq, 0x80000000u, obs, 1.0, 0, NULL);
    s_fake_one(s, 4, seq, 0xffffffffu, obs, 1.0, 0, NULL);
    // A finite float32 reward whose n-step sums would overflow: that env's fault.
    s_fake_one(s, 4, seq, 0, obs, 1e31, 0, NULL);
    FAKE_EXPECT(s_fake_recv(s, &seq, buf, sizeof buf, &len) == 3 && len == 4);
    s_fake_one(s, 4, seq, 0, obs, -1e30, 1 | 4, reset); // the bound itself is a reward
out:
    zmq_close(s);
    zmq_ctx_term(ctx);
    return NULL;
}

START_TEST(test_fake_worker_values) {
    const char *dir = check_tmpdir();
    s_fake_t fake = {.rc = 0};
    snprintf(fake.ep, sizeof fake.ep, "ipc://%s/bridge", dir);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, s_fake_values_main, &fake), 0);
    pyenv_opts_t o;
    s_opts(&o, "counter", NULL, 1, 1, 1);
    o.spawn = 0;
    o.transport = PYENV_ZMQ;
    snprintf(o.bind, sizeof o.bind, "%.200s", fake.ep);
    pyenv_t *p = pyenv_new(&o);
    ck_assert_ptr_nonnull(p);
    s_res r;
    s_res_init(&r, 1, 16);
    ck_assert_int_eq(pyenv_recv_results(p, 0, STEP_MS, &r.r), 0);
    ck_assert(s_obs_is(s_f(r.obs, 0), 1, 2, 3, 4));
    r.actions[0] = 1;
    ck_assert_int_eq(pyenv_send_actions(p, 0, r.actions), 1);
    ck_assert_int_eq(pyenv_recv_results(p, 0, STEP_MS, &r.r), 0);
    ck_assert_int_eq(r.status[0], PYENV_ENV_FAULT);
    ck_assert_msg(strstr(pyenv_env_error(p, 0, 0), "reward 1e+31") != NULL, "'%s'",
                  pyenv_env_error(p, 0, 0));
    ck_assert(s_obs_is(s_f(r.next_obs, 0), 0, 0, 0, 0) && r.rewards[0] == 0.0f);
    ck_assert(s_obs_is(s_f(r.obs, 0), 5, 6, 7, 8)); // where the worker's env is now
    pyenv_stats_t st;
    pyenv_get_stats(p, &st);
    ck_assert_uint_eq(st.bad_frames, 2);
    ck_assert_uint_eq(st.stale_frames, 0);
    ck_assert_uint_eq(st.env_faults, 1);
    ck_assert_int_eq(pyenv_send_actions(p, 0, r.actions), 1);
    ck_assert_int_eq(pyenv_recv_results(p, 0, STEP_MS, &r.r), 1);
    ck_assert(r.status[0] == PYENV_OK && r.rewards[0] == -1e30f && r.terminated[0]);
    ck_assert(s_obs_is(s_f(r.next_obs, 0), 5, 6, 7, 8) && s_obs_is(s_f(r.obs, 0), 9, 9, 9, 9));
    pyenv_get_stats(p, &st);
    ck_assert_uint_eq(st.workers_lost, 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_int_eq(fake.rc, 0);
    pyenv_destroy(&p);
    s_res_fini(&r);
    check_rmtree(dir);
}
END_TEST

// A spawned worker on the local transport that says HELLO again while up
// (tests/pyenv_hostile.py): ignored, nothing dropped, nobody lost.
START_TEST(test_local_worker_repeats_hello) {
    ck_assert_int_eq(setenv("APEX_PYENV_HOSTILE", "rehello", 1), 0);
    pyenv_opts_t o;
    s_opts(&o, "counter", NULL, 1, 2, 2);
    o.transport = PYENV_LOCAL;
    snprintf(o.script, sizeof o.script, "tests/pyenv_hostile.py");
    pyenv_t *p = pyenv_new(&o);
    ck_assert_ptr_nonnull(p);
    s_res res[2];
    s_ctr ctr[2] = {{.seed = SEED}, {.seed = SEED + 1}};
    s_res_init(&res[0], 1, 16);
    s_res_init(&res[1], 1, 16);
    s_first_counter(p, res, ctr);
    for (int t = 0; t < 3; t++) {
        for (int g = 1; g >= 0; g--) { // group 1 first: its RESULT follows the HELLO
            res[g].actions[0] = (t + g) % COUNTER_ACTIONS;
            ck_assert_int_eq(pyenv_send_actions(p, g, res[g].actions), 1);
            ck_assert_int_eq(pyenv_recv_results(p, g, STEP_MS, &res[g].r), 1);
            s_check_counter(p, g, 0, &res[g], &ctr[g], res[g].actions[0], NULL, g);
        }
    }
    pyenv_stats_t st;
    pyenv_get_stats(p, &st);
    ck_assert_uint_eq(st.hellos, 1);
    ck_assert_uint_eq(st.bad_frames + st.stale_frames + st.workers_lost + st.worker_deaths, 0);
    pyenv_destroy(&p);
    s_res_fini(&res[0]);
    s_res_fini(&res[1]);
}
END_TEST

// ---------------------------------------------------------------------------------------
// A fake actor (a ROUTER here) against a real worker: invalid messages are ignored

// Starts a Counter worker (2 envs, worker id 0) by hand, as on another host; server_key
// and secret NULL for plaintext.
static pid_t s_start_worker(const char *ep, const char *server_key, const char *secret) {
    char *argv[] = {PYTHON,
                    "python/apex_env.py",
                    "--connect",
                    (char *)ep,
                    "--make",
                    FAULTS ":counter",
                    "--num-envs",
                    "2",
                    "--worker-id",
                    "0",
                    "--curve-server-key",
                    (char *)server_key,
                    "--curve-secret",
                    (char *)secret,
                    NULL};
    if (!server_key) {
        argv[10] = NULL; // plaintext
    }
    pid_t pid = child_start(argv); // dies with this test process if an assertion fails
    ck_assert_int_gt(pid, 0);
    return pid;
}

// Receives one message of at most 8 frames from the ROUTER: returns the frame count.
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

START_TEST(test_worker_ignores_garbage) {
    void *ctx = zmq_ctx_new(), *r = zmq_socket(ctx, ZMQ_ROUTER);
    int zero = 0, timeout = STEP_MS;
    zmq_setsockopt(r, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(r, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    ck_assert_int_eq(zmq_bind(r, "tcp://127.0.0.1:*"), 0);
    char ep[256];
    size_t len = sizeof ep;
    zmq_getsockopt(r, ZMQ_LAST_ENDPOINT, ep, &len);
    pid_t pid = s_start_worker(ep, NULL, NULL);
    zmq_msg_t f[8];
    int nf = s_router_recv(r, f);
    ck_assert_int_eq(nf, 3);
    ck_assert_uint_eq(zmq_msg_size(&f[1]), 72);
    uint8_t rid[256], h[72];
    size_t rid_len = zmq_msg_size(&f[0]);
    memcpy(rid, zmq_msg_data(&f[0]), rid_len);
    memcpy(h, zmq_msg_data(&f[1]), 72); // the HELLO: its nonce and spaces are echoed below
    for (int i = 0; i < nf; i++) {
        zmq_msg_close(&f[i]);
    }
    uint16_t type;
    uint64_t seq;
    // Garbage: a short header, a bad magic, a wrong nonce, a STEP before any RESET with
    // actions out of range, a RESET with a wrong payload size.
    uint8_t bad[72];
    int32_t acts[2] = {0, 7};
    uint64_t seeds[2] = {5, 6};
    zmq_send(r, rid, rid_len, ZMQ_SNDMORE);
    zmq_send(r, "APXE", 4, 0);
    memcpy(bad, h, 72);
    bad[0] = 'X';
    zmq_send(r, rid, rid_len, ZMQ_SNDMORE);
    zmq_send(r, bad, 72, ZMQ_SNDMORE);
    zmq_send(r, seeds, 16, 0);
    memcpy(bad, h, 72);
    bad[24] ^= 1; // nonce
    type = 2;
    memcpy(bad + 6, &type, 2);
    zmq_send(r, rid, rid_len, ZMQ_SNDMORE);
    zmq_send(r, bad, 72, ZMQ_SNDMORE);
    zmq_send(r, seeds, 16, 0);
    memcpy(bad, h, 72);
    type = 3;
    memcpy(bad + 6, &type, 2);
    zmq_send(r, rid, rid_len, ZMQ_SNDMORE);
    zmq_send(r, bad, 72, ZMQ_SNDMORE);
    zmq_send(r, acts, 8, 0);
    type = 2;
    memcpy(bad + 6, &type, 2);
    zmq_send(r, rid, rid_len, ZMQ_SNDMORE);
    zmq_send(r, bad, 72, ZMQ_SNDMORE);
    zmq_send(r, seeds, 12, 0);
    // A valid RESET: the first answer must be its RESET_DONE.
    seq = 42;
    memcpy(bad + 16, &seq, 8);
    zmq_send(r, rid, rid_len, ZMQ_SNDMORE);
    zmq_send(r, bad, 72, ZMQ_SNDMORE);
    zmq_send(r, seeds, 16, 0);
    nf = s_router_recv(r, f);
    ck_assert_int_eq(nf, 7);
    memcpy(&type, (uint8_t *)zmq_msg_data(&f[1]) + 6, 2);
    memcpy(&seq, (uint8_t *)zmq_msg_data(&f[1]) + 16, 8);
    ck_assert_int_eq(type, 5);
    ck_assert_uint_eq(seq, 42);
    ck_assert(s_obs_is(zmq_msg_data(&f[2]), 5, 0, 0, -1)); // Counter, seed 5
    for (int i = 0; i < nf; i++) {
        zmq_msg_close(&f[i]);
    }
    // REFUSE: the worker says why and exits with status 3.
    type = 6;
    memcpy(bad + 6, &type, 2);
    zmq_send(r, rid, rid_len, ZMQ_SNDMORE);
    zmq_send(r, bad, 72, ZMQ_SNDMORE);
    zmq_send(r, "test over", 9, 0);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 3);
    zmq_close(r);
    zmq_ctx_term(ctx);
}
END_TEST

// ---------------------------------------------------------------------------------------
// CURVE

// Steps a 1-worker, 2-env pool `steps` times (or, with until_denied, until the ZAP handler
// has refused a client), checking Counter's model.
static void s_curve_steps(pyenv_t *p, int steps, int until_denied) {
    s_res r;
    s_ctr ctr[2] = {{.seed = SEED}, {.seed = SEED + 1}};
    s_res_init(&r, 2, 16);
    s_first_counter(p, &r, ctr);
    int64_t deadline = clock_now_ms() + WAIT_MS;
    pyenv_stats_t st = {0};
    for (int t = 0; t < steps || (until_denied && st.curve_denied == 0); t++) {
        ck_assert_msg(clock_now_ms() < deadline, "no CURVE refusal seen");
        r.actions[0] = r.actions[1] = t % COUNTER_ACTIONS;
        ck_assert_int_eq(pyenv_send_actions(p, 0, r.actions), 2);
        ck_assert_int_eq(pyenv_recv_results(p, 0, STEP_MS, &r.r), 2);
        for (int j = 0; j < 2; j++) {
            s_check_counter(p, 0, j, &r, &ctr[j], r.actions[j], NULL, j);
        }
        pyenv_get_stats(p, &st);
    }
    s_res_fini(&r);
}

START_TEST(test_curve) {
    const char *tmp = check_tmpdir();
    char dir[600];
    snprintf(dir, sizeof dir, "%s", tmp);
    char pub[SECURITY_KEY_Z85_LEN + 1], err[256], path[700], key[SECURITY_KEY_Z85_LEN + 1];
    const char *names[] = {"actor", "envworker", "intruder"};
    for (int i = 0; i < 3; i++) {
        ck_assert_msg(security_keygen(dir, names[i], pub, err, sizeof err) == 0, "%s", err);
    }
    // An actor key that begins with '-' (1 in 85 do): the spawned worker must still get it
    // (argparse takes "--curve-server-key -..." for two options; a CI run failed so).
    for (int tries = 0; pub[0] != '-'; tries++) {
        ck_assert_int_lt(tries, 20000);
        ck_assert_msg(security_keygen(dir, "actor", pub, err, sizeof err) == 0, "%s", err);
    }
    snprintf(path, sizeof path, "%s/envworker.pub", dir);
    ck_assert_int_eq(security_read_key_file(path, key, NULL, err, sizeof err), 0);
    snprintf(path, sizeof path, "%s/authorized_keys", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "%s envworker\n", key);
    fclose(f);
    apex_config_t cfg;
    char kd[700], ak[700], cerr[CONFIG_ERR_LEN];
    snprintf(kd, sizeof kd, "security.key_dir=%s", dir);
    snprintf(ak, sizeof ak, "security.authorized_keys=%.600s", path);
    const char *sets[] = {"security.mode=curve", kd, ak};
    ck_assert_msg(config_load(&cfg, NULL, sets, 3, cerr, sizeof cerr) == 0, "%s", cerr);

    // A spawned worker over ZeroMQ gets the actor's public key and <key_dir>/envworker.key.
    pyenv_opts_t o;
    s_opts(&o, "counter", NULL, 1, 2, 1);
    o.transport = PYENV_ZMQ;
    o.cfg = &cfg;
    pyenv_t *p = pyenv_new(&o);
    ck_assert_ptr_nonnull(p);
    s_curve_steps(p, 6, 0);
    pyenv_destroy(&p);

    // A worker started by hand (as on another host: the actor's .pub file, its own .key),
    // then an intruder whose key is not on the allow-list: refused by the ZAP handler, and
    // the worker keeps stepping.
    char ep[700], actor_pub[700], wkey[700], ikey[700];
    snprintf(ep, sizeof ep, "ipc://%s/bridge", dir);
    snprintf(actor_pub, sizeof actor_pub, "%s/actor.pub", dir);
    snprintf(wkey, sizeof wkey, "%s/envworker.key", dir);
    snprintf(ikey, sizeof ikey, "%s/intruder.key", dir);
    pid_t worker = s_start_worker(ep, actor_pub, wkey);
    o.spawn = 0;
    o.transport = PYENV_ZMQ;
    snprintf(o.bind, sizeof o.bind, "%.200s", ep);
    p = pyenv_new(&o);
    ck_assert_ptr_nonnull(p);
    pid_t intruder = s_start_worker(ep, actor_pub, ikey);
    s_curve_steps(p, 3, 1);
    pyenv_stats_t st;
    pyenv_get_stats(p, &st);
    ck_assert_uint_ge(st.curve_denied, 1);
    ck_assert_uint_eq(st.hellos, 1); // the intruder never got a message through
    ck_assert_uint_eq(st.workers_lost + st.bad_frames, 0);
    child_kill_wait(worker);
    child_kill_wait(intruder);
    pyenv_destroy(&p);
    check_rmtree(dir);
}
END_TEST

// ---------------------------------------------------------------------------------------
// apex-eval on a Python env (the evaluator's own env workers, actor/evaluator.h)

// [env] eval_kwargs reaches the evaluator's workers only (envsrc_pyenv_opts with index -1),
// merged over kwargs as one JSON object whose later members replace the earlier (json.loads).
START_TEST(test_eval_kwargs) {
    static const char *const cases[][3] = {
        // kwargs, eval_kwargs, the evaluator's
        {"{\"game\": \"Pong\"}", "{\"training\": false}",
         "{\"game\": \"Pong\", \"training\": false}"},
        {"{\"a\": 1}", "{\"a\": 2}", "{\"a\": 1, \"a\": 2}"},
        {"", "{\"training\": false}", "{\"training\": false}"},
        {"{ }", "{\"training\": false}", "{\"training\": false}"},
        {"{\"a\": 1}", "{}", "{\"a\": 1}"},
        {"{\"a\": 1}", "", "{\"a\": 1}"},
    };
    for (int i = 0; i < 6; i++) {
        apex_config_t cfg;
        char err[512], kw[300], ekw[300];
        snprintf(kw, sizeof kw, "env.kwargs=%s", cases[i][0]);
        snprintf(ekw, sizeof ekw, "env.eval_kwargs=%s", cases[i][1]);
        const char *sets[] = {kw, ekw};
        ck_assert_msg(config_load(&cfg, "configs/python-cartpole.ini", sets, 2, err, sizeof err) ==
                          0,
                      "%s", err);
        pyenv_opts_t o;
        ck_assert_int_eq(envsrc_pyenv_opts(&cfg, 2, 0, -1, &o), 0);
        ck_assert_str_eq(o.kwargs, cases[i][2]);
        ck_assert_int_eq(envsrc_pyenv_opts(&cfg, 2, 0, 0, &o), 0);
        ck_assert_str_eq(o.kwargs, cases[i][0]); // an actor's: kwargs as they are
    }
}
END_TEST

// apex-eval --checkpoint with [env] id = python (configs/python-cartpole.ini with eval_id
// emptied) on a network of two hidden units whose greedy action is "push right iff
// theta_dot > 0", against the returns tests/pyenv_faults.py --eval-reference computes in
// plain Python for the same seeds ([run] seed + EVALUATOR_STREAM_BASE + env; the built-in
// CartPole-v1 draws its start states from apex's streams, not numpy's, so it cannot be the
// reference). _i = 0: CartPole; 1: FaultyCartPole raising every 150th step of an env (counted
// episodes dropped, the envs' next episodes counted, envs faulting 9 times given up: the
// mean of the others); 2: every 40th step (no episode can be counted: apex-eval says
// "evaluation skipped" and exits 2, it does not crash); 3: [env] frame_stack = 2 and the
// policy reading the stack's older frame (the previous observation; at an episode's start
// its first one), whose returns differ from case 0's.
START_TEST(test_eval_checkpoint) {
    const char *bin = getenv("APEX_BIN");
    if (!bin) {
        return; // the binaries are needed
    }
    static const int every[] = {0, 150, 40, 0};
    const int K = _i == 3 ? 2 : 1, in = 4 * K; // the network reads K frames of 4
    enum { EPISODES = 6 };
    const float wt = 0.0f, wd = 1.0f; // u = wt theta + wd theta_dot; right iff u > 0
    apex_config_t cfg;
    char stack[32];
    snprintf(stack, sizeof stack, "env.frame_stack=%d", K);
    const char *sets[] = {"network.hidden=2", "network.dueling=false", stack};
    char err[512];
    ck_assert_int_eq(config_load(&cfg, "configs/python-cartpole.ini", sets, 3, err, sizeof err), 0);
    nn_config_t nc;
    nn_config_from_run(&nc, &cfg);
    nn_params_t p;
    nn_params_init(&p, &nc);
    ck_assert_int_eq(p.n_layers, 2);
    memset(p.data, 0, p.num_params * sizeof(float));
    // fc1 (2 x 4K): h0 = relu(u), h1 = relu(-u) of the oldest frame (the only one for K =
    // 1); head (2 x 2): Q_0 = h1, Q_1 = h0.
    ck_assert_int_eq(p.layer[0].in_dim, in);
    p.layer[0].w[2] = wt, p.layer[0].w[3] = wd;
    p.layer[0].w[in + 2] = -wt, p.layer[0].w[in + 3] = -wd;
    p.layer[1].w[1] = 1.0f, p.layer[1].w[2] = 1.0f;
    const char *dir = check_tmpdir();
    char path[600], cmd[2400], line[1024];
    snprintf(path, sizeof path, "%s/linear.ckpt", dir);
    ckpt_header_t h;
    ckpt_header_init(&h, &nc);
    const float *one[1] = {p.data};
    ck_assert_int_eq(ckpt_write(path, &h, one, 1), APEX_OK);

    snprintf(cmd, sizeof cmd, PYTHON " " FAULTS " --eval-reference %d %lld 1000000000 %d %g %g %d",
             EPISODES, (long long)cfg.run.seed, every[_i], (double)wt, (double)wd, K - 1);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    int ref_n = -1;
    double ref_mean = NAN;
    ck_assert(fgets(line, sizeof line, f) && sscanf(line, "%d %lf", &ref_n, &ref_mean) >= 1);
    ck_assert_int_eq(pclose(f), 0);
    // The cases are what they say: varied returns, some envs given up, none counted.
    static const int want_n[] = {EPISODES, 4, 0, EPISODES};
    ck_assert_int_eq(ref_n, want_n[_i]);

    char fault[200] = "";
    if (every[_i]) {
        snprintf(fault, sizeof fault,
                 "--set env.make=" FAULTS ":faulty_cartpole --set 'env.kwargs={\"every\": %d}'",
                 every[_i]);
    }
    snprintf(cmd, sizeof cmd,
             "%s/apex-eval -c configs/python-cartpole.ini --set env.eval_id= --set "
             "network.hidden=2 --set network.dueling=false --set %s %s --checkpoint %s "
             "--episodes %d --epsilon 0 2>&1",
             bin, stack, fault, path, EPISODES);
    f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    double got = NAN;
    long got_n = -1;
    int skipped = 0, fault_lines = 0;
    while (fgets(line, sizeof line, f)) {
        const char *m = strstr(line, "  mean "), *e = strstr(line, "episodes ");
        if (m && e && strstr(line, "python checkpoint")) {
            got = strtod(m + 7, NULL);
            got_n = strtol(e + 9, NULL, 10);
        }
        skipped += strstr(line, "evaluation skipped") != NULL;
        fault_lines += strstr(line, "injected fault") != NULL;
    }
    int status = pclose(f);
    ck_assert(WIFEXITED(status));
    if (ref_n == 0) {
        ck_assert_int_eq(WEXITSTATUS(status), 2);
        ck_assert_int_eq(skipped, 1);
        ck_assert_int_gt(fault_lines, 0);
    } else {
        ck_assert_int_eq(WEXITSTATUS(status), 0);
        ck_assert_int_eq(got_n, ref_n);
        ck_assert_msg(fabs(got - ref_mean) < 0.006, "apex-eval printed mean %.2f, Python %.4f", got,
                      ref_mean);
        ck_assert_int_eq(fault_lines > 0, every[_i] > 0);
    }
    check_rmtree(dir);
    nn_params_fini(&p);
}
END_TEST

// Successive evaluations by one evaluator (evaluator_py_run three times, the workers living
// on between them, as apex-eval --follow does): each round counts, for each env, the first
// episode that starts in it (an episode in progress at the round's start finishes
// uncounted), against tests/pyenv_faults.py --eval-rounds, which derives that from each env's
// episodes under the same policy (test_eval_checkpoint's, case 0).
START_TEST(test_eval_rounds) {
    enum { N = 6, ROUNDS = 3 };
    apex_config_t cfg;
    const char *sets[] = {"network.hidden=2", "network.dueling=false", "env.eval_id="};
    char err[512], line[256];
    ck_assert_int_eq(config_load(&cfg, "configs/python-cartpole.ini", sets, 3, err, sizeof err), 0);
    nn_config_t nc;
    nn_config_from_run(&nc, &cfg);
    nn_params_t p;
    nn_params_init(&p, &nc);
    memset(p.data, 0, p.num_params * sizeof(float));
    p.layer[0].w[3] = 1.0f, p.layer[0].w[4 + 3] = -1.0f; // u = theta_dot, right iff u > 0
    p.layer[1].w[1] = 1.0f, p.layer[1].w[2] = 1.0f;
    eval_opts_t o;
    evaluator_opts_from_run(&o, &cfg);
    o.episodes = N;
    o.parallel = N;
    nn_state_t st;
    nn_state_init(&st, &nc, N, 0);
    evaluator_py_t *py = evaluator_py_new(&cfg, &o);
    ck_assert_ptr_nonnull(py);
    double got[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        eval_result_t res;
        ck_assert_int_eq(evaluator_py_run(py, &p, &st, &o, &res), 0);
        ck_assert_int_eq(res.episodes, N);
        got[r] = res.mean;
    }
    evaluator_py_destroy(&py);
    ck_assert_ptr_null(py);
    char cmd[512];
    snprintf(cmd, sizeof cmd, PYTHON " " FAULTS " --eval-rounds %d %lld 1000000000 0 1 %d", N,
             (long long)cfg.run.seed, ROUNDS);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert(fgets(line, sizeof line, f) != NULL);
    ck_assert_int_eq(pclose(f), 0);
    char *q = line;
    for (int r = 0; r < ROUNDS; r++) {
        double want = strtod(q, &q);
        ck_assert_msg(fabs(got[r] - want) < 1e-3, "round %d: mean %.4f, Python %.4f", r, got[r],
                      want);
    }
    ck_assert(got[1] != got[0]); // the rounds' episodes differ: the streams continued
    nn_state_fini(&st);
    nn_params_fini(&p);
}
END_TEST

Suite *pyenv_suite(void) {
    Suite *s = suite_create("pyenv");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_spaces_refused);
    tcase_add_test(tc, test_apex_cartpole_matches_gymnasium);
    tcase_add_test(tc, test_apex_cartpole_matches_peer);
    tcase_add_loop_test(tc, test_cartpole_matches_python, PYENV_LOCAL, PYENV_ZMQ + 1);
    tcase_add_loop_test(tc, test_env_faults, PYENV_LOCAL, PYENV_ZMQ + 1);
    tcase_add_loop_test(tc, test_uint8_frames, PYENV_LOCAL, PYENV_ZMQ + 1);
    tcase_add_loop_test(tc, test_worker_hangs, PYENV_LOCAL, PYENV_ZMQ + 1);
    tcase_add_loop_test(tc, test_worker_killed, PYENV_LOCAL, PYENV_ZMQ + 1);
    tcase_add_test(tc, test_fake_worker_garbage);
    tcase_add_test(tc, test_fake_worker_values);
    tcase_add_test(tc, test_local_worker_repeats_hello);
    tcase_add_test(tc, test_worker_ignores_garbage);
    tcase_add_test(tc, test_curve);
    tcase_add_test(tc, test_eval_kwargs);
    tcase_add_loop_test(tc, test_eval_checkpoint, 0, 4);
    tcase_add_test(tc, test_eval_rounds);
    suite_add_tcase(s, tc);
    return s;
}
