// minatar.h: the five MinAtar games (Young & Tian 2019), bit-exact to the reference.
//
// What it does: ports kenjyoung/MinAtar at commit 4241f24 (version 1.0.15): Asterix,
// Breakout, Freeway, Seaquest and Space Invaders, with the semantics of its wrapper
// minatar/environment.py, so that for the same seed and the same actions every observation,
// reward and terminal flag equals the reference's. That covers:
// - one numpy RandomState (nprandom_t) shared by the sticky-action draws and the game, seeded
//   with RandomState(seed); minatar_seed replaces it and does not reset (as Environment.seed),
//   so the reference's sequence is minatar_seed, minatar_reset, minatar_act...;
// - sticky actions: every act draws one rand(), also when the probability is 0 and also when
//   the game is already over; if it is below sticky_prob the previous action is repeated.
//   last_action starts at 0 and is kept across resets (the wrapper never clears it);
// - act on a finished game: the draw happens, last_action is updated, the game does not
//   change, and the reward is 0 with terminal 1;
// - the games' quirks, kept on purpose (see each minatar_<game>.c): Seaquest's diver count
//   going negative after surfacing with 6, Freeway's car period |speed| + 1 and its 2500-step
//   limit (terminal on act 2501), Asterix's ramp every 102 steps, the exact order of draws.
// tests/fixtures/gen_minatar.py records the reference itself; tests/check_minatar.c replays it.
//
// Actions are always the 6 of the reference (MINATAR_NOOP..MINATAR_FIRE), whatever the game;
// minimal_actions lists the ones that matter. Observations are 10 x 10 x channels bytes, 0 or
// 1, laid out [y][x][c] (the reference's state(), channels last). Rewards are the reference's
// integers (Seaquest's surfacing bonus is oxygen * 10 // 200) returned as floats.
//
// What it deliberately does not do: rendering, the gym wrappers (minimal-action v1 ids),
// numpy's unseeded construction (the reference's constructor draws from entropy; here an
// unseeded minatar_t is seeded with 0 by minatar_init, and callers seed before resetting), or
// continuous state. No allocation: minatar_t is plain fixed-size data (about 4 KB, 2.5 KB of
// it the RNG) that can be copied, embedded in arrays or memcmp'ed. Not thread-safe: one
// minatar_t per thread at a time; the game table is static and shared.
#ifndef APEX_MINATAR_H
#define APEX_MINATAR_H

#include "nprandom.h"

#include <stddef.h>
#include <stdint.h>

#define MINATAR_SIZE 10 // the grid is MINATAR_SIZE x MINATAR_SIZE cells
#define MINATAR_MAX_CHANNELS 10
#define MINATAR_MAX_OBS (MINATAR_SIZE * MINATAR_SIZE * MINATAR_MAX_CHANNELS) // bytes
#define MINATAR_N_ACTIONS 6
#define MINATAR_STICKY_PROB_DEFAULT 0.1 // Environment(sticky_action_prob=0.1)

// The reference's action_map ['n','l','u','r','d','f'].
enum { MINATAR_NOOP, MINATAR_LEFT, MINATAR_UP, MINATAR_RIGHT, MINATAR_DOWN, MINATAR_FIRE };

// ---------------------------------------------------------------------------------------
// Per-game state: plain data mirroring the reference's attributes (names kept).

typedef struct {
    int8_t x, lr, gold, present; // [x, y = slot + 1, moving right, is gold] or None
} minatar_asterix_entity_t;

typedef struct {
    int32_t player_x, player_y;
    minatar_asterix_entity_t entities[8]; // one slot per row 1..8
    int32_t spawn_speed, spawn_timer, move_speed, move_timer, ramp_timer, ramp_index;
} minatar_asterix_t;

typedef struct {
    int32_t ball_x, ball_y, ball_dir, pos, last_x, last_y, strike;
    uint8_t brick_map[MINATAR_SIZE][MINATAR_SIZE];
} minatar_breakout_t;

typedef struct {
    int32_t x, y, timer, speed; // speed in -5..5, sign is the direction
} minatar_freeway_car_t;

typedef struct {
    minatar_freeway_car_t cars[8]; // car i drives in row i + 1
    int32_t pos, move_timer, terminate_timer;
} minatar_freeway_t;

// Seaquest keeps Python lists; these are their capacities, each above what the rules allow
// (asserted when an element is added): a bullet lives <= 10 steps and the cooldown is 5;
// at most one enemy spawns per step and one lives <= 10 * (5 + 1) steps; a sub keeps at most
// one bullet in the water; a diver spawns every 30 steps and lives <= 60.
#define MINATAR_SEAQUEST_MAX_F_BULLETS 8
#define MINATAR_SEAQUEST_MAX_ENEMIES 64
#define MINATAR_SEAQUEST_MAX_E_BULLETS 128
#define MINATAR_SEAQUEST_MAX_DIVERS 8

typedef struct {
    int8_t v[5]; // the list's ints/bools: [x, y, lr(, timer(, shot timer))]
} minatar_seaquest_obj_t;

typedef struct {
    int32_t oxygen, diver_count, sub_x, sub_y, sub_or, surface;
    int32_t e_spawn_speed, e_spawn_timer, d_spawn_timer, move_speed, ramp_index, shot_timer;
    int32_t n_f_bullets, n_e_bullets, n_e_fish, n_e_subs, n_divers;
    minatar_seaquest_obj_t f_bullets[MINATAR_SEAQUEST_MAX_F_BULLETS]; // [x, y, dir]
    minatar_seaquest_obj_t e_bullets[MINATAR_SEAQUEST_MAX_E_BULLETS]; // [x, y, dir]
    minatar_seaquest_obj_t e_fish[MINATAR_SEAQUEST_MAX_ENEMIES];      // [x, y, lr, move timer]
    minatar_seaquest_obj_t e_subs[MINATAR_SEAQUEST_MAX_ENEMIES];      // ... + shot timer
    minatar_seaquest_obj_t divers[MINATAR_SEAQUEST_MAX_DIVERS];       // [x, y, lr, move timer]
} minatar_seaquest_t;

typedef struct {
    // The 0/1 maps as one 10-bit row mask per row: bit x is column x.
    uint16_t alien_map[MINATAR_SIZE], f_bullet_map[MINATAR_SIZE], e_bullet_map[MINATAR_SIZE];
    int32_t pos, alien_dir, enemy_move_interval, alien_move_timer, alien_shot_timer;
    int32_t ramp_index, shot_timer;
} minatar_space_invaders_t;

// ---------------------------------------------------------------------------------------
// One environment

typedef struct minatar_game minatar_game_t;

typedef struct {
    const minatar_game_t *game; // borrowed, static
    nprandom_t rng;             // Environment.random, shared with the game
    double sticky_prob;         // Environment.sticky_action_prob
    int32_t last_action;        // Environment.last_action
    uint8_t ramping;            // difficulty_ramping (ignored by Breakout and Freeway)
    uint8_t terminal;           // the game's self.terminal
    union {
        minatar_asterix_t asterix;
        minatar_breakout_t breakout;
        minatar_freeway_t freeway;
        minatar_seaquest_t seaquest;
        minatar_space_invaders_t space_invaders;
    } s;
} minatar_t;

// A game: constants and the functions the wrapper calls. act runs on a game that is not
// terminal and returns the reward; it may set m->terminal.
struct minatar_game {
    const char *name; // the reference's module name: "asterix", "breakout", "freeway",
                      // "seaquest", "space_invaders"
    int channels;
    int n_minimal_actions;
    int minimal_actions[MINATAR_N_ACTIONS]; // minimal_action_set(), in the reference's order
    void (*reset)(minatar_t *m);
    int (*act)(minatar_t *m, int action);
    // Writes the frame's ones into obs, which the caller zeroed, or, for a game with
    // whole_frame set, every byte of the frame (rows copied whole, where that is cheaper
    // than zeroing them first: Asterix).
    void (*observe)(const minatar_t *m, uint8_t *obs);
    int whole_frame;
    int (*difficulty_ramp)(const minatar_t *m); // ramp_index, or -1 where there is none
};

extern const minatar_game_t minatar_asterix_game;
extern const minatar_game_t minatar_breakout_game;
extern const minatar_game_t minatar_freeway_game;
extern const minatar_game_t minatar_seaquest_game;
extern const minatar_game_t minatar_space_invaders_game;

// The game called name (exact, e.g. "breakout"), or NULL. Thread-safe; static storage.
const minatar_game_t *minatar_find(const char *name);
// The n-th game (0 .. minatar_game_count() - 1), in the order above, for listings.
int minatar_game_count(void);
const minatar_game_t *minatar_game_at(int i);

// Environment(game, sticky_action_prob=sticky_prob, difficulty_ramping=ramping): sets up m
// (any prior content is overwritten), seeds its RNG with 0 and resets. sticky_prob in [0, 1]
// and game != NULL are asserted.
void minatar_init(minatar_t *m, const minatar_game_t *game, double sticky_prob, int ramping);
// Environment.seed(seed): a new RandomState(seed) for the wrapper and the game. Does not reset.
void minatar_seed(minatar_t *m, uint32_t seed);
// Environment.reset(): a new episode (Breakout and Freeway draw from the RNG here).
void minatar_reset(minatar_t *m);
// Environment.act(action): one step. action in [0, 6) is asserted. Writes the reward and the
// terminal flag (either pointer may be NULL).
void minatar_act(minatar_t *m, int action, float *reward, int *terminal);
// minatar_act's body without the check of action, inline for loops over many envs
// (env_minatar.c's step_batch, whose caller has checked every action): the sticky draw,
// then the game's act unless it is over. Returns the reward; m->terminal is the flag.
static inline int minatar_act_inline(minatar_t *m, int action) {
    // Environment.act: the draw comes first and always happens.
    if (nprandom_rand_below(&m->rng, m->sticky_prob)) { // rand() < sticky_prob
        action = m->last_action;
    }
    m->last_action = action;
    // Every game's act starts with `if self.terminal: return 0, True`.
    return m->terminal ? 0 : m->game->act(m, action);
}
// Environment.state(): writes 10 * 10 * channels bytes (0/1), [y][x][c], into obs.
void minatar_observe(const minatar_t *m, uint8_t *obs);
static inline size_t minatar_obs_size(const minatar_t *m) {
    return (size_t)MINATAR_SIZE * MINATAR_SIZE * (size_t)m->game->channels;
}

// ---------------------------------------------------------------------------------------
// Debugging and test helpers

// 64-bit FNV-1a over n bytes (the fixtures' observation hash, which keeps its low 32 bits).
uint64_t minatar_fnv1a64(const uint8_t *data, size_t n);
// The fixtures' and traces' action stream, a 64-bit LCG (Knuth's MMIX constants):
// *state = *state * 6364136223846793005 + 1442695040888963407; returns (*state >> 33) % 6.
int minatar_lcg_action(uint64_t *state);
// Packs n 0/1 bytes into (n + 7) / 8 bytes, least significant bit first
// (numpy.packbits(bitorder='little')).
void minatar_pack_bits(uint8_t *out, const uint8_t *obs, size_t n);

// Formats one step as a text line (no newline) into buf of cap bytes, the same line
// tests/fixtures/gen_minatar.py --trace prints from the reference, so the two can be diffed:
//   t=<step> a=<action> ea=<applied action> r=<reward %g> term=<0|1> obs=<hex>
// action is what was passed to act and ea the action applied after the sticky draw
// (m->last_action); both are -1 for the observation right after a reset. obs is the packed
// observation (minatar_pack_bits) in lower-case hex. Returns the length snprintf would
// write (>= cap means truncated; MINATAR_TRACE_LINE_MAX always suffices).
#define MINATAR_TRACE_LINE_MAX (96 + 2 * (MINATAR_MAX_OBS / 8))
int minatar_format_step(char *buf, size_t cap, int64_t t, int action, int applied, float reward,
                        int terminal, const uint8_t *obs, int channels);

#endif
