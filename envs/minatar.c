// minatar.c: the wrapper of minatar/environment.py, the game table and the trace helpers.
// The games are in minatar_<game>.c.
#include "minatar.h"

#include "apex.h"

#include <stdio.h>
#include <string.h>

// ---------------------------------------------------------------------------------------
// Game table

static const minatar_game_t *const s_games[] = {
    &minatar_asterix_game,  &minatar_breakout_game,       &minatar_freeway_game,
    &minatar_seaquest_game, &minatar_space_invaders_game,
};

const minatar_game_t *minatar_find(const char *name) {
    for (size_t i = 0; name && i < APEX_ARRAY_LEN(s_games); i++) {
        if (strcmp(s_games[i]->name, name) == 0) {
            return s_games[i];
        }
    }
    return NULL;
}

int minatar_game_count(void) { return (int)APEX_ARRAY_LEN(s_games); }

const minatar_game_t *minatar_game_at(int i) {
    APEX_ASSERT(i >= 0 && i < minatar_game_count());
    return s_games[i];
}

// ---------------------------------------------------------------------------------------
// Environment

void minatar_init(minatar_t *m, const minatar_game_t *game, double sticky_prob, int ramping) {
    APEX_ASSERT(game != NULL);
    APEX_ASSERT(sticky_prob >= 0.0 && sticky_prob <= 1.0);
    memset(m, 0, sizeof *m);
    m->game = game;
    m->sticky_prob = sticky_prob;
    m->ramping = ramping ? 1 : 0;
    m->last_action = MINATAR_NOOP;
    // The reference seeds from entropy here; 0 keeps an unseeded minatar_t reproducible.
    nprandom_seed(&m->rng, 0);
    minatar_reset(m);
}

void minatar_seed(minatar_t *m, uint32_t seed) { nprandom_seed(&m->rng, seed); }

void minatar_reset(minatar_t *m) {
    m->terminal = 0;
    m->game->reset(m);
}

void minatar_act(minatar_t *m, int action, float *reward, int *terminal) {
    APEX_ASSERT(action >= 0 && action < MINATAR_N_ACTIONS);
    int r = minatar_act_inline(m, action);
    if (reward) {
        *reward = (float)r;
    }
    if (terminal) {
        *terminal = m->terminal;
    }
}

void minatar_observe(const minatar_t *m, uint8_t *obs) {
    if (!m->game->whole_frame) {
        memset(obs, 0, minatar_obs_size(m));
    }
    m->game->observe(m, obs);
}

// ---------------------------------------------------------------------------------------
// Debugging and test helpers

uint64_t minatar_fnv1a64(const uint8_t *data, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= data[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

int minatar_lcg_action(uint64_t *state) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (int)((*state >> 33) % MINATAR_N_ACTIONS);
}

void minatar_pack_bits(uint8_t *out, const uint8_t *obs, size_t n) {
    memset(out, 0, (n + 7) / 8);
    for (size_t i = 0; i < n; i++) {
        out[i / 8] |= (uint8_t)((obs[i] ? 1u : 0u) << (i % 8));
    }
}

int minatar_format_step(char *buf, size_t cap, int64_t t, int action, int applied, float reward,
                        int terminal, const uint8_t *obs, int channels) {
    APEX_ASSERT(channels > 0 && channels <= MINATAR_MAX_CHANNELS);
    size_t n = (size_t)MINATAR_SIZE * MINATAR_SIZE * (size_t)channels;
    uint8_t packed[MINATAR_MAX_OBS / 8];
    minatar_pack_bits(packed, obs, n);
    // Python's '%g' % float(r) prints integers as C's %g does ("1", "10", "0").
    int len = snprintf(buf, cap, "t=%lld a=%d ea=%d r=%g term=%d obs=", (long long)t, action,
                       applied, (double)reward, terminal ? 1 : 0);
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < (n + 7) / 8; i++) {
        if ((size_t)len + 2 < cap) {
            buf[len] = hex[packed[i] >> 4];
            buf[len + 1] = hex[packed[i] & 15];
            buf[len + 2] = '\0';
        }
        len += 2;
    }
    return len;
}
