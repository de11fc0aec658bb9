// bench_replay.c: in-process throughput of the replay store (replay/store.h), the same
// operations as the numpy peer (../shared/peers/numpy_per.py) at the same sizes:
//   add50      store_add of 50 transitions with actor priorities     (transitions/s)
//   sample512  store_sample of 512 with IS weights and row gather     (batches/s)
//   update512  store_update of 512 keys with new priorities           (batches/s)
// The store is filled to capacity first, so adds overwrite (FIFO) as in steady state.
// Each op runs in `reps` windows of about `window` seconds; the median window is reported,
// on lines "BENCH replay.<op> <median> <unit>" (plus a "#" line with min and max).
//
// Usage: bench_replay [--capacity-log2 20] [--obs-dim 4] [--reps 5] [--window 0.3]
#include "apex.h"
#include "clock.h"
#include "parse.h"
#include "rng.h"
#include "store.h"
#include "xalloc.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_ALPHA 0.6 // the peer's ALPHA and BETA
#define BENCH_BETA 0.4f
#define BENCH_MAX_REPS 64
#define BENCH_INPUTS 64 // distinct pre-generated inputs per op, cycled (as the peer does)
#define ADD_N 50u
#define SAMPLE_N 512u

typedef struct {
    store_t *store;
    rng_t rng;
    uint32_t d;       // obs_dim
    uint32_t counter; // which pre-generated input the next call uses
    // add50 inputs: BENCH_INPUTS batches, laid out batch-major
    float *add_obs, *add_next_obs, *add_rew, *add_disc, *add_prio;
    int32_t *add_act;
    // update512 inputs
    uint64_t *upd_keys;
    float *upd_prio;
    // sample512 outputs
    uint64_t *keys;
    float *is_w, *obs, *next_obs, *rew, *disc;
    int32_t *act;
} bench_t;

typedef void (*bench_op_fn)(bench_t *b);

// ---------------------------------------------------------------------------------------
// The three operations
// ---------------------------------------------------------------------------------------

static void s_op_add50(bench_t *b) {
    size_t k = b->counter++ % BENCH_INPUTS;
    size_t r = k * ADD_N;
    store_add(b->store, ADD_N, b->add_obs + r * b->d, b->add_act + r, b->add_rew + r,
              b->add_disc + r, b->add_next_obs + r * b->d, b->add_prio + r);
}

static void s_op_sample512(bench_t *b) {
    int rc = store_sample(b->store, &b->rng, SAMPLE_N, BENCH_BETA, b->keys, b->is_w, b->obs, b->act,
                          b->rew, b->disc, b->next_obs);
    APEX_ASSERT(rc == APEX_OK);
}

static void s_op_update512(bench_t *b) {
    size_t k = b->counter++ % BENCH_INPUTS;
    store_update(b->store, SAMPLE_N, b->upd_keys + k * SAMPLE_N, b->upd_prio + k * SAMPLE_N);
}

// ---------------------------------------------------------------------------------------
// Timing: calibrate the call count to the window, then median over reps windows
// ---------------------------------------------------------------------------------------

static int s_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double s_seconds_for(bench_t *b, bench_op_fn op, uint64_t calls) {
    int64_t t0 = clock_now_ns();
    for (uint64_t i = 0; i < calls; i++) {
        op(b);
    }
    return (double)(clock_now_ns() - t0) * 1e-9;
}

static void s_measure(bench_t *b, const char *name, bench_op_fn op, double per_call,
                      const char *unit, int reps, double window) {
    uint64_t calls = 1;
    double dt;
    while ((dt = s_seconds_for(b, op, calls)) < 0.05) {
        calls *= 2;
    }
    calls = (uint64_t)((double)calls * window / dt) + 1;
    double rate[BENCH_MAX_REPS];
    for (int r = 0; r < reps; r++) {
        rate[r] = (double)calls * per_call / s_seconds_for(b, op, calls);
    }
    qsort(rate, (size_t)reps, sizeof rate[0], s_cmp_double);
    double med = reps % 2 ? rate[reps / 2] : 0.5 * (rate[reps / 2 - 1] + rate[reps / 2]);
    printf("# replay.%s: %d windows of %llu calls, min %.1f max %.1f %s\n", name, reps,
           (unsigned long long)calls, rate[0], rate[reps - 1], unit);
    printf("BENCH replay.%s %.1f %s\n", name, med, unit);
    fflush(stdout);
}

// ---------------------------------------------------------------------------------------
// Set-up
// ---------------------------------------------------------------------------------------

static float *s_randn(rng_t *rng, size_t n) {
    float *x = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)rng_normal(rng);
    }
    return x;
}

// Fills the store to capacity with random rows and priorities, in add batches of 4096.
static void s_fill(bench_t *b, uint32_t capacity) {
    const uint32_t batch = 4096;
    float *obs = s_randn(&b->rng, (size_t)batch * b->d);
    float *prio = xmalloc(batch * sizeof(float));
    float *rew = xmalloc(batch * sizeof(float));
    int32_t *act = xmalloc(batch * sizeof(int32_t));
    for (uint32_t i = 0; i < batch; i++) {
        rew[i] = (float)rng_normal(&b->rng);
        act[i] = (int32_t)rng_below(&b->rng, 2);
    }
    for (uint64_t done = 0; done < capacity; done += batch) {
        for (uint32_t i = 0; i < batch; i++) {
            prio[i] = (float)rng_uniform(&b->rng) * 2.0f + 1e-3f;
        }
        store_add(b->store, batch, obs, act, rew, rew, obs, prio);
    }
    xfree(obs);
    xfree(prio);
    xfree(rew);
    xfree(act);
}

static void s_make_inputs(bench_t *b, uint32_t capacity) {
    size_t na = (size_t)BENCH_INPUTS * ADD_N, nu = (size_t)BENCH_INPUTS * SAMPLE_N;
    b->add_obs = s_randn(&b->rng, na * b->d);
    b->add_next_obs = s_randn(&b->rng, na * b->d);
    b->add_rew = s_randn(&b->rng, na);
    b->add_disc = xmalloc(na * sizeof(float));
    b->add_prio = xmalloc(na * sizeof(float));
    b->add_act = xmalloc(na * sizeof(int32_t));
    for (size_t i = 0; i < na; i++) {
        b->add_disc[i] = 0.970299f;
        b->add_prio[i] = (float)rng_uniform(&b->rng) * 2.0f;
        b->add_act[i] = (int32_t)rng_below(&b->rng, 2);
    }
    // Updates hit uniformly random slots with their current generation, like the peer's
    // random leaf indices; all are applied (none stale) since no add runs in between.
    b->upd_keys = xmalloc(nu * sizeof(uint64_t));
    b->upd_prio = xmalloc(nu * sizeof(float));
    for (size_t i = 0; i < nu; i++) {
        uint32_t slot = rng_below(&b->rng, capacity);
        b->upd_keys[i] = slot | (uint64_t)store_slot_generation(b->store, slot) << 32;
        b->upd_prio[i] = (float)rng_uniform(&b->rng) * 2.0f;
    }
    b->keys = xmalloc(SAMPLE_N * sizeof(uint64_t));
    b->is_w = xmalloc(SAMPLE_N * sizeof(float));
    b->obs = xmalloc((size_t)SAMPLE_N * b->d * sizeof(float));
    b->next_obs = xmalloc((size_t)SAMPLE_N * b->d * sizeof(float));
    b->rew = xmalloc(SAMPLE_N * sizeof(float));
    b->disc = xmalloc(SAMPLE_N * sizeof(float));
    b->act = xmalloc(SAMPLE_N * sizeof(int32_t));
}

static void s_free_inputs(bench_t *b) {
    void *bufs[] = {b->add_obs, b->add_next_obs, b->add_rew,  b->add_disc, b->add_prio,
                    b->add_act, b->upd_keys,     b->upd_prio, b->keys,     b->is_w,
                    b->obs,     b->next_obs,     b->rew,      b->disc,     b->act};
    for (size_t i = 0; i < APEX_ARRAY_LEN(bufs); i++) {
        xfree(bufs[i]);
    }
}

// Parses "--name value" pairs; returns 0, or -1 with a message on anything unknown.
static int s_parse_args(int argc, char **argv, long *cap_log2, long *d, long *reps,
                        double *window) {
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc) {
            fprintf(stderr, "bench_replay: %s needs a value\n", argv[i]);
            return -1;
        }
        int ok;
        if (!strcmp(argv[i], "--window")) {
            char *end = NULL;
            *window = strtod(argv[i + 1], &end);
            ok = end != argv[i + 1] && *end == '\0';
        } else {
            long *dst = !strcmp(argv[i], "--capacity-log2") ? cap_log2
                        : !strcmp(argv[i], "--obs-dim")     ? d
                        : !strcmp(argv[i], "--reps")        ? reps
                                                            : NULL;
            if (!dst) {
                fprintf(stderr, "bench_replay: unknown option %s\n", argv[i]);
                return -1;
            }
            int64_t x = 0;
            ok = parse_int64(argv[i + 1], LONG_MIN, LONG_MAX, &x) == 0;
            *dst = (long)x;
        }
        if (!ok) {
            fprintf(stderr, "bench_replay: bad value for %s: %s\n", argv[i], argv[i + 1]);
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    long cap_log2 = 20, d = 4, reps = 5;
    double window = 0.3;
    if (s_parse_args(argc, argv, &cap_log2, &d, &reps, &window) != 0 || cap_log2 < 4 ||
        cap_log2 > 26 || d < 1 || d > 4096 || reps < 1 || reps > BENCH_MAX_REPS ||
        !(window > 0.0)) {
        fprintf(stderr, "usage: bench_replay [--capacity-log2 4..26] [--obs-dim 1..4096] "
                        "[--reps 1..64] [--window seconds]\n");
        return 2;
    }
    bench_t b = {.d = (uint32_t)d};
    rng_init_stream(&b.rng, 1, RNG_ROLE_TEST, 0);
    store_config_t cfg = {.capacity = 1u << cap_log2, .obs_dim = b.d, .alpha = BENCH_ALPHA};
    b.store = store_new(&cfg);
    if (!b.store) {
        return 2;
    }
    int64_t t0 = clock_now_ns();
    s_fill(&b, cfg.capacity);
    printf("# apex replay store: capacity 2^%ld obs_dim %ld, %.1f MiB, filled in %.2f s, "
           "%ld windows x %.2f s\n",
           cap_log2, d, (double)store_bytes(&cfg) / (1 << 20), (double)(clock_now_ns() - t0) * 1e-9,
           reps, window);
    s_make_inputs(&b, cfg.capacity);
    // Updates first, while every prepared key still matches its slot's generation.
    s_measure(&b, "update512", s_op_update512, 1.0, "batches/s", (int)reps, window);
    s_measure(&b, "sample512", s_op_sample512, 1.0, "batches/s", (int)reps, window);
    s_measure(&b, "add50", s_op_add50, ADD_N, "transitions/s", (int)reps, window);
    s_free_inputs(&b);
    store_destroy(&b.store);
    return 0;
}
