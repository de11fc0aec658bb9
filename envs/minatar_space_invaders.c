// minatar_space_invaders.c: MinAtar Space Invaders
// (minatar/environments/space_invaders.py at 4241f24).
//
// A cannon on row 9 shoots at a block of aliens that sweeps sideways and steps down at the
// edges; the alien column nearest the cannon fires back. +1 per alien shot; an alien or an
// enemy bullet on the cannon's cell ends the episode. Channels: cannon 0, alien 1,
// alien_left 2, alien_right 3 (the alien map again, in the channel of the current
// direction), friendly_bullet 4, enemy_bullet 5.
//
// The game draws no random numbers; only the wrapper's sticky draw touches the RNG.
// Each 0/1 map is kept as one 10-bit mask per row (bit x = column x), and np.roll becomes a
// rotation: rows for axis 0, bits for axis 1. Kept from the reference: aliens that step down
// from row 9 wrap to row 0 (the step also ends the episode, so the final frame shows them
// there); the alien move timer restarts at min(#aliens, enemy_move_interval), so few aliens
// move fast; a new wave keeps the alien direction and the running timers; with ramping the
// interval drops by one per wave down to 6.
#include "minatar.h"

#include "apex.h"

#define SI_SHOT_COOL_DOWN 5
#define SI_ENEMY_MOVE_INTERVAL 12
#define SI_ENEMY_SHOT_INTERVAL 10
#define SI_ROW_MASK 0x3ffu // 10 columns

enum { SI_CANNON, SI_ALIEN, SI_ALIEN_LEFT, SI_ALIEN_RIGHT, SI_F_BULLET, SI_E_BULLET, SI_CHANNELS };

// ---------------------------------------------------------------------------------------
// The 0/1 maps

static void s_new_wave(minatar_space_invaders_t *g) {
    for (int y = 0; y < 4; y++) {
        g->alien_map[y] |= 0xfcu; // alien_map[0:4, 2:8] = 1: columns 2..7
    }
}

static int s_count(const uint16_t *map) {
    int n = 0;
    for (int y = 0; y < MINATAR_SIZE; y++) {
        n += __builtin_popcount(map[y]);
    }
    return n;
}

static int s_column_any(const uint16_t *map, int x) {
    for (int y = 0; y < MINATAR_SIZE; y++) {
        if (map[y] >> x & 1u) {
            return 1;
        }
    }
    return 0;
}

// np.roll(map, shift, axis=0) for shift = +1 (down) or -1 (up): rows rotate.
static void s_roll_rows(uint16_t *map, int shift) {
    if (shift > 0) {
        uint16_t last = map[MINATAR_SIZE - 1];
        for (int y = MINATAR_SIZE - 1; y > 0; y--) {
            map[y] = map[y - 1];
        }
        map[0] = last;
    } else {
        uint16_t first = map[0];
        for (int y = 0; y < MINATAR_SIZE - 1; y++) {
            map[y] = map[y + 1];
        }
        map[MINATAR_SIZE - 1] = first;
    }
}

// np.roll(map, shift, axis=1) for shift = +1 (right) or -1 (left): columns rotate.
static void s_roll_columns(uint16_t *map, int shift) {
    for (int y = 0; y < MINATAR_SIZE; y++) {
        unsigned v = map[y];
        v = shift > 0 ? (v << 1 | v >> 9) : (v >> 1 | (v & 1u) << 9);
        map[y] = (uint16_t)(v & SI_ROW_MASK);
    }
}

// ---------------------------------------------------------------------------------------

static void s_space_invaders_reset(minatar_t *m) {
    minatar_space_invaders_t *g = &m->s.space_invaders;
    g->pos = 5;
    for (int y = 0; y < MINATAR_SIZE; y++) {
        g->f_bullet_map[y] = g->e_bullet_map[y] = g->alien_map[y] = 0;
    }
    s_new_wave(g);
    g->alien_dir = -1;
    g->enemy_move_interval = SI_ENEMY_MOVE_INTERVAL;
    g->alien_move_timer = g->enemy_move_interval;
    g->alien_shot_timer = SI_ENEMY_SHOT_INTERVAL;
    g->ramp_index = 0;
    g->shot_timer = 0;
}

// _nearest_alien: columns by distance to pos (ties: the left one first, Python's stable
// sort), then the lowest alien of the first column that has one. Writes its cell.
static void s_nearest_alien(const minatar_space_invaders_t *g, int *ay, int *ax) {
    for (int d = 0; d < MINATAR_SIZE; d++) {
        for (int side = -1; side <= 1; side += 2) {
            int x = g->pos + side * d;
            if (x < 0 || x > 9 || (d == 0 && side > 0)) {
                continue;
            }
            for (int y = MINATAR_SIZE - 1; y >= 0; y--) {
                if (g->alien_map[y] >> x & 1u) {
                    *ay = y;
                    *ax = x;
                    return;
                }
            }
        }
    }
    // Unreachable: the aliens are refilled at the end of every step that clears them, and
    // the reference itself would fail here (None[0]).
    APEX_PANIC("space_invaders: no alien left to shoot");
}

static int s_space_invaders_act(minatar_t *m, int a) {
    minatar_space_invaders_t *g = &m->s.space_invaders;
    int r = 0;
    if (a == MINATAR_FIRE && g->shot_timer == 0) {
        g->f_bullet_map[9] |= (uint16_t)(1u << g->pos);
        g->shot_timer = SI_SHOT_COOL_DOWN;
    } else if (a == MINATAR_LEFT) {
        g->pos = APEX_MAX(0, g->pos - 1);
    } else if (a == MINATAR_RIGHT) {
        g->pos = APEX_MIN(9, g->pos + 1);
    }
    uint16_t cannon = (uint16_t)(1u << g->pos);

    s_roll_rows(g->f_bullet_map, -1);
    g->f_bullet_map[9] = 0;

    s_roll_rows(g->e_bullet_map, 1);
    g->e_bullet_map[0] = 0;
    if (g->e_bullet_map[9] & cannon) {
        m->terminal = 1;
    }

    if (g->alien_map[9] & cannon) {
        m->terminal = 1;
    }
    if (g->alien_move_timer == 0) {
        g->alien_move_timer = APEX_MIN(s_count(g->alien_map), g->enemy_move_interval);
        if ((s_column_any(g->alien_map, 0) && g->alien_dir < 0) ||
            (s_column_any(g->alien_map, 9) && g->alien_dir > 0)) {
            g->alien_dir = -g->alien_dir;
            if (g->alien_map[9]) {
                m->terminal = 1;
            }
            s_roll_rows(g->alien_map, 1);
        } else {
            s_roll_columns(g->alien_map, g->alien_dir);
        }
        if (g->alien_map[9] & cannon) {
            m->terminal = 1;
        }
    }
    if (g->alien_shot_timer == 0) {
        g->alien_shot_timer = SI_ENEMY_SHOT_INTERVAL;
        int ay, ax;
        s_nearest_alien(g, &ay, &ax);
        g->e_bullet_map[ay] |= (uint16_t)(1u << ax);
    }

    // kill_locations = alien & (alien == f_bullet): cells holding both.
    for (int y = 0; y < MINATAR_SIZE; y++) {
        uint16_t kill = g->alien_map[y] & g->f_bullet_map[y];
        r += __builtin_popcount(kill);
        g->alien_map[y] &= (uint16_t)~kill;
        g->f_bullet_map[y] &= (uint16_t)~kill;
    }

    g->shot_timer -= g->shot_timer > 0;
    g->alien_move_timer -= 1;
    g->alien_shot_timer -= 1;
    if (s_count(g->alien_map) == 0) {
        if (g->enemy_move_interval > 6 && m->ramping) {
            g->enemy_move_interval -= 1;
            g->ramp_index += 1;
        }
        s_new_wave(g);
    }
    return r;
}

static void s_space_invaders_observe(const minatar_t *m, uint8_t *obs) {
    const minatar_space_invaders_t *g = &m->s.space_invaders;
    int dir_channel = g->alien_dir < 0 ? SI_ALIEN_LEFT : SI_ALIEN_RIGHT;
    for (int y = 0; y < MINATAR_SIZE; y++) {
        for (int x = 0; x < MINATAR_SIZE; x++) {
            uint8_t *cell = &obs[(y * MINATAR_SIZE + x) * SI_CHANNELS];
            uint8_t alien = (uint8_t)(g->alien_map[y] >> x & 1u);
            cell[SI_ALIEN] = alien;
            cell[dir_channel] = alien;
            cell[SI_F_BULLET] = (uint8_t)(g->f_bullet_map[y] >> x & 1u);
            cell[SI_E_BULLET] = (uint8_t)(g->e_bullet_map[y] >> x & 1u);
        }
    }
    obs[(9 * MINATAR_SIZE + g->pos) * SI_CHANNELS + SI_CANNON] = 1;
}

static int s_space_invaders_ramp(const minatar_t *m) { return m->s.space_invaders.ramp_index; }

const minatar_game_t minatar_space_invaders_game = {
    .name = "space_invaders",
    .channels = SI_CHANNELS,
    .n_minimal_actions = 4,
    .minimal_actions = {MINATAR_NOOP, MINATAR_LEFT, MINATAR_RIGHT, MINATAR_FIRE},
    .reset = s_space_invaders_reset,
    .act = s_space_invaders_act,
    .observe = s_space_invaders_observe,
    .difficulty_ramp = s_space_invaders_ramp,
};
