// bench_learner.c: learner update throughput and GEMM efficiency (not a test: timing).
//
//   build/bench/bench_learner [--threads N] [--runs R] [--iters K]
//
// For the small net 4-256-256-dueling(2) and the large net 84-512-512-dueling(18), batch
// 512, Adam, clip 40, target sync every 2500: R timed windows of K full trainer_step
// updates after a warm-up, fed from a pool of 8 random batches (as the torch peer is).
// Also measures 1024^3 sgemm in the same process, in windows interleaved with the update
// windows, and reports the update's achieved GEMM rate (FLOPs of every forward/backward
// GEMM per update x updates/s) as a percentage of it (median of per-window ratios).
// Prints "BENCH <name> <median> <unit>" lines; medians over the R windows.
#include "blas.h"
#include "clock.h"
#include "nn.h"
#include "rng.h"
#include "train.h"
#include "xalloc.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POOL 8
#define BATCH 512

typedef struct {
    float *obs, *next_obs, *rew, *disc, *w;
    int32_t *act;
} bench_batch_t;

static int s_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double s_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, s_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The 1024^3 reference product. Measured in short windows interleaved with the update
// windows, so that both see the same load on a shared machine.
typedef struct {
    float *a, *b, *c;
    double rates[256]; // GFLOP/s of every window so far
    int n_rates;
} sgemm_ref_t;

#define SGEMM_N 1024

static void s_sgemm_init(sgemm_ref_t *g) {
    size_t nn = (size_t)SGEMM_N * SGEMM_N;
    g->a = xaligned_alloc(nn * sizeof(float));
    g->b = xaligned_alloc(nn * sizeof(float));
    g->c = xaligned_alloc(nn * sizeof(float));
    for (size_t i = 0; i < nn; i++) {
        g->a[i] = (float)(i % 13) * 0.01f;
        g->b[i] = (float)(i % 7) * 0.01f;
    }
    g->n_rates = 0;
}

// One window of 3 products (~60 ms); records and returns its GFLOP/s.
static double s_sgemm_window(sgemm_ref_t *g) {
    const int n = SGEMM_N, reps = 3;
    int64_t t0 = clock_now_ns();
    for (int k = 0; k < reps; k++) {
        blas_sgemm(g->c, g->a, g->b, 1.0f, 0.0f, BLAS_NO_TRANS, BLAS_NO_TRANS, n, n, n);
    }
    double s = (double)(clock_now_ns() - t0) * 1e-9;
    double rate = 2.0 * n * (double)n * n * reps / s * 1e-9;
    if (g->n_rates < 256) {
        g->rates[g->n_rates++] = rate;
    }
    return rate;
}

static void s_sgemm_fini(sgemm_ref_t *g) {
    xfree(g->a);
    xfree(g->b);
    xfree(g->c);
}

// FLOPs of the GEMMs in one update: 3 forwards, dW of every layer, dX of all but the first.
static double s_update_flops(const nn_config_t *cfg, int B) {
    nn_params_t p;
    nn_params_init(&p, cfg);
    double fwd = 0, first = 0;
    for (int l = 0; l < p.n_layers; l++) {
        double f = 2.0 * B * p.layer[l].in_dim * p.layer[l].out_dim;
        fwd += f;
        first = l == 0 ? f : first;
    }
    nn_params_fini(&p);
    return 3 * fwd + fwd + (fwd - first);
}

static void s_make_pool(bench_batch_t *pool, train_batch_t *tb, int O, int A, rng_t *r) {
    for (int k = 0; k < POOL; k++) {
        bench_batch_t *b = &pool[k];
        b->obs = xaligned_alloc(sizeof(float) * BATCH * (size_t)O);
        b->next_obs = xaligned_alloc(sizeof(float) * BATCH * (size_t)O);
        b->rew = xmalloc(sizeof(float) * BATCH);
        b->disc = xmalloc(sizeof(float) * BATCH);
        b->w = xmalloc(sizeof(float) * BATCH);
        b->act = xmalloc(sizeof(int32_t) * BATCH);
        for (size_t i = 0; i < (size_t)BATCH * O; i++) {
            b->obs[i] = (float)rng_normal(r);
            b->next_obs[i] = (float)rng_normal(r);
        }
        for (int i = 0; i < BATCH; i++) {
            b->rew[i] = (float)rng_normal(r);
            b->disc[i] = rng_uniform(r) < 0.05 ? 0.0f : 0.970299f; // 0.99^3, 5% terminals
            b->w[i] = rng_uniform_f(r);
            b->act[i] = (int32_t)rng_below(r, (uint32_t)A);
        }
        tb[k] = (train_batch_t){b->obs, b->act, b->rew, b->disc, b->next_obs, b->w, BATCH};
    }
}

static void s_free_pool(bench_batch_t *pool) {
    for (int k = 0; k < POOL; k++) {
        xfree(pool[k].obs);
        xfree(pool[k].next_obs);
        xfree(pool[k].rew);
        xfree(pool[k].disc);
        xfree(pool[k].w);
        xfree(pool[k].act);
    }
}

// Runs one network; prints its BENCH lines. Each window times an sgemm reference and then
// `iters` updates; efficiency is the median over windows of (update GEMM rate / reference).
static void s_bench_net(const char *name, const nn_config_t *net, int runs, int iters,
                        sgemm_ref_t *ref, const char *tsuffix) {
    train_config_t tc;
    train_config_default(&tc);
    tc.net = *net;
    tc.batch_size = BATCH;
    trainer_t *tr = trainer_new(&tc);
    rng_t r;
    rng_init_stream(&r, 0, RNG_ROLE_TEST, 0);
    bench_batch_t pool[POOL];
    train_batch_t tb[POOL];
    s_make_pool(pool, tb, net->obs_dim, net->n_actions, &r);
    float *prio = xmalloc(sizeof(float) * BATCH);
    train_stats_t st;
    int k = 0;
    for (int i = 0; i < 10; i++) {
        trainer_step(tr, &tb[k++ % POOL], prio, &st);
    }
    double flops = s_update_flops(net, BATCH), rates[64], eff[64];
    int64_t f_ns = 0, b_ns = 0, o_ns = 0;
    for (int w = 0; w < runs; w++) {
        double peak = s_sgemm_window(ref);
        int64_t t0 = clock_now_ns();
        for (int i = 0; i < iters; i++) {
            trainer_step(tr, &tb[k++ % POOL], prio, &st);
            f_ns += st.forward_ns, b_ns += st.backward_ns, o_ns += st.optim_ns;
        }
        rates[w] = iters / ((double)(clock_now_ns() - t0) * 1e-9);
        eff[w] = 100.0 * rates[w] * flops * 1e-9 / peak;
    }
    double n_upd = (double)runs * iters, med = s_median(rates, runs);
    printf("# %s: %zu params, %.1f MFLOP/update in GEMMs; per update: forward+loss %.3f ms, "
           "backward %.3f ms, clip+optim %.3f ms; min %.1f max %.1f updates/s\n",
           name, trainer_num_params(tr), flops * 1e-6, f_ns / n_upd * 1e-6, b_ns / n_upd * 1e-6,
           o_ns / n_upd * 1e-6, rates[0], rates[runs - 1]);
    printf("BENCH learner.%s%s.updates_per_s %.2f updates/s\n", name, tsuffix, med);
    printf("BENCH learner.%s%s.gemm_gflops %.1f GFLOP/s\n", name, tsuffix, med * flops * 1e-9);
    printf("BENCH learner.%s%s.gemm_efficiency %.1f %%\n", name, tsuffix, s_median(eff, runs));
    fflush(stdout);
    xfree(prio);
    s_free_pool(pool);
    trainer_destroy(&tr);
}

// The layout question behind nn.h: one hidden-layer product, batch-major (B x H, the
// batch is M) against feature-major (H x B, the batch is N), best of 5 short windows.
static void s_bench_layouts(void) {
    static const struct {
        const char *name;
        blas_trans ta, tb;
        int M, N, K;
    } cases[] = {
        {"batch_major.fwd_b512_h256", BLAS_NO_TRANS, BLAS_TRANS, 512, 256, 256},
        {"feature_major.fwd_b512_h256", BLAS_NO_TRANS, BLAS_NO_TRANS, 256, 512, 256},
        {"batch_major.dw_b512_h256", BLAS_TRANS, BLAS_NO_TRANS, 256, 256, 512},
        {"feature_major.dw_b512_h256", BLAS_NO_TRANS, BLAS_TRANS, 256, 256, 512},
        {"batch_major.fwd_b64_h512", BLAS_NO_TRANS, BLAS_TRANS, 64, 512, 512},
        {"feature_major.fwd_b64_h512", BLAS_NO_TRANS, BLAS_NO_TRANS, 512, 64, 512},
    };
    float *a = xaligned_alloc(512 * 512 * sizeof(float)),
          *b = xaligned_alloc(512 * 512 * sizeof(float));
    float *c = xaligned_alloc(512 * 512 * sizeof(float));
    for (size_t i = 0; i < 512 * 512; i++) {
        a[i] = (float)(i % 11) * 0.01f;
        b[i] = (float)(i % 5) * 0.01f;
    }
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        double best = 0;
        for (int w = 0; w < 5; w++) {
            int reps = 0;
            int64_t t0 = clock_now_ns(), dt;
            do {
                blas_sgemm(c, a, b, 1.0f, 0.0f, cases[k].ta, cases[k].tb, cases[k].M, cases[k].N,
                           cases[k].K);
                reps++;
            } while ((dt = clock_now_ns() - t0) < 20000000);
            double rate = 2.0 * cases[k].M * cases[k].N * (double)cases[k].K * reps / dt;
            best = rate > best ? rate : best;
        }
        printf("BENCH sgemm.layout.%s %.1f GFLOP/s\n", cases[k].name, best);
    }
    xfree(a);
    xfree(b);
    xfree(c);
}

// Actor-side latency: one forward pass for 64 environments on the large net.
static void s_bench_actor_forward(const nn_config_t *net, int runs, const char *tsuffix) {
    enum { B = 64 };
    nn_params_t p;
    nn_state_t st;
    nn_params_init(&p, net);
    nn_state_init(&st, net, B, 1);
    rng_t r;
    rng_init_stream(&r, 0, RNG_ROLE_TEST, 1);
    nn_params_init_random(&p, &r);
    float *obs = xaligned_alloc(sizeof(float) * B * (size_t)net->obs_dim);
    float *q = xaligned_alloc(sizeof(float) * B * (size_t)net->n_actions);
    double us[64];
    for (int w = 0; w < runs; w++) {
        int64_t t0 = clock_now_ns();
        for (int i = 0; i < 200; i++) {
            nn_forward(&st, &p, obs, B, q);
        }
        us[w] = (double)(clock_now_ns() - t0) * 1e-3 / 200;
    }
    printf("BENCH nn.large%s.forward_b64_us %.1f us\n", tsuffix, s_median(us, runs));
    xfree(obs);
    xfree(q);
    nn_state_fini(&st);
    nn_params_fini(&p);
}

// Parses a whole decimal int into *out; returns 0, or -1 for anything else (STYLE S17).
static int s_parse_int(const char *s, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < INT_MIN || v > INT_MAX) {
        return -1;
    }
    *out = (int)v;
    return 0;
}

int main(int argc, char **argv) {
    int threads = 1, runs = 7, iters = 0;
    for (int i = 1; i < argc; i += 2) {
        int *dst = strcmp(argv[i], "--threads") == 0 ? &threads
                   : strcmp(argv[i], "--runs") == 0  ? &runs
                   : strcmp(argv[i], "--iters") == 0 ? &iters
                                                     : NULL;
        if (!dst || i + 1 >= argc || s_parse_int(argv[i + 1], dst) != 0) {
            fprintf(stderr, "usage: %s [--threads N] [--runs R] [--iters K]\n", argv[0]);
            return 2;
        }
    }
    if (threads < 1 || runs < 1 || runs > 64 || iters < 0) {
        fprintf(stderr, "bench_learner: need threads >= 1, 1 <= runs <= 64, iters >= 0\n");
        return 2;
    }
    blas_set_threads(threads);
    char tsuffix[16] = "";
    if (threads != 1) {
        snprintf(tsuffix, sizeof tsuffix, ".t%d", threads);
    }
    const char *ct = getenv("OPENBLAS_CORETYPE");
    printf("# bench_learner: batch %d, threads %d, %d windows, OPENBLAS_CORETYPE=%s\n", BATCH,
           threads, runs, ct ? ct : "(unset)");
    sgemm_ref_t ref;
    s_sgemm_init(&ref);
    s_sgemm_window(&ref); // warm-up, discarded
    ref.n_rates = 0;
    nn_config_t
        small = {.obs_dim = 4, .n_actions = 2, .n_hidden = 2, .hidden = {256, 256}, .dueling = 1},
        large = {.obs_dim = 84, .n_actions = 18, .n_hidden = 2, .hidden = {512, 512}, .dueling = 1};
    s_bench_net("small", &small, runs, iters ? iters : 100, &ref, tsuffix);
    s_bench_net("large", &large, runs, iters ? iters : 30, &ref, tsuffix);
    printf("BENCH sgemm.1024%s %.1f GFLOP/s\n", tsuffix, s_median(ref.rates, ref.n_rates));
    s_sgemm_fini(&ref);
    s_bench_actor_forward(&large, runs, tsuffix);
    if (threads == 1) {
        s_bench_layouts();
    }
    return 0;
}
