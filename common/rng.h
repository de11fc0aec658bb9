// rng.h: explicit-state pseudo-random numbers (STYLE S11).
//
// xoshiro256** (Blackman & Vigna) seeded through splitmix64. Each user owns an rng_t and
// passes it by pointer; there is no global generator, and rand()/srand() are banned.
// Streams are derived from the run seed plus a role and an index, so every actor, env and
// daemon draws from its own reproducible stream. Not thread-safe: one rng_t per thread.
#ifndef APEX_RNG_H
#define APEX_RNG_H

#include <stdint.h>

typedef struct {
    uint64_t s[4];
} rng_t;

// Roles that own a stream; the values are part of reproducibility, never renumber them.
typedef enum {
    RNG_ROLE_ACTOR = 1,
    RNG_ROLE_ENV = 2,
    RNG_ROLE_REPLAY = 3,
    RNG_ROLE_LEARNER = 4,
    RNG_ROLE_NET_INIT = 5,
    // The learner's choice of replay shard, index = its rank in its group (learner/shards.c).
    RNG_ROLE_SHARDS = 6,
    RNG_ROLE_DET_ROWS = 7, // a deterministic sharded run's rows of each place (learner/prefetch.c)
    RNG_ROLE_TEST = 99,
} rng_role;

void rng_init(rng_t *r, uint64_t seed);
// Stream for (seed, role, index): distinct for every distinct triple.
void rng_init_stream(rng_t *r, uint64_t seed, rng_role role, uint64_t index);
uint64_t rng_next_u64(rng_t *r);
uint32_t rng_next_u32(rng_t *r);
double rng_uniform(rng_t *r);             // [0, 1), 53 random bits
float rng_uniform_f(rng_t *r);            // [0, 1), 24 random bits
uint32_t rng_below(rng_t *r, uint32_t n); // uniform in [0, n), unbiased; n > 0
double rng_normal(rng_t *r);              // standard normal (Box-Muller)

#endif
