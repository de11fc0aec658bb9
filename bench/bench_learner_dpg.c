// bench_learner_dpg.c: the DPG / TD3 learner update's throughput (not a test: timing).
//
//   build/bench/bench_learner_dpg [--threads N] [--windows R] [--iters K] [--warmup W]
//                                 [--obs O] [--act A] [--hidden H] [--batch B] [--ddpg]
//
// Defaults are issue #28's shapes: HalfCheetah-v4 (17 observations, 6 actions), 256-256 MLPs
// for the policy and each critic, batch 256, TD3's options on (twin critics, target smoothing
// 0.2 clipped to 0.5, policy every 2nd update, Polyak 0.005), Adam 3e-4, no gradient clip:
// what ../shared/peers/torch_td3.py --td3 runs (--ddpg: one critic, no smoothing, the policy
// every update, as the peer without --td3). One update is train_dpg_step on a batch from a
// pool of 8 random batches (the peer's distributions: observations N(0, 1), actions U(-1, 1),
// rewards N(0, 1), discount 0 for 2 % of the rows else 0.99, weights U(0.1, 1)), priorities
// written back, as the learner daemon does per batch.
// Prints "BENCH learner.dpg.updates_per_s <median> updates/s" (".ddpg" with --ddpg, ".t2" for
// 2 threads), the median over R windows of K updates after W warm-up updates.
#include "bench_common.h"
#include "blas.h"
#include "clock.h"
#include "nn.h"
#include "parse.h"
#include "rng.h"
#include "train_dpg.h"
#include "xalloc.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POOL 8

typedef struct {
    float *obs, *act, *rew, *disc, *next, *w;
} s_batch_t;

int main(int argc, char **argv) {
    blas_startup(argv, "auto"); // the kernel every apex daemon would run here
    int threads = 1, windows = 5, iters = 200, warmup = 50, obs = 17, act = 6, hidden = 256,
        batch = 256, ddpg = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--ddpg") == 0) {
            ddpg = 1;
            continue;
        }
        int *dst = strcmp(argv[i], "--threads") == 0   ? &threads
                   : strcmp(argv[i], "--windows") == 0 ? &windows
                   : strcmp(argv[i], "--iters") == 0   ? &iters
                   : strcmp(argv[i], "--warmup") == 0  ? &warmup
                   : strcmp(argv[i], "--obs") == 0     ? &obs
                   : strcmp(argv[i], "--act") == 0     ? &act
                   : strcmp(argv[i], "--hidden") == 0  ? &hidden
                   : strcmp(argv[i], "--batch") == 0   ? &batch
                                                       : NULL;
        int64_t v;
        if (!dst || i + 1 >= argc || parse_int64(argv[i + 1], 0, INT_MAX, &v) != 0) {
            fprintf(stderr,
                    "usage: %s [--threads N] [--windows R] [--iters K] [--warmup W] [--obs O] "
                    "[--act A] [--hidden H] [--batch B] [--ddpg]\n",
                    argv[0]);
            return 2;
        }
        *dst = (int)v;
        i++;
    }
    if (threads < 1 || windows < 1 || windows > 64 || iters < 1 || obs < 1 || act < 1 ||
        act > NN_MAX_BOUNDED || hidden < 1 || batch < 1) {
        fprintf(stderr, "bench_learner_dpg: need threads, windows (<= 64), iters, obs, act "
                        "(<= 64), hidden and batch >= 1\n");
        return 2;
    }
    blas_set_threads(threads);

    train_dpg_config_t cfg;
    train_dpg_config_default(&cfg); // TD3: twin, delay 2, noise 0.2 / 0.5, tau 0.005, Adam 3e-4
    cfg.actor = (nn_config_t){.obs_dim = obs,
                              .in_dtype = NN_INPUT_F32,
                              .in_scale = 1.0f,
                              .n_actions = act,
                              .n_hidden = 2,
                              .hidden = {hidden, hidden},
                              .out_bounded = 1};
    for (int j = 0; j < act; j++) {
        cfg.actor.out_low[j] = -1.0f, cfg.actor.out_high[j] = 1.0f;
    }
    cfg.batch_size = batch;
    if (ddpg) {
        cfg.twin = 0, cfg.policy_delay = 1, cfg.target_noise = 0.0f;
    }
    train_dpg_t *t = train_dpg_new(&cfg);
    if (!t) {
        return 2;
    }
    rng_t rng;
    rng_init_stream(&rng, 1, RNG_ROLE_TEST, 0);
    s_batch_t pool[POOL];
    const size_t B = (size_t)batch;
    for (int k = 0; k < POOL; k++) {
        s_batch_t *p = &pool[k];
        p->obs = xmalloc(B * (size_t)obs * sizeof(float));
        p->next = xmalloc(B * (size_t)obs * sizeof(float));
        p->act = xmalloc(B * (size_t)act * sizeof(float));
        p->rew = xmalloc(B * sizeof(float));
        p->disc = xmalloc(B * sizeof(float));
        p->w = xmalloc(B * sizeof(float));
        for (size_t i = 0; i < B * (size_t)obs; i++) {
            p->obs[i] = (float)rng_normal(&rng), p->next[i] = (float)rng_normal(&rng);
        }
        for (size_t i = 0; i < B * (size_t)act; i++) {
            p->act[i] = (float)(2.0 * rng_uniform(&rng) - 1.0);
        }
        for (size_t i = 0; i < B; i++) {
            p->rew[i] = (float)rng_normal(&rng);
            p->disc[i] = rng_uniform(&rng) < 0.02 ? 0.0f : 0.99f;
            p->w[i] = (float)(0.1 + 0.9 * rng_uniform(&rng));
        }
    }
    float *prio = xmalloc(B * sizeof(float));
    double rates[64];
    long step = 0;
    for (int r = -1; r < windows; r++) { // window -1 is the warm-up
        int n = r < 0 ? warmup : iters;
        int64_t t0 = clock_now_ns();
        for (int i = 0; i < n; i++, step++) {
            const s_batch_t *p = &pool[step % POOL];
            train_dpg_batch_t b = {.obs = p->obs,
                                   .actions = p->act,
                                   .rewards = p->rew,
                                   .discounts = p->disc,
                                   .next_obs = p->next,
                                   .is_weights = p->w,
                                   .size = batch};
            train_dpg_step(t, &b, prio, NULL);
        }
        if (r >= 0) {
            rates[r] = (double)n / ((double)(clock_now_ns() - t0) * 1e-9);
        }
    }
    double med = bench_median(rates, windows);
    char sfx[32] = "";
    if (threads > 1) {
        snprintf(sfx, sizeof sfx, ".t%d", threads);
    }
    printf("BENCH learner.dpg%s%s.updates_per_s %.1f updates/s\n", ddpg ? ".ddpg" : "", sfx, med);
    printf("# o%d a%d h%d b%d %s, %d windows of %d updates: min %.1f max %.1f; %zu parameters, "
           "OpenBLAS %s\n",
           obs, act, hidden, batch, ddpg ? "DDPG" : "TD3", windows, iters, rates[0],
           rates[windows - 1], train_dpg_num_params(t), blas_core());
    for (int k = 0; k < POOL; k++) {
        free(pool[k].obs), free(pool[k].next), free(pool[k].act);
        free(pool[k].rew), free(pool[k].disc), free(pool[k].w);
    }
    free(prio);
    train_dpg_destroy(&t);
    return 0;
}
