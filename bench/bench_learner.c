// bench_learner.c: learner update throughput and GEMM efficiency (not a test: timing).
//
//   build/bench/bench_learner [--threads N] [--runs R] [--iters K]
//
// For the small net 4-256-256-dueling(2) and the large net 84-512-512-dueling(18), batch
// 512, Adam, clip 40, target sync every 2500: R timed windows of K full trainer_step
// updates after a warm-up, fed from a pool of 8 random batches (as the torch peer is).
// Also measures 1024^3 sgemm in the same process and reports the update's achieved GEMM
// rate (FLOPs of every forward/backward GEMM per update x updates/s) as a percentage of it.
// Prints "BENCH <name> <median> <unit>" lines; medians over the R windows.
#include "blas.h"
#include "clock.h"
#include "nn.h"
#include "rng.h"
#include "train.h"
#include "xalloc.h"

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

// GFLOP/s of C = A B at n^3, median of runs windows of a few products each.
static double s_sgemm_gflops(int n, int runs) {
    size_t nn = (size_t)n * n;
    float *a = xaligned_alloc(nn * sizeof(float)), *b = xaligned_alloc(nn * sizeof(float));
    float *c = xaligned_alloc(nn * sizeof(float));
    for (size_t i = 0; i < nn; i++) {
        a[i] = (float)(i % 13) * 0.01f;
        b[i] = (float)(i % 7) * 0.01f;
    }
    blas_sgemm(c, a, b, 1.0f, 0.0f, BLAS_NO_TRANS, BLAS_NO_TRANS, n, n, n); // warm-up
    double rates[64];
    for (int r = 0; r < runs; r++) {
        int64_t t0 = clock_now_ns();
        int reps = 5;
        for (int k = 0; k < reps; k++) {
            blas_sgemm(c, a, b, 1.0f, 0.0f, BLAS_NO_TRANS, BLAS_NO_TRANS, n, n, n);
        }
        double s = (double)(clock_now_ns() - t0) * 1e-9;
        rates[r] = 2.0 * n * (double)nn * reps / s * 1e-9;
    }
    xfree(a);
    xfree(b);
    xfree(c);
    return s_median(rates, runs);
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

// Runs one network; prints its BENCH lines. Returns the median updates/s.
static double s_bench_net(const char *name, const nn_config_t *net, int runs, int iters,
                          double sgemm_gflops, const char *tsuffix) {
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
    double rates[64];
    int64_t f_ns = 0, b_ns = 0, o_ns = 0;
    for (int w = 0; w < runs; w++) {
        int64_t t0 = clock_now_ns();
        for (int i = 0; i < iters; i++) {
            trainer_step(tr, &tb[k++ % POOL], prio, &st);
            f_ns += st.forward_ns, b_ns += st.backward_ns, o_ns += st.optim_ns;
        }
        rates[w] = iters / ((double)(clock_now_ns() - t0) * 1e-9);
    }
    double med = s_median(rates, runs), n_upd = (double)runs * iters;
    double gflops = s_update_flops(net, BATCH) * med * 1e-9;
    printf("# %s: %zu params, %.1f MFLOP/update in GEMMs; per update: forward+loss %.3f ms, "
           "backward %.3f ms, clip+optim %.3f ms; min %.1f max %.1f updates/s\n",
           name, trainer_num_params(tr), s_update_flops(net, BATCH) * 1e-6,
           f_ns / n_upd * 1e-6, b_ns / n_upd * 1e-6, o_ns / n_upd * 1e-6, rates[0],
           rates[runs - 1]);
    printf("BENCH learner.%s%s.updates_per_s %.2f updates/s\n", name, tsuffix, med);
    printf("BENCH learner.%s%s.gemm_gflops %.1f GFLOP/s\n", name, tsuffix, gflops);
    printf("BENCH learner.%s%s.gemm_efficiency %.1f %%\n", name, tsuffix,
           100.0 * gflops / sgemm_gflops);
    fflush(stdout);
    xfree(prio);
    s_free_pool(pool);
    trainer_destroy(&tr);
    return med;
}

// Actor-side latency: one forward pass for 64 environments on the large net.
static void s_bench_actor_forward(const nn_config_t *net, int runs, const char *tsuffix) {
    enum { B = 64 };
    nn_params_t p;
    nn_state_t st;
    nn_params_init(&p, net);
    nn_state_init(&st, net, B);
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

int main(int argc, char **argv) {
    int threads = 1, runs = 7, iters = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--threads") == 0) {
            threads = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--runs") == 0) {
            runs = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--iters") == 0) {
            iters = atoi(argv[i + 1]);
        } else {
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
    double sg = s_sgemm_gflops(1024, runs);
    printf("BENCH sgemm.1024%s %.1f GFLOP/s\n", tsuffix, sg);
    nn_config_t small = {4, 2, 2, {256, 256}, 1}, large = {84, 18, 2, {512, 512}, 1};
    s_bench_net("small", &small, runs, iters ? iters : 100, sg, tsuffix);
    s_bench_net("large", &large, runs, iters ? iters : 30, sg, tsuffix);
    s_bench_actor_forward(&large, runs, tsuffix);
    return 0;
}
