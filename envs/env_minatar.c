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
//
// "MinAtar/<Game>-render84-v0" is the same game, the same minatar_t and the same seed, reset
// and act: only its observation differs, the game's frame drawn as one 84 x 84 grayscale
// image (minatar_render.h). Its steps and episodes are therefore those of
// "MinAtar/<Game>-v0" with the same seed and actions, step for step (tests/
// check_minatar_render.c).
#include "env.h"

#include "apex.h"
#include "minatar.h"
#include "minatar_render.h"

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

// ---------------------------------------------------------------------------------------
// Rendered: the game's frame as one 84 x 84 grayscale image

_Static_assert(MINATAR_RENDER_BYTES <= ENV_MAX_OBS_DIM, "a rendered frame fits vecenv's bound");

static void s_reset_render(void *state, rng_t *rng, void *frame) {
    (void)rng; // as s_reset's
    minatar_reset(state);
    minatar_render_observe(state, frame);
}

// No step_batch: vecenv calls this env by env. Drawing 7 KB dominates the step, and the
// plain spec's prefetching would save nothing next to it.
static void s_step_render(void *state, int32_t action, void *frame, float *reward,
                          uint8_t *terminated) {
    int term;
    minatar_act(state, action, reward, &term);
    *terminated = (uint8_t)term;
    minatar_render_observe(state, frame);
}

static void s_observe_render(const void *state, void *frame) {
    minatar_render_observe(state, frame);
}

// The rendered spec of table row ENVINFO_<key>_RENDER84: the plain spec's seed (var's
// s_seed_<plain>), with observations drawn by minatar_render.
#define MINATAR_RENDER_SPEC(var, plain, key)                                                       \
    const env_spec_t var = {.info = &envinfo_table[ENVINFO_##key##_RENDER84],                      \
                            .state_dim = 0,                                                        \
                            .state_bytes = sizeof(minatar_t),                                      \
                            .seed = s_seed_##plain,                                                \
                            .reset = s_reset_render,                                               \
                            .step = s_step_render,                                                 \
                            .observe = s_observe_render}

MINATAR_RENDER_SPEC(env_minatar_asterix_render84_spec, env_minatar_asterix_spec, ASTERIX);
MINATAR_RENDER_SPEC(env_minatar_breakout_render84_spec, env_minatar_breakout_spec, BREAKOUT);
MINATAR_RENDER_SPEC(env_minatar_freeway_render84_spec, env_minatar_freeway_spec, FREEWAY);
MINATAR_RENDER_SPEC(env_minatar_seaquest_render84_spec, env_minatar_seaquest_spec, SEAQUEST);
MINATAR_RENDER_SPEC(env_minatar_space_invaders_render84_spec, env_minatar_space_invaders_spec,
                    SPACE_INVADERS);

// ---------------------------------------------------------------------------------------
// Lookups

const minatar_game_t *env_minatar_game(const env_spec_t *spec) {
    static const struct {
        const env_spec_t *spec;
        const minatar_game_t *game;
    } map[] = {{&env_minatar_asterix_spec, &minatar_asterix_game},
               {&env_minatar_breakout_spec, &minatar_breakout_game},
               {&env_minatar_freeway_spec, &minatar_freeway_game},
               {&env_minatar_seaquest_spec, &minatar_seaquest_game},
               {&env_minatar_space_invaders_spec, &minatar_space_invaders_game},
               {&env_minatar_asterix_render84_spec, &minatar_asterix_game},
               {&env_minatar_breakout_render84_spec, &minatar_breakout_game},
               {&env_minatar_freeway_render84_spec, &minatar_freeway_game},
               {&env_minatar_seaquest_render84_spec, &minatar_seaquest_game},
               {&env_minatar_space_invaders_render84_spec, &minatar_space_invaders_game}};
    for (size_t i = 0; i < APEX_ARRAY_LEN(map); i++) {
        if (map[i].spec == spec) {
            return map[i].game;
        }
    }
    return NULL;
}
