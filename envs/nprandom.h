// nprandom.h: numpy's legacy RandomState (numpy.random.RandomState), bit for bit.
//
// What it does: the MT19937 generator numpy's RandomState wraps, seeded the way
// RandomState(int) seeds it, and the three draws MinAtar makes with it: rand() (one
// double), randint(low, high) (one int64) and the raw 32-bit word both are built from.
// Checked against values printed by numpy 1.24 (tests/fixtures/gen_nprandom.py).
//
// The numpy facts it reproduces (numpy/random/_mt19937.pyx, src/mt19937, distributions.c):
// - RandomState(seed) with an int seed in [0, 2^32) calls MT19937._legacy_seeding, which
//   runs mt19937_seed: Matsumoto-Nishimura's init_genrand (not init_by_array; that one is
//   only for array seeds, which are not reproduced here).
// - rand() is next_double: a = u32 >> 5, b = u32 >> 6 (two draws, in that order),
//   (a * 2^26 + b) / 2^53.
// - randint(low, high) (dtype int64, the default) goes through
//   random_bounded_uint64_fill with use_masked: rng = high - 1 - low; rng == 0 returns low
//   and consumes no draw; rng < 2^32 repeats `v = u32 & mask` until v <= rng (mask the
//   smallest 2^k - 1 >= rng); a larger rng does the same with 64-bit words, each made of two
//   u32 draws, the first one the high half.
//
// What it deliberately does not do: seeding from arrays or from entropy, the Gaussian and
// other distributions, or numpy's newer Generator. Not thread-safe: one nprandom_t per
// thread. Plain data (2.5 KB), safe to copy, embed or memcmp.
#ifndef APEX_NPRANDOM_H
#define APEX_NPRANDOM_H

#include <stdint.h>

#define NPRANDOM_N 624

typedef struct {
    uint32_t key[NPRANDOM_N]; // MT19937 state words
    int32_t pos;              // next word to temper; NPRANDOM_N means "regenerate first"
} nprandom_t;

// Seeds as numpy.random.RandomState(seed) does for an int seed (init_genrand).
void nprandom_seed(nprandom_t *r, uint32_t seed);
// Regenerates all 624 words (mt19937_gen) and sets pos to 0; the draws below call it.
void nprandom_generate(nprandom_t *r);

// MT19937's tempering of one state word.
static inline uint32_t nprandom_temper(uint32_t y) {
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

// The next raw 32-bit word (numpy's next_uint32 / random_raw of the legacy MT19937). Inline:
// every MinAtar step draws at least two (the sticky-action rand()).
static inline uint32_t nprandom_next_u32(nprandom_t *r) {
    if (r->pos >= NPRANDOM_N) {
        nprandom_generate(r);
    }
    return nprandom_temper(r->key[r->pos++]);
}

// Two words, the first drawn as the high half (numpy's mt19937_next64).
uint64_t nprandom_next_u64(nprandom_t *r);

// RandomState.rand(): a double in [0, 1) from two words, a = u32 >> 5 then b = u32 >> 6.
// Both products and the sum are exact (a * 2^26 + b < 2^53), so no rounding to match.
static inline double nprandom_rand(nprandom_t *r) {
    int32_t a = (int32_t)(nprandom_next_u32(r) >> 5);
    int32_t b = (int32_t)(nprandom_next_u32(r) >> 6);
    return (a * 67108864.0 + b) / 9007199254740992.0;
}
// nprandom_rand(r) < p, exactly, for p in [0, 1], consuming the same two words; faster. The
// comparison is a * 2^26 + b < p * 2^53, i.e. a + b / 2^26 < p * 2^27 (both sides exact:
// scaling by powers of two), and b / 2^26 is in [0, 1): unless p * 2^27 - 1 < a < p * 2^27,
// which has probability 2^-27 per draw, a alone decides it, and the second word is skipped
// (its position is still consumed, regenerating the state when the first word was its last)
// rather than tempered and converted. MinAtar's sticky-action draw, on every step.
static inline int nprandom_rand_below(nprandom_t *r, double p) {
    double a = (double)(nprandom_next_u32(r) >> 5);
    double t = p * 134217728.0; // p * 2^27
    if (a + 1.0 <= t || a >= t) {
        if (r->pos >= NPRANDOM_N) {
            nprandom_generate(r);
        }
        r->pos++;
        return a < t;
    }
    int32_t b = (int32_t)(nprandom_next_u32(r) >> 6);
    return (a * 67108864.0 + b) / 9007199254740992.0 < p;
}

// RandomState.randint(low, high): an int64 in [low, high). low < high is asserted (numpy
// raises ValueError). Consumes no draw when high == low + 1.
int64_t nprandom_randint(nprandom_t *r, int64_t low, int64_t high);

#endif
