// envinfo.c: see envinfo.h. Data only: nothing here may reference an environment's code,
// since the replay server and the learner link this file (through libapexcommon).
#include "envinfo.h"

#include <string.h>

// Each row is consistent in itself: an image's length is its shape's, a vector has no
// shape, and its actions are either discrete (n_actions > 0) or continuous (action_dim > 0),
// not both. Checked at compile time, row by row. A continuous row's low < high is checked
// by check_envinfo instead: a float comparison is not an integer constant expression, and
// clang (the fuzz build) refuses it in _Static_assert where gcc lets it through.
#define ENVINFO_X_CHECK(KEY, spec, id, obs_dim, obs_dtype, h, w, c, scale, n_actions, action_dim,  \
                        low, high, max_steps)                                                      \
    _Static_assert((h) == 0 ? (w) == 0 && (c) == 0 : (obs_dim) == (h) * (w) * (c),                 \
                   id ": obs_dim must be obs_h * obs_w * obs_c, and a vector has no shape");       \
    _Static_assert((obs_dim) > 0 && (max_steps) >= 0, id ": obs_dim must be positive");            \
    _Static_assert(((n_actions) > 0) != ((action_dim) > 0),                                        \
                   id ": discrete (n_actions) or continuous (action_dim) actions");
ENVINFO_TABLE(ENVINFO_X_CHECK)

#define ENVINFO_X_ROW(KEY, spec, id_, obs_dim_, obs_dtype_, h, w, c, scale, n_actions_,            \
                      action_dim_, low, high, max_steps)                                           \
    [ENVINFO_##KEY] = {.id = id_,                                                                  \
                       .obs_dim = obs_dim_,                                                        \
                       .obs_dtype = obs_dtype_,                                                    \
                       .obs_h = h,                                                                 \
                       .obs_w = w,                                                                 \
                       .obs_c = c,                                                                 \
                       .obs_scale = scale,                                                         \
                       .n_actions = n_actions_,                                                    \
                       .action_dim = action_dim_,                                                  \
                       .action_low = low,                                                          \
                       .action_high = high,                                                        \
                       .max_episode_steps = max_steps},
const envinfo_t envinfo_table[ENVINFO_COUNT] = {ENVINFO_TABLE(ENVINFO_X_ROW)};

// ", CartPole-v1, Acrobot-v1, ...": the list with a leading separator, skipped on return.
#define ENVINFO_X_ID(KEY, spec, id, ...) ", " id
static const char s_known_ids[] = ENVINFO_TABLE(ENVINFO_X_ID);

// A linear scan: a few rows, looked up at start-up.
const envinfo_t *envinfo_find(const char *id) {
    if (id == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < ENVINFO_COUNT; i++) {
        if (strcmp(envinfo_table[i].id, id) == 0) {
            return &envinfo_table[i];
        }
    }
    return NULL;
}

const char *envinfo_known_ids(void) { return s_known_ids + 2; }

size_t envinfo_obs_bytes(const envinfo_t *e) {
    return (size_t)e->obs_dim * (e->obs_dtype == ENVINFO_OBS_U8 ? 1 : sizeof(float));
}

// The MuJoCo rows by index: the sub-table expanded once more (its rows are listed once).
#define ENVINFO_X_MUJOCO(KEY, ...) [ENVINFO_##KEY] = 1,
static const unsigned char s_is_mujoco[ENVINFO_COUNT] = {ENVINFO_MUJOCO_TABLE(ENVINFO_X_MUJOCO)};

// Equality only: e may be any pointer (ordering unrelated pointers is undefined).
int envinfo_is_mujoco(const envinfo_t *e) {
    for (size_t i = 0; i < ENVINFO_COUNT; i++) {
        if (e == &envinfo_table[i]) {
            return s_is_mujoco[i];
        }
    }
    return 0;
}
