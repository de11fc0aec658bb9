// evaluator.c: see evaluator.h.
#define LOG_MODULE "eval"
#include "evaluator.h"

#include "apex.h"
#include "blas.h"
#include "ckpt.h"
#include "clock.h"
#include "envsrc.h"
#include "explore.h"
#include "framestack.h"
#include "fileio.h"
#include "log.h"
#include "minatar.h"
#include "net.h"
#include "security.h"
#include "signals.h"
#include "tbevents.h"
#include "weights_client.h"
#include "wire.h"
#include "xalloc.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#define POLL_MS 200 // how often a quiet evaluator looks at the shutdown flag

void evaluator_opts_from_run(eval_opts_t *o, const apex_config_t *cfg) {
    *o = (eval_opts_t){.episodes = (long)cfg->eval.episodes,
                       // Continuous runs evaluate mu(s) greedily (evaluator.h).
                       .epsilon = cfg->env.action_dim > 0 ? 0.0 : cfg->eval.epsilon,
                       .parallel = (int)APEX_MIN(cfg->eval.episodes, EVALUATOR_PARALLEL_MAX),
                       .max_episode_steps = cfg->eval.max_episode_steps,
                       .seed = (uint64_t)cfg->run.seed,
                       .frame_stack = (int)cfg->env.frame_stack};
}

// ---------------------------------------------------------------------------------------
// Rounds

typedef struct {
    double sum, sum2, min, max;
    long n, truncated;
} s_summary;

// One round of n envs until each has finished (or been cut at max_steps in) its first
// episode.
static void s_round(const env_spec_t *spec, const nn_params_t *p, nn_state_t *st, int n,
                    const eval_opts_t *o, uint64_t first, s_summary *sum) {
    vecenv_t v;
    vecenv_init(&v, spec, n, o->seed, first, n);
    // Continuous actions: the policy's outputs mu(s) are the actions (greedy, no noise; an
    // out_bounded policy keeps them in the bounds). A void step (a diverging simulation)
    // restarts its env, whose next episode is then the one that counts.
    const int A = spec->info->n_actions, D = spec->info->action_dim;
    float *q = xmalloc((size_t)n * (size_t)(D > 0 ? D : A) * sizeof(float));
    float *eps = xmalloc((size_t)n * sizeof(float));
    int32_t *act = xmalloc((size_t)n * sizeof(int32_t));
    float *rew = xmalloc((size_t)n * sizeof(float));
    uint8_t *term = xmalloc((size_t)n), *trunc = xmalloc((size_t)n), *done = xcalloc((size_t)n, 1);
    vecenv_episode_t *eps_done = xmalloc((size_t)n * sizeof *eps_done);
    rng_t rng;
    rng_init_stream(&rng, o->seed, RNG_ROLE_ACTOR, first);
    for (int i = 0; i < n; i++) {
        eps[i] = (float)o->epsilon;
    }
    // [env] frame_stack > 1: the network reads each env's last K frames, as the actors'
    // (framestack.h: an episode starts with its first frame K times).
    const int K = o->frame_stack > 1 ? o->frame_stack : 1;
    const size_t FB = env_obs_bytes(spec);
    framestack_t fs = {0};
    if (K > 1) {
        framestack_init(&fs, n, K, FB);
        for (int e = 0; e < n; e++) {
            framestack_reset(&fs, e, (const uint8_t *)v.obs + (size_t)e * FB);
        }
    }
    int remaining = n;
    for (int64_t t = 1; remaining > 0; t++) {
        nn_forward(st, p, K > 1 ? (const void *)fs.stacks : v.obs, n, q);
        if (D > 0) {
            vecenv_step_cont(&v, q, rew, term, trunc, NULL);
        } else {
            explore_select(act, q, eps, n, A, &rng);
            vecenv_step(&v, act, rew, term, trunc);
        }
        for (int e = 0; e < n && K > 1; e++) {
            // vecenv reset an env whose episode ended (or whose step was void): v.obs holds
            // the next episode's first frame.
            const uint8_t *frame = (const uint8_t *)v.obs + (size_t)e * FB;
            if (term[e] || trunc[e]) {
                framestack_reset(&fs, e, frame);
            } else {
                framestack_push(&fs, e, frame);
            }
        }
        int k = vecenv_drain_episodes(&v, eps_done, n);
        int cut = o->max_episode_steps > 0 && t >= o->max_episode_steps;
        for (int j = 0; j < k + (cut ? n : 0); j++) {
            int e = j < k ? eps_done[j].env : j - k;
            if (done[e]) {
                continue;
            }
            // An env cut here is still inside its first episode: its return so far.
            double r = j < k ? eps_done[j].ret : v.ep_return[e];
            done[e] = 1;
            remaining--;
            sum->truncated += j >= k;
            sum->sum += r;
            sum->sum2 += r * r;
            sum->min = sum->n ? fmin(sum->min, r) : r;
            sum->max = sum->n ? fmax(sum->max, r) : r;
            sum->n++;
        }
    }
    vecenv_fini(&v);
    if (K > 1) {
        framestack_fini(&fs);
    }
    free(q), free(eps), free(act), free(rew), free(term), free(trunc), free(done);
    free(eps_done);
}

void evaluator_run(const env_spec_t *spec, const nn_params_t *p, nn_state_t *st,
                   const eval_opts_t *opts, eval_result_t *out) {
    APEX_ASSERT(opts->parallel >= 1 && opts->parallel <= st->max_batch && opts->episodes >= 1);
    s_summary sum = {0};
    uint64_t first = EVALUATOR_STREAM_BASE;
    for (long left = opts->episodes; left > 0;) {
        int n = left < opts->parallel ? (int)left : opts->parallel;
        s_round(spec, p, st, n, opts, first, &sum);
        first += (uint64_t)n;
        left -= n;
    }
    double mean = sum.sum / (double)sum.n, var = sum.sum2 / (double)sum.n - mean * mean;
    *out = (eval_result_t){mean, sqrt(var > 0 ? var : 0), sum.min, sum.max, sum.n, sum.truncated};
}

// ---------------------------------------------------------------------------------------
// Python envs ([env] id = python): the bridge's workers, started once

// An env's part in a round. The bridge cannot reset an env on request (envsrc.h): a round
// starts where each env is, so an env in the middle of an episode (played by the previous
// network) first finishes it uncounted (WAIT), and the episode after it counts (COUNT).
enum { S_PY_WAIT, S_PY_COUNT, S_PY_DONE };

#define S_PY_FAULTS_MAX 8 // dropped episodes of one env in one round before it is given up

struct evaluator_py {
    envsrc_t *src;
    int n, G, GE, K, A, D;
    size_t FB; // bytes of one frame, as the workers emit it
    framestack_t fs;
    envsrc_result_t *res; // (G) each group's last results (the obs to act on next)
    uint8_t *fresh;       // (n) at the first observation of an episode
    uint8_t *phase;       // (n) S_PY_*
    int *faults;          // (n) episodes dropped this round
    double *ret;          // (n) the counted episode's return so far
    int64_t *len;         // (n) its steps so far (or, waiting, the steps waited)
    float *q, *eps, *act_cont;
    int32_t *act;
    float low[CONFIG_MAX_ACTION_DIM], high[CONFIG_MAX_ACTION_DIM];
    vecenv_episode_t *drained;
    rng_t rng;
};

evaluator_py_t *evaluator_py_new(const apex_config_t *cfg, const eval_opts_t *opts) {
    apex_config_t c = *cfg;
    if (c.python.transport == CONFIG_PY_ZMQ) {
        if (!c.python.spawn) {
            log_error("[python] spawn = 0: the evaluator cannot use workers started by hand "
                      "(they connect to the actors)\n---> HINT: [env] eval_id names a built-in "
                      "env with the same dynamics, or let the evaluator spawn its own workers "
                      "([python] spawn = 1)");
            return NULL;
        }
        // The actors bind [python] bind's port (+ index): the evaluator's spawned workers
        // connect to any free port.
        snprintf(c.python.bind, sizeof c.python.bind, "tcp://127.0.0.1:*");
    }
    const int n = opts->parallel;
    envsrc_t *src = envsrc_new(&c, n, EVALUATOR_STREAM_BASE, -1);
    if (!src) {
        return NULL;
    }
    evaluator_py_t *s = xcalloc(1, sizeof *s);
    s->src = src;
    s->n = n;
    s->G = envsrc_groups(src);
    s->GE = envsrc_group_size(src);
    s->K = opts->frame_stack > 1 ? opts->frame_stack : 1;
    s->A = cfg->env.n_actions;
    s->D = envsrc_action_dim(src);
    s->FB = envsrc_obs_bytes(src);
    memcpy(s->low, cfg->env.action_low, sizeof s->low);
    memcpy(s->high, cfg->env.action_high, sizeof s->high);
    framestack_init(&s->fs, n, s->K, s->FB); // K = 1: a copy of each env's frame
    s->res = xcalloc((size_t)s->G, sizeof *s->res);
    s->fresh = xcalloc((size_t)n, 1);
    s->phase = xcalloc((size_t)n, 1);
    s->faults = xcalloc((size_t)n, sizeof(int));
    s->ret = xcalloc((size_t)n, sizeof(double));
    s->len = xcalloc((size_t)n, sizeof(int64_t));
    s->q = xmalloc((size_t)n * (size_t)(s->D > 0 ? s->D : s->A) * sizeof(float));
    s->eps = xmalloc((size_t)n * sizeof(float));
    s->act = xcalloc((size_t)n, sizeof(int32_t));
    s->drained = xmalloc((size_t)n * sizeof *s->drained);
    rng_init_stream(&s->rng, opts->seed, RNG_ROLE_ACTOR, EVALUATOR_STREAM_BASE);
    // Each group's first observations (status NO_STEP): every env starts an episode.
    for (int g = 0; g < s->G; g++) {
        envsrc_recv(src, g, &s->res[g]);
        for (int j = 0; j < s->GE; j++) {
            int e = g * s->GE + j;
            framestack_reset(&s->fs, e, (const uint8_t *)s->res[g].obs + (size_t)j * s->FB);
            s->fresh[e] = 1;
        }
    }
    return s;
}

void evaluator_py_destroy(evaluator_py_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    evaluator_py_t *s = *self_p;
    envsrc_destroy(&s->src);
    framestack_fini(&s->fs);
    free(s->res), free(s->fresh), free(s->phase), free(s->faults), free(s->ret), free(s->len);
    free(s->q), free(s->eps), free(s->act), free(s->drained);
    free(s);
    *self_p = NULL;
}

const char *evaluator_py_name(const evaluator_py_t *self) { return envsrc_name(self->src); }

static void s_count(s_summary *sum, double r, int cut) {
    sum->truncated += cut;
    sum->sum += r;
    sum->sum2 += r * r;
    sum->min = sum->n ? fmin(sum->min, r) : r;
    sum->max = sum->n ? fmax(sum->max, r) : r;
    sum->n++;
}

// Group g's actions from its envs' observations (stacks): greedy (epsilon) or mu(s), sent.
static void s_py_act(evaluator_py_t *s, const nn_params_t *p, nn_state_t *st, int g) {
    const int GE = s->GE;
    const uint8_t *in = s->fs.stacks + (size_t)g * (size_t)GE * s->fs.stack_bytes;
    nn_forward(st, p, in, GE, s->q);
    if (s->D > 0) {
        // The bridge asserts finite actions within the bounds: an out_bounded policy's are,
        // up to rounding, and a policy gone NaN steps at the low bound (fmaxf picks it).
        for (int j = 0; j < GE; j++) {
            for (int k = 0; k < s->D; k++) {
                float *a = &s->q[(size_t)j * (size_t)s->D + (size_t)k];
                *a = fminf(fmaxf(*a, s->low[k]), s->high[k]);
            }
        }
        envsrc_send_cont(s->src, g, s->q);
        return;
    }
    explore_select(s->act, s->q, s->eps, GE, s->A, &s->rng);
    envsrc_send(s->src, g, s->act);
}

// Group g's results folded into the round: returns summed, first counted episodes recorded.
static void s_py_fold(evaluator_py_t *s, int g, const eval_opts_t *o, s_summary *sum,
                      int *remaining, long *dropped, long *given_up) {
    const envsrc_result_t *r = &s->res[g];
    for (int j = 0; j < s->GE; j++) {
        const int e = g * s->GE + j;
        const uint8_t *frame = (const uint8_t *)r->obs + (size_t)j * s->FB;
        if (r->status[j] != PYENV_OK) {
            // A fault or a lost worker dropped the running episode (the bridge logged why);
            // the env restarted, and its next episode is the one that counts.
            framestack_reset(&s->fs, e, frame);
            s->fresh[e] = 1;
            if (s->phase[e] == S_PY_DONE) {
                continue;
            }
            *dropped += s->phase[e] == S_PY_COUNT;
            if (++s->faults[e] > S_PY_FAULTS_MAX) {
                s->phase[e] = S_PY_DONE; // an env that keeps failing ends no round
                (*remaining)--;
                (*given_up)++;
                continue;
            }
            s->phase[e] = S_PY_COUNT;
            s->ret[e] = 0;
            s->len[e] = 0;
            continue;
        }
        const int ended = r->terminated[j] || r->truncated[j];
        if (ended) {
            framestack_reset(&s->fs, e, frame); // obs holds the next episode's first frame
        } else {
            framestack_push(&s->fs, e, frame);
        }
        s->fresh[e] = (uint8_t)ended;
        if (s->phase[e] == S_PY_DONE) {
            continue;
        }
        s->len[e]++;
        if (s->phase[e] == S_PY_WAIT) {
            if (ended) { // the next episode starts now: it counts
                s->phase[e] = S_PY_COUNT;
                s->ret[e] = 0;
                s->len[e] = 0;
            } else if (o->max_episode_steps > 0 && s->len[e] >= o->max_episode_steps) {
                // An episode older than the round that does not end: the env cannot be
                // reset on request, so it gives nothing this round.
                s->phase[e] = S_PY_DONE;
                (*remaining)--;
                (*given_up)++;
            }
            continue;
        }
        s->ret[e] += (double)r->rewards[j];
        const int cut = !ended && o->max_episode_steps > 0 && s->len[e] >= o->max_episode_steps;
        if (ended || cut) {
            s_count(sum, s->ret[e], cut);
            s->phase[e] = S_PY_DONE;
            (*remaining)--;
        }
    }
}

int evaluator_py_run(evaluator_py_t *s, const nn_params_t *p, nn_state_t *st,
                     const eval_opts_t *opts, eval_result_t *out) {
    APEX_ASSERT(s->GE <= st->max_batch && opts->episodes >= 1);
    s_summary sum = {0};
    long dropped = 0, given_up = 0;
    for (int i = 0; i < s->n; i++) {
        s->eps[i] = (float)opts->epsilon;
    }
    int stopped = 0;
    for (long left = opts->episodes; left > 0 && !stopped;) {
        // A round: the first m envs each give their first episode that starts in it.
        const int m = left < s->n ? (int)left : s->n;
        int remaining = m;
        for (int e = 0; e < s->n; e++) {
            s->phase[e] = e >= m ? S_PY_DONE : s->fresh[e] ? S_PY_COUNT : S_PY_WAIT;
            s->faults[e] = 0;
            s->ret[e] = 0;
            s->len[e] = 0;
        }
        while (remaining > 0) {
            if (signals_should_stop()) {
                stopped = 1;
                break;
            }
            for (int g = 0; g < s->G; g++) {
                s_py_act(s, p, st, g);
            }
            for (int g = 0; g < s->G; g++) {
                envsrc_recv(s->src, g, &s->res[g]);
                s_py_fold(s, g, opts, &sum, &remaining, &dropped, &given_up);
            }
            // Episodes are summed here; the bridge's reports would only pile up.
            while (envsrc_drain_episodes(s->src, s->drained, s->n) == s->n) {
            }
        }
        left -= m;
    }
    if (dropped || given_up) {
        log_warn("evaluation: %ld counted episodes dropped by env faults or lost workers (their "
                 "envs' next episodes counted instead), %ld envs given up (more than %d faults, "
                 "or an earlier episode not ended within [eval] max_episode_steps)",
                 dropped, given_up, S_PY_FAULTS_MAX);
    }
    double mean = sum.n ? sum.sum / (double)sum.n : NAN;
    double var = sum.n ? sum.sum2 / (double)sum.n - mean * mean : 0;
    *out = (eval_result_t){mean, sqrt(var > 0 ? var : 0), sum.min, sum.max, sum.n, sum.truncated};
    if (stopped || sum.n == 0) {
        if (!stopped) {
            log_error("evaluation skipped: no episode of %s could be counted (see the env "
                      "errors above)",
                      envsrc_name(s->src));
        }
        return -1;
    }
    return 0;
}

// ---------------------------------------------------------------------------------------
// Traces

// The a= fields of a trace file (lines after a reset carry a=-1 and are skipped). Returns
// how many were read into *out (caller frees), or -1.
static long s_read_actions(const char *path, int **out) {
    FILE *f = fopen(path, "r");
    if (!f) {
        log_error("%s: %s", path, strerror(errno));
        return -1;
    }
    long n = 0, cap = 1024;
    int *a = xmalloc((size_t)cap * sizeof *a);
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        const char *p = strstr(line, " a=");
        int v;
        if (p && sscanf(p + 3, "%d", &v) == 1 && v >= 0) {
            if (n == cap) {
                cap *= 2;
                a = xrealloc(a, (size_t)cap * sizeof *a); // start-up, not a hot path
            }
            a[n++] = v;
        }
    }
    fclose(f);
    *out = a;
    return n;
}

static void s_hex(FILE *out, const uint8_t *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        fprintf(out, "%02x", b[i]);
    }
}

// The a= fields of a continuous env's trace file: action_dim comma-separated floats per
// line (reset lines carry a=none and are skipped). Returns how many action vectors were
// read into *out (caller frees), or -1.
static long s_read_actions_cont(const char *path, int D, float **out) {
    FILE *f = fopen(path, "r");
    if (!f) {
        log_error("%s: %s", path, strerror(errno));
        return -1;
    }
    long n = 0, cap = 1024;
    float *a = xmalloc((size_t)cap * (size_t)D * sizeof *a);
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        const char *p = strstr(line, " a=");
        if (!p || strncmp(p + 3, "none", 4) == 0) {
            continue;
        }
        if (n == cap) {
            cap *= 2;
            a = xrealloc(a, (size_t)cap * (size_t)D * sizeof *a); // start-up, not a hot path
        }
        char *end = (char *)p + 3;
        for (int j = 0; j < D; j++) {
            const char *start = end + (j > 0 && *end == ',');
            a[n * D + j] = strtof(start, &end);
            if (end == start) {
                log_error("%s: a= needs %d comma-separated floats: %s", path, D, p + 1);
                fclose(f);
                free(a);
                return -1;
            }
        }
        n++;
    }
    fclose(f);
    *out = a;
    return n;
}

static void s_trace_line_cont(FILE *out, long t, const float *a, int D, float r, int term,
                              int trunc, const uint8_t *obs, size_t obs_bytes) {
    fprintf(out, "t=%ld a=", t);
    for (int j = 0; j < D; j++) {
        if (a) {
            fprintf(out, "%s%.9g", j ? "," : "", (double)a[j]);
        }
    }
    fprintf(out, "%s r=%.9g term=%d trunc=%d obs=", a ? "" : "none", (double)r, term, trunc);
    s_hex(out, obs, obs_bytes);
    fputc('\n', out);
}

#define TRACE_MAX_ACTION_DIM 64 // floats per action; the widest env (MuJoCo Ant) has 8

// evaluator_trace for a continuous env (info->action_dim > 0): actions uniform in the
// action bounds from the same LCG (each component low + (high - low) * u, u its top 24 bits
// over 2^24), or read from a trace's a= fields; %.9g prints each float exactly.
static int s_trace_cont(const env_spec_t *spec, uint64_t seed, long steps, const char *actions_path,
                        FILE *out) {
    const envinfo_t *e = spec->info;
    const int D = e->action_dim;
    float *actions = NULL, a[TRACE_MAX_ACTION_DIM];
    APEX_ASSERT(D <= TRACE_MAX_ACTION_DIM);
    long n_actions = -1;
    if (actions_path && (n_actions = s_read_actions_cont(actions_path, D, &actions)) < 0) {
        return 2;
    }
    const size_t O = env_obs_bytes(spec);
    uint64_t lcg = seed;
    // Zeroed: a state that owns something outside itself (as a simulator's would) starts
    // from the zeroed state, as in vecenv_init's.
    uint8_t state[ENV_MAX_STATE_BYTES] = {0}, obs[ENV_MAX_OBS_DIM * 4];
    rng_t rng;
    rng_init_stream(&rng, seed, RNG_ROLE_ENV, 0);
    spec->reset(state, &rng, obs);
    s_trace_line_cont(out, 0, NULL, D, 0.0f, 0, 0, obs, O);
    long ep_len = 0;
    for (long t = 1; t <= steps && (n_actions < 0 || t <= n_actions); t++) {
        for (int j = 0; j < D; j++) {
            if (n_actions >= 0) {
                a[j] = actions[(t - 1) * D + j];
                continue;
            }
            lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
            const double u = (double)(lcg >> 40) / (double)(1 << 24);
            a[j] = (float)((double)e->action_low +
                           ((double)e->action_high - (double)e->action_low) * u);
        }
        float r;
        uint8_t term;
        spec->step_cont(state, a, obs, &r, &term);
        ep_len++;
        // A void step (term = 2) is printed as such and starts over, as vecenv_step_cont does.
        const int trunc = term != 2 && e->max_episode_steps > 0 && ep_len >= e->max_episode_steps;
        s_trace_line_cont(out, t, a, D, r, term, trunc, obs, O);
        if (term || trunc) {
            ep_len = 0;
            spec->reset(state, &rng, obs);
            s_trace_line_cont(out, t, NULL, D, 0.0f, 0, 0, obs, O);
        }
    }
    if (spec->fini) { // a MuJoCo env's state owns its simulation data
        spec->fini(state);
    }
    free(actions);
    return 0;
}

int evaluator_trace(const apex_config_t *cfg, uint64_t seed, long steps, const char *actions_path,
                    FILE *out) {
    const env_spec_t *spec = env_find(cfg->env.id);
    if (!spec) {
        log_error("[env] id '%s' is not an environment apex can step (%s)", cfg->env.id,
                  envinfo_known_ids());
        return 2;
    }
    if (spec->info->action_dim > 0) {
        return s_trace_cont(spec, seed, steps, actions_path, out);
    }
    int *actions = NULL;
    long n_actions = -1;
    if (actions_path && (n_actions = s_read_actions(actions_path, &actions)) < 0) {
        return 2;
    }
    uint64_t lcg = seed;
    const minatar_game_t *game = env_minatar_game(spec);
    // grid: a MinAtar game's own frame, what its lines print (also for a render84 spec,
    // whose obs is the frame drawn from it: the trace of MinAtar/<Game>-render84-v0 is
    // MinAtar/<Game>-v0's, line for line).
    uint8_t state[ENV_MAX_STATE_BYTES], obs[ENV_MAX_OBS_DIM * 4], grid[MINATAR_MAX_OBS];
    char line[MINATAR_TRACE_LINE_MAX];
    minatar_t *m = (minatar_t *)(void *)state;
    rng_t rng;
    rng_init_stream(&rng, seed, RNG_ROLE_ENV, 0);
    if (game) {
        // The reference's sequence: Environment(game), seed(seed), reset().
        minatar_init(m, game, MINATAR_STICKY_PROB_DEFAULT, 1);
        minatar_seed(m, (uint32_t)seed);
        minatar_reset(m);
        minatar_observe(m, grid);
        minatar_format_step(line, sizeof line, 0, -1, -1, 0.0f, 0, grid, game->channels);
        fprintf(out, "%s\n", line);
    } else {
        spec->reset(state, &rng, obs);
        fprintf(out, "t=0 a=-1 r=0 term=0 trunc=0 obs=");
        s_hex(out, obs, env_obs_bytes(spec));
        fputc('\n', out);
    }
    long ep_len = 0;
    for (long t = 1; t <= steps && (n_actions < 0 || t <= n_actions); t++) {
        int a = n_actions >= 0 ? actions[t - 1] : minatar_lcg_action(&lcg) % spec->info->n_actions;
        if (a < 0 || a >= spec->info->n_actions) {
            log_error("%s: action %d at step %ld is not in [0, %d)", actions_path, a, t,
                      spec->info->n_actions);
            free(actions);
            return 2;
        }
        float r;
        uint8_t term;
        spec->step(state, a, obs, &r, &term);
        ep_len++;
        int trunc = spec->info->max_episode_steps > 0 && ep_len >= spec->info->max_episode_steps;
        if (game) {
            minatar_observe(m, grid);
            minatar_format_step(line, sizeof line, t, a, m->last_action, r, term, grid,
                                game->channels);
            fprintf(out, "%s\n", line);
        } else {
            fprintf(out, "t=%ld a=%d r=%g term=%d trunc=%d obs=", t, a, (double)r, term, trunc);
            s_hex(out, obs, env_obs_bytes(spec));
            fputc('\n', out);
        }
        if (term || trunc) {
            ep_len = 0;
            spec->reset(state, &rng, obs);
            if (game) {
                minatar_observe(m, grid);
                minatar_format_step(line, sizeof line, t, -1, -1, 0.0f, 0, grid, game->channels);
                fprintf(out, "%s\n", line);
            } else {
                fprintf(out, "t=%ld a=-1 r=0 term=0 trunc=0 obs=", t);
                s_hex(out, obs, env_obs_bytes(spec));
                fputc('\n', out);
            }
        }
    }
    free(actions);
    return 0;
}

// ---------------------------------------------------------------------------------------
// Following the weights stream

typedef struct {
    apex_config_t cfg;
    const env_spec_t *spec; // built-in envs, or
    evaluator_py_t *py;     // [env] id = python: the evaluator's own env workers
    char run_dir[CONFIG_STR_LEN + 64];
    nn_config_t net;
    nn_params_t params;
    nn_state_t state;
    eval_opts_t opts;
    void *ctx;
    weights_client_t weights; // asks the learner for weights (weights_client.h)
    security_t *security;
    wire_decoder_t *dec;
    float *staged;
    uint64_t staged_version, staged_step, staged_frames;
    int has_staged;
    int64_t staged_seen_ms;
    uint64_t last_version; // evaluated last (0: none)
    uint64_t last_point;   // [eval] every_updates: the update evaluated last (eval.csv's too)
    double best;
    FILE *csv;
    tbevents_t *tb;
    int64_t t0_ms, last_eval_ms;
    uint64_t bad, reconnects;
    log_limiter_t bad_log;
} s_follow;

// Reads every queued Weights message and stages the newest valid one, newest by version
// (wire_weights_judge), so that eval.csv never goes back to a killed learner's weights.
static void s_drain(s_follow *f) {
    wire_msg_t m;
    for (int i = 0; i < 256; i++) {
        int rc = net_recv_decode(f->weights.sock, f->dec, &m);
        if (rc == APEX_EAGAIN) {
            break;
        }
        if (rc == APEX_OK && m.type == WIRE_MSG_WEIGHTS) {
            int64_t now = clock_now_ms();
            weights_client_heard(&f->weights, now);
            wire_weights_verdict w = wire_weights_judge(m.u.weights.version, f->has_staged,
                                                        f->staged_version, now - f->staged_seen_ms);
            if (w != WIRE_WEIGHTS_STALE) {
                f->staged_seen_ms = now;
                // Served: ask again at once (as actor.c s_reader_weights, which says why
                // only then).
                weights_client_answered(&f->weights);
            }
            if (w == WIRE_WEIGHTS_TAKE) {
                memcpy(f->staged, m.u.weights.params, f->params.num_params * sizeof(float));
                f->staged_version = m.u.weights.version;
                f->staged_step = m.u.weights.learner_step;
                f->staged_frames = m.u.weights.env_frames;
                f->has_staged = 1;
            }
            continue;
        }
        f->bad++;
        log_every(&f->bad_log, 5000, LOG_WARN, "dropped bad weights message: %s (%llu in all)",
                  rc == APEX_OK ? "wrong message kind" : wire_decoder_last_error(f->dec),
                  (unsigned long long)f->bad);
    }
    // A learner silent while we listened (checked after the queue is read, so a long
    // evaluation is not silence) is reconnected, as the actors do: one that sent an
    // oversized message would otherwise have stopped the following for good.
    int64_t now = clock_now_ms();
    if (weights_client_revive(&f->weights, now)) {
        f->reconnects++;
        log_warn("learner at %s silent for %d s: reconnected (%llu times)", f->weights.endpoint,
                 WEIGHTS_SILENT_MS / 1000, (unsigned long long)f->reconnects);
        return;
    }
    // The next request: at once after an answer, again after WEIGHTS_RESEND_MS without one.
    weights_client_ask(&f->weights, f->has_staged ? f->staged_version : 0, now);
}

#define EVAL_CSV_HEADER                                                                            \
    "wall_time,elapsed_s,env_frames,updates,incarnation,version,episodes,eval_mean,eval_std,"      \
    "eval_min,eval_max,truncated,eval_s\n"
#define EVAL_CSV_MEAN_COLUMN 7
#define EVAL_CSV_UPDATES_COLUMN 3

// An evaluator restarted on a run directory (apex-local --restart, a resumed run, a requeued
// Slurm job) continues its eval.csv and must not replace best.bin with a worse network: the
// best so far is the largest eval_mean of the rows already there, as long as best.bin exists
// (without it, the first evaluation writes one). A file with another header (an older
// build's) is renamed to eval.csv.old and a new one started. Returns 1 when the file is to be
// started (no header yet).
static int s_resume_csv(s_follow *f, const char *path) {
    FILE *in = fopen(path, "r");
    if (!in) {
        return 1;
    }
    char line[1024];
    int fresh = 0;
    if (!fgets(line, sizeof line, in)) {
        fresh = 1;
    } else if (strcmp(line, EVAL_CSV_HEADER) != 0) {
        char old[CONFIG_STR_LEN + 112];
        snprintf(old, sizeof old, "%s.old", path);
        if (rename(path, old) == 0) {
            log_warn("%s has another build's columns: renamed to %s, starting a new one", path,
                     old);
        }
        fresh = 1;
    } else {
        char best_path[CONFIG_STR_LEN + 96];
        snprintf(best_path, sizeof best_path, "%s/best.bin", f->run_dir);
        struct stat st;
        int have_best = stat(best_path, &st) == 0;
        while (fgets(line, sizeof line, in)) {
            // The evaluation points already in (an evaluator killed between a row and the
            // removal of its file must not write that row twice).
            const char *q = line;
            for (int k = 0; k < EVAL_CSV_UPDATES_COLUMN && q; k++) {
                q = strchr(q, ',');
                q = q ? q + 1 : NULL;
            }
            unsigned long long u = q ? strtoull(q, NULL, 10) : 0;
            f->last_point = u > f->last_point ? u : f->last_point;
            if (!have_best) {
                continue;
            }
            const char *p = line;
            for (int c = 0; c < EVAL_CSV_MEAN_COLUMN && p; c++) {
                p = strchr(p, ',');
                p = p ? p + 1 : NULL;
            }
            char *end;
            double mean = p ? strtod(p, &end) : NAN;
            if (p && end != p && mean > f->best) {
                f->best = mean;
            }
        }
        if (have_best && isfinite(f->best)) {
            log_info("continuing %s: best.bin holds the best so far, mean %.2f", path, f->best);
        }
    }
    fclose(in);
    return fresh;
}

// best.bin: the online network of the best version so far, a checkpoint of one array.
static void s_write_best(s_follow *f, const eval_result_t *r) {
    char path[CONFIG_STR_LEN + 96];
    snprintf(path, sizeof path, "%s/best.bin", f->run_dir);
    ckpt_header_t h;
    ckpt_header_init(&h, &f->net);
    h.learner_step = f->staged_step;
    h.extra.weights_version = f->last_version;
    h.extra.user[CKPT_USER_FRAMES] = f->staged_frames;
    const float *arrays[1] = {f->params.data};
    int rc = ckpt_write(path, &h, arrays, 1);
    if (rc != APEX_OK) {
        log_error("cannot write %s: %s (evaluation goes on)", path, apex_strerror(rc));
        return;
    }
    log_info("best so far: mean %.2f at " WIRE_VERSION_FMT " (update %llu): %s", r->mean,
             WIRE_VERSION_ARGS(f->last_version), (unsigned long long)f->staged_step, path);
}

static void s_record(s_follow *f, const eval_result_t *r, double secs) {
    double elapsed = (double)(clock_now_ms() - f->t0_ms) / 1000.0;
    if (f->csv) {
        fprintf(f->csv, "%.3f,%.3f,%llu,%llu,%u,%u,%ld,%.4f,%.4f,%.4f,%.4f,%ld,%.3f\n",
                clock_wall_s(), elapsed, (unsigned long long)f->staged_frames,
                (unsigned long long)f->staged_step, WIRE_VERSION_ARGS(f->last_version), r->episodes,
                r->mean, r->std, r->min, r->max, r->truncated, secs);
        fflush(f->csv);
    }
    if (f->tb) {
        static const char *const tags[] = {"eval/mean_return", "eval/std_return", "eval/min_return",
                                           "eval/max_return",  "eval/updates",    "eval/seconds"};
        double v[] = {r->mean, r->std, r->min, r->max, (double)f->staged_step, secs};
        if (tbevents_scalars(f->tb, (int64_t)f->staged_frames, clock_wall_s(), tags, v, 6) != 0 ||
            tbevents_flush(f->tb) != 0) {
            log_every(&f->bad_log, 5000, LOG_WARN, "cannot write %s", tbevents_path(f->tb));
        }
    }
    log_info("evaluated " WIRE_VERSION_FMT " (update %llu, %llu frames): mean %.2f std %.2f "
             "min %.1f max %.1f over %ld episodes%s in %.2f s",
             WIRE_VERSION_ARGS(f->last_version), (unsigned long long)f->staged_step,
             (unsigned long long)f->staged_frames, r->mean, r->std, r->min, r->max, r->episodes,
             r->truncated ? " (some cut at max_episode_steps)" : "", secs);
}

static int s_follow_open(s_follow *f) {
    const apex_config_t *c = &f->cfg;
    snprintf(f->run_dir, sizeof f->run_dir, "%s/%s", c->run.out_dir, c->run.name);
    int e = fileio_mkdir_p(f->run_dir);
    if (e != 0) {
        log_error("cannot create %s: %s", f->run_dir, strerror(e));
        return -1;
    }
    nn_config_from_run(&f->net, c);
    nn_params_init(&f->params, &f->net);
    evaluator_opts_from_run(&f->opts, c);
    nn_state_init(&f->state, &f->net, f->opts.parallel, 0);
    if (!f->spec && !(f->py = evaluator_py_new(c, &f->opts))) {
        return -1;
    }
    f->staged = xmalloc(f->params.num_params * sizeof(float));
    // The weights message may carry more than the network it runs (a continuous run's:
    // [ mu | Q_1 ], nn_run_weights_params): the policy is its prefix, all it copies.
    wire_limits_t lim = {.obs_dim = (uint32_t)c->env.obs_dim,
                         .n_actions = (uint32_t)c->env.n_actions,
                         .num_params = (uint32_t)nn_run_weights_params(c),
                         .max_count = (uint32_t)c->replay.max_batch};
    f->dec = wire_decoder_new(&lim);
    f->ctx = zmq_ctx_new();
    // The evaluator is an evaluation actor: it connects with the actors' key pair. With
    // [eval] every_updates it reads the learner's files instead, and connects to nothing.
    f->security = security_new(f->ctx, c, "actor", -1, 0);
    if (!f->security) {
        return -1;
    }
    if (c->eval.every_updates == 0) {
        if (weights_client_open(&f->weights, f->ctx, f->security, c->endpoints.learner_weights,
                                (int64_t)wire_max_message_bytes(&lim)) != 0) {
            return -1;
        }
        weights_client_ask(&f->weights, 0, clock_now_ms());
    }
    char path[CONFIG_STR_LEN + 96];
    snprintf(path, sizeof path, "%s/eval.csv", f->run_dir);
    f->best = -INFINITY;
    int fresh = s_resume_csv(f, path);
    f->csv = fopen(path, "a");
    if (!f->csv) {
        log_warn("cannot open %s: %s; evaluating without it", path, strerror(errno));
    } else if (fresh) {
        fputs(EVAL_CSV_HEADER, f->csv);
        fflush(f->csv);
    }
    snprintf(path, sizeof path, "%s/tb/eval", f->run_dir);
    f->tb = tbevents_new(path);
    f->t0_ms = clock_now_ms();
    return 0;
}

static void s_follow_close(s_follow *f) {
    if (f->csv) {
        fclose(f->csv);
    }
    tbevents_destroy(&f->tb);
    weights_client_close(&f->weights);
    security_destroy(&f->security);
    if (f->ctx) {
        zmq_ctx_term(f->ctx);
    }
    wire_decoder_destroy(&f->dec);
    free(f->staged);
    nn_state_fini(&f->state);
    nn_params_fini(&f->params);
    evaluator_py_destroy(&f->py);
}

// [eval] every_updates: the learner's evaluation points in dir (learner.c writes
// u<12 digits>.bin; anything else there is not one). Sets *next to the smallest update in
// (after, upto] (returns 1; 0 when there is none) and *last to the largest of all (0: none).
// With remove, points at or below `after` are removed: their rows are in eval.csv already
// (an evaluator killed between a row and the file's removal), or, numbered again by a
// learner resumed from an older checkpoint, they name updates eval.csv has a row for; each
// removal is counted in *removed.
static int s_scan_points(const char *dir, uint64_t after, uint64_t upto, int remove, uint64_t *next,
                         uint64_t *last, uint64_t *removed) {
    DIR *d = opendir(dir);
    *last = 0;
    if (!d) {
        return 0;
    }
    int found = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        unsigned long long v;
        char tail[8];
        if (strlen(e->d_name) != 17 || sscanf(e->d_name, "u%12llu%7s", &v, tail) != 2 ||
            strcmp(tail, ".bin") != 0) {
            continue;
        }
        *last = v > *last ? v : *last;
        if (v <= after) {
            if (remove) {
                char path[CONFIG_STR_LEN + 160];
                snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
                *removed += unlink(path) == 0;
            }
        } else if (v <= upto && (!found || v < *next)) {
            *next = v;
            found = 1;
        }
    }
    closedir(d);
    return found;
}

static int s_evaluate(s_follow *f, long *evals);

// apex-eval --follow with [eval] every_updates: every point the learner wrote, in order of
// update, each evaluated once and then removed. Stopping (a signal), it evaluates the points
// already written (each is one the run promised: a deterministic rerun's eval.csv must have
// them all) and exits; the launcher gives it STOP_GRACE_S for that.
static void s_follow_points(s_follow *f, long max_evals) {
    char dir[CONFIG_STR_LEN + 80];
    snprintf(dir, sizeof dir, "%s/evals", f->run_dir);
    log_info("evaluating the network at every %lld updates (the learner's files in %s/)",
             (long long)f->cfg.eval.every_updates, dir);
    uint64_t upto = UINT64_MAX, removed = 0, skip = 0;
    long evals = 0;
    log_limiter_t stale_log = {0};
    while (max_evals <= 0 || evals < max_evals) {
        uint64_t u = 0, last = 0, removed0 = removed;
        if (signals_should_stop() && upto == UINT64_MAX) {
            s_scan_points(dir, 0, 0, 0, &u, &last, &removed); // (looks only)
            upto = last;
            log_info("stopping: evaluating the points up to update %llu first",
                     (unsigned long long)upto);
        }
        int found = s_scan_points(dir, APEX_MAX(f->last_point, skip), upto, 1, &u, &last, &removed);
        if (removed != removed0) {
            log_every(&stale_log, 5000, LOG_WARN,
                      "removed %llu evaluation points at or below update %llu, which eval.csv "
                      "has rows for (a restarted evaluator, or a learner resumed from an older "
                      "checkpoint writing those updates again)",
                      (unsigned long long)removed, (unsigned long long)f->last_point);
        }
        if (!found) {
            if (upto != UINT64_MAX) {
                break;
            }
            zmq_poll(NULL, 0, POLL_MS);
            continue;
        }
        char path[CONFIG_STR_LEN + 112];
        snprintf(path, sizeof path, "%s/u%012llu.bin", dir, (unsigned long long)u);
        ckpt_header_t h;
        int rc = f->cfg.env.action_dim > 0 ? ckpt_read_policy(path, &f->net, &h, f->params.data)
                                           : ckpt_read_online(path, &f->net, &h, f->params.data);
        if (rc != APEX_OK) {
            // (last_point stays: a stray file numbered past the learner must not make the
            // points before it look evaluated)
            char bad[CONFIG_STR_LEN + 120];
            snprintf(bad, sizeof bad, "%s.bad", path);
            if (rename(path, bad) == 0) {
                log_error("cannot evaluate %s: %s; moved to %s, on to the next", path,
                          apex_strerror(rc), bad);
            } else {
                // Not even that (a read-only directory): passed over from now on.
                log_error("cannot evaluate %s: %s, nor move it to %s (%s); passed over", path,
                          apex_strerror(rc), bad, strerror(errno));
                skip = u;
            }
            continue;
        }
        f->last_point = u;
        f->staged_step = h.learner_step;
        f->staged_frames = h.extra.user[CKPT_USER_FRAMES];
        f->last_version = h.extra.weights_version;
        if (s_evaluate(f, &evals) != 0) {
            log_error("the evaluation of update %llu failed (above): that point has no row in "
                      "eval.csv",
                      (unsigned long long)u);
        }
        unlink(path); // (after its row: a kill in between is what s_scan_points' removal is for)
    }
}

// Evaluates f->params (the version f->last_version), records it and keeps the best.
// Returns 0, or -1 when a Python env's evaluation failed (logged; no row).
static int s_evaluate(s_follow *f, long *evals) {
    int64_t t0 = clock_now_ns();
    eval_result_t r;
    if (f->py) {
        if (evaluator_py_run(f->py, &f->params, &f->state, &f->opts, &r) != 0) {
            f->last_eval_ms = clock_now_ms(); // skipped (logged): the next version's turn
            return -1;
        }
    } else {
        evaluator_run(f->spec, &f->params, &f->state, &f->opts, &r);
    }
    double secs = (double)(clock_now_ns() - t0) / 1e9;
    f->last_eval_ms = clock_now_ms();
    s_record(f, &r, secs);
    if (r.mean > f->best) {
        f->best = r.mean;
        s_write_best(f, &r);
    }
    (*evals)++;
    return 0;
}

int evaluator_follow(const apex_config_t *cfg, long max_evals) {
    s_follow f = {.cfg = *cfg};
    f.spec = env_find(cfg->env.id);
    if (!f.spec && strcmp(cfg->env.id, CONFIG_ENV_PYTHON) != 0) {
        log_error("[env] id '%s' is not an environment apex can step (%s)", cfg->env.id,
                  envinfo_known_ids());
        return 2;
    }
    blas_set_threads(1);
    if (s_follow_open(&f) != 0) {
        s_follow_close(&f);
        return 2;
    }
    if (cfg->eval.every_updates > 0) {
        s_follow_points(&f, max_evals);
        s_follow_close(&f);
        return 0;
    }
    log_info("following the weights on %s: %ld episodes per version, epsilon %g, at most every "
             "%g s; results in %s/eval.csv",
             cfg->endpoints.learner_weights, f.opts.episodes, f.opts.epsilon, cfg->eval.interval_s,
             f.run_dir);
    long evals = 0;
    while (!signals_should_stop() && (max_evals <= 0 || evals < max_evals)) {
        zmq_pollitem_t item = {.socket = f.weights.sock, .events = ZMQ_POLLIN};
        int64_t wait = POLL_MS;
        int64_t due = f.last_eval_ms + (int64_t)(cfg->eval.interval_s * 1000.0);
        if (f.has_staged && f.staged_version != f.last_version) {
            wait = APEX_MAX(0, APEX_MIN(wait, due - clock_now_ms()));
        }
        if (zmq_poll(&item, 1, (long)wait) < 0 && errno != EINTR) {
            log_error("zmq_poll: %s", zmq_strerror(errno));
            break;
        }
        s_drain(&f);
        if (!f.has_staged || f.staged_version == f.last_version || clock_now_ms() < due) {
            continue;
        }
        // The newest staged version; versions that arrived during the last evaluation and
        // were overtaken are skipped.
        memcpy(f.params.data, f.staged, f.params.num_params * sizeof(float));
        f.last_version = f.staged_version;
        s_evaluate(&f, &evals);
    }
    s_follow_close(&f);
    return 0;
}
