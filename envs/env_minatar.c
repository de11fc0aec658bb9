// env_minatar.c: the five MinAtar games (envs/minatar.h, exact to kenjyoung/MinAtar 4241f24)
// as env specs: "MinAtar/<Game>-v0", the ids MinAtar's own Gymnasium registration gives the
// full 6-action set the paper's results use. Sticky actions (probability 0.1) and difficulty
// ramping are on, as in minatar.Environment's defaults.
//
// Seeding: each env's numpy RandomState is seeded once (spec->seed) with a 32-bit value
// drawn from the env's apex stream (seed, RNG_ROLE_ENV, global env index), and is never
// re-seeded: like the reference's Environment, the one stream runs on through every reset and
// both the sticky draws and the game draw from it. Episodes have no time limit (MinAtar's
// registration sets none; Freeway ends itself after 2 500 steps).
#include "env.h"

#include "apex.h"
#include "minatar.h"

#include <string.h>

_Static_assert(sizeof(minatar_t) <= ENV_MAX_STATE_BYTES, "a MinAtar state fits vecenv's bound");

static void s_seed(void *state, rng_t *rng, const minatar_game_t *game) {
    minatar_t *m = state;
    minatar_init(m, game, MINATAR_STICKY_PROB_DEFAULT, 1);
    minatar_seed(m, (uint32_t)(rng_next_u64(rng) >> 32));
}

static void s_reset(void *state, rng_t *rng, void *obs) {
    (void)rng; // the game's own RandomState, seeded in s_seed, draws the start state
    minatar_reset(state);
    minatar_observe(state, obs);
}

static void s_step(void *state, int32_t action, void *obs, float *reward, uint8_t *terminated) {
    int term;
    minatar_act(state, action, reward, &term);
    *terminated = (uint8_t)term;
    minatar_observe(state, obs);
}

static void s_observe(const void *state, void *obs) { minatar_observe(state, obs); }

// n steps at once, the same as n calls of s_step: the n observations are zeroed by one
// memset of the block instead of one per env (they are sparse 0/1 frames, mostly zeros;
// a memset of one frame with a constant size compiles to rep stos, slower at this size),
// unless the game writes its frames whole, and each game writes its ones straight into its
// frame. A minatar_t is ~4 KB (the RNG's 2.5 KB first), so consecutive envs' states are far
// apart: the next env's game state, its RNG position and the RNG word it will draw are
// prefetched (a few percent; prefetching the whole game state was slower).
static void s_step_batch(void *states, int n, const int32_t *actions, void *obs_out, float *rewards,
                         uint8_t *terminated) {
    minatar_t *m = states;
    uint8_t *obs = obs_out;
    size_t O = minatar_obs_size(&m[0]);
    if (!m[0].game->whole_frame) {
        memset(obs, 0, (size_t)n * O);
    }
    for (int i = 0; i < n; i++) {
        if (i + 1 < n) {
            const minatar_t *next = &m[i + 1];
            __builtin_prefetch(&next->rng.pos);
            __builtin_prefetch(&next->s);
            __builtin_prefetch((const char *)&next->s + 64);
            __builtin_prefetch(&next->rng.key[next->rng.pos < NPRANDOM_N ? next->rng.pos : 0]);
        }
        // minatar_act inline: the wrapper costs no call (a predictable check of the action
        // stays: the games index tables with it).
        APEX_ASSERT((unsigned)actions[i] < MINATAR_N_ACTIONS);
        rewards[i] = (float)minatar_act_inline(&m[i], actions[i]);
        terminated[i] = m[i].terminal;
        m[i].game->observe(&m[i], obs + (size_t)i * O);
    }
}

// The spec of table row ENVINFO_<key>, stepping game (whose channels are the row's obs_c:
// check_envinfo).
#define MINATAR_SPEC(var, key, game)                                                               \
    static void s_seed_##var(void *state, rng_t *rng) { s_seed(state, rng, &game); }               \
    const env_spec_t var = {.info = &envinfo_table[ENVINFO_##key],                                 \
                            .state_dim = 0,                                                        \
                            .state_bytes = sizeof(minatar_t),                                      \
                            .seed = s_seed_##var,                                                  \
                            .reset = s_reset,                                                      \
                            .step = s_step,                                                        \
                            .observe = s_observe,                                                  \
                            .step_batch = s_step_batch}

MINATAR_SPEC(env_minatar_asterix_spec, ASTERIX, minatar_asterix_game);
MINATAR_SPEC(env_minatar_breakout_spec, BREAKOUT, minatar_breakout_game);
MINATAR_SPEC(env_minatar_freeway_spec, FREEWAY, minatar_freeway_game);
MINATAR_SPEC(env_minatar_seaquest_spec, SEAQUEST, minatar_seaquest_game);
MINATAR_SPEC(env_minatar_space_invaders_spec, SPACE_INVADERS, minatar_space_invaders_game);

const minatar_game_t *env_minatar_game(const env_spec_t *spec) {
    static const struct {
        const env_spec_t *spec;
        const minatar_game_t *game;
    } map[] = {{&env_minatar_asterix_spec, &minatar_asterix_game},
               {&env_minatar_breakout_spec, &minatar_breakout_game},
               {&env_minatar_freeway_spec, &minatar_freeway_game},
               {&env_minatar_seaquest_spec, &minatar_seaquest_game},
               {&env_minatar_space_invaders_spec, &minatar_space_invaders_game}};
    for (size_t i = 0; i < APEX_ARRAY_LEN(map); i++) {
        if (map[i].spec == spec) {
            return map[i].game;
        }
    }
    return NULL;
}
