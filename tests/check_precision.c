// check_precision.c: [learner] precision (issue #32). The decision as a pure function of a
// feature set (bf16 on the CPUs that have AVX512_BF16 and the AVX-512 it builds on, refused
// elsewhere with the key, the missing features and the remedy; fp32 anywhere; an unknown
// value refused, by the function and by the config loader); every product of every pass
// (MLP and conv: forward, the forward pair, backward, backward in pieces, backward to the
// inputs) goes through the state's GEMM, and the fp32 path through a blas_sgemm_ld pointer
// is bit for bit the default's; and, on a CPU with AVX512_BF16 (elsewhere the tests say so on
// stderr and pass), bf16 networks agree with fp32 ones on the same weights to bfloat16's
// precision without being the same bits (so a bf16 silently ignored fails), and the DQN and
// DPG trainers in bf16 lower the loss on a fixed batch.
#include "check_apex.h"

#include "algo.h"
#include "apex.h"
#include "bf16.h"
#include "blas.h"
#include "config.h"
#include "cpu.h"
#include "nn.h"
#include "rng.h"
#include "train.h"
#include "train_dpg.h"
#include "xalloc.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void s_fill(float *x, size_t n, rng_t *r, float scale) {
    for (size_t i = 0; i < n; i++) {
        x[i] = scale * (2.0f * rng_uniform_f(r) - 1.0f);
    }
}

// ||got - want|| / ||want|| over n floats (Frobenius): bfloat16's error is relative to the
// sizes of the terms summed, so an elementwise bound would trip on entries that cancel.
static double s_rel_err(const float *got, const float *want, size_t n) {
    double d = 0, w = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
        w += (double)want[i] * want[i];
    }
    return sqrt(d / (w > 0 ? w : 1));
}

// 1 when this CPU runs the bf16 kernels; else says on stderr what is skipped.
static int s_have_bf16(const char *what) {
    cpu_features_t f;
    cpu_detect(&f);
    if (bf16_gemm_supported(&f)) {
        return 1;
    }
    char d[256];
    cpu_describe(&f, d, sizeof d);
    fprintf(stderr, "check_precision: this CPU (%s) has no AVX512_BF16: %s not run\n", d, what);
    return 0;
}

// ----------------------------------------------------------------------------
// the decision

START_TEST(test_check_by_features) {
    char msg[512];
    blas_gemm_fn gemm = blas_sgemm_ld;
    cpu_features_t none = {0}, skx = {0}, zen4 = {0}, no_vl = {0};
    skx.avx = skx.avx2 = skx.fma = 1;
    skx.avx512f = skx.avx512cd = skx.avx512bw = skx.avx512dq = skx.avx512vl = 1; // Skylake-X
    zen4 = skx;
    zen4.avx512_bf16 = 1; // Zen 4, Cooper Lake, Sapphire Rapids
    no_vl = zen4;
    no_vl.avx512vl = 0;
    // fp32 runs anywhere, on blas_sgemm (NULL).
    const cpu_features_t *all[] = {&none, &skx, &zen4, &no_vl};
    for (size_t i = 0; i < APEX_ARRAY_LEN(all); i++) {
        gemm = blas_sgemm_ld;
        ck_assert_int_eq(train_precision_check(TRAIN_FP32, all[i], &gemm, msg, sizeof msg), 0);
        ck_assert_ptr_null(gemm);
        ck_assert_ptr_nonnull(strstr(msg, "fp32"));
    }
    // bf16 with AVX-512 F, BW, VL and AVX512_BF16.
    ck_assert_int_eq(train_precision_check(TRAIN_BF16, &zen4, &gemm, msg, sizeof msg), 0);
    ck_assert_ptr_eq(gemm, bf16_gemm_ld);
    ck_assert_ptr_nonnull(strstr(msg, "bf16"));
    // Refused without, naming the key, what is missing and the remedy; the GEMM left NULL.
    struct {
        const cpu_features_t *f;
        const char *missing;
    } refused[] = {{&skx, "lacks AVX512_BF16;"},
                   {&no_vl, "lacks AVX512VL;"},
                   {&none, "lacks AVX512F, AVX512BW, AVX512VL, AVX512_BF16;"}};
    for (size_t i = 0; i < APEX_ARRAY_LEN(refused); i++) {
        gemm = blas_sgemm_ld;
        ck_assert_int_eq(train_precision_check(TRAIN_BF16, refused[i].f, &gemm, msg, sizeof msg),
                         -1);
        ck_assert_ptr_null(gemm);
        ck_assert_msg(strstr(msg, "[learner] precision = bf16") &&
                          strstr(msg, refused[i].missing) &&
                          strstr(msg, "set [learner] precision = fp32"),
                      "refusal %zu: %s", i, msg);
    }
    // A value that is neither (a programmatic caller: the config loader refuses names).
    for (int bad = -1; bad <= 2; bad += 3) {
        gemm = blas_sgemm_ld;
        ck_assert_int_eq(train_precision_check(bad, &zen4, &gemm, msg, sizeof msg), -1);
        ck_assert_ptr_null(gemm);
        ck_assert_ptr_nonnull(strstr(msg, "[learner] precision"));
    }
}
END_TEST

// The key: fp32 by default, bf16 when set, anything else refused by the loader; and both
// trainers' configs carry it.
START_TEST(test_config_key) {
    apex_config_t cfg;
    char err[CONFIG_ERR_LEN];
    ck_assert_int_eq(config_load(&cfg, NULL, NULL, 0, err, sizeof err), 0);
    ck_assert_int_eq(cfg.learner.precision, CONFIG_PRECISION_FP32);
    train_config_t tc;
    train_config_from_run(&tc, &cfg);
    ck_assert_int_eq(tc.precision, TRAIN_FP32);
    ck_assert_int_eq(config_set(&cfg, "learner.precision=bf16", err, sizeof err), 0);
    ck_assert_int_eq(cfg.learner.precision, CONFIG_PRECISION_BF16);
    train_config_from_run(&tc, &cfg);
    ck_assert_int_eq(tc.precision, TRAIN_BF16);
    const char *cont[] = {"env.id=external",   "env.obs_dim=3",     "env.action_dim=1",
                          "env.action_low=-1", "env.action_high=1", "learner.precision=bf16"};
    ck_assert_msg(config_load(&cfg, NULL, cont, APEX_ARRAY_LEN(cont), err, sizeof err) == 0, "%s",
                  err);
    train_dpg_config_t dc;
    train_dpg_config_default(&dc);
    ck_assert_int_eq(dc.precision, TRAIN_FP32);
    dpg_config_from_run(&dc, &cfg);
    ck_assert_int_eq(dc.precision, TRAIN_BF16);
    ck_assert_int_eq(config_set(&cfg, "learner.precision=fp16", err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "precision"));
    ck_assert_int_eq(config_set(&cfg, "learner.precision=BF16x", err, sizeof err), -1);
}
END_TEST

// ----------------------------------------------------------------------------
// every product through the state's GEMM

static int s_calls;

// blas_sgemm_ld behind another pointer: blas_gemm_with takes the GEMM's path (implied leading
// dimensions) instead of blas_sgemm's, and counts.
static void s_counting_gemm(float *c, int ldc, const float *a, int lda, const float *b, int ldb,
                            float alpha, float beta, blas_trans ta, blas_trans tb, int M, int N,
                            int K) {
    s_calls++;
    blas_sgemm_ld(c, ldc, a, lda, b, ldb, alpha, beta, ta, tb, M, N, K);
}

// A small conv net (two layers, the second strided) and a dueling MLP: between them every
// product nn.c and conv.c have (nn_backward_input, the critics', runs on the MLP's inputs).
static const nn_config_t s_conv_cfg = {.obs_dim = 9 * 8 * 3,
                                       .in_h = 9,
                                       .in_w = 8,
                                       .in_c = 3,
                                       .n_conv = 2,
                                       .conv = {{6, 3, 1}, {5, 2, 2}},
                                       .n_actions = 4,
                                       .n_hidden = 1,
                                       .hidden = {24},
                                       .dueling = 1};
static const nn_config_t s_mlp_cfg = {
    .obs_dim = 10, .n_actions = 5, .n_hidden = 2, .hidden = {48, 40}, .dueling = 1};

// nn_backward_pieces' capacity past nn_piece_min (several pieces per layer); the columns of
// the MLP's 10 inputs nn_backward_input differentiates, [3, 7): a strided view of W_0.
enum { PIECE_SLACK = 7, DIN_COL0 = 3, DIN_N = 4 };

// GEMMs of one forward (pair: nn_forward_pair, the first conv layer stacked), one backward,
// one in pieces, one nn_backward_input (MLPs). A conv layer: per chunk of positions, one
// forward product, dW^T and (above the first layer) dcol. A linear layer: one forward
// product, dW (in pieces: one per block of whole rows) and din (above the first layer).
static void s_expected(const nn_state_t *s, const nn_params_t *p, int B, int *fwd, int *pair,
                       int *bwd, int *pieces, int *bin) {
    const nn_config_t *c = &s->cfg;
    int conv_fwd = 0, conv_bwd = 0, first = 0, lin_fwd = 0, lin_bwd = 0, lin_pieces = 0;
    for (int l = 0; l < c->n_conv; l++) {
        int P = s->conv[l].oh * s->conv[l].ow, pc = conv_chunk_positions(&s->conv[l], B);
        int chunks = (P + pc - 1) / pc;
        first = l == 0 ? chunks : first;
        conv_fwd += chunks;
        conv_bwd += chunks * (l == 0 ? 1 : 2);
    }
    size_t cap = nn_piece_min(c) + PIECE_SLACK;
    for (int l = c->n_conv; l < p->n_layers; l++) {
        const nn_linear_t *L = &p->layer[l];
        size_t rows = APEX_MIN(cap / (size_t)L->in_dim, (size_t)L->out_dim);
        int din = l > 0;
        lin_fwd += 1;
        lin_bwd += 1 + din;
        lin_pieces += (int)(((size_t)L->out_dim + rows - 1) / rows) + din;
    }
    *fwd = conv_fwd + lin_fwd;
    *pair = 2 * *fwd - first;
    *bwd = conv_bwd + lin_bwd;
    *pieces = conv_bwd + lin_pieces;
    *bin = lin_fwd;
}

typedef struct {
    nn_params_t p, g;
    nn_state_t s;
    float *obs, *dq, *q, *din, *pieces;
} s_net_t;

static void s_net_init(s_net_t *n, const nn_config_t *cfg, int B, blas_gemm_fn gemm) {
    rng_t r;
    rng_init_stream(&r, 11, RNG_ROLE_TEST, 0);
    nn_params_init(&n->p, cfg);
    nn_params_init_random(&n->p, &r);
    for (int l = 0; l < n->p.n_layers - 1; l++) {
        // Every ReLU open (pre-activations 1 +- 0.2): a unit whose pre-activation is within
        // bfloat16's error of 0 flips its whole gradient (in a random net ~sqrt(2^-9) of the
        // gradient's norm), a discontinuity the comparisons below would measure instead of
        // the products' rounding. The trainers' tests run nets as initialised.
        nn_linear_t *L = &n->p.layer[l];
        for (size_t i = 0; i < (size_t)L->out_dim * L->in_dim; i++) {
            L->w[i] *= 0.25f;
        }
        for (int i = 0; i < L->out_dim; i++) {
            L->b[i] = 1.0f;
        }
    }
    nn_params_init(&n->g, cfg);
    nn_state_init(&n->s, cfg, B, 1);
    nn_state_set_gemm(&n->s, gemm);
    for (int l = 0; l < cfg->n_conv; l++) {
        n->s.conv[l].chunk = 5; // several chunks and a short last one (conv.c's every edge)
    }
    size_t O = (size_t)cfg->obs_dim + cfg->action_inputs, A = (size_t)cfg->n_actions;
    n->obs = xmalloc((size_t)B * O * sizeof(float));
    n->dq = xmalloc((size_t)B * A * sizeof(float));
    n->q = xmalloc((size_t)B * A * sizeof(float));
    n->din = xcalloc((size_t)B * O, sizeof(float));
    n->pieces = xcalloc(n->p.num_params, sizeof(float));
    s_fill(n->obs, (size_t)B * O, &r, 1.0f);
    s_fill(n->dq, (size_t)B * A, &r, 0.5f);
}

static void s_net_fini(s_net_t *n) {
    free(n->obs), free(n->dq), free(n->q), free(n->din), free(n->pieces);
    nn_state_fini(&n->s);
    nn_params_fini(&n->g);
    nn_params_fini(&n->p);
}

// The piece callback: each piece to its place in a flat array.
static void s_piece(void *arg, const float *piece, size_t offset, size_t n) {
    memcpy((float *)arg + offset, piece, n * sizeof(float));
}

// Forward, backward, backward in pieces and (MLPs) backward to the inputs on n.
static void s_net_run(s_net_t *n, int B) {
    nn_forward(&n->s, &n->p, n->obs, B, n->q);
    nn_params_zero(&n->g);
    nn_backward(&n->s, &n->p, &n->g, n->dq, B);
    size_t cap = nn_piece_min(&n->s.cfg) + PIECE_SLACK;
    float *buf = xmalloc(cap * sizeof(float));
    nn_pieces_t pc = {buf, cap, s_piece, n->pieces};
    nn_backward_pieces(&n->s, &n->p, &pc, n->dq, B);
    free(buf);
    if (n->s.cfg.n_conv == 0) {
        nn_backward_input(&n->s, &n->p, n->dq, B, DIN_COL0, DIN_N, n->din); // a strided view
    }
}

static void s_same_bits(const float *a, const float *b, size_t n, const char *what) {
    ck_assert_msg(memcmp(a, b, n * sizeof(float)) == 0, "%s: not bit for bit fp32's", what);
}

// fp32 through a pointer (the implied leading dimensions, blas_sgemm_ld) is what the default
// (NULL: blas_sgemm) gives, bit for bit, and every product went through the pointer.
START_TEST(test_every_product_through_the_gemm) {
    const nn_config_t *cfgs[] = {&s_mlp_cfg, &s_conv_cfg};
    enum { B = 6 }; // N >= 2 everywhere: blas_sgemm's sgemv route is not taken
    for (size_t k = 0; k < APEX_ARRAY_LEN(cfgs); k++) {
        s_net_t ref, via;
        s_net_init(&ref, cfgs[k], B, NULL);
        s_net_init(&via, cfgs[k], B, s_counting_gemm);
        s_net_run(&ref, B);
        int fwd, pair, bwd, pieces, bin;
        s_expected(&via.s, &via.p, B, &fwd, &pair, &bwd, &pieces, &bin);
        s_calls = 0;
        nn_forward(&via.s, &via.p, via.obs, B, via.q);
        ck_assert_int_eq(s_calls, fwd);
        s_calls = 0;
        nn_params_zero(&via.g);
        nn_backward(&via.s, &via.p, &via.g, via.dq, B);
        ck_assert_int_eq(s_calls, bwd);
        s_calls = 0;
        s_net_run(&via, B);
        ck_assert_int_eq(s_calls, fwd + bwd + pieces + (cfgs[k]->n_conv == 0 ? bin : 0));
        s_same_bits(via.q, ref.q, (size_t)B * cfgs[k]->n_actions, "q");
        s_same_bits(via.g.data, ref.g.data, ref.p.num_params, "gradient");
        s_same_bits(via.pieces, ref.pieces, ref.p.num_params, "gradient pieces");
        if (cfgs[k]->n_conv == 0) {
            s_same_bits(via.din, ref.din, (size_t)B * DIN_N, "dL/dx");
        }
        // The forward pair: online and target on the same observations (conv: the first
        // layer's two products stacked into one of twice the rows). Through the pointer it is
        // the default's pair bit for bit; against the single forward only within rounding:
        // a kernel may sum the rows of a taller product in another order (OpenBLAS's Haswell
        // kernel does, on an AMD Zen 5; SkylakeX and Cooperlake gave the same bits).
        nn_state_t s2, r2;
        nn_state_init(&s2, cfgs[k], B, 0);
        nn_state_set_gemm(&s2, s_counting_gemm);
        nn_state_init(&r2, cfgs[k], B, 0);
        for (int l = 0; l < cfgs[k]->n_conv; l++) {
            s2.conv[l].chunk = r2.conv[l].chunk = 5;
        }
        size_t nq = (size_t)B * cfgs[k]->n_actions;
        float q2[B * 8], rq[B * 8], rq2[B * 8];
        nn_forward_pair(&ref.s, &ref.p, &r2, &ref.p, ref.obs, B, rq, rq2);
        s_calls = 0;
        nn_forward_pair(&via.s, &via.p, &s2, &ref.p, via.obs, B, via.q, q2);
        ck_assert_int_eq(s_calls, pair);
        s_same_bits(via.q, rq, nq, "pair's q");
        s_same_bits(q2, rq2, nq, "pair's second q");
        for (size_t i = 0; i < nq; i++) {
            ck_assert_float_eq_tol(via.q[i], ref.q[i], 1e-5f * (1.0f + fabsf(ref.q[i])));
            ck_assert_float_eq_tol(q2[i], ref.q[i], 1e-5f * (1.0f + fabsf(ref.q[i])));
        }
        nn_state_fini(&r2);
        nn_state_fini(&s2);
        s_net_fini(&via);
        s_net_fini(&ref);
    }
}
END_TEST

// ----------------------------------------------------------------------------
// bf16 networks against fp32 ones

// The same network and inputs in fp32 and bf16: q, the gradient and (MLPs) dL/dx within
// bfloat16's precision of fp32's, and not fp32's bits. Tolerances: inputs rounded to 8
// mantissa bits (relative 2^-9) give errors of a few 1e-3 through these depths.
static void s_bf16_against_fp32(const nn_config_t *cfg, int B) {
    s_net_t f32, b16;
    s_net_init(&f32, cfg, B, NULL);
    s_net_init(&b16, cfg, B, bf16_gemm_ld);
    s_net_run(&f32, B);
    s_net_run(&b16, B);
    size_t nq = (size_t)B * cfg->n_actions, np = f32.p.num_params;
    double eq = s_rel_err(b16.q, f32.q, nq), eg = s_rel_err(b16.g.data, f32.g.data, np);
    double ep = s_rel_err(b16.pieces, f32.g.data, np);
    fprintf(stderr, "check_precision: %s bf16 against fp32: q %.2e, gradient %.2e\n",
            cfg->n_conv ? "conv" : "MLP", eq, eg);
    ck_assert_msg(eq < 1e-2 && eg < 1e-2 && ep < 1e-2, "q %g, gradient %g, pieces %g", eq, eg, ep);
    ck_assert_msg(memcmp(b16.q, f32.q, nq * sizeof(float)) != 0, "bf16 q is fp32's bits");
    ck_assert_msg(memcmp(b16.g.data, f32.g.data, np * sizeof(float)) != 0,
                  "bf16 gradient is fp32's bits");
    // Each layer's gradient moved: a product left in fp32 would leave its layer's dW alone.
    for (int l = 0; l < f32.p.n_layers; l++) {
        size_t nw = (size_t)f32.g.layer[l].out_dim * f32.g.layer[l].in_dim;
        ck_assert_msg(memcmp(b16.g.layer[l].w, f32.g.layer[l].w, nw * sizeof(float)) != 0,
                      "layer %d's dW is fp32's bits", l);
        ck_assert(s_rel_err(b16.g.layer[l].w, f32.g.layer[l].w, nw) < 1.5e-2);
    }
    if (cfg->n_conv == 0) {
        size_t nx = (size_t)B * DIN_N;
        ck_assert(s_rel_err(b16.din, f32.din, nx) < 1e-2);
        ck_assert(memcmp(b16.din, f32.din, nx * sizeof(float)) != 0);
    }
    s_net_fini(&b16);
    s_net_fini(&f32);
}

START_TEST(test_bf16_mlp_close_to_fp32) {
    if (s_have_bf16("the bf16 MLP")) {
        s_bf16_against_fp32(&s_mlp_cfg, 16);
    }
}
END_TEST

START_TEST(test_bf16_conv_close_to_fp32) {
    if (s_have_bf16("the bf16 conv net")) {
        s_bf16_against_fp32(&s_conv_cfg, 8);
    }
}
END_TEST

// ----------------------------------------------------------------------------
// the trainers in bf16

enum { TB = 16, STEPS = 30 };

typedef struct {
    float obs[TB * 9 * 8 * 3], next[TB * 9 * 8 * 3], act_c[TB * 2];
    float rew[TB], disc[TB], w[TB], prio[TB];
    int32_t act[TB];
} s_batch_t;

// Terminal transitions (disc 0: y = R, no bootstrap): a fixed regression the updates must fit.
static void s_batch(s_batch_t *b, int O, int A) {
    rng_t r;
    rng_init_stream(&r, 3, RNG_ROLE_TEST, 0);
    s_fill(b->obs, (size_t)TB * O, &r, 1.0f);
    s_fill(b->next, (size_t)TB * O, &r, 1.0f);
    s_fill(b->act_c, (size_t)TB * 2, &r, 1.0f);
    s_fill(b->rew, TB, &r, 2.0f);
    for (int i = 0; i < TB; i++) {
        b->disc[i] = 0.0f, b->w[i] = 1.0f, b->act[i] = i % A;
    }
}

// The losses of the first and the last of STEPS updates in fp32 ([0]) and bf16 ([1]): the
// first within bfloat16's precision of fp32's but not its bits (the same weights, the
// products rounded); bf16's updates lower the loss, and land near where fp32's do (the
// trajectories part by the roundings, not by much in STEPS updates).
static void s_learned(const char *what, const float first[2], const float last[2]) {
    fprintf(stderr, "check_precision: %s: loss %.6g -> %.6g in fp32, %.6g -> %.6g in bf16\n", what,
            first[0], last[0], first[1], last[1]);
    ck_assert_msg(first[1] != first[0], "%s: the bf16 trainer's loss is fp32's", what);
    ck_assert_double_le(fabs(first[1] - first[0]), 1e-2 * fabs(first[0]));
    ck_assert_msg(last[1] < 0.6f * first[1], "%s: bf16's %d updates took the loss from %g to %g",
                  what, STEPS, first[1], last[1]);
    ck_assert_msg(fabs(last[1] - last[0]) < 0.1 * first[0], "%s: after %d updates bf16 %g, fp32 %g",
                  what, STEPS, last[1], last[0]);
}

// DQN: the MLP and the conv net.
static void s_dqn(const nn_config_t *net) {
    s_batch_t *b = xcalloc(1, sizeof *b);
    s_batch(b, net->obs_dim, net->n_actions);
    train_batch_t tb = {.obs = b->obs,
                        .actions = b->act,
                        .rewards = b->rew,
                        .discounts = b->disc,
                        .next_obs = b->next,
                        .is_weights = b->w,
                        .size = TB};
    float first[2], last[2];
    for (int prec = TRAIN_FP32; prec <= TRAIN_BF16; prec++) {
        train_config_t tc;
        train_config_default(&tc);
        tc.net = *net;
        tc.batch_size = TB;
        tc.optim.lr = 3e-3f;
        tc.seed = 9;
        tc.precision = prec;
        trainer_t *t = trainer_new(&tc);
        ck_assert_ptr_nonnull(t);
        first[prec] = trainer_step(t, &tb, b->prio, NULL);
        for (int k = 1; k < STEPS; k++) {
            last[prec] = trainer_step(t, &tb, b->prio, NULL);
        }
        trainer_destroy(&t);
    }
    s_learned(net->n_conv ? "DQN conv" : "DQN MLP", first, last);
    free(b);
}

START_TEST(test_bf16_dqn_learns) {
    if (s_have_bf16("the bf16 DQN trainers")) {
        s_dqn(&s_mlp_cfg);
        s_dqn(&s_conv_cfg);
    }
}
END_TEST

// DPG (policy and twin critics, nn_backward_input through the critic): as DQN's.
START_TEST(test_bf16_dpg_learns) {
    if (!s_have_bf16("the bf16 DPG trainer")) {
        return;
    }
    s_batch_t *b = xcalloc(1, sizeof *b);
    enum { O = 6, A = 2 };
    s_batch(b, O, A);
    train_dpg_batch_t db = {.obs = b->obs,
                            .actions = b->act_c,
                            .rewards = b->rew,
                            .discounts = b->disc,
                            .next_obs = b->next,
                            .is_weights = b->w,
                            .size = TB};
    float first[2], last[2];
    for (int prec = TRAIN_FP32; prec <= TRAIN_BF16; prec++) {
        train_dpg_config_t dc;
        train_dpg_config_default(&dc);
        dc.actor = (nn_config_t){.obs_dim = O, .n_actions = A, .n_hidden = 2, .hidden = {32, 32}};
        dc.actor.out_bounded = 1;
        for (int a = 0; a < A; a++) {
            dc.actor.out_low[a] = -1.0f, dc.actor.out_high[a] = 1.0f;
        }
        dc.batch_size = TB;
        dc.critic_optim.lr = dc.actor_optim.lr = 3e-3f;
        dc.seed = 4;
        dc.precision = prec;
        train_dpg_t *t = train_dpg_new(&dc);
        ck_assert_ptr_nonnull(t);
        train_dpg_stats_t st;
        first[prec] = train_dpg_step(t, &db, b->prio, &st);
        for (int k = 1; k < STEPS; k++) {
            last[prec] = train_dpg_step(t, &db, b->prio, &st);
        }
        train_dpg_destroy(&t);
    }
    s_learned("DPG", first, last);
    free(b);
}
END_TEST

Suite *precision_suite(void) {
    Suite *s = suite_create("precision");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_check_by_features);
    tcase_add_test(tc, test_config_key);
    tcase_add_test(tc, test_every_product_through_the_gemm);
    tcase_add_test(tc, test_bf16_mlp_close_to_fp32);
    tcase_add_test(tc, test_bf16_conv_close_to_fp32);
    tcase_add_test(tc, test_bf16_dqn_learns);
    tcase_add_test(tc, test_bf16_dpg_learns);
    suite_add_tcase(s, tc);
    return s;
}
