// env.c: the implementation registry and the vectorised lock-step wrapper (vecenv_t).
//
// The registry is the env table (envinfo.h) expanded once more: row i's spec, found by the
// row's index, so an id is looked up in the table and nowhere else. Adding an environment is
// one row in ENVINFO_TABLE and one spec in its own env_*.c. vecenv_t keeps every per-env
// array flat and preallocated, so the actor's hot loop (vecenv_step) is a loop of spec->step
// calls plus bookkeeping, with no allocation.
#include "env.h"

#include "apex.h"
#include "config.h"
#include "xalloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------
// Registry

// One dtype code everywhere: the table's, the config's and the wire's.
_Static_assert((int)ENVINFO_OBS_F32 == (int)CONFIG_OBS_FLOAT32 &&
                   (int)ENVINFO_OBS_U8 == (int)CONFIG_OBS_UINT8,
               "envinfo_obs_dtype is config_obs_dtype");

// Every row fits vecenv's observation bound (checked at compile time, row by row).
#define ENV_X_FITS(KEY, spec, id, obs_dim, ...)                                                    \
    _Static_assert((obs_dim) <= ENV_MAX_OBS_DIM, id ": obs_dim above ENV_MAX_OBS_DIM");
ENVINFO_TABLE(ENV_X_FITS)

// Row i's spec at index i (check_envinfo: s_registry[i]->info == &envinfo_table[i]).
#define ENV_X_REGISTER(KEY, spec, ...) [ENVINFO_##KEY] = &spec,
static const env_spec_t *const s_registry[ENVINFO_COUNT] = {ENVINFO_TABLE(ENV_X_REGISTER)};

size_t env_obs_bytes(const env_spec_t *spec) { return envinfo_obs_bytes(spec->info); }

const env_spec_t *env_find(const char *id) {
    const envinfo_t *e = envinfo_find(id);
    return e ? s_registry[e - envinfo_table] : NULL;
}

void env_set_state(const env_spec_t *spec, void *state, const double *values, void *obs_out) {
    APEX_ASSERT(spec->state_dim > 0); // classic control only
    memcpy(state, values, (size_t)spec->state_dim * sizeof(double));
    if (obs_out != NULL) {
        spec->observe(state, obs_out);
    }
}

// ---------------------------------------------------------------------------------------
// vecenv_t

void vecenv_init(vecenv_t *v, const env_spec_t *spec, int n, uint64_t seed, uint64_t first_index,
                 int episodes_cap) {
    APEX_ASSERT(spec != NULL && n > 0 && episodes_cap > 0);
    APEX_ASSERT(spec->info->obs_dim <= ENV_MAX_OBS_DIM && spec->state_dim <= ENV_MAX_STATE_DIM &&
                spec->state_bytes <= ENV_MAX_STATE_BYTES);
    memset(v, 0, sizeof(*v));
    // Every array is sized here, once: vecenv_step and the resets it triggers only touch
    // memory allocated now (STYLE S8).
    v->spec = spec;
    v->n = n;
    v->obs_bytes = env_obs_bytes(spec);
    const size_t N = (size_t)n;
    v->state = xcalloc(N, spec->state_bytes);
    v->rng = xcalloc(N, sizeof(rng_t));
    v->obs = xcalloc(N, v->obs_bytes);
    v->final_obs = xcalloc(N, v->obs_bytes);
    v->ep_return = xcalloc(N, sizeof(double));
    v->ep_len = xcalloc(N, sizeof(int32_t));
    v->done = xcalloc((size_t)episodes_cap, sizeof(vecenv_episode_t));
    v->done_cap = episodes_cap;
    // One stream per env keyed by its *global* index, not one stream per actor: an env's
    // episodes then do not depend on how many envs its actor runs or in what order.
    for (int i = 0; i < n; i++) {
        rng_init_stream(&v->rng[i], seed, RNG_ROLE_ENV, first_index + (uint64_t)i);
        uint8_t *st = v->state + (size_t)i * spec->state_bytes;
        if (spec->seed) {
            spec->seed(st, &v->rng[i]);
        }
        spec->reset(st, &v->rng[i], v->obs + (size_t)i * v->obs_bytes);
    }
}

void vecenv_fini(vecenv_t *v) {
    if (v->state != NULL && v->spec->fini != NULL) {
        for (int i = 0; i < v->n; i++) {
            v->spec->fini(v->state + (size_t)i * v->spec->state_bytes);
        }
    }
    free(v->state);
    free(v->rng);
    free(v->obs);
    free(v->final_obs);
    free(v->ep_return);
    free(v->ep_len);
    free(v->done);
    memset(v, 0, sizeof(*v));
}

// Starts env i's next episode: its running return and length back to 0, and its reset
// observation written into v->obs.
static void s_vecenv_restart(vecenv_t *v, int i) {
    const env_spec_t *spec = v->spec;
    v->ep_return[i] = 0.0;
    v->ep_len[i] = 0;
    spec->reset(v->state + (size_t)i * spec->state_bytes, &v->rng[i],
                v->obs + (size_t)i * v->obs_bytes);
}

// Records env i's finished episode (or counts it as dropped when the buffer is full), keeps
// its final observation in v->final_obs, then starts the next one, writing its first
// observation into v->obs.
static void s_vecenv_finish(vecenv_t *v, int i) {
    // Full buffer: drop the newest report rather than shift the old ones out. Reports are
    // statistics only; the count of drops says the caller drains too rarely.
    if (v->done_count < v->done_cap) {
        v->done[v->done_count++] =
            (vecenv_episode_t){.ret = v->ep_return[i], .len = v->ep_len[i], .env = i};
    } else {
        v->episodes_dropped++;
    }
    v->episodes++;
    const size_t O = v->obs_bytes;
    memcpy(v->final_obs + (size_t)i * O, v->obs + (size_t)i * O, O);
    s_vecenv_restart(v, i);
}

// Folds env i's step into its episode and applies the time limit (pass 2 of a step):
// writes *truncated, and auto-resets the env when the episode ended.
// T is the spec's max_episode_steps.
static void s_vecenv_fold(vecenv_t *v, int i, int T, float reward, uint8_t terminated,
                          uint8_t *truncated) {
    v->ep_return[i] += (double)reward;
    v->ep_len[i]++;
    // TimeLimit semantics: truncated depends on the step count only, so a terminal step
    // that is also the last allowed one reports both.
    *truncated = (uint8_t)(T > 0 && v->ep_len[i] >= T);
    if (terminated || *truncated) {
        s_vecenv_finish(v, i);
    }
}

void vecenv_step(vecenv_t *v, const int32_t *actions, float *rewards, uint8_t *terminated,
                 uint8_t *truncated) {
    const env_spec_t *spec = v->spec;
    const size_t S = spec->state_bytes, O = v->obs_bytes;
    const int A = spec->info->n_actions, T = spec->info->max_episode_steps;
    // A continuous env steps with vecenv_step_cont: calling this on one is a bug (S6.1).
    APEX_ASSERT(A > 0 && spec->step != NULL);
    // Actions come from our own policy code, so a bad one is a bug, not input (S6.1).
    // Checked for all envs before any steps, so an abort never leaves half a vector stepped.
    for (int i = 0; i < v->n; i++) {
        APEX_ASSERT(actions[i] >= 0 && actions[i] < A);
    }
    // Pass 1: physics for all envs (batched where the spec can overlap its libm calls),
    // writing straight into the observations to act on: for the envs whose episode goes on
    // they are the same, and the few that end are set apart in pass 2.
    if (spec->step_batch != NULL) {
        spec->step_batch(v->state, v->n, actions, v->obs, rewards, terminated);
    } else {
        for (int i = 0; i < v->n; i++) {
            spec->step(v->state + (size_t)i * S, actions[i], v->obs + (size_t)i * O, &rewards[i],
                       &terminated[i]);
        }
    }
    // Pass 2: bookkeeping and auto-reset: an ended episode's final observation moves to
    // v->final_obs and its reset observation takes its place in v->obs.
    for (int i = 0; i < v->n; i++) {
        s_vecenv_fold(v, i, T, rewards[i], terminated[i], &truncated[i]);
    }
    v->steps += (uint64_t)v->n;
}

void vecenv_step_cont(vecenv_t *v, const float *actions, float *rewards, uint8_t *terminated,
                      uint8_t *truncated, uint8_t *void_step) {
    const env_spec_t *spec = v->spec;
    const size_t S = spec->state_bytes, O = v->obs_bytes;
    const int D = spec->info->action_dim, T = spec->info->max_episode_steps;
    // A discrete env steps with vecenv_step (S6.1).
    APEX_ASSERT(D > 0 && spec->step_cont != NULL);
    // The policy's actions must be finite (env.h): a NaN would pass through the envs'
    // clipping (as through Gymnasium's) into the state. Checked before any env steps.
    for (size_t k = 0; k < (size_t)v->n * (size_t)D; k++) {
        APEX_ASSERT(isfinite(actions[k]));
    }
    // Pass 1: physics, into the observations to act on (see vecenv_step). No clipping here:
    // each spec treats out-of-bounds actions the way its Gymnasium env does.
    for (int i = 0; i < v->n; i++) {
        spec->step_cont(v->state + (size_t)i * S, actions + (size_t)i * (size_t)D,
                        v->obs + (size_t)i * O, &rewards[i], &terminated[i]);
    }
    // Pass 2: as vecenv_step's, except for void steps (terminated == 2, a state that is no
    // longer finite): the env starts over and the step counts nowhere, neither as a frame
    // nor in an episode; the cut episode is not reported.
    uint64_t voids = 0;
    for (int i = 0; i < v->n; i++) {
        const int is_void = terminated[i] == 2;
        APEX_ASSERT(terminated[i] <= 2);
        if (void_step != NULL) {
            void_step[i] = (uint8_t)is_void;
        }
        if (is_void) {
            rewards[i] = 0.0f; // the spec's may be NaN or inf
            terminated[i] = 0;
            truncated[i] = 0;
            s_vecenv_restart(v, i);
            voids++;
            continue;
        }
        s_vecenv_fold(v, i, T, rewards[i], terminated[i], &truncated[i]);
    }
    v->steps += (uint64_t)v->n - voids;
    v->void_steps += voids;
}

int vecenv_drain_episodes(vecenv_t *v, vecenv_episode_t *out, int cap) {
    int k = APEX_MIN(cap, v->done_count);
    if (k <= 0) {
        return 0;
    }
    memcpy(out, v->done, (size_t)k * sizeof(vecenv_episode_t));
    // Keep the rest, oldest first; the buffer is small, so the move is cheap.
    memmove(v->done, v->done + k, (size_t)(v->done_count - k) * sizeof(vecenv_episode_t));
    v->done_count -= k;
    return k;
}
