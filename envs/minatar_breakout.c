// minatar_breakout.c: MinAtar Breakout (minatar/environments/breakout.py at 4241f24).
//
// A paddle on row 9 bounces a ball that moves diagonally and breaks the bricks of rows 1..3
// (+1 each); a missed ball ends the episode. Channels: paddle 0, ball 1, trail 2 (the ball's
// previous cell), brick 3.
//
// Kept from the reference: the RNG is used only by reset (randint(2) picks the start
// corner); the wall reflection is applied before the ceiling and brick tests, which then see
// the new direction; a ball that hits a brick on the step right after breaking one (strike
// still set) enters the brick's cell without breaking it; the bricks are refilled only when
// the ball comes down to row 9 with none left.
#include "minatar.h"

#include "apex.h"

#include <string.h>

enum { BO_PADDLE, BO_BALL, BO_TRAIL, BO_BRICK, BO_CHANNELS };

// ---------------------------------------------------------------------------------------

static void s_fill_bricks(minatar_breakout_t *g) {
    for (int y = 1; y < 4; y++) {
        memset(g->brick_map[y], 1, MINATAR_SIZE);
    }
}

static void s_breakout_reset(minatar_t *m) {
    minatar_breakout_t *g = &m->s.breakout;
    g->ball_y = 3;
    int ball_start = (int)nprandom_randint(&m->rng, 0, 2);
    g->ball_x = ball_start ? 9 : 0;
    g->ball_dir = ball_start ? 3 : 2;
    g->pos = 4;
    memset(g->brick_map, 0, sizeof g->brick_map);
    s_fill_bricks(g);
    g->strike = 0;
    g->last_x = g->ball_x;
    g->last_y = g->ball_y;
}

static int s_no_bricks(const minatar_breakout_t *g) {
    for (int y = 0; y < MINATAR_SIZE; y++) {
        for (int x = 0; x < MINATAR_SIZE; x++) {
            if (g->brick_map[y][x]) {
                return 0;
            }
        }
    }
    return 1;
}

static int s_breakout_act(minatar_t *m, int a) {
    minatar_breakout_t *g = &m->s.breakout;
    // Direction tables of the reference: dir 0 up-left, 1 up-right, 2 down-right, 3 down-left.
    static const int flip_x[4] = {1, 0, 3, 2};  // a side wall
    static const int flip_y[4] = {3, 2, 1, 0};  // the ceiling, a brick, the paddle's edge
    static const int reverse[4] = {2, 3, 0, 1}; // the paddle's corner: straight back
    static const int dx[4] = {-1, 1, 1, -1}, dy[4] = {-1, -1, 1, 1};
    int r = 0;

    if (a == MINATAR_LEFT) {
        g->pos = APEX_MAX(0, g->pos - 1);
    } else if (a == MINATAR_RIGHT) {
        g->pos = APEX_MIN(9, g->pos + 1);
    }

    g->last_x = g->ball_x;
    g->last_y = g->ball_y;
    int new_x = g->ball_x + dx[g->ball_dir];
    int new_y = g->ball_y + dy[g->ball_dir];

    int strike_toggle = 0;
    if (new_x < 0 || new_x > 9) {
        new_x = new_x < 0 ? 0 : 9;
        g->ball_dir = flip_x[g->ball_dir];
    }
    if (new_y < 0) {
        new_y = 0;
        g->ball_dir = flip_y[g->ball_dir];
    } else if (g->brick_map[new_y][new_x] == 1) {
        strike_toggle = 1;
        if (!g->strike) {
            r += 1;
            g->strike = 1;
            g->brick_map[new_y][new_x] = 0;
            new_y = g->last_y;
            g->ball_dir = flip_y[g->ball_dir];
        }
    } else if (new_y == 9) {
        if (s_no_bricks(g)) {
            s_fill_bricks(g);
        }
        if (g->ball_x == g->pos) {
            g->ball_dir = flip_y[g->ball_dir];
            new_y = g->last_y;
        } else if (new_x == g->pos) {
            g->ball_dir = reverse[g->ball_dir];
            new_y = g->last_y;
        } else {
            m->terminal = 1;
        }
    }

    if (!strike_toggle) {
        g->strike = 0;
    }
    g->ball_x = new_x;
    g->ball_y = new_y;
    return r;
}

static void s_breakout_observe(const minatar_t *m, uint8_t *obs) {
    const minatar_breakout_t *g = &m->s.breakout;
#define BO_AT(y, x, c) obs[((y)*MINATAR_SIZE + (x)) * BO_CHANNELS + (c)]
    BO_AT(g->ball_y, g->ball_x, BO_BALL) = 1;
    BO_AT(9, g->pos, BO_PADDLE) = 1;
    BO_AT(g->last_y, g->last_x, BO_TRAIL) = 1;
    // state[:, :, brick] = brick_map. Bricks only ever exist in rows 1..3 (s_fill_bricks
    // is the one writer of a 1), and obs arrives zeroed: the other rows are already right.
    const uint8_t *bricks = &g->brick_map[1][0]; // rows 1..3: 30 contiguous cells
    uint8_t *dst = &BO_AT(1, 0, BO_BRICK);
    for (int i = 0; i < 3 * MINATAR_SIZE; i++) {
        dst[i * BO_CHANNELS] = bricks[i];
    }
#undef BO_AT
}

static int s_breakout_ramp(const minatar_t *m) {
    (void)m;
    return -1; // difficulty_ramp() returns None
}

const minatar_game_t minatar_breakout_game = {
    .name = "breakout",
    .channels = BO_CHANNELS,
    .n_minimal_actions = 3,
    .minimal_actions = {MINATAR_NOOP, MINATAR_LEFT, MINATAR_RIGHT},
    .reset = s_breakout_reset,
    .act = s_breakout_act,
    .observe = s_breakout_observe,
    .difficulty_ramp = s_breakout_ramp,
};
