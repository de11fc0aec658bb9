// minatar_seaquest.c: MinAtar Seaquest (minatar/environments/seaquest.py at 4241f24).
//
// A two-cell submarine shoots fish and enemy subs (+1 each), picks up divers (at most 6) and
// must surface before its oxygen (200 steps) runs out. Surfacing with no diver ends the
// episode; with 6 it pays oxygen * 10 // 200 and empties the sub; either way one diver is
// then taken off, oxygen refills and the difficulty ramps. Channels: sub_front 0, sub_back 1,
// friendly_bullet 2, trail 3, enemy_bullet 4, enemy_fish 5, enemy_sub 6, oxygen_guage 7,
// diver_guage 8, diver 9.
//
// Draws per step: when e_spawn_timer is 0, rand() < 1/2 (direction), rand() < 1/3 (sub or
// fish), randint(1, 9) (row; one word, the range is exactly 8) even if the spawn is then
// cancelled by an enemy going the other way in that row; then, when d_spawn_timer is 0,
// rand() < 1/2 and randint(1, 9) for a diver.
//
// Kept from the reference, on purpose:
// - After surfacing with 6 divers the count is set to 0 and then decremented: -1. A negative
//   count never ends the episode at the surface (the test is == 0), keeps decreasing on each
//   surfacing, shows an empty gauge, and divers picked up count up from it.
// - Oxygen is tested (<= 0 ends the episode) before it is decremented, so it can reach -1.
// - An enemy sub that leaves the board or is shot still runs its shot timer in the same step
//   and may fire from where it was (an off-board bullet is removed in the bullet update).
// - The objects live in Python lists iterated with reversed() while list.remove(value)
//   deletes the first *equal* element. Both are reproduced exactly: each list is an array in
//   the same order, removal is by value (the first element equal in every field), and the
//   reversed loops stop when their index runs past the shrunken list, as Python's iterator.
#include "minatar.h"

#include "apex.h"

#include <string.h>

#define SQ_MAX_OXYGEN 200
#define SQ_INIT_SPAWN_SPEED 20
#define SQ_DIVER_SPAWN_SPEED 30
#define SQ_INIT_MOVE_INTERVAL 5
#define SQ_SHOT_COOL_DOWN 5
#define SQ_ENEMY_SHOT_INTERVAL 10
#define SQ_DIVER_MOVE_INTERVAL 5

enum {
    SQ_SUB_FRONT,
    SQ_SUB_BACK,
    SQ_F_BULLET,
    SQ_TRAIL,
    SQ_E_BULLET,
    SQ_E_FISH,
    SQ_E_SUB,
    SQ_OXYGEN_GUAGE,
    SQ_DIVER_GUAGE,
    SQ_DIVER,
    SQ_CHANNELS
};

// Fields of an object: x, y, direction (lr / sub_or: 1 = moving right), then the timers.
enum { SQ_X, SQ_Y, SQ_LR, SQ_MOVE_TIMER, SQ_SHOT_TIMER };

typedef minatar_seaquest_obj_t sq_obj_t;

// ---------------------------------------------------------------------------------------
// Python list operations on (array, count)

static void s_append(sq_obj_t *arr, int32_t *n, int cap, sq_obj_t v) {
    APEX_ASSERT(*n < cap); // the capacities in minatar.h bound what the rules allow
    arr[(*n)++] = v;
}

// list.remove(v): deletes the first element equal to v (every field; unused ones are 0) and
// returns its index. v is a copy, so it may have come from the array itself.
static int s_remove(sq_obj_t *arr, int32_t *n, sq_obj_t v) {
    for (int i = 0; i < *n; i++) {
        if (memcmp(arr[i].v, v.v, sizeof v.v) == 0) {
            memmove(&arr[i], &arr[i + 1], (size_t)(*n - i - 1) * sizeof *arr);
            (*n)--;
            return i;
        }
    }
    APEX_PANIC("seaquest: list.remove(x): x not in list"); // the reference would raise too
}

// list.remove(obj) for the object at index i, when the caller keeps using obj afterwards.
// If an equal element came first, that one was deleted and obj, still in the list, moved to
// i - 1; otherwise obj left the list and lives on in *detached. Returns where obj now is.
static sq_obj_t *s_remove_tracked(sq_obj_t *arr, int32_t *n, int i, sq_obj_t *detached) {
    sq_obj_t obj = arr[i];
    int j = s_remove(arr, n, obj);
    if (j == i) {
        *detached = obj;
        return detached;
    }
    return &arr[i - 1];
}

static inline sq_obj_t s_obj(int x, int y, int lr, int timer, int shot_timer) {
    return (sq_obj_t){{(int8_t)x, (int8_t)y, (int8_t)lr, (int8_t)timer, (int8_t)shot_timer}};
}

// Bitwise & rather than &&: one branch at the caller instead of one per coordinate, which
// mispredicted on the objects' random positions (perf: the top two lines of a step).
static inline int s_same_cell(const sq_obj_t *a, const sq_obj_t *b) {
    return (a->v[SQ_X] == b->v[SQ_X]) & (a->v[SQ_Y] == b->v[SQ_Y]);
}

static inline int s_on_player(const minatar_seaquest_t *g, const sq_obj_t *o) {
    return (o->v[SQ_X] == g->sub_x) & (o->v[SQ_Y] == g->sub_y);
}

static inline int s_off_board(const sq_obj_t *o) { return o->v[SQ_X] < 0 || o->v[SQ_X] > 9; }

static inline void s_step_x(sq_obj_t *o) {
    o->v[SQ_X] = (int8_t)(o->v[SQ_X] + (o->v[SQ_LR] ? 1 : -1));
}

// ---------------------------------------------------------------------------------------
// Reset and spawns

static void s_seaquest_reset(minatar_t *m) {
    minatar_seaquest_t *g = &m->s.seaquest;
    memset(g, 0, sizeof *g); // empty lists
    g->oxygen = SQ_MAX_OXYGEN;
    g->diver_count = 0;
    g->sub_x = 5;
    g->sub_y = 0;
    g->sub_or = 0; // facing left
    g->e_spawn_speed = SQ_INIT_SPAWN_SPEED;
    g->e_spawn_timer = g->e_spawn_speed;
    g->d_spawn_timer = SQ_DIVER_SPAWN_SPEED;
    g->move_speed = SQ_INIT_MOVE_INTERVAL;
    g->ramp_index = 0;
    g->shot_timer = 0;
    g->surface = 1;
}

static void s_spawn_enemy(minatar_t *m) {
    minatar_seaquest_t *g = &m->s.seaquest;
    int lr = nprandom_rand(&m->rng) < 1.0 / 2;
    int is_sub = nprandom_rand(&m->rng) < 1.0 / 3;
    int x = lr ? 0 : 9;
    int y = (int)nprandom_randint(&m->rng, 1, 9);
    // No spawn into a row where an enemy moves the other way.
    for (int i = 0; i < g->n_e_subs; i++) {
        if (g->e_subs[i].v[SQ_Y] == y && g->e_subs[i].v[SQ_LR] != lr) {
            return;
        }
    }
    for (int i = 0; i < g->n_e_fish; i++) {
        if (g->e_fish[i].v[SQ_Y] == y && g->e_fish[i].v[SQ_LR] != lr) {
            return;
        }
    }
    if (is_sub) {
        s_append(g->e_subs, &g->n_e_subs, MINATAR_SEAQUEST_MAX_ENEMIES,
                 s_obj(x, y, lr, g->move_speed, SQ_ENEMY_SHOT_INTERVAL));
    } else {
        s_append(g->e_fish, &g->n_e_fish, MINATAR_SEAQUEST_MAX_ENEMIES,
                 s_obj(x, y, lr, g->move_speed, 0));
    }
}

static void s_spawn_diver(minatar_t *m) {
    minatar_seaquest_t *g = &m->s.seaquest;
    int lr = nprandom_rand(&m->rng) < 1.0 / 2;
    int x = lr ? 0 : 9;
    int y = (int)nprandom_randint(&m->rng, 1, 9);
    s_append(g->divers, &g->n_divers, MINATAR_SEAQUEST_MAX_DIVERS,
             s_obj(x, y, lr, SQ_DIVER_MOVE_INTERVAL, 0));
}

// ---------------------------------------------------------------------------------------
// The updates of one step, in the reference's order. Each returns the reward it earned.
// A reversed loop runs `for (i = n - 1; i >= 0 && i < n; i--)`: Python's reverse iterator
// yields list[i] only while i is below the list's current length.

static int s_update_f_bullets(minatar_seaquest_t *g) {
    int r = 0;
    for (int i = g->n_f_bullets - 1; i >= 0 && i < g->n_f_bullets; i--) {
        sq_obj_t *b = &g->f_bullets[i];
        s_step_x(b);
        if (s_off_board(b)) {
            s_remove(g->f_bullets, &g->n_f_bullets, *b);
            continue;
        }
        int removed = 0;
        for (int k = 0; k < g->n_e_fish; k++) {
            if (s_same_cell(b, &g->e_fish[k])) {
                s_remove(g->e_fish, &g->n_e_fish, g->e_fish[k]);
                s_remove(g->f_bullets, &g->n_f_bullets, *b);
                r += 1;
                removed = 1;
                break;
            }
        }
        if (removed) {
            continue;
        }
        for (int k = 0; k < g->n_e_subs; k++) {
            if (s_same_cell(b, &g->e_subs[k])) {
                s_remove(g->e_subs, &g->n_e_subs, g->e_subs[k]);
                s_remove(g->f_bullets, &g->n_f_bullets, *b);
                r += 1;
                break;
            }
        }
    }
    return r;
}

// The per-object tests of the updates below are selects and bitwise &, and each object
// takes at most one branch, on a rare event (it left, was picked up, or may have met a
// bullet): the move timers' zeros, and which objects touch the player, differ from env to
// env, and as branches they mispredicted. The order of what each object does is the
// reference's.

// A due object's timer restarts at restart and it moves one cell; any other counts down.
// Returns whether it was due.
static inline int s_tick(sq_obj_t *o, int restart) {
    int due = o->v[SQ_MOVE_TIMER] == 0;
    o->v[SQ_MOVE_TIMER] = (int8_t)(due ? restart : o->v[SQ_MOVE_TIMER] - 1);
    o->v[SQ_X] = (int8_t)(o->v[SQ_X] + (due ? (o->v[SQ_LR] ? 1 : -1) : 0));
    return due;
}

static void s_update_divers(minatar_seaquest_t *g) {
    for (int i = g->n_divers - 1; i >= 0 && i < g->n_divers; i--) {
        sq_obj_t *d = &g->divers[i];
        if (s_on_player(g, d) & (g->diver_count < 6)) {
            s_remove(g->divers, &g->n_divers, *d);
            g->diver_count += 1;
            continue;
        }
        int due = s_tick(d, SQ_DIVER_MOVE_INTERVAL);
        int off = due & s_off_board(d);
        if (off | (due & s_on_player(g, d) & (g->diver_count < 6))) {
            s_remove(g->divers, &g->n_divers, *d);
            g->diver_count += !off;
        }
    }
}

// An enemy (sub or fish) that moved onto a friendly bullet: both go, +1. Returns where the
// enemy object now is (s_remove_tracked), or the enemy itself if no bullet was there.
static sq_obj_t *s_enemy_meets_bullets(minatar_seaquest_t *g, sq_obj_t *list, int32_t *n, int i,
                                       sq_obj_t *detached, int *r) {
    sq_obj_t *e = &list[i];
    for (int k = 0; k < g->n_f_bullets; k++) {
        if (s_same_cell(e, &g->f_bullets[k])) {
            sq_obj_t bullet = g->f_bullets[k];
            e = s_remove_tracked(list, n, i, detached);
            s_remove(g->f_bullets, &g->n_f_bullets, bullet);
            *r += 1;
            break;
        }
    }
    return e;
}

static int s_update_e_subs(minatar_t *m) {
    minatar_seaquest_t *g = &m->s.seaquest;
    int r = 0;
    for (int i = g->n_e_subs - 1; i >= 0 && i < g->n_e_subs; i--) {
        sq_obj_t detached; // the sub after it left the list, when it did
        sq_obj_t *s = &g->e_subs[i];
        int hit = s_on_player(g, s);
        int due = s_tick(s, g->move_speed);
        int off = due & s_off_board(s);
        int hit_after = due & !off & s_on_player(g, s);
        m->terminal |= (uint8_t)(hit | hit_after);
        if (off) {
            s = s_remove_tracked(g->e_subs, &g->n_e_subs, i, &detached);
        } else if (due & !hit_after & (g->n_f_bullets > 0)) {
            s = s_enemy_meets_bullets(g, g->e_subs, &g->n_e_subs, i, &detached, &r);
        }
        // Runs for a sub removed just above, too (the reference keeps using the object).
        if (s->v[SQ_SHOT_TIMER] == 0) {
            s->v[SQ_SHOT_TIMER] = SQ_ENEMY_SHOT_INTERVAL;
            s_append(g->e_bullets, &g->n_e_bullets, MINATAR_SEAQUEST_MAX_E_BULLETS,
                     s_obj(s->v[SQ_X], s->v[SQ_Y], s->v[SQ_LR], 0, 0));
        } else {
            s->v[SQ_SHOT_TIMER] -= 1;
        }
    }
    return r;
}

static void s_update_e_bullets(minatar_t *m) {
    minatar_seaquest_t *g = &m->s.seaquest;
    for (int i = g->n_e_bullets - 1; i >= 0 && i < g->n_e_bullets; i--) {
        sq_obj_t *b = &g->e_bullets[i];
        int hit = s_on_player(g, b);
        s_step_x(b);
        int off = s_off_board(b);
        m->terminal |= (uint8_t)(hit | ((!off) & s_on_player(g, b)));
        if (off) {
            s_remove(g->e_bullets, &g->n_e_bullets, *b);
        }
    }
}

static int s_update_e_fish(minatar_t *m) {
    minatar_seaquest_t *g = &m->s.seaquest;
    int r = 0;
    for (int i = g->n_e_fish - 1; i >= 0 && i < g->n_e_fish; i--) {
        sq_obj_t detached; // unused after the call: a removed fish is not touched again
        sq_obj_t *f = &g->e_fish[i];
        int hit = s_on_player(g, f);
        int due = s_tick(f, g->move_speed);
        int off = due & s_off_board(f);
        int hit_after = due & !off & s_on_player(g, f);
        m->terminal |= (uint8_t)(hit | hit_after);
        if (off) {
            s_remove(g->e_fish, &g->n_e_fish, *f);
        } else if (due & !hit_after & (g->n_f_bullets > 0)) {
            s_enemy_meets_bullets(g, g->e_fish, &g->n_e_fish, i, &detached, &r);
        }
    }
    return r;
}

// Python's floor division, for the non-negative operands it sees here and any others.
static inline int s_floordiv(int a, int b) {
    int q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// _surface: called on reaching row 0 with at least one diver (or a negative count).
static int s_surface(minatar_t *m) {
    minatar_seaquest_t *g = &m->s.seaquest;
    int r = 0;
    g->surface = 1;
    if (g->diver_count == 6) {
        g->diver_count = 0;
        r = s_floordiv(g->oxygen * 10, SQ_MAX_OXYGEN);
    }
    g->oxygen = SQ_MAX_OXYGEN;
    g->diver_count -= 1;
    if (m->ramping && (g->e_spawn_speed > 1 || g->move_speed > 2)) {
        if (g->move_speed > 2 && g->ramp_index % 2) {
            g->move_speed -= 1;
        }
        if (g->e_spawn_speed > 1) {
            g->e_spawn_speed -= 1;
        }
        g->ramp_index += 1;
    }
    return r;
}

// ---------------------------------------------------------------------------------------

static int s_seaquest_act(minatar_t *m, int a) {
    minatar_seaquest_t *g = &m->s.seaquest;
    int r = 0;
    if (g->e_spawn_timer == 0) {
        s_spawn_enemy(m);
        g->e_spawn_timer = g->e_spawn_speed;
    }
    if (g->d_spawn_timer == 0) {
        s_spawn_diver(m);
        g->d_spawn_timer = SQ_DIVER_SPAWN_SPEED;
    }

    // The reference's if/elif on the action as table lookups and clamps, as in Asterix (the
    // agent's action is the least predictable branch of a step): x stays in [0, 9] and y in
    // [0, 8], so a clamp is the identity for the actions that do not move along that axis;
    // LEFT and RIGHT also turn the sub (sub_or: -1 keeps it). Only FIRE keeps a branch.
    static const int8_t dx[MINATAR_N_ACTIONS] = {0, -1, 0, 1, 0, 0};
    static const int8_t dy[MINATAR_N_ACTIONS] = {0, 0, -1, 0, 1, 0};
    static const int8_t turn[MINATAR_N_ACTIONS] = {-1, 0, -1, 1, -1, -1};
    if (a == MINATAR_FIRE) {
        if (g->shot_timer == 0) {
            s_append(g->f_bullets, &g->n_f_bullets, MINATAR_SEAQUEST_MAX_F_BULLETS,
                     s_obj(g->sub_x, g->sub_y, g->sub_or, 0, 0));
            g->shot_timer = SQ_SHOT_COOL_DOWN;
        }
    } else {
        g->sub_x = APEX_MIN(9, APEX_MAX(0, g->sub_x + dx[a]));
        g->sub_y = APEX_MIN(8, APEX_MAX(0, g->sub_y + dy[a]));
        int keep = -(turn[a] < 0); // all ones for the actions that keep sub_or (no branch)
        g->sub_or = (g->sub_or & keep) | (turn[a] & ~keep);
    }

    r += s_update_f_bullets(g);
    s_update_divers(g);
    r += s_update_e_subs(m);
    s_update_e_bullets(m);
    r += s_update_e_fish(m);

    g->e_spawn_timer -= g->e_spawn_timer > 0;
    g->d_spawn_timer -= g->d_spawn_timer > 0;
    g->shot_timer -= g->shot_timer > 0;
    if (g->oxygen <= 0) {
        m->terminal = 1;
    }
    if (g->sub_y > 0) {
        g->oxygen -= 1;
        g->surface = 0;
    } else if (!g->surface) {
        if (g->diver_count == 0) {
            m->terminal = 1;
        } else {
            r += s_surface(m);
        }
    }
    return r;
}

// state[y, x, c] = 1 with numpy's indexing: -10..-1 count from the end; beyond is an
// IndexError in the reference (unreachable: every object on the board is inside it).
static inline void s_set(uint8_t *restrict obs, int y, int x, int c) {
    x += (x < 0) * MINATAR_SIZE; // no branch: objects' positions are random
    APEX_ASSERT((unsigned)y < MINATAR_SIZE && (unsigned)x < MINATAR_SIZE);
    obs[(y * MINATAR_SIZE + x) * SQ_CHANNELS + c] = 1;
}

// An enemy or diver and, if it is on the board, its trail behind it. The trail is ORed in
// (its cell clamped onto the board when it is off it) instead of a branch on random data;
// OR and = agree since nothing clears a cell.
static inline void s_set_with_trail(uint8_t *restrict obs, const sq_obj_t *o, int c) {
    int x = o->v[SQ_X], y = o->v[SQ_Y];
    s_set(obs, y, x, c);
    int back_x = x + 1 - 2 * (o->v[SQ_LR] != 0);
    int on = (back_x >= 0) & (back_x <= 9);
    obs[(y * MINATAR_SIZE + APEX_MIN(9, APEX_MAX(0, back_x))) * SQ_CHANNELS + SQ_TRAIL] |=
        (uint8_t)on;
}

// Sliding windows for the gauges of row 9: cell x of the oxygen gauge is s_oxygen_window[10
// - cells + x] (1 for x < cells), and of the diver gauge s_diver_window[9 - from + x] (1 for
// from <= x <= from + 5), each as its byte of the cell's 16-bit pair of gauge channels:
// loads and ORs of four cells at a time, where a loop ending where a slice ends
// mispredicted (the ends change every step) and a loop over the cells cost more than the
// rest of the frame.
static const uint16_t s_oxygen_window[24] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
static const uint16_t s_diver_window[24] = {
    [9] = 0x100, [10] = 0x100, [11] = 0x100, [12] = 0x100, [13] = 0x100, [14] = 0x100};
_Static_assert(SQ_DIVER_GUAGE == SQ_OXYGEN_GUAGE + 1, "a cell's two gauges are one uint16");
// The windows' 16-bit pairs and 64-bit shifts put the oxygen byte first in memory only on a
// little-endian host; elsewhere the frames would silently differ from the reference's.
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the gauge windows assume little-endian");

// obs is restrict: its byte stores would otherwise alias the game state, and the compiler
// reloaded every count and position after each of them.
static void s_seaquest_observe(const minatar_t *m, uint8_t *restrict obs) {
    const minatar_seaquest_t *g = &m->s.seaquest;
    const int sub_x = g->sub_x, sub_y = g->sub_y;
    s_set(obs, sub_y, sub_x, SQ_SUB_FRONT);
    s_set(obs, sub_y, sub_x + 1 - 2 * g->sub_or, SQ_SUB_BACK); // behind it: sub_or is 0 or 1
    // state[9, 0:max(0, oxygen) * 10 // 200, 7] and state[9, 9 - diver_count:9, 8]: the
    // second slice is empty for a negative count (from > 9: clamped to 9). diver_count <= 6
    // keeps from >= 3; cell 9 of the diver gauge is never set (masked below: from + 5 can
    // reach it).
    int oxygen_cells = s_floordiv(APEX_MAX(0, g->oxygen) * 10, SQ_MAX_OXYGEN);
    int divers_from = APEX_MIN(9, 9 - g->diver_count);
    APEX_ASSERT(oxygen_cells <= MINATAR_SIZE && divers_from >= 3);
    uint64_t ox[3], dv[3], pairs[3]; // cells 0-3, 4-7, 8-11: four 16-bit pairs each
    memcpy(ox, s_oxygen_window + MINATAR_SIZE - oxygen_cells, sizeof ox);
    memcpy(dv, s_diver_window + 9 - divers_from, sizeof dv);
    for (int k = 0; k < 3; k++) {
        pairs[k] = ox[k] | dv[k];
    }
    pairs[2] &= ~(0xffull << 24); // cell 9's diver byte
    // Ten stores spelled out: as a loop (which GCC keeps at -O2) they cost as much again.
    uint8_t *row9 = obs + 9 * MINATAR_SIZE * SQ_CHANNELS + SQ_OXYGEN_GUAGE;
#define SQ_GAUGE_CELL(x)                                                                           \
    do {                                                                                           \
        uint16_t pair = (uint16_t)(pairs[(x) / 4] >> (16 * ((x) % 4)));                            \
        memcpy(row9 + (x)*SQ_CHANNELS, &pair, 2);                                                  \
    } while (0)
    SQ_GAUGE_CELL(0);
    SQ_GAUGE_CELL(1);
    SQ_GAUGE_CELL(2);
    SQ_GAUGE_CELL(3);
    SQ_GAUGE_CELL(4);
    SQ_GAUGE_CELL(5);
    SQ_GAUGE_CELL(6);
    SQ_GAUGE_CELL(7);
    SQ_GAUGE_CELL(8);
    SQ_GAUGE_CELL(9);
#undef SQ_GAUGE_CELL
    const int n_f_bullets = g->n_f_bullets, n_e_bullets = g->n_e_bullets;
    const int n_e_fish = g->n_e_fish, n_e_subs = g->n_e_subs, n_divers = g->n_divers;
    for (int i = 0; i < n_f_bullets; i++) {
        s_set(obs, g->f_bullets[i].v[SQ_Y], g->f_bullets[i].v[SQ_X], SQ_F_BULLET);
    }
    for (int i = 0; i < n_e_bullets; i++) {
        s_set(obs, g->e_bullets[i].v[SQ_Y], g->e_bullets[i].v[SQ_X], SQ_E_BULLET);
    }
    for (int i = 0; i < n_e_fish; i++) {
        s_set_with_trail(obs, &g->e_fish[i], SQ_E_FISH);
    }
    for (int i = 0; i < n_e_subs; i++) {
        s_set_with_trail(obs, &g->e_subs[i], SQ_E_SUB);
    }
    for (int i = 0; i < n_divers; i++) {
        s_set_with_trail(obs, &g->divers[i], SQ_DIVER);
    }
}

static int s_seaquest_ramp(const minatar_t *m) { return m->s.seaquest.ramp_index; }

const minatar_game_t minatar_seaquest_game = {
    .name = "seaquest",
    .channels = SQ_CHANNELS,
    .n_minimal_actions = 6,
    .minimal_actions = {MINATAR_NOOP, MINATAR_LEFT, MINATAR_UP, MINATAR_RIGHT, MINATAR_DOWN,
                        MINATAR_FIRE},
    .reset = s_seaquest_reset,
    .act = s_seaquest_act,
    .observe = s_seaquest_observe,
    .difficulty_ramp = s_seaquest_ramp,
};
