// config_check.c: the checks between keys (see config_check.h).
#include "config_check.h"

#include "apex.h"
#include "config_schema.h"
#include "envinfo.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

// Where the value of [sec] key in this function's cfg came from, for a message.
#define WHERE(sec, key) CONFIG_WHERE(cfg, sec, key)

static int s_cross_check_sizes(apex_config_t *cfg, char *err, size_t errlen);

// ---------------------------------------------------------------------------------------
// [env] and [network]: the observation and the layers that read it.

// Parses "HxWxC" into *h, *w, *c (each >= 1). 0 or -1.
static int s_parse_shape(const char *v, int *h, int *w, int *c) {
    char tail;
    if (sscanf(v, "%dx%dx%d%c", h, w, c, &tail) != 3 || *h < 1 || *w < 1 || *c < 1 ||
        (int64_t)*h * *w * *c > (1 << 20)) {
        return -1;
    }
    return 0;
}

// Parses [network] conv ("16x3s1,32x4s2", or "" for none) into cfg->network.conv, then walks
// the observation shape through the layers (no padding: out = (in - k) / s + 1), so that a
// stack that does not fit its input is a config error naming the layer.
static int s_parse_conv(apex_config_t *cfg, char *err, size_t errlen) {
    config_network_t *n = &cfg->network;
    n->n_conv = 0;
    const char *p = n->conv_spec;
    while (*p == ' ') {
        p++;
    }
    if (*p == '\0' || strcmp(p, "none") == 0) {
        return 0;
    }
    while (*p) {
        int f, k, st, used = 0;
        if (sscanf(p, " %dx%ds%d%n", &f, &k, &st, &used) != 3 || f < 1 || f > 4096 || k < 1 ||
            k > 256 || st < 1 || st > 256) {
            return apex_errf(
                err, errlen, -1,
                "%s: [network] conv: '%s' is not a list of FILTERSxKERNELsSTRIDE (e.g. "
                "16x3s1 or 32x8s4,64x4s2,64x3s1; filters 1..4096, kernel and stride "
                "1..256)",
                WHERE("network", "conv"), n->conv_spec);
        }
        if (n->n_conv == CONFIG_MAX_CONV) {
            return apex_errf(err, errlen, -1, "%s: [network] conv: at most %d layers",
                             WHERE("network", "conv"), CONFIG_MAX_CONV);
        }
        n->conv[n->n_conv].filters = f, n->conv[n->n_conv].kernel = k;
        n->conv[n->n_conv].stride = st;
        n->n_conv++;
        p += used;
        while (*p == ' ') {
            p++;
        }
        if (*p == ',') {
            p++;
        } else if (*p) {
            return apex_errf(err, errlen, -1,
                             "%s: [network] conv: '%s': expected ',' after layer %d",
                             WHERE("network", "conv"), n->conv_spec, n->n_conv);
        }
    }
    const config_env_t *e = &cfg->env;
    if (e->obs_h == 0) {
        return apex_errf(err, errlen, -1,
                         "%s: [network] conv: conv layers need an image observation; %s's is a "
                         "vector of %d (for id = external, set [env] obs_shape)",
                         WHERE("network", "conv"), e->id, e->obs_dim);
    }
    int h = e->obs_h, w = e->obs_w;
    for (int l = 0; l < n->n_conv; l++) {
        int k = n->conv[l].kernel, st = n->conv[l].stride;
        if (k > h || k > w) {
            return apex_errf(err, errlen, -1,
                             "%s: [network] conv: layer %d (%dx%ds%d) has a kernel larger than its "
                             "%dx%d input",
                             WHERE("network", "conv"), l + 1, n->conv[l].filters, k, st, h, w);
        }
        h = (h - k) / st + 1, w = (w - k) / st + 1;
    }
    return 0;
}

// [env]'s observation keys against the environment: the dtype and shape of a built-in id are
// its own (a matching value is accepted: --print-config writes them back); scale 0 and dtype
// auto resolve to the environment's.
static int s_cross_check_obs(apex_config_t *cfg, const envinfo_t *e, char *err, size_t errlen) {
    config_env_t *env = &cfg->env;
    int h = 0, w = 0, c = 0;
    if (env->obs_shape[0] && s_parse_shape(env->obs_shape, &h, &w, &c) != 0) {
        return apex_errf(err, errlen, -1,
                         "%s: [env] obs_shape: '%s' is not HxWxC (positive, at most 2^20 elements)",
                         WHERE("env", "obs_shape"), env->obs_shape);
    }
    if (e) {
        if (env->obs_dtype != CONFIG_OBS_AUTO && env->obs_dtype != e->obs_dtype) {
            return apex_errf(err, errlen, -1, "%s: [env] obs_dtype: %s's observations are %s",
                             WHERE("env", "obs_dtype"), e->id,
                             e->obs_dtype == CONFIG_OBS_UINT8 ? "uint8" : "float32");
        }
        if (env->obs_shape[0] && (h != e->obs_h || w != e->obs_w || c != e->obs_c)) {
            return apex_errf(err, errlen, -1, "%s: [env] obs_shape: %s's observations are %s",
                             WHERE("env", "obs_shape"), e->id,
                             e->obs_h ? "images" : "vectors (leave obs_shape empty)");
        }
        env->obs_dtype = e->obs_dtype;
        env->obs_h = e->obs_h, env->obs_w = e->obs_w, env->obs_c = e->obs_c;
        if (env->obs_scale == 0) {
            env->obs_scale = e->obs_scale;
        }
        return 0;
    }
    if (env->obs_dtype == CONFIG_OBS_AUTO) {
        env->obs_dtype = CONFIG_OBS_FLOAT32;
    }
    if (env->obs_shape[0]) {
        if ((int64_t)h * w * c != env->obs_dim) {
            return apex_errf(
                err, errlen, -1, "%s: [env] obs_shape: %s is %lld elements, obs_dim is %d",
                WHERE("env", "obs_shape"), env->obs_shape, (long long)h * w * c, env->obs_dim);
        }
        env->obs_h = h, env->obs_w = w, env->obs_c = c;
    }
    if (env->obs_scale == 0) {
        env->obs_scale = env->obs_dtype == CONFIG_OBS_UINT8 ? 1.0 / 255.0 : 1.0;
    }
    return 0;
}

// [env] eval_id: a built-in env whose spaces are the run's (id = python or external).
static int s_cross_check_eval_id(const apex_config_t *cfg, char *err, size_t errlen) {
    const config_env_t *env = &cfg->env;
    if (!env->eval_id[0]) {
        return 0;
    }
    const envinfo_t *e = envinfo_find(env->eval_id);
    if (!e) {
        return apex_errf(err, errlen, -1,
                         "%s: [env] eval_id: '%s' is not a built-in environment (%s)",
                         WHERE("env", "eval_id"), env->eval_id, envinfo_known_ids());
    }
    if (e->obs_dim != env->obs_dim || e->n_actions != env->n_actions ||
        e->obs_dtype != env->obs_dtype || e->obs_h != env->obs_h || e->obs_w != env->obs_w ||
        e->obs_c != env->obs_c) {
        return apex_errf(err, errlen, -1,
                         "%s: [env] eval_id: %s has %d %s observation elements and %d actions; the "
                         "run's ([env] obs_dim, obs_dtype, obs_shape, n_actions) are %d %s and %d",
                         WHERE("env", "eval_id"), e->id, e->obs_dim,
                         e->obs_dtype == CONFIG_OBS_UINT8 ? "uint8" : "float32", e->n_actions,
                         env->obs_dim, env->obs_dtype == CONFIG_OBS_UINT8 ? "uint8" : "float32",
                         env->n_actions);
    }
    // Continuous: the evaluator acts with the run's policy, whose tanh head is scaled into the
    // run's bounds, so the built-in env's action_dim and bounds must be the run's too.
    int same = e->action_dim == env->action_dim;
    for (int i = 0; same && i < env->action_dim; i++) {
        same = e->action_low == env->action_low[i] && e->action_high == env->action_high[i];
    }
    if (!same) {
        return apex_errf(err, errlen, -1,
                         "%s: [env] eval_id: %s has continuous actions of %d floats in [%g, %g]; "
                         "the run's ([env] action_dim, action_low, action_high) are %d floats, "
                         "the first in [%g, %g]",
                         WHERE("env", "eval_id"), e->id, e->action_dim, (double)e->action_low,
                         (double)e->action_high, env->action_dim, (double)env->action_low[0],
                         (double)env->action_high[0]);
    }
    return 0;
}

// [env] id = python: the factory and [python]'s keys against [actor]'s.
static int s_cross_check_python(const apex_config_t *cfg, char *err, size_t errlen) {
    const config_env_t *env = &cfg->env;
    const config_python_t *py = &cfg->python;
    if (py->spawn && (!env->make[0] || !strchr(env->make, ':'))) {
        return apex_errf(err, errlen, -1,
                         "%s: [env] make: id = python needs the env factory as MODULE:CALLABLE "
                         "(have '%s'), e.g. apex_cartpole:CartPoleEnv",
                         WHERE("env", "make"), env->make);
    }
    const char *const kw[2] = {env->kwargs, env->eval_kwargs};
    for (int i = 0; i < 2; i++) {
        size_t kl = strlen(kw[i]);
        if (kl && (kw[i][0] != '{' || kw[i][kl - 1] != '}')) {
            const char *key = i ? "eval_kwargs" : "kwargs";
            return apex_errf(err, errlen, -1, "%s: [env] %s: '%s' is not a JSON object {...}",
                             WHERE("env", key), key, kw[i]);
        }
    }
    if (py->transport == CONFIG_PY_LOCAL && !py->spawn) {
        return apex_errf(err, errlen, -1,
                         "%s: [python] transport: local is for workers the actor spawns (%s: spawn "
                         "= false); workers started by hand connect with transport = zmq",
                         WHERE("python", "transport"), WHERE("python", "spawn"));
    }
    if (!py->spawn && strstr(py->bind, ":*")) {
        return apex_errf(err, errlen, -1,
                         "%s: [python] bind: '%s' has an ephemeral port; workers started by hand "
                         "(spawn = false) need a fixed one to connect to",
                         WHERE("python", "bind"), py->bind);
    }
    int64_t E = cfg->actor.envs_per_actor;
    if (E % py->workers != 0 || (E / py->workers) % py->groups != 0) {
        return apex_errf(
            err, errlen, -1,
            "%s: [python] workers %lld x groups %lld must divide [actor] "
            "envs_per_actor %lld (%s): each worker steps envs_per_actor / workers envs "
            "in groups of equal size",
            WHERE("python", E % py->workers ? "workers" : "groups"), (long long)py->workers,
            (long long)py->groups, (long long)E, WHERE("actor", "envs_per_actor"));
    }
    return 0;
}

// [env] action_low / action_high: "x" (every component) or action_dim comma-separated
// finite numbers, into out[0..dim).
static int s_parse_bounds(const char *text, int dim, float *out) {
    const char *p = text;
    int n = 0;
    while (*p && n < CONFIG_MAX_ACTION_DIM) {
        char *end;
        double v = strtod(p, &end);
        if (end == p || !isfinite(v) || fabs(v) > 3e38) {
            return -1;
        }
        out[n++] = (float)v;
        p = end + strspn(end, " ");
        if (*p == ',') {
            p++;
        } else if (*p) {
            return -1;
        }
    }
    if (*p || n == 0) {
        return -1;
    }
    if (n == 1) {
        for (int i = 1; i < dim; i++) {
            out[i] = out[0];
        }
        return 0;
    }
    return n == dim ? 0 : -1;
}

// The action space of id = python or external: discrete (n_actions >= 2) or continuous
// (action_dim >= 1 with its bounds), not both.
static int s_cross_check_ext_actions(apex_config_t *cfg, char *err, size_t errlen) {
    config_env_t *env = &cfg->env;
    if ((env->ext_n_actions >= 2) == (env->ext_action_dim >= 1)) {
        return apex_errf(err, errlen, -1,
                         "%s: [env] id = %s needs discrete actions (n_actions >= 2) or "
                         "continuous ones (action_dim >= 1 with action_low and action_high), one "
                         "of them (have n_actions %lld, action_dim %lld)",
                         WHERE("env", env->ext_action_dim ? "action_dim" : "n_actions"), env->id,
                         (long long)env->ext_n_actions, (long long)env->ext_action_dim);
    }
    env->n_actions = (int)env->ext_n_actions;
    env->action_dim = (int)env->ext_action_dim;
    if (env->action_dim == 0) {
        if (env->action_low_text[0] || env->action_high_text[0]) {
            return apex_errf(err, errlen, -1,
                             "%s: [env] action_low and action_high are for "
                             "continuous actions (action_dim >= 1)",
                             WHERE("env", env->action_low_text[0] ? "action_low" : "action_high"));
        }
        return 0;
    }
    const char *key = "action_low";
    int bad = s_parse_bounds(env->action_low_text, env->action_dim, env->action_low);
    if (bad == 0) {
        key = "action_high";
        bad = s_parse_bounds(env->action_high_text, env->action_dim, env->action_high);
    }
    if (bad) {
        return apex_errf(err, errlen, -1,
                         "%s: [env] %s: '%s' is not one finite number or %d comma-separated ones",
                         WHERE("env", key), key,
                         key[7] == 'l' ? env->action_low_text : env->action_high_text,
                         env->action_dim);
    }
    for (int i = 0; i < env->action_dim; i++) {
        if (!(env->action_low[i] < env->action_high[i])) {
            return apex_errf(err, errlen, -1,
                             "%s: [env] action_low[%d] = %g is not below action_high[%d] = %g",
                             WHERE("env", "action_low"), i, (double)env->action_low[i], i,
                             (double)env->action_high[i]);
        }
    }
    return 0;
}

// The learner's update follows the actions: dueling double DQN for discrete ones, DPG
// (actor and critic MLPs) for continuous ones, whose heads are plain: a policy's bounded
// action and a critic's one value. [network] dueling is the Q-network's head: with
// continuous actions it is off, whatever the file says (so that one base config serves both
// kinds of env, as --set env.id=Pendulum-v1 on configs/cartpole.ini), and --print-config
// shows it off.
static int s_cross_check_continuous(apex_config_t *cfg, char *err, size_t errlen) {
    if (cfg->env.action_dim == 0) {
        return 0;
    }
    if (cfg->network.conv_spec[0]) {
        return apex_errf(err, errlen, -1,
                         "%s: [network] conv: continuous actions train DPG's actor and critic, "
                         "MLPs over vector observations",
                         WHERE("network", "conv"));
    }
    if (cfg->learner.zero_stage == 3) {
        return apex_errf(
            err, errlen, -1,
            "%s: [learner] zero_stage = 3 (parameters sharded) is the DQN learner's; the "
            "DPG learner of continuous actions shards optimizer state and "
            "gradients: set [learner] zero_stage = 0, 1 or 2",
            WHERE("learner", "zero_stage"));
    }
    cfg->network.dueling = 0;
    return 0;
}

// [env] model_xml: a MuJoCo id's model file, given for it and for no other id. Only its
// presence: the file is read where the env is stepped (apex-actor and apex-eval load it at
// start-up, env_mujoco.h), not by the replay server or the learner, which need not see it.
static int s_cross_check_model_xml(const apex_config_t *cfg, const envinfo_t *e, char *err,
                                   size_t errlen) {
    const config_env_t *env = &cfg->env;
    if (envinfo_is_mujoco(e) && !env->model_xml[0]) {
        return apex_errf(err, errlen, -1,
                         "%s: [env] model_xml: %s is a MuJoCo task and needs the path of its "
                         "MuJoCo model (normally Gymnasium's own, which "
                         "scripts/fetch-mujoco-models installs into models/mujoco/; apex ships "
                         "none)",
                         WHERE("env", "model_xml"), e->id);
    }
    if (!envinfo_is_mujoco(e) && env->model_xml[0]) {
        return apex_errf(err, errlen, -1, "%s: [env] model_xml is for the MuJoCo ids (id is %s)",
                         WHERE("env", "model_xml"), env->id);
    }
    return 0;
}

// [env] frame_stack = K: the run's observation is K frames of what the env emits (frame-major,
// actor/framestack.h), so obs_dim and obs_c grow K-fold once everything that describes the
// env's own frame (obs_shape, eval_id, the built-in id's dims) has been checked.
static int s_apply_frame_stack(apex_config_t *cfg, char *err, size_t errlen) {
    config_env_t *env = &cfg->env;
    const int64_t k = env->frame_stack;
    env->frame_dim = env->obs_dim;
    env->frame_c = env->obs_c;
    if (k == 1) {
        return 0;
    }
    if (strcmp(env->id, CONFIG_ENV_EXTERNAL) == 0) {
        return apex_errf(err, errlen, -1,
                         "%s: [env] frame_stack = %lld with id = external: your own actors send "
                         "the observations; stack them there and give the stack's obs_shape"
                         "\n---> HINT: set [env] frame_stack = 1",
                         WHERE("env", "frame_stack"), (long long)k);
    }
    if ((int64_t)env->obs_dim * k > (1 << 20)) {
        return apex_errf(err, errlen, -1,
                         "%s: [env] frame_stack = %lld: %lld x %d elements is above the 2^20 an "
                         "observation may have",
                         WHERE("env", "frame_stack"), (long long)k, (long long)k, env->obs_dim);
    }
    env->obs_dim = (int)(env->obs_dim * k);
    env->obs_c = (int)(env->obs_c * k);
    return 0;
}

// Checks between keys, and the values derived from them.
static int s_cross_check(apex_config_t *cfg, char *err, size_t errlen) {
    config_env_t *env = &cfg->env;
    int is_python = strcmp(env->id, CONFIG_ENV_PYTHON) == 0;
    if (!is_python && (env->make[0] || env->kwargs[0] || env->eval_kwargs[0])) {
        const char *key = env->make[0] ? "make" : env->kwargs[0] ? "kwargs" : "eval_kwargs";
        return apex_errf(err, errlen, -1, "%s: [env] %s is for id = python (id is '%s')",
                         WHERE("env", key), key, env->id);
    }
    if (env->obs_layout == CONFIG_OBS_CHW && (!is_python || !env->obs_shape[0])) {
        // Only the bridge's workers can transpose, and only a shape says what C, H, W are.
        return apex_errf(err, errlen, -1,
                         "%s: [env] obs_layout = chw is for id = python with an obs_shape HxWxC "
                         "(the env workers transpose (C, H, W) observations to it); id is '%s'%s",
                         WHERE("env", "obs_layout"), env->id,
                         is_python ? ", obs_shape is empty" : "");
    }
    if (strcmp(env->id, CONFIG_ENV_EXTERNAL) == 0 || is_python) {
        if (env->obs_shape[0]) {
            int h, w, c;
            if (s_parse_shape(env->obs_shape, &h, &w, &c) != 0) {
                return apex_errf(err, errlen, -1,
                                 "%s: [env] obs_shape: '%s' is not HxWxC (positive, at most 2^20 "
                                 "elements)",
                                 WHERE("env", "obs_shape"), env->obs_shape);
            }
            if (env->ext_obs_dim == 0) {
                env->ext_obs_dim = (int64_t)h * w * c; // the shape gives the length
            }
        }
        if (env->ext_obs_dim < 1) {
            return apex_errf(err, errlen, -1,
                             "%s: [env] id = %s needs obs_dim (or obs_shape) (have %lld)",
                             WHERE("env", "id"), env->id, (long long)env->ext_obs_dim);
        }
        env->obs_dim = (int)env->ext_obs_dim;
        env->max_episode_steps = 0;
        if (s_cross_check_ext_actions(cfg, err, errlen) != 0 ||
            s_cross_check_continuous(cfg, err, errlen) != 0 ||
            s_cross_check_model_xml(cfg, NULL, err, errlen) != 0 ||
            s_cross_check_obs(cfg, NULL, err, errlen) != 0 || s_parse_conv(cfg, err, errlen) != 0 ||
            s_cross_check_eval_id(cfg, err, errlen) != 0 ||
            (is_python && s_cross_check_python(cfg, err, errlen) != 0) ||
            s_apply_frame_stack(cfg, err, errlen) != 0) {
            return -1;
        }
        return s_cross_check_sizes(cfg, err, errlen);
    }
    const envinfo_t *e = envinfo_find(env->id);
    if (!e) {
        return apex_errf(err, errlen, -1,
                         "%s: [env] id: unknown environment '%s' (known: %s, or %s, or %s)",
                         WHERE("env", "id"), env->id, envinfo_known_ids(), CONFIG_ENV_PYTHON,
                         CONFIG_ENV_EXTERNAL);
    }
    if (s_cross_check_model_xml(cfg, e, err, errlen) != 0) {
        return -1;
    }
    if (env->eval_id[0] && strcmp(env->eval_id, env->id) != 0) {
        return apex_errf(err, errlen, -1,
                         "%s: [env] eval_id is for id = python or external (id is %s)",
                         WHERE("env", "eval_id"), env->id);
    }
    // --print-config writes the derived values back, so a matching value is accepted.
    if ((env->ext_obs_dim != 0 && env->ext_obs_dim != e->obs_dim) ||
        (env->ext_n_actions != 0 && env->ext_n_actions != e->n_actions) ||
        (env->ext_action_dim != 0 && env->ext_action_dim != e->action_dim)) {
        return apex_errf(
            err, errlen, -1,
            "%s: [env] obs_dim, n_actions and action_dim are for id = python or "
            "external; %s has %d, %d and %d",
            WHERE("env", env->ext_obs_dim != 0 && env->ext_obs_dim != e->obs_dim ? "obs_dim"
                         : env->ext_n_actions != 0 && env->ext_n_actions != e->n_actions
                             ? "n_actions"
                             : "action_dim"),
            e->id, e->obs_dim, e->n_actions, e->action_dim);
    }
    if (env->action_low_text[0] || env->action_high_text[0]) {
        return apex_errf(err, errlen, -1,
                         "%s: [env] action_low and action_high are for id = python or external; "
                         "%s's are [%g, %g]",
                         WHERE("env", env->action_low_text[0] ? "action_low" : "action_high"),
                         e->id, (double)e->action_low, (double)e->action_high);
    }
    env->obs_dim = e->obs_dim;
    env->n_actions = e->n_actions;
    env->action_dim = e->action_dim;
    for (int i = 0; i < e->action_dim; i++) {
        env->action_low[i] = e->action_low, env->action_high[i] = e->action_high;
    }
    env->max_episode_steps = e->max_episode_steps;
    env->ext_obs_dim = e->obs_dim;
    env->ext_n_actions = e->n_actions;
    env->ext_action_dim = e->action_dim;
    if (s_cross_check_continuous(cfg, err, errlen) != 0 ||
        s_cross_check_obs(cfg, e, err, errlen) != 0 || s_parse_conv(cfg, err, errlen) != 0 ||
        s_apply_frame_stack(cfg, err, errlen) != 0) {
        return -1;
    }
    return s_cross_check_sizes(cfg, err, errlen);
}

// ---------------------------------------------------------------------------------------
// Batch sizes: [learner] and [actor] against [replay].

// [learner] batches_per_request = 0. Every request/reply pair costs each side a few
// system calls and I/O-thread wake-ups whatever its size (~28 per batch over TCP), so small
// replies are merged: up to 4 batches (3x the batches/s over TCP, bench/RESULTS.md), while
// a reply stays within 1 MiB (beyond that the copy, not the message, is the cost, and the
// learner's prefetch slots grow with it) and within [replay] max_batch.
static int64_t s_auto_batches_per_request(const apex_config_t *cfg) {
    const int64_t elem = cfg->env.obs_dtype == CONFIG_OBS_UINT8 ? 1 : 4;
    // obs and next_obs, key, weight, action, reward, discount
    const int64_t row_bytes = 2 * cfg->env.obs_dim * elem + 8 + 4 * 4;
    int64_t k = 4;
    k = APEX_MIN(k, cfg->replay.max_batch / cfg->learner.batch_size);
    k = APEX_MIN(k, (int64_t)(1 << 20) / (cfg->learner.batch_size * row_bytes));
    return APEX_MAX(k, (int64_t)1);
}

// The batch-size checks of s_cross_check.
static int s_cross_check_sizes(apex_config_t *cfg, char *err, size_t errlen) {
    if (cfg->replay.min_size_to_sample > cfg->replay.capacity) {
        return apex_errf(err, errlen, -1,
                         "%s: [replay] min_size_to_sample: %lld exceeds capacity %lld (%s; the "
                         "learner would wait forever)",
                         WHERE("replay", "min_size_to_sample"),
                         (long long)cfg->replay.min_size_to_sample, (long long)cfg->replay.capacity,
                         WHERE("replay", "capacity"));
    }
    if (cfg->learner.batch_size > cfg->replay.max_batch) {
        return apex_errf(err, errlen, -1,
                         "%s: [learner] batch_size: %lld exceeds [replay] max_batch %lld (%s)",
                         WHERE("learner", "batch_size"), (long long)cfg->learner.batch_size,
                         (long long)cfg->replay.max_batch, WHERE("replay", "max_batch"));
    }
    if (cfg->learner.batches_per_request == 0) {
        cfg->learner.batches_per_request = s_auto_batches_per_request(cfg);
    }
    if (cfg->learner.batch_size * cfg->learner.batches_per_request > cfg->replay.max_batch) {
        return apex_errf(err, errlen, -1,
                         "%s: [learner] batches_per_request: %lld batches of %lld exceed [replay] "
                         "max_batch %lld (the rows of one reply)",
                         WHERE("learner", "batches_per_request"),
                         (long long)cfg->learner.batches_per_request,
                         (long long)cfg->learner.batch_size, (long long)cfg->replay.max_batch);
    }
    if (cfg->actor.send_batch > cfg->replay.max_batch) {
        return apex_errf(err, errlen, -1,
                         "%s: [actor] send_batch: %lld exceeds [replay] max_batch %lld (%s)",
                         WHERE("actor", "send_batch"), (long long)cfg->actor.send_batch,
                         (long long)cfg->replay.max_batch, WHERE("replay", "max_batch"));
    }
    if (cfg->replay.compress != 0 && !cfg->replay.frame_storage) {
        return apex_errf(err, errlen, -1,
                         "%s: [replay] compress = %s needs frame_storage = true (frames are "
                         "compressed one by one, as they are stored)",
                         WHERE("replay", "compress"), cfg->replay.compress == 1 ? "lz4" : "zstd");
    }
    if (cfg->replay.compress == 2 && cfg->replay.compress_level > 22) {
        return apex_errf(err, errlen, -1,
                         "%s: [replay] compress_level %lld: zstd's levels are 1..22",
                         WHERE("replay", "compress_level"), (long long)cfg->replay.compress_level);
    }
    if (cfg->replay.compress == 0 && cfg->replay.compress_level != 0) {
        return apex_errf(
            err, errlen, -1,
            "%s: [replay] compress_level %lld without compress: it would change "
            "nothing\n---> HINT: set [replay] compress = zstd or lz4, or remove the key",
            WHERE("replay", "compress_level"), (long long)cfg->replay.compress_level);
    }
    // Frame mode: a batch carries at most max_batch frames, and an actor ships early when one
    // more step (up to 2 frames per env) could pass that, so there must be room for a step.
    if (config_frame_mode(cfg) && cfg->replay.max_batch < 4 * cfg->actor.envs_per_actor) {
        return apex_errf(err, errlen, -1,
                         "%s: [replay] max_batch %lld is below 4 x [actor] envs_per_actor (%lld) "
                         "with frame_storage: a batch must hold the frames of a few steps",
                         WHERE("replay", "max_batch"), (long long)cfg->replay.max_batch,
                         (long long)(4 * cfg->actor.envs_per_actor));
    }
    if (cfg->replay.frame_storage && cfg->env.frame_stack > 1 && cfg->replay.frame_capacity > 0 &&
        cfg->replay.frame_capacity < cfg->replay.shards * cfg->env.frame_stack) {
        return apex_errf(err, errlen, -1,
                         "%s: [replay] frame_capacity %lld holds less than one stack per shard",
                         WHERE("replay", "frame_capacity"), (long long)cfg->replay.frame_capacity);
    }
    return 0;
}

// ---------------------------------------------------------------------------------------
// The entry point: the environment, layers and batch sizes, then the replay shards.

// [run] blas_kernel: auto, openblas, or a core of CONFIG_BLAS_CORES (any case).
static int s_check_blas_kernel(const apex_config_t *cfg, char *err, size_t errlen) {
    const char *v = cfg->run.blas_kernel;
    if (strcmp(v, "auto") == 0 || strcmp(v, "openblas") == 0) {
        return 0;
    }
    size_t n = strlen(v);
    for (const char *p = CONFIG_BLAS_CORES; *p;) {
        size_t w = strcspn(p, " ");
        if (w == n && strncasecmp(p, v, n) == 0) {
            return 0;
        }
        p += w + (p[w] == ' ');
    }
    return apex_errf(err, errlen, -1,
                     "%s: [run] blas_kernel: '%s' is not auto, openblas or one of %s",
                     WHERE("run", "blas_kernel"), v, CONFIG_BLAS_CORES);
}

// [endpoints] relay: an ipc:// or tcp:// endpoint, and not tcp:// under CURVE (the relay's
// actor-facing side is plain: ipc:// sockets are guarded by file permissions, tcp:// would
// carry the weights in the clear).
static int s_check_relay(const apex_config_t *cfg, char *err, size_t errlen) {
    const char *r = cfg->endpoints.relay;
    if (!r[0]) {
        return 0;
    }
    int ipc = strncmp(r, "ipc://", 6) == 0 && r[6], tcp = strncmp(r, "tcp://", 6) == 0 && r[6];
    if (!ipc && !tcp) {
        return apex_errf(err, errlen, -1,
                         "%s: [endpoints] relay = '%s': need ipc://PATH or tcp://HOST:PORT",
                         WHERE("endpoints", "relay"), r);
    }
    if (tcp && cfg->security.mode == SECURITY_CURVE) {
        return apex_errf(err, errlen, -1,
                         "%s: [endpoints] relay = '%s' with [security] mode = curve: the relay "
                         "serves its host's actors without CURVE, so only over ipc://"
                         "\n---> HINT: use ipc://PATH (a path on the actors' host)",
                         WHERE("endpoints", "relay"), r);
    }
    return 0;
}

// [run] deterministic: what the fixed schedule needs (docs/architecture.md "Deterministic
// runs"). The ratio is what orders inserts against samples, so it must hold one; actors
// take their weights from the learner's own weights endpoint.
static int s_check_deterministic(const apex_config_t *cfg, char *err, size_t errlen) {
    if (!cfg->run.deterministic) {
        return 0;
    }
    if (!(cfg->replay.samples_per_insert > 0)) {
        return apex_errf(err, errlen, -1,
                         "%s: [run] deterministic needs [replay] samples_per_insert > 0 (it is 0 "
                         "at %s): the replay ratio is what fixes where each sample falls among "
                         "the inserts\n---> HINT: set [replay] samples_per_insert (the configs "
                         "use 8)",
                         WHERE("run", "deterministic"), WHERE("replay", "samples_per_insert"));
    }
    if (cfg->replay.shards > 1 &&
        cfg->actor.weight_sync_steps < cfg->actor.n_step * cfg->actor.envs_per_actor) {
        // Shards serve each place at their actors' share of its rows, so they stay within the
        // rows an actor holds back at a period's end (its unfinished n-step windows, up to
        // n_step x envs_per_actor) of each other; a period longer than that keeps the shard
        // that got ahead from waiting for the other's next period (docs/architecture.md).
        return apex_errf(err, errlen, -1,
                         "%s: [run] deterministic with [replay] shards = %lld needs [actor] "
                         "weight_sync_steps >= n_step x envs_per_actor (%lld < %lld x %lld): "
                         "shorter periods can leave one shard waiting on another for ever"
                         "\n---> HINT: raise [actor] weight_sync_steps (Ape-X: 400), or use "
                         "one replay shard",
                         WHERE("actor", "weight_sync_steps"), (long long)cfg->replay.shards,
                         (long long)cfg->actor.weight_sync_steps, (long long)cfg->actor.n_step,
                         (long long)cfg->actor.envs_per_actor);
    }
    if (cfg->endpoints.relay[0]) {
        return apex_errf(err, errlen, -1,
                         "%s: [run] deterministic with [endpoints] relay: actors take fixed "
                         "weights versions from the learner itself, which a relay does not keep"
                         "\n---> HINT: leave [endpoints] relay empty",
                         WHERE("run", "deterministic"));
    }
    return 0;
}

int config_check(apex_config_t *cfg, char *err, size_t errlen) {
    if (s_check_blas_kernel(cfg, err, errlen) != 0 || s_check_relay(cfg, err, errlen) != 0 ||
        s_check_deterministic(cfg, err, errlen) != 0) {
        return -1;
    }
    if (s_cross_check(cfg, err, errlen) != 0) {
        return -1;
    }
    return config_shard_check(cfg, err, errlen);
}
