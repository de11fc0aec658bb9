// bench_env.c: raw CartPole-v1 stepping throughput of vecenv_t on one core.
//
// 64 envs in lock step with auto-reset, uniform random actions drawn from an rng_t inside the
// timed loop (as an actor with a random policy would pick them), no policy network and no
// n-step folding. Peer: ../shared/peers/cartpole.py (see bench/run_env.sh for the ratio).
//
// Output: one "BENCH env.cartpole.steps_per_s <median> steps/s" line (median of the timed
// windows after one warm-up window), plus a comment line with min/max and episode counts.
//
// Usage: bench_env [vector_steps_per_window] [windows]     defaults 200000 and 7
#include "clock.h"
#include "env.h"
#include "rng.h"

#include <stdio.h>
#include <stdlib.h>

#define BENCH_NENV 64

static int s_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// Steps v for vsteps vector steps with random actions; returns env steps per second.
static double s_run_window(vecenv_t *v, rng_t *r, long vsteps, float *next_obs, float *rewards,
                           uint8_t *term, uint8_t *trunc) {
    int32_t actions[BENCH_NENV];
    int64_t t0 = clock_now_ns();
    for (long s = 0; s < vsteps; s++) {
        // One 64-bit draw gives all 64 binary actions: uniform and independent per env.
        uint64_t bits = rng_next_u64(r);
        for (int i = 0; i < BENCH_NENV; i++) {
            actions[i] = (int32_t)((bits >> i) & 1u);
        }
        vecenv_step(v, actions, next_obs, rewards, term, trunc);
        v->done_count = 0; // nobody drains episode reports in this benchmark
    }
    int64_t dt_ns = clock_now_ns() - t0;
    return (double)vsteps * BENCH_NENV / ((double)dt_ns * 1e-9);
}

int main(int argc, char **argv) {
    long vsteps = argc > 1 ? strtol(argv[1], NULL, 10) : 200000;
    int windows = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 7;
    if (vsteps <= 0 || windows < 5 || windows > 100) {
        fprintf(stderr, "usage: %s [vector_steps_per_window > 0] [windows 5..100]\n", argv[0]);
        return 2;
    }
    vecenv_t v;
    vecenv_init(&v, &env_cartpole_spec, BENCH_NENV, 1, 0, BENCH_NENV);
    rng_t r;
    rng_init_stream(&r, 1, RNG_ROLE_ACTOR, 0);
    static float next_obs[BENCH_NENV * 4], rewards[BENCH_NENV];
    static uint8_t term[BENCH_NENV], trunc[BENCH_NENV];

    double rates[100];
    (void)s_run_window(&v, &r, vsteps / 4, next_obs, rewards, term, trunc); // warm-up
    for (int w = 0; w < windows; w++) {
        rates[w] = s_run_window(&v, &r, vsteps, next_obs, rewards, term, trunc);
    }
    qsort(rates, (size_t)windows, sizeof(double), s_cmp_double);
    double median = windows % 2 ? rates[windows / 2]
                                : 0.5 * (rates[windows / 2 - 1] + rates[windows / 2]);
    printf("# bench_env: %d envs, %ld vector steps x %d windows; min %.0f max %.0f steps/s; "
           "%llu episodes, mean length %.1f\n",
           BENCH_NENV, vsteps, windows, rates[0], rates[windows - 1],
           (unsigned long long)v.episodes, (double)v.steps / (double)(v.episodes ? v.episodes : 1));
    printf("BENCH env.cartpole.steps_per_s %.0f steps/s\n", median);
    vecenv_fini(&v);
    return 0;
}
