// rng.c: xoshiro256** with splitmix64 seeding. Reference: https://prng.di.unimi.it/
#include "rng.h"

#include "apex.h"

#include <math.h>

static uint64_t s_splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t s_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void rng_init(rng_t *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) {
        r->s[i] = s_splitmix64(&x);
    }
}

void rng_init_stream(rng_t *r, uint64_t seed, rng_role role, uint64_t index) {
    // Hash the triple through splitmix so that nearby seeds/indices give unrelated streams.
    uint64_t x = seed;
    uint64_t h = s_splitmix64(&x);
    x = h ^ ((uint64_t)role * 0xd1342543de82ef95ULL);
    h = s_splitmix64(&x);
    x = h ^ (index * 0xaf251af3b0f025b5ULL + 0x632be59bd9b4e019ULL);
    rng_init(r, s_splitmix64(&x));
}

uint64_t rng_next_u64(rng_t *r) {
    uint64_t *s = r->s;
    const uint64_t result = s_rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = s_rotl(s[3], 45);
    return result;
}

uint32_t rng_next_u32(rng_t *r) { return (uint32_t)(rng_next_u64(r) >> 32); }

double rng_uniform(rng_t *r) { return (double)(rng_next_u64(r) >> 11) * 0x1.0p-53; }

float rng_uniform_f(rng_t *r) { return (float)(rng_next_u64(r) >> 40) * 0x1.0p-24f; }

uint32_t rng_below(rng_t *r, uint32_t n) {
    APEX_ASSERT(n > 0);
    // Lemire's multiply-shift with rejection: unbiased and division-free on the fast path.
    uint64_t m = (uint64_t)rng_next_u32(r) * n;
    uint32_t low = (uint32_t)m;
    if (low < n) {
        uint32_t threshold = -n % n;
        while (low < threshold) {
            m = (uint64_t)rng_next_u32(r) * n;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

double rng_normal(rng_t *r) {
    double u1 = rng_uniform(r);
    double u2 = rng_uniform(r);
    if (u1 < 1e-300) {
        u1 = 1e-300;
    }
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}
