// bench_learner.c: learner update throughput and GEMM efficiency (not a test: timing).
//
//   build/bench/bench_learner [--threads N] [--runs R] [--iters K] [--batch B]
//                             [--precision fp32|bf16] [--library auto|openblas|onednn]
//                             [--net NAME]...
//
// --library is [run] blas_library (model/blas.h), auto as in the product by default (the
// products on OpenBLAS, the Atari bodies' conv layers on oneDNN's primitives where libdnnl2
// loads); openblas: everything on OpenBLAS (im2col); onednn: the products on oneDNN's sgemm
// too (the sgemm reference windows also). The BENCH names do not change, so compare two
// invocations.
//
// --precision bf16 is [learner] precision = bf16 (the products' inputs rounded to bfloat16,
// model/bf16.h's GEMM, one thread): the update lines are named learner.<net>.bf16.*, their
// gemm_efficiency still against the fp32 sgemm (so it can pass 100 %); refused, exit 2, on a
// CPU without AVX512_BF16.
//
// --batch B replaces every net's batch below (the MinAtar configs train on 256: what
// updates/s a learner of that batch can reach on this machine, with 1 or 2 threads).
//
// Nets (--net may be given several times; default: small, large, minatar, nature):
//   small    4-256-256-dueling(2), float32 vectors, batch 512
//   large    84-512-512-dueling(18), float32 vectors, batch 512
//   minatar  MinAtar's DQN body: uint8 10x10x4 frames (0/1, scale 1) -> conv 16 3x3 s1 ->
//            fc 128 -> dueling(6), batch 512 (torch_learner.py --net minatar --actions 6)
//   nature   the Nature DQN body: uint8 84x84x4 frames (0..255, scale 1/255) -> conv 32 8x8
//            s4, 64 4x4 s2, 64 3x3 s1 -> fc 512 -> dueling(6), batch 128
//            (torch_learner.py --net nature --actions 6 --batch 128)
//   pixels   configs/minatar-breakout-pixels.ini's network, the 2013 DQN body: uint8 84x84x1
//            frames -> conv 16 8x8 s4, 32 4x4 s2 -> fc 256 -> dueling(6), batch 128 (no peer;
//            not in the default set)
// Each: Adam, clip 40, target sync every 2500; R timed windows of K full trainer_step
// updates after a warm-up, fed from a pool of 8 random batches (as the torch peer is).
// Also measures 1024^3 sgemm in the same process, in windows interleaved with the update
// windows, and reports the update's achieved GEMM rate as a percentage of it (median of
// per-window ratios).
//
// FLOPs of one update (s_update_flops), 2 per multiply-add, B samples: with f_l the forward
// FLOPs of parametric layer l for one sample (linear: in out; conv: OC C k k OH OW, i.e. the
// im2col GEMM), fwd = B sum_l 2 f_l and first = B 2 f_0,
//   update = 3 fwd (online(s'), target(s'), online(s)) + fwd (dW of every layer)
//            + (fwd - first) (dX of every layer but the first; for a conv layer the dcol GEMM)
// i.e. exactly the GEMMs nn_backward runs; bias fills and sums, ReLU, im2col/col2im, the
// loss and Adam are not counted. For the MLPs this is the count earlier builds used.
// Prints "BENCH <name> <median> <unit>" lines; medians over the R windows.
#include "bench_common.h"
#include "blas.h"
#include "clock.h"
#include "dnnconv.h"
#include "nn.h"
#include "parse.h"
#include "rng.h"
#include "train.h"
#include "xalloc.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POOL 8

typedef struct {
    void *obs, *next_obs; // (B x O) of the net's input dtype
    float *rew, *disc, *w;
    int32_t *act;
} bench_batch_t;

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

// FLOPs of the GEMMs in one update (see the header): 3 forwards, dW of every layer, dX of
// all but the first. A conv layer's forward is its im2col GEMM, OC x (C k k) x (OH OW).
static double s_update_flops(const nn_config_t *cfg, int B) {
    nn_params_t p;
    nn_params_init(&p, cfg);
    int h, w, c;
    nn_input_shape(cfg, &h, &w, &c);
    double fwd = 0, first = 0;
    for (int l = 0; l < p.n_layers; l++) {
        double positions = 1.0;
        if (l < cfg->n_conv) {
            conv_shape_t cs;
            int rc = conv_shape_init(&cs, c, h, w, cfg->conv[l].filters, cfg->conv[l].kernel,
                                     cfg->conv[l].stride, NULL, 0);
            if (rc != 0) {
                abort();
            }
            positions = (double)cs.oh * cs.ow;
            h = cs.oh, w = cs.ow, c = cs.c_out;
        }
        double f = 2.0 * B * p.layer[l].in_dim * p.layer[l].out_dim * positions;
        fwd += f;
        first = l == 0 ? f : first;
    }
    nn_params_fini(&p);
    return 3 * fwd + fwd + (fwd - first);
}

// Random observations: float32 normals for an MLP; uint8 frames for a conv net, 0/1 when
// in_scale is 1 (MinAtar) and 0..255 otherwise (Atari), as the torch peer draws them.
static void *s_make_obs(const nn_config_t *cfg, int B, rng_t *r) {
    size_t n = (size_t)B * cfg->obs_dim;
    if (cfg->in_dtype == NN_INPUT_U8) {
        uint8_t *o = xaligned_alloc(n);
        uint32_t hi = cfg->in_scale == 1.0f ? 2 : 256;
        for (size_t i = 0; i < n; i++) {
            o[i] = (uint8_t)rng_below(r, hi);
        }
        return o;
    }
    float *o = xaligned_alloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        o[i] = (float)rng_normal(r);
    }
    return o;
}

static void s_make_pool(bench_batch_t *pool, train_batch_t *tb, const nn_config_t *cfg, int B,
                        rng_t *r) {
    for (int k = 0; k < POOL; k++) {
        bench_batch_t *b = &pool[k];
        b->obs = s_make_obs(cfg, B, r);
        b->next_obs = s_make_obs(cfg, B, r);
        b->rew = xmalloc(sizeof(float) * (size_t)B);
        b->disc = xmalloc(sizeof(float) * (size_t)B);
        b->w = xmalloc(sizeof(float) * (size_t)B);
        b->act = xmalloc(sizeof(int32_t) * (size_t)B);
        for (int i = 0; i < B; i++) {
            b->rew[i] = (float)rng_normal(r);
            b->disc[i] = rng_uniform(r) < 0.05 ? 0.0f : 0.970299f; // 0.99^3, 5% terminals
            b->w[i] = rng_uniform_f(r);
            b->act[i] = (int32_t)rng_below(r, (uint32_t)cfg->n_actions);
        }
        tb[k] = (train_batch_t){b->obs, b->act, NULL, b->rew, b->disc, b->next_obs, b->w, B};
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

// One benchmarked network.
typedef struct {
    const char *name;
    nn_config_t net;
    int batch;
    int iters; // updates per window unless --iters
} bench_net_t;

// Runs one network; prints its BENCH lines. Each window times an sgemm reference and then
// `iters` updates; efficiency is the median over windows of (update GEMM rate / reference).
static int s_precision = TRAIN_FP32; // --precision

static void s_bench_net(const bench_net_t *bn, int runs, int iters, sgemm_ref_t *ref,
                        const char *tsuffix) {
    const nn_config_t *net = &bn->net;
    const char *name = bn->name;
    const int B = bn->batch;
    train_config_t tc;
    train_config_default(&tc);
    tc.net = *net;
    tc.batch_size = B;
    tc.precision = s_precision;
    trainer_t *tr = trainer_new(&tc);
    if (!tr) { // logged: a precision this CPU cannot run
        exit(2);
    }
    rng_t r;
    rng_init_stream(&r, 0, RNG_ROLE_TEST, 0);
    bench_batch_t pool[POOL];
    train_batch_t tb[POOL];
    s_make_pool(pool, tb, net, B, &r);
    float *prio = xmalloc(sizeof(float) * (size_t)B);
    train_stats_t st;
    int k = 0;
    for (int i = 0; i < 10; i++) {
        trainer_step(tr, &tb[k++ % POOL], prio, &st);
    }
    double flops = s_update_flops(net, B), rates[64], eff[64], peaks[64], cpu_rates[64];
    int64_t f_ns = 0, b_ns = 0, o_ns = 0;
    double cpu = 0.0, wall = 0.0;
    for (int w = 0; w < runs; w++) {
        peaks[w] = s_sgemm_window(ref);
        double c0 = bench_cpu_s(CLOCK_THREAD_CPUTIME_ID);
        int64_t t0 = clock_now_ns();
        for (int i = 0; i < iters; i++) {
            trainer_step(tr, &tb[k++ % POOL], prio, &st);
            f_ns += st.forward_ns, b_ns += st.backward_ns, o_ns += st.optim_ns;
        }
        double dt = (double)(clock_now_ns() - t0) * 1e-9,
               dc = bench_cpu_s(CLOCK_THREAD_CPUTIME_ID) - c0;
        rates[w] = iters / dt;
        cpu_rates[w] = iters / dc;
        cpu += dc, wall += dt;
        eff[w] = 100.0 * rates[w] * flops * 1e-9 / peaks[w];
    }
    double n_upd = (double)runs * iters, med = bench_median(rates, runs);
    char desc[128];
    nn_config_format(net, desc, sizeof desc);
    printf("# %s: %s, batch %d, %zu params, %.1f MFLOP/update in GEMMs; per update: "
           "forward+loss %.3f ms, backward %.3f ms, clip+optim %.3f ms; min %.2f max %.2f "
           "updates/s; sgemm in these windows %.1f GFLOP/s\n",
           name, desc, B, trainer_num_params(tr), flops * 1e-6, f_ns / n_upd * 1e-6,
           b_ns / n_upd * 1e-6, o_ns / n_upd * 1e-6, rates[0], rates[runs - 1],
           bench_median(peaks, runs));
    // On a shared machine the thread's CPU time shows what one core does when it runs.
    printf("# %s: the updating thread ran %.0f%% of the wall clock: %.2f updates per CPU "
           "second (median of windows)\n",
           name, 100.0 * cpu / wall, bench_median(cpu_rates, runs));
    printf("BENCH learner.%s%s.updates_per_s %.2f updates/s\n", name, tsuffix, med);
    printf("BENCH learner.%s%s.gemm_gflops %.1f GFLOP/s\n", name, tsuffix, med * flops * 1e-9);
    printf("BENCH learner.%s%s.gemm_efficiency %.1f %%\n", name, tsuffix, bench_median(eff, runs));
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

// Actor-side latency: one forward pass for 64 environments (what an actor runs per step).
static void s_bench_actor_forward(const bench_net_t *bn, int runs, const char *tsuffix) {
    enum { B = 64 };
    const nn_config_t *net = &bn->net;
    nn_params_t p;
    nn_state_t st;
    nn_params_init(&p, net);
    nn_state_init(&st, net, B, 0);
    rng_t r;
    rng_init_stream(&r, 0, RNG_ROLE_TEST, 1);
    nn_params_init_random(&p, &r);
    void *obs = s_make_obs(net, B, &r);
    float *q = xaligned_alloc(sizeof(float) * B * (size_t)net->n_actions);
    double us[64];
    int reps = net->n_conv > 1 ? 10 : 200;
    nn_forward(&st, &p, obs, B, q); // first touch
    for (int w = 0; w < runs; w++) {
        int64_t t0 = clock_now_ns();
        for (int i = 0; i < reps; i++) {
            nn_forward(&st, &p, obs, B, q);
        }
        us[w] = (double)(clock_now_ns() - t0) * 1e-3 / reps;
    }
    double med = bench_median(us, runs);
    printf("BENCH nn.%s%s.forward_b64_us %.1f us\n", bn->name, tsuffix, med);
    printf("BENCH nn.%s%s.forward_b64_gflops %.1f GFLOP/s\n", bn->name, tsuffix,
           nn_forward_flops(net) * B / (med * 1e-6) * 1e-9);
    xfree(obs);
    xfree(q);
    nn_state_fini(&st);
    nn_params_fini(&p);
}

static bench_net_t s_nets[] = {
    {"small",
     {.obs_dim = 4, .n_actions = 2, .n_hidden = 2, .hidden = {256, 256}, .dueling = 1},
     512,
     100},
    {"large",
     {.obs_dim = 84, .n_actions = 18, .n_hidden = 2, .hidden = {512, 512}, .dueling = 1},
     512,
     30},
    {"minatar", {0}, 512, 30}, // net: nn_config_minatar(4, 6, 1), set by s_nets_init
    {"nature", {0}, 128, 4},   // net: nn_config_nature(6, 1), set by s_nets_init
    {"pixels",
     {.obs_dim = 84 * 84,
      .in_h = 84,
      .in_w = 84,
      .in_c = 1,
      .in_dtype = NN_INPUT_U8,
      .in_scale = 1.0f / 255.0f,
      .n_conv = 2,
      .conv = {{16, 8, 4}, {32, 4, 2}},
      .n_actions = 6,
      .n_hidden = 1,
      .hidden = {256},
      .dueling = 1},
     128,
     8},
};
#define N_NETS ((int)(sizeof s_nets / sizeof s_nets[0]))

static int s_find_net(const char *name) {
    for (int i = 0; i < N_NETS; i++) {
        if (strcmp(s_nets[i].name, name) == 0) {
            return i;
        }
    }
    return -1;
}

// The two conv bodies are nn.h's reference bodies, with dueling heads over 6 actions.
static void s_nets_init(void) {
    s_nets[s_find_net("minatar")].net = nn_config_minatar(4, 6, 1);
    s_nets[s_find_net("nature")].net = nn_config_nature(6, 1);
}

int main(int argc, char **argv) {
    // The kernel every apex daemon would run here ([run] blas_kernel = auto): it may start
    // the benchmark again with another one.
    blas_startup(argv, "auto");
    int threads = 1, runs = 7, iters = 0, batch = 0, want[N_NETS] = {0}, any = 0;
    const char *library = "auto"; // the product's default ([run] blas_library)
    s_nets_init();
    for (int i = 1; i < argc; i += 2) {
        if (strcmp(argv[i], "--precision") == 0 && i + 1 < argc &&
            (strcmp(argv[i + 1], "fp32") == 0 || strcmp(argv[i + 1], "bf16") == 0)) {
            s_precision = strcmp(argv[i + 1], "bf16") == 0 ? TRAIN_BF16 : TRAIN_FP32;
            continue;
        }
        if (strcmp(argv[i], "--library") == 0 && i + 1 < argc) {
            library = argv[i + 1];
            continue;
        }
        if (strcmp(argv[i], "--net") == 0 && i + 1 < argc && s_find_net(argv[i + 1]) >= 0) {
            want[s_find_net(argv[i + 1])] = any = 1;
            continue;
        }
        int *dst = strcmp(argv[i], "--threads") == 0 ? &threads
                   : strcmp(argv[i], "--runs") == 0  ? &runs
                   : strcmp(argv[i], "--iters") == 0 ? &iters
                   : strcmp(argv[i], "--batch") == 0 ? &batch
                                                     : NULL;
        int64_t v;
        if (!dst || i + 1 >= argc || parse_int64(argv[i + 1], INT_MIN, INT_MAX, &v) != 0) {
            fprintf(stderr,
                    "usage: %s [--threads N] [--runs R] [--iters K] [--batch B] "
                    "[--precision fp32|bf16] [--library auto|openblas|onednn] "
                    "[--net small|large|minatar|nature]...\n",
                    argv[0]);
            return 2;
        }
        *dst = (int)v;
    }
    if (threads < 1 || runs < 1 || runs > 64 || iters < 0 || batch < 0 || batch > 65536) {
        fprintf(stderr, "bench_learner: need threads >= 1, 1 <= runs <= 64, iters >= 0, "
                        "0 <= batch <= 65536\n");
        return 2;
    }
    for (int i = 0; i < N_NETS && batch > 0; i++) {
        s_nets[i].batch = batch;
    }
    for (int i = 0; i < N_NETS && !any; i++) {
        want[i] = strcmp(s_nets[i].name, "pixels") != 0;
    }
    // As a daemon decides: oneDNN for the conv bodies only when a network asked for gets one
    // (so that --net small --threads 2 measures OpenBLAS's products, as an MLP run has them).
    int convs = 0;
    for (int i = 0; i < N_NETS; i++) {
        convs |= want[i] && nn_wants_conv_body(&s_nets[i].net);
    }
    char err[512];
    if (blas_use_library(library, threads, convs, err, sizeof err) != 0) {
        fprintf(stderr, "bench_learner: %s\n", err);
        return 2;
    }
    blas_set_threads(threads);
    // Names say what they measure: ".t2" for 2 threads; the update lines add ".b256" for
    // --batch 256 (the actor forward is always B = 64, the sgemm always 1024^3).
    char tsuffix[16] = "", usuffix[32];
    if (threads != 1) {
        snprintf(tsuffix, sizeof tsuffix, ".t%d", threads);
    }
    snprintf(usuffix, sizeof usuffix, "%s%s", s_precision == TRAIN_BF16 ? ".bf16" : "", tsuffix);
    if (batch > 0) {
        snprintf(usuffix + strlen(usuffix), sizeof usuffix - strlen(usuffix), ".b%d", batch);
    }
    const char *ct = getenv("OPENBLAS_CORETYPE");
    printf("# bench_learner: threads %d, %d windows, OPENBLAS_CORETYPE=%s, products on %s, conv "
           "layers on %s\n",
           threads, runs, ct ? ct : "(unset)", blas_library(),
           dnnconv_enabled() ? "oneDNN's primitives where a network qualifies" : "im2col");
    sgemm_ref_t ref;
    s_sgemm_init(&ref);
    s_sgemm_window(&ref); // warm-up, discarded
    ref.n_rates = 0;
    for (int i = 0; i < N_NETS; i++) {
        if (want[i]) {
            s_bench_net(&s_nets[i], runs, iters ? iters : s_nets[i].iters, &ref, usuffix);
        }
    }
    printf("BENCH sgemm.1024%s %.1f GFLOP/s\n", tsuffix, bench_median(ref.rates, ref.n_rates));
    s_sgemm_fini(&ref);
    for (int i = 0; i < N_NETS; i++) {
        if (want[i] && strcmp(s_nets[i].name, "small") != 0) {
            s_bench_actor_forward(&s_nets[i], runs, tsuffix);
        }
    }
    if (threads == 1 && (!any || want[0])) {
        s_bench_layouts();
    }
    return 0;
}
