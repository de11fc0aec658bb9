// minatar_asterix.c: MinAtar Asterix (minatar/environments/asterix.py at 4241f24).
//
// The player moves in 4 directions over rows 1..8; enemies and gold enter from the sides,
// one per row. Gold gives +1, an enemy ends the episode. Channels: player 0, enemy 1,
// trail 2, gold 3.
//
// Kept from the reference: the spawn draws rand() < 1/2 (direction) and rand() < 1/3 (gold)
// even when every row is taken, then randint(#free rows), which draws nothing with one free
// row; collisions are tested before and after the move; the ramp counts ramp_timer from 100
// down to -1 before it fires (every 102 steps), and stops for good once both speeds are 1.
#include "minatar.h"

#include "apex.h"

#include <string.h>

#define AX_RAMP_INTERVAL 100
#define AX_INIT_SPAWN_SPEED 10
#define AX_INIT_MOVE_INTERVAL 5

enum { AX_PLAYER, AX_ENEMY, AX_TRAIL, AX_GOLD, AX_CHANNELS };

// ---------------------------------------------------------------------------------------

static void s_asterix_reset(minatar_t *m) {
    minatar_asterix_t *g = &m->s.asterix;
    g->player_x = 5;
    g->player_y = 5;
    for (int i = 0; i < 8; i++) {
        g->entities[i] = (minatar_asterix_entity_t){0, 0, 0, 0};
    }
    g->spawn_speed = AX_INIT_SPAWN_SPEED;
    g->spawn_timer = g->spawn_speed;
    g->move_speed = AX_INIT_MOVE_INTERVAL;
    g->move_timer = g->move_speed;
    g->ramp_timer = AX_RAMP_INTERVAL;
    g->ramp_index = 0;
}

// _spawn_entity: an enemy or gold in a random free row, entering from a random side.
static void s_spawn_entity(minatar_t *m) {
    minatar_asterix_t *g = &m->s.asterix;
    // Python's 1/2 and 1/3 are the doubles 0.5 and 0.333...; C's 1.0 / 3 is the same double.
    int lr = nprandom_rand(&m->rng) < 1.0 / 2;
    int is_gold = nprandom_rand(&m->rng) < 1.0 / 3;
    int slot_options[8], n = 0;
    for (int i = 0; i < 8; i++) {
        if (!g->entities[i].present) {
            slot_options[n++] = i;
        }
    }
    if (n == 0) {
        return;
    }
    int slot = slot_options[nprandom_randint(&m->rng, 0, n)];
    g->entities[slot] = (minatar_asterix_entity_t){(int8_t)(lr ? 0 : 9), (int8_t)lr,
                                                   (int8_t)is_gold, 1};
}

// Entity i on the player's cell: gold is collected (+1), an enemy ends the game. The test is
// one branch (bitwise &, not ||): which slots hold entities is random, so a branch per
// condition mispredicted often enough to be most of the step's time.
static int s_touch(minatar_t *m, int i) {
    minatar_asterix_t *g = &m->s.asterix;
    minatar_asterix_entity_t *e = &g->entities[i];
    if (!(e->present & (e->x == g->player_x) & (i + 1 == g->player_y))) {
        return 0;
    }
    if (e->gold) {
        e->present = 0;
        return 1;
    }
    m->terminal = 1;
    return 0;
}

static int s_asterix_act(minatar_t *m, int a) {
    minatar_asterix_t *g = &m->s.asterix;
    int r = 0;
    if (g->spawn_timer == 0) {
        s_spawn_entity(m);
        g->spawn_timer = g->spawn_speed;
    }

    // The reference's if/elif on the action as table lookups and clamps (the agent's action
    // is the least predictable branch of a step): x stays in [0, 9], y in [1, 8], so a clamp
    // is the identity for the actions that do not move along that axis.
    static const int8_t dx[MINATAR_N_ACTIONS] = {0, -1, 0, 1, 0, 0};
    static const int8_t dy[MINATAR_N_ACTIONS] = {0, 0, -1, 0, 1, 0};
    g->player_x = APEX_MIN(9, APEX_MAX(0, g->player_x + dx[a]));
    g->player_y = APEX_MIN(8, APEX_MAX(1, g->player_y + dy[a]));

    for (int i = 0; i < 8; i++) {
        r += s_touch(m, i);
    }
    if (g->move_timer == 0) {
        g->move_timer = g->move_speed;
        for (int i = 0; i < 8; i++) {
            // Present entities move one cell (absent ones keep x); one that leaves the board
            // is gone and cannot touch the player either. Branch-free, as s_touch.
            minatar_asterix_entity_t *e = &g->entities[i];
            int p = e->present, x = e->x + p * (2 * e->lr - 1);
            e->x = (int8_t)x;
            e->present = (int8_t)(p & (x >= 0) & (x <= 9));
            r += s_touch(m, i);
        }
    }

    g->spawn_timer -= 1;
    g->move_timer -= 1;

    if (m->ramping && (g->spawn_speed > 1 || g->move_speed > 1)) {
        if (g->ramp_timer >= 0) {
            g->ramp_timer -= 1;
        } else {
            if (g->move_speed > 1 && g->ramp_index % 2) {
                g->move_speed -= 1;
            }
            if (g->spawn_speed > 1) {
                g->spawn_speed -= 1;
            }
            g->ramp_index += 1;
            g->ramp_timer = AX_RAMP_INTERVAL;
        }
    }
    return r;
}

// The frame row by row: row y = slot + 1 holds only that slot's entity and its trail (and
// maybe the player, written last), so each of rows 1..8 is copied whole from a table of the
// 41 rows there can be: s_rows[x * 4 + lr * 2 + gold] for an entity, s_rows[40] (zeros) for
// an empty slot. Rows 0 and 9 never hold anything (the player stays in rows 1..8). This
// replaces zeroing the frame and a branch-free read-modify-write of each slot's cells (the
// slots' presence is random: a branch per slot mispredicted), which were two thirds of an
// Asterix step. The table is a constant expression: cell k of a row is byte k / 4 (x) and
// channel k % 4.
#define AX_ROW_BYTES (MINATAR_SIZE * AX_CHANNELS)
#define AX_B(k, x, lr, gold)                                                                       \
    (uint8_t)(((k) / AX_CHANNELS == (x) && (k) % AX_CHANNELS == ((gold) ? AX_GOLD : AX_ENEMY)) ||  \
              ((k) / AX_CHANNELS == (x) + 1 - 2 * (lr) && (k) % AX_CHANNELS == AX_TRAIL))
#define AX_CELL(c, x, lr, gold)                                                                    \
    AX_B(4 * (c), x, lr, gold), AX_B(4 * (c) + 1, x, lr, gold), AX_B(4 * (c) + 2, x, lr, gold),    \
        AX_B(4 * (c) + 3, x, lr, gold)
#define AX_ROW(x, lr, gold)                                                                        \
    {                                                                                              \
        AX_CELL(0, x, lr, gold), AX_CELL(1, x, lr, gold), AX_CELL(2, x, lr, gold),                 \
            AX_CELL(3, x, lr, gold), AX_CELL(4, x, lr, gold), AX_CELL(5, x, lr, gold),             \
            AX_CELL(6, x, lr, gold), AX_CELL(7, x, lr, gold), AX_CELL(8, x, lr, gold),             \
            AX_CELL(9, x, lr, gold)                                                                \
    }
#define AX_ROWS_AT(x) AX_ROW(x, 0, 0), AX_ROW(x, 0, 1), AX_ROW(x, 1, 0), AX_ROW(x, 1, 1)
_Static_assert(AX_CHANNELS == 4, "AX_CELL spells out four channels");

static const uint8_t s_rows[4 * MINATAR_SIZE + 1][AX_ROW_BYTES] = {
    AX_ROWS_AT(0), AX_ROWS_AT(1), AX_ROWS_AT(2), AX_ROWS_AT(3), AX_ROWS_AT(4), AX_ROWS_AT(5),
    AX_ROWS_AT(6), AX_ROWS_AT(7), AX_ROWS_AT(8), AX_ROWS_AT(9), {0}, // an empty slot
};

static void s_asterix_observe(const minatar_t *m, uint8_t *obs) {
    const minatar_asterix_t *g = &m->s.asterix;
    memset(obs, 0, AX_ROW_BYTES);
    memset(obs + 9 * AX_ROW_BYTES, 0, AX_ROW_BYTES);
    for (int i = 0; i < 8; i++) {
        // An absent slot's x may be stale (off the board): it selects the zero row instead,
        // by a mask rather than a branch (presence is random).
        const minatar_asterix_entity_t *e = &g->entities[i];
        int present = -(int)e->present; // all ones or 0
        int row = ((e->x * 4 + e->lr * 2 + e->gold) & present) | (4 * MINATAR_SIZE & ~present);
        memcpy(obs + (i + 1) * AX_ROW_BYTES, s_rows[row], AX_ROW_BYTES);
    }
    obs[(g->player_y * MINATAR_SIZE + g->player_x) * AX_CHANNELS + AX_PLAYER] = 1;
}

static int s_asterix_ramp(const minatar_t *m) { return m->s.asterix.ramp_index; }

const minatar_game_t minatar_asterix_game = {
    .name = "asterix",
    .channels = AX_CHANNELS,
    .n_minimal_actions = 5,
    .minimal_actions = {MINATAR_NOOP, MINATAR_LEFT, MINATAR_UP, MINATAR_RIGHT, MINATAR_DOWN},
    .reset = s_asterix_reset,
    .act = s_asterix_act,
    .observe = s_asterix_observe,
    .whole_frame = 1,
    .difficulty_ramp = s_asterix_ramp,
};
