// minatar_freeway.c: MinAtar Freeway (minatar/environments/freeway.py at 4241f24).
//
// A chicken in column 4 crosses 8 lanes of cars from row 9 to row 0 (+1, then back to row
// 9 with new car speeds); a car sends it back to row 9. Channels: chicken 0, car 1, and the
// trail of a car with |speed| s in channel 1 + s (speed1..speed5 = 2..6).
//
// Kept from the reference: a car moves when its timer is 0 and the timer restarts at
// |speed|, so a car moves every |speed| + 1 steps; the chicken moves at most every 3 steps;
// the episode ends on the 2501st act (terminate_timer 2500 goes below 0), never earlier;
// _randomize_cars draws randint(1, 6, 8) (eight masked draws) and then rand(8), whose sign
// against 0.5 gives the directions, at reset and on every crossing (positions are kept then).
#include "minatar.h"

#include "apex.h"

#define FW_PLAYER_SPEED 3
#define FW_TIME_LIMIT 2500

enum { FW_CHICKEN, FW_CAR, FW_SPEED1, FW_CHANNELS = FW_SPEED1 + 5 };

// ---------------------------------------------------------------------------------------

static void s_randomize_cars(minatar_t *m, int initialize) {
    minatar_freeway_t *g = &m->s.freeway;
    int speeds[8];
    for (int i = 0; i < 8; i++) {
        speeds[i] = (int)nprandom_randint(&m->rng, 1, 6);
    }
    for (int i = 0; i < 8; i++) {
        // np.sign(rand - 0.5): the subtraction is exact, so this is the sign of u vs 0.5;
        // u == 0.5 gives a car of speed 0 in the reference too (probability 2^-53).
        double u = nprandom_rand(&m->rng);
        speeds[i] *= u > 0.5 ? 1 : u < 0.5 ? -1 : 0;
    }
    for (int i = 0; i < 8; i++) {
        minatar_freeway_car_t *c = &g->cars[i];
        if (initialize) {
            c->x = 0;
            c->y = i + 1;
        }
        c->timer = speeds[i] < 0 ? -speeds[i] : speeds[i];
        c->speed = speeds[i];
    }
}

static void s_freeway_reset(minatar_t *m) {
    minatar_freeway_t *g = &m->s.freeway;
    s_randomize_cars(m, 1);
    g->pos = 9;
    g->move_timer = FW_PLAYER_SPEED;
    g->terminate_timer = FW_TIME_LIMIT;
}

// A car's move, with x wrapping around the board (speed 0, probability 2^-53, moves left as
// in the reference's `1 if speed > 0 else -1`).
static inline int s_wrap(int x) { return x < 0 ? 9 : x > 9 ? 0 : x; }

// The reference's branches as selects: the action, each car's timer and direction differ
// from env to env and step to step, and as branches they mispredicted (a vector step goes
// through 64 different envs). The order of the tests on pos is the reference's.
static int s_freeway_act(minatar_t *m, int a) {
    minatar_freeway_t *g = &m->s.freeway;
    int r = 0;
    static const int8_t dy[MINATAR_N_ACTIONS] = {0, 0, -1, 0, 1, 0}; // UP -1, DOWN +1
    int moves = (dy[a] != 0) & (g->move_timer == 0);
    g->move_timer = moves ? FW_PLAYER_SPEED : g->move_timer;
    g->pos = APEX_MIN(9, APEX_MAX(0, g->pos + (moves ? dy[a] : 0)));

    if (g->pos == 0) {
        r += 1;
        s_randomize_cars(m, 0);
        g->pos = 9;
    }

    int pos = g->pos;
    for (int i = 0; i < 8; i++) {
        minatar_freeway_car_t *c = &g->cars[i];
        pos = (c->x == 4) & (c->y == pos) ? 9 : pos;
        int due = c->timer == 0;
        int speed = c->speed;
        int x = due ? s_wrap(c->x + (speed > 0 ? 1 : -1)) : c->x;
        c->timer = due ? (speed < 0 ? -speed : speed) : c->timer - 1;
        c->x = x;
        pos = due & (x == 4) & (c->y == pos) ? 9 : pos;
    }
    g->pos = pos;

    g->move_timer -= g->move_timer > 0;
    g->terminate_timer -= 1;
    if (g->terminate_timer < 0) {
        m->terminal = 1;
    }
    return r;
}

// Without a branch per car (speeds and positions differ between envs): the trail's cell
// and channel are selects.
static void s_freeway_observe(const minatar_t *m, uint8_t *restrict obs) {
    const minatar_freeway_t *g = &m->s.freeway;
#define FW_AT(y, x, c) obs[((y)*MINATAR_SIZE + (x)) * FW_CHANNELS + (c)]
    FW_AT(g->pos, 4, FW_CHICKEN) = 1;
    // The reference's trail variable is set only for |speed| 1..5 and otherwise keeps the
    // previous car's value (for the first car it would raise); only a speed-0 car, which
    // needs rand() == 0.5 exactly, can see that.
    int trail = -1;
    for (int i = 0; i < 8; i++) {
        const minatar_freeway_car_t *c = &g->cars[i];
        FW_AT(c->y, c->x, FW_CAR) = 1;
        int back_x = s_wrap(c->speed > 0 ? c->x - 1 : c->x + 1);
        int s = c->speed < 0 ? -c->speed : c->speed;
        trail = (s >= 1) & (s <= 5) ? FW_SPEED1 + s - 1 : trail;
        if (trail >= 0) {
            FW_AT(c->y, back_x, trail) = 1;
        }
    }
#undef FW_AT
}

static int s_freeway_ramp(const minatar_t *m) {
    (void)m;
    return -1; // difficulty_ramp() returns None
}

const minatar_game_t minatar_freeway_game = {
    .name = "freeway",
    .channels = FW_CHANNELS,
    .n_minimal_actions = 3,
    .minimal_actions = {MINATAR_NOOP, MINATAR_UP, MINATAR_DOWN},
    .reset = s_freeway_reset,
    .act = s_freeway_act,
    .observe = s_freeway_observe,
    .difficulty_ramp = s_freeway_ramp,
};
