// envsrc.c: see envsrc.h.
#define LOG_MODULE "envsrc"
#include "envsrc.h"

#include "apex.h"
#include "env_mujoco.h"
#include "log.h"
#include "parse.h"
#include "xalloc.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct envsrc {
    int n, G, GE;
    size_t obs_bytes;
    int n_actions;
    char name[CONFIG_STR_LEN + 16];
    // Built-in envs (G = 1): recv steps with the actions the last send left.
    vecenv_t v;
    int builtin;
    int32_t *actions;    // (n)
    int action_dim;      // continuous actions of this many floats (0: discrete)
    float *cont_actions; // (n, action_dim) continuous actions
    uint8_t *void_step;  // (n) vecenv_step_cont's void steps
    int pending;         // a send is waiting for its recv
    int started;         // the first recv happened
    // The bridge.
    pyenv_t *py;
    // Result buffers, per group: (G, GE, obs) (the bridge only) and (G, GE).
    uint8_t *next_obs, *obs;
    float *rewards;
    uint8_t *terminated, *truncated, *status;
    int64_t step_timeout_ms;
};

#define EPISODES_CAP 4096

// ---------------------------------------------------------------------------------------
// Start-up

// The worker script: [python] script, else python/apex_env.py of the tree the binary was
// built in (bin/ and build-*/bin/ sit one or two levels below it), else of the working
// directory.
static int s_script(const apex_config_t *cfg, char *out, size_t cap) {
    if (cfg->python.script[0]) {
        snprintf(out, cap, "%s", cfg->python.script);
        return 0;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        const char *dir = dirname(exe);
        const char *up[] = {"..", "../.."};
        for (int i = 0; i < 2; i++) {
            if ((size_t)snprintf(out, cap, "%.200s/%s/python/apex_env.py", dir, up[i]) >= cap) {
                continue;
            }
            if (access(out, R_OK) == 0) {
                return 0;
            }
        }
    }
    snprintf(out, cap, "python/apex_env.py");
    if (access(out, R_OK) == 0) {
        return 0;
    }
    log_error("[python] script: python/apex_env.py is neither beside the binaries' tree nor in "
              "the working directory\n---> HINT: set [python] script to its path");
    return -1;
}

// [python] bind for actor index: a numeric port is actor 0's, actor i binds port + i.
static void s_bind(const char *bind, int index, char *out, size_t cap) {
    const char *colon = strrchr(bind, ':');
    int64_t port;
    if (index > 0 && colon && parse_int64(colon + 1, 1, 65535 - index, &port) == 0) {
        snprintf(out, cap, "%.*s:%lld", (int)(colon - bind), bind, (long long)(port + index));
    } else {
        snprintf(out, cap, "%s", bind);
    }
}

// Whether a JSON object (config-checked: "{...}") has no members.
static int s_json_empty(const char *obj) {
    for (const char *p = obj + 1; *p && *p != '}'; p++) {
        if (*p != ' ' && *p != '\t') {
            return 0;
        }
    }
    return 1;
}

// The workers' kwargs: [env] kwargs, or for an evaluator's workers eval_kwargs merged over
// them as one JSON object, kwargs' members then eval_kwargs' (json.loads keeps the last of a
// repeated key, so eval_kwargs' replace kwargs'). Both fit: cap is PYENV_KWARGS_LEN.
static void s_kwargs(const config_env_t *env, int eval, char *out, size_t cap) {
    const char *kw = env->kwargs, *ekw = eval ? env->eval_kwargs : "";
    if (!ekw[0] || s_json_empty(ekw)) {
        snprintf(out, cap, "%s", kw);
    } else if (!kw[0] || s_json_empty(kw)) {
        snprintf(out, cap, "%s", ekw);
    } else {
        snprintf(out, cap, "%.*s, %s", (int)(strlen(kw) - 1), kw, ekw + 1);
    }
}

int envsrc_pyenv_opts(const apex_config_t *cfg, int n, uint64_t first, int index, pyenv_opts_t *o) {
    const config_python_t *py = &cfg->python;
    pyenv_opts_defaults(o);
    int W = (int)py->workers, G = (int)py->groups;
    if (n % W != 0 || (n / W) % G != 0) { // an evaluator's n: whatever divides
        W = n % W == 0 ? W : 1;
        G = (n / W) % G == 0 ? G : 1;
    }
    o->workers = W;
    o->envs_per_worker = n / W;
    o->groups = G;
    o->spawn = py->spawn;
    o->transport = py->transport == CONFIG_PY_ZMQ ? PYENV_ZMQ : PYENV_LOCAL;
    s_bind(py->bind, index < 0 ? 0 : index, o->bind, sizeof o->bind);
    snprintf(o->python, sizeof o->python, "%s", py->interpreter);
    if (s_script(cfg, o->script, sizeof o->script) != 0) {
        return -1;
    }
    snprintf(o->make, sizeof o->make, "%s", cfg->env.make);
    s_kwargs(&cfg->env, index < 0, o->kwargs, sizeof o->kwargs);
    o->obs_dim = cfg->env.frame_dim; // what a worker's env emits: one frame ([env] frame_stack)
    o->obs_dtype = cfg->env.obs_dtype;
    o->obs_h = cfg->env.obs_h; // one frame's shape: the run's obs_c is frame_stack x frame_c
    o->obs_w = cfg->env.obs_w;
    o->obs_c = cfg->env.obs_h ? cfg->env.frame_c : 0;
    o->obs_layout = cfg->env.obs_layout;
    o->n_actions = cfg->env.n_actions;
    o->action_dim = cfg->env.action_dim;
    memcpy(o->action_low, cfg->env.action_low, sizeof o->action_low);
    memcpy(o->action_high, cfg->env.action_high, sizeof o->action_high);
    o->seed = (uint64_t)cfg->run.seed;
    o->first_env = first;
    o->hello_timeout_ms = py->hello_timeout_ms;
    o->cfg = cfg;
    o->actor_index = index;
    return 0;
}

static void s_alloc_results(envsrc_t *s) {
    size_t n = (size_t)s->n;
    if (!s->builtin) { // vecenv keeps its own observations
        s->next_obs = xcalloc(n, s->obs_bytes);
        s->obs = xcalloc(n, s->obs_bytes);
    }
    s->rewards = xcalloc(n, sizeof(float));
    s->terminated = xcalloc(n, 1);
    s->truncated = xcalloc(n, 1);
    s->status = xcalloc(n, 1);
}

envsrc_t *envsrc_new(const apex_config_t *cfg, int n, uint64_t first, int index) {
    APEX_ASSERT(n > 0);
    const int is_python = strcmp(cfg->env.id, CONFIG_ENV_PYTHON) == 0;
    const env_spec_t *spec = is_python ? NULL : env_find(cfg->env.id);
    if (!is_python && !spec) {
        log_error("[env] id: '%s' is not an environment apex can step (it runs: %s, and python "
                  "envs through [env] make)%s",
                  cfg->env.id, envinfo_known_ids(),
                  strcmp(cfg->env.id, CONFIG_ENV_EXTERNAL) == 0
                      ? "\n---> HINT: with id = external, the replay server and the learner "
                        "run with your own actors, which speak proto/apex.proto; or let "
                        "apex-actor step a Gymnasium-style env: id = python"
                      : "");
        return NULL;
    }
    char err[512];
    if (spec && env_mujoco_load(spec, cfg->env.model_xml, err, sizeof err) != 0) {
        log_error("[env] model_xml: %s", err); // a MuJoCo task's model (start-up error)
        return NULL;
    }
    envsrc_t *s = xcalloc(1, sizeof *s);
    s->n = n;
    s->n_actions = cfg->env.n_actions;
    if (spec) {
        s->builtin = 1;
        s->G = 1;
        s->GE = n;
        s->obs_bytes = env_obs_bytes(spec);
        snprintf(s->name, sizeof s->name, "%s", spec->info->id);
        vecenv_init(&s->v, spec, n, (uint64_t)cfg->run.seed, first, EPISODES_CAP);
        s->actions = xcalloc((size_t)n, sizeof(int32_t));
        s->action_dim = spec->info->action_dim;
        if (s->action_dim > 0) {
            s->cont_actions = xcalloc((size_t)n * (size_t)s->action_dim, sizeof(float));
            s->void_step = xcalloc((size_t)n, 1);
        }
        s_alloc_results(s);
        memset(s->status, PYENV_OK, (size_t)n);
        return s;
    }
    pyenv_opts_t o;
    if (envsrc_pyenv_opts(cfg, n, first, index, &o) != 0) {
        free(s);
        return NULL;
    }
    s->py = pyenv_new(&o);
    if (!s->py) {
        free(s);
        return NULL;
    }
    s->step_timeout_ms = cfg->python.step_timeout_ms;
    s->action_dim = cfg->env.action_dim; // the bridge's workers checked it at their HELLO
    s->G = pyenv_groups(s->py);
    s->GE = pyenv_group_size(s->py);
    s->obs_bytes = (size_t)cfg->env.frame_dim * (cfg->env.obs_dtype == CONFIG_OBS_UINT8 ? 1 : 4);
    snprintf(s->name, sizeof s->name, "python (%s)", cfg->env.make);
    s_alloc_results(s);
    return s;
}

void envsrc_destroy(envsrc_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    envsrc_t *s = *self_p;
    pyenv_destroy(&s->py);
    if (s->builtin) {
        vecenv_fini(&s->v);
    }
    free(s->actions);
    free(s->cont_actions);
    free(s->void_step);
    free(s->next_obs);
    free(s->obs);
    free(s->rewards);
    free(s->terminated);
    free(s->truncated);
    free(s->status);
    free(s);
    *self_p = NULL;
}

int envsrc_groups(const envsrc_t *self) { return self->G; }
int envsrc_group_size(const envsrc_t *self) { return self->GE; }
size_t envsrc_obs_bytes(const envsrc_t *self) { return self->obs_bytes; }
const char *envsrc_name(const envsrc_t *self) { return self->name; }
int envsrc_action_dim(const envsrc_t *self) { return self->action_dim; }

// ---------------------------------------------------------------------------------------
// Stepping

void envsrc_send(envsrc_t *s, int g, const int32_t *actions) {
    APEX_ASSERT(g >= 0 && g < s->G && s->action_dim == 0);
    if (s->builtin) {
        APEX_ASSERT(s->started && !s->pending); // recv, then send, then recv ...
        memcpy(s->actions, actions, (size_t)s->n * sizeof(int32_t));
        s->pending = 1;
        return;
    }
    pyenv_send_actions(s->py, g, actions);
}

void envsrc_send_cont(envsrc_t *s, int g, const float *actions) {
    APEX_ASSERT(g >= 0 && g < s->G && s->action_dim > 0);
    if (!s->builtin) {
        pyenv_send_cont(s->py, g, actions);
        return;
    }
    APEX_ASSERT(s->started && !s->pending);
    memcpy(s->cont_actions, actions, (size_t)s->n * (size_t)s->action_dim * sizeof(float));
    s->pending = 1;
}

int envsrc_recv(envsrc_t *s, int g, envsrc_result_t *out) {
    APEX_ASSERT(g >= 0 && g < s->G);
    size_t off = (size_t)g * (size_t)s->GE, ob = off * s->obs_bytes;
    *out = (envsrc_result_t){.rewards = s->rewards + off,
                             .terminated = s->terminated + off,
                             .truncated = s->truncated + off,
                             .status = s->status + off};
    if (s->builtin) {
        out->obs = s->v.obs; // vecenv's own arrays: no copy
        out->final_obs = s->v.final_obs;
        if (!s->started) { // the start observations; no step happened
            APEX_ASSERT(!s->pending);
            s->started = 1;
            memset(s->status, PYENV_NO_STEP, (size_t)s->n);
            out->ok = 0;
            return 0;
        }
        APEX_ASSERT(s->pending);
        s->pending = 0;
        if (s->action_dim > 0) {
            // A void step (a diverging simulation, env.h) reports NO_STEP: the env was reset,
            // and the caller drops its pending n-step window.
            vecenv_step_cont(&s->v, s->cont_actions, s->rewards, s->terminated, s->truncated,
                             s->void_step);
            int ok = 0;
            for (int i = 0; i < s->n; i++) {
                s->status[i] = s->void_step[i] ? PYENV_NO_STEP : PYENV_OK;
                ok += !s->void_step[i];
            }
            out->ok = ok;
            return ok;
        }
        vecenv_step(&s->v, s->actions, s->rewards, s->terminated, s->truncated);
        memset(s->status, PYENV_OK, (size_t)s->n);
        out->ok = s->n;
        return s->n;
    }
    // The bridge's next_obs holds what every step produced, so its ended rows are the final
    // observations and the others equal obs's: one array serves as final_obs.
    out->obs = s->obs + ob;
    out->final_obs = s->next_obs + ob;
    pyenv_results_t r = {s->next_obs + ob,    s->obs + ob,        s->rewards + off,
                         s->terminated + off, s->truncated + off, s->status + off};
    out->ok = pyenv_recv_results(s->py, g, s->step_timeout_ms, &r);
    return out->ok;
}

int envsrc_drain_episodes(envsrc_t *s, vecenv_episode_t *out, int cap) {
    return s->builtin ? vecenv_drain_episodes(&s->v, out, cap)
                      : pyenv_drain_episodes(s->py, out, cap);
}

void envsrc_get_stats(const envsrc_t *s, envsrc_stats_t *out) {
    if (s->builtin) {
        *out = (envsrc_stats_t){
            .steps = s->v.steps, .episodes = s->v.episodes, .void_steps = s->v.void_steps};
        return;
    }
    pyenv_stats_t st;
    pyenv_get_stats(s->py, &st);
    *out = (envsrc_stats_t){.steps = st.steps,
                            .episodes = st.episodes,
                            .episodes_dropped = st.episodes_dropped,
                            .env_faults = st.env_faults,
                            .workers_lost = st.workers_lost};
}
