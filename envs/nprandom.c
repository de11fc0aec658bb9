// nprandom.c: MT19937 and numpy's legacy rand/randint on top of it (see nprandom.h).
#include "nprandom.h"

#include "apex.h"

// ---------------------------------------------------------------------------------------
// MT19937 (Matsumoto & Nishimura 1998), the constants of mt19937ar.c.

#define MT_M 397
#define MT_MATRIX_A 0x9908b0dfu
#define MT_UPPER_MASK 0x80000000u
#define MT_LOWER_MASK 0x7fffffffu

void nprandom_seed(nprandom_t *r, uint32_t seed) {
    // init_genrand: Knuth's multiplier, as numpy's mt19937_seed.
    r->key[0] = seed;
    for (uint32_t i = 1; i < NPRANDOM_N; i++) {
        uint32_t prev = r->key[i - 1];
        r->key[i] = 1812433253u * (prev ^ (prev >> 30)) + i;
    }
    r->pos = NPRANDOM_N;
}

static inline uint32_t s_twist(uint32_t hi, uint32_t lo, uint32_t far) {
    uint32_t y = (hi & MT_UPPER_MASK) | (lo & MT_LOWER_MASK);
    return far ^ (y >> 1) ^ ((y & 1u) ? MT_MATRIX_A : 0u);
}

void nprandom_generate(nprandom_t *r) {
    uint32_t *k = r->key;
    int i = 0;
    for (; i < NPRANDOM_N - MT_M; i++) {
        k[i] = s_twist(k[i], k[i + 1], k[i + MT_M]);
    }
    for (; i < NPRANDOM_N - 1; i++) {
        k[i] = s_twist(k[i], k[i + 1], k[i + (MT_M - NPRANDOM_N)]);
    }
    k[NPRANDOM_N - 1] = s_twist(k[NPRANDOM_N - 1], k[0], k[MT_M - 1]);
    r->pos = 0;
}

uint64_t nprandom_next_u64(nprandom_t *r) {
    // numpy writes `(uint64_t)next(state) << 32 | next(state)`, whose evaluation order C
    // leaves open; numpy's build draws the high half first (randint(0, 2**40) with seed 0
    // is 741280623151 = (0x8c7f0aac << 32 | 0x97c4aa2f) & (2^40 - 1)).
    uint64_t hi = nprandom_next_u32(r);
    uint64_t lo = nprandom_next_u32(r);
    return hi << 32 | lo;
}

// ---------------------------------------------------------------------------------------
// numpy's draws

// Smallest 2^k - 1 >= v (numpy's gen_mask).
static inline uint64_t s_mask(uint64_t v) {
    v |= v >> 1;
    v |= v >> 2;
    v |= v >> 4;
    v |= v >> 8;
    v |= v >> 16;
    v |= v >> 32;
    return v;
}

int64_t nprandom_randint(nprandom_t *r, int64_t low, int64_t high) {
    APEX_ASSERT(low < high);
    // rng = high - 1 - low in uint64, where the int64 difference could overflow.
    uint64_t rng = (uint64_t)high - 1u - (uint64_t)low;
    uint64_t v;
    if (rng == 0) {
        v = 0; // numpy returns off without drawing
    } else if (rng <= 0xffffffffu) {
        // buffered_bounded_masked_uint32: 32-bit words (the buffer is only for 8/16 bits).
        uint32_t mask = (uint32_t)s_mask(rng);
        uint32_t w;
        do {
            w = nprandom_next_u32(r) & mask;
        } while (w > rng);
        v = w;
    } else {
        // 64-bit words. (numpy's rng == UINT64_MAX branch cannot be reached from int64
        // bounds: rng is at most 2^64 - 2.)
        uint64_t mask = s_mask(rng);
        do {
            v = nprandom_next_u64(r) & mask;
        } while (v > rng);
    }
    // off + v wraps in uint64 like numpy's, and is in [low, high) as an int64.
    return (int64_t)((uint64_t)low + v);
}
