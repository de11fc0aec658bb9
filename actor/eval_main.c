// apex-eval: runs episodes with a checkpoint's network and prints the return statistics.
//
//   apex-eval -c CONFIG --checkpoint PATH [--episodes 100] [--epsilon 0]
// Episodes run in parallel, up to EVAL_PARALLEL at a time, and each environment of a round
// contributes exactly its first episode, so that short episodes are not over-represented
// (collecting "the first K to finish" from a fixed pool of envs would bias the mean down).
#define LOG_MODULE "eval"
#include "apex.h"
#include "blas.h"
#include "ckpt.h"
#include "cli.h"
#include "env.h"
#include "explore.h"
#include "log.h"
#include "nn.h"
#include "xalloc.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define EVAL_PARALLEL 256
#define EVAL_STREAM_BASE 1000000000ULL // env streams far from any training env's index

typedef struct {
    double sum, sum2, min, max;
    long n;
} s_summary;

// Runs one round of n envs until each has finished its first episode.
static void s_round(const env_spec_t *spec, nn_params_t *p, nn_state_t *st, int n, uint64_t seed,
                    uint64_t first, float epsilon, s_summary *sum) {
    vecenv_t v;
    vecenv_init(&v, spec, n, seed, first, n);
    int A = spec->n_actions;
    float *q = xmalloc((size_t)n * (size_t)A * sizeof(float));
    float *eps = xmalloc((size_t)n * sizeof(float));
    int32_t *act = xmalloc((size_t)n * sizeof(int32_t));
    void *next = xmalloc((size_t)n * env_obs_bytes(spec));
    float *rew = xmalloc((size_t)n * sizeof(float));
    uint8_t *term = xmalloc((size_t)n), *trunc = xmalloc((size_t)n), *done = xcalloc((size_t)n, 1);
    vecenv_episode_t *eps_done = xmalloc((size_t)n * sizeof *eps_done);
    rng_t rng;
    rng_init_stream(&rng, seed, RNG_ROLE_ACTOR, first);
    for (int i = 0; i < n; i++) {
        eps[i] = epsilon;
    }
    for (int remaining = n; remaining > 0;) {
        nn_forward(st, p, v.obs, n, q);
        explore_select(act, q, eps, n, A, &rng);
        vecenv_step(&v, act, next, rew, term, trunc);
        int k = vecenv_drain_episodes(&v, eps_done, n);
        for (int j = 0; j < k; j++) {
            int e = eps_done[j].env;
            if (!done[e]) {
                done[e] = 1;
                remaining--;
                double r = eps_done[j].ret;
                sum->sum += r;
                sum->sum2 += r * r;
                sum->min = sum->n ? fmin(sum->min, r) : r;
                sum->max = sum->n ? fmax(sum->max, r) : r;
                sum->n++;
            }
        }
    }
    vecenv_fini(&v);
    free(q), free(eps), free(act), free(next), free(rew), free(term), free(trunc), free(done);
    free(eps_done);
}

int main(int argc, char **argv) {
    cli_args_t args;
    apex_config_t cfg;
    int rc = cli_startup("apex-eval", CLI_FLAG_CHECKPOINT | CLI_FLAG_EPISODES | CLI_FLAG_EPSILON,
                         "  --checkpoint PATH     learner checkpoint to evaluate (required)\n"
                         "  --episodes N          episodes to run (default 100)\n"
                         "  --epsilon X           exploration rate (default 0: greedy)\n",
                         argc, argv, &args, &cfg);
    if (rc >= 0) {
        return rc;
    }
    if (!args.checkpoint) {
        fprintf(stderr, "apex-eval: --checkpoint PATH is required\n");
        return 2;
    }
    const env_spec_t *spec = env_find(cfg.env.id);
    if (!spec) { // id = external: nothing here can step it
        fprintf(stderr, "apex-eval: [env] id '%s' is not an environment apex can step (%s)\n",
                cfg.env.id, env_known_ids());
        return 2;
    }
    nn_config_t nc;
    nn_config_from_run(&nc, &cfg);
    nn_params_t p;
    nn_params_init(&p, &nc);
    ckpt_header_t hdr;
    rc = ckpt_read_online(args.checkpoint, &nc, &hdr, p.data);
    if (rc != APEX_OK) {
        fprintf(stderr, "apex-eval: cannot load %s: %s\n", args.checkpoint, apex_strerror(rc));
        nn_params_fini(&p);
        return 2;
    }
    blas_set_threads(1);
    nn_state_t st;
    nn_state_init(&st, &nc, EVAL_PARALLEL, 0);
    s_summary sum = {0};
    uint64_t first = EVAL_STREAM_BASE;
    for (long left = args.episodes; left > 0;) {
        int n = left < EVAL_PARALLEL ? (int)left : EVAL_PARALLEL;
        s_round(spec, &p, &st, n, (uint64_t)cfg.run.seed, first, (float)args.epsilon, &sum);
        first += (uint64_t)n;
        left -= n;
    }
    double mean = sum.sum / (double)sum.n;
    double var = sum.sum2 / (double)sum.n - mean * mean;
    printf("%s checkpoint %s (update %llu): episodes %ld  epsilon %g  mean %.2f  std %.2f  "
           "min %.1f  max %.1f\n",
           spec->id, args.checkpoint, (unsigned long long)hdr.learner_step, sum.n, args.epsilon,
           mean, sqrt(var > 0 ? var : 0), sum.min, sum.max);
    nn_state_fini(&st);
    nn_params_fini(&p);
    return 0;
}
