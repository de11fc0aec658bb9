// check_nn.c: the MLP against an independent double-precision reference forward, and
// nn_backward against central differences of that reference (STYLE S22).
#include "check_apex.h"

#include "apex.h"
#include "check_nn_ref.h"
#include "nn.h"
#include "rng.h"
#include "xalloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// L(theta) = sum_{j,a} c[j,a] * q[j,a], so dL/dq = c.
static double s_ref_loss(const nn_config_t *cfg, const double *theta, const void *obs,
                         const float *c, int B) {
    double q[256];
    nnref_forward(q, cfg, theta, obs, B);
    double L = 0;
    for (int i = 0; i < B * cfg->n_actions; i++) {
        L += c[i] * q[i];
    }
    return L;
}

static void s_fill(float *x, size_t n, rng_t *r, float scale) {
    for (size_t i = 0; i < n; i++) {
        x[i] = scale * (2.0f * rng_uniform_f(r) - 1.0f);
    }
}

static const nn_config_t s_shapes[] = {
    {.obs_dim = 3, .n_actions = 2, .n_hidden = 1, .hidden = {5}, .dueling = 0},
    {.obs_dim = 4, .n_actions = 3, .n_hidden = 2, .hidden = {7, 6}, .dueling = 1},
    {.obs_dim = 2, .n_actions = 4, .n_hidden = 4, .hidden = {4, 5, 3, 6}, .dueling = 1},
    {.obs_dim = 5, .n_actions = 1, .n_hidden = 2, .hidden = {8, 8}, .dueling = 1},
    {.obs_dim = 6, .n_actions = 5, .n_hidden = 3, .hidden = {9, 4, 7}, .dueling = 0},
};
static const int s_batches[] = {1, 4, 7, 3, 5};

// ----------------------------------------------------------------------------

START_TEST(test_layout) {
    nn_config_t small = {
        .obs_dim = 4, .n_actions = 2, .n_hidden = 2, .hidden = {256, 256}, .dueling = 1};
    nn_config_t large = {
        .obs_dim = 84, .n_actions = 18, .n_hidden = 2, .hidden = {512, 512}, .dueling = 1};
    // PyTorch counts for the peer's DuelingMLP: fc1, fc2, v, a.
    ck_assert_uint_eq(nn_num_params(&small), 4 * 256 + 256 + 256 * 256 + 256 + 3 * 256 + 3);
    ck_assert_uint_eq(nn_num_params(&small), 67843);
    ck_assert_uint_eq(nn_num_params(&large), 315923);
    nn_tensor_t t[NN_MAX_TENSORS];
    int n = nn_layout(&small, t);
    ck_assert_int_eq(n, 6);
    ck_assert_str_eq(t[0].name, "fc1.w");
    ck_assert_str_eq(t[5].name, "head.b");
    ck_assert_uint_eq(t[1].offset, 1024); // fc1.b right after the 256 x 4 weights
    ck_assert_uint_eq(t[2].offset, 1280);
    ck_assert_int_eq(t[4].rows, 3); // head: value row + 2 advantage rows
    ck_assert_int_eq(t[4].cols, 256);
    nn_params_t p;
    nn_params_init(&p, &small);
    ck_assert_ptr_eq(p.layer[2].w, p.data + t[4].offset);
    ck_assert_ptr_eq(p.layer[2].b, p.data + t[5].offset);
    ck_assert_uint_eq((uintptr_t)p.data % 64, 0);
    nn_params_fini(&p);
    nn_params_fini(&p); // fini on a zeroed struct is a no-op
    char buf[64];
    nn_config_format(&small, buf, sizeof buf);
    ck_assert_str_eq(buf, "4-256-256-dueling(2)");
}
END_TEST

START_TEST(test_init_bounds_and_determinism) {
    nn_config_t cfg = {
        .obs_dim = 10, .n_actions = 3, .n_hidden = 2, .hidden = {64, 32}, .dueling = 1};
    nn_params_t p, p2;
    nn_params_init(&p, &cfg);
    nn_params_init(&p2, &cfg);
    rng_t r, r2;
    rng_init_stream(&r, 7, RNG_ROLE_NET_INIT, 0);
    rng_init_stream(&r2, 7, RNG_ROLE_NET_INIT, 0);
    nn_params_init_random(&p, &r);
    nn_params_init_random(&p2, &r2);
    ck_assert_int_eq(memcmp(p.data, p2.data, p.num_params * sizeof(float)), 0);
    for (int l = 0; l < p.n_layers; l++) {
        const nn_linear_t *L = &p.layer[l];
        double bound = 1.0 / sqrt(L->in_dim), maxabs = 0, sum = 0;
        size_t nw = (size_t)L->in_dim * L->out_dim;
        for (size_t i = 0; i < nw; i++) {
            maxabs = fmax(maxabs, fabs(L->w[i]));
            sum += L->w[i];
        }
        for (int i = 0; i < L->out_dim; i++) {
            ck_assert(fabs(L->b[i]) <= bound);
        }
        ck_assert(maxabs <= bound && maxabs > 0.9 * bound); // uses the whole range
        ck_assert(fabs(sum / nw) < 0.1 * bound);
    }
    nn_params_fini(&p);
    nn_params_fini(&p2);
}
END_TEST

START_TEST(test_forward_matches_reference) {
    rng_t r;
    rng_init_stream(&r, 3, RNG_ROLE_TEST, 0);
    for (size_t s = 0; s < APEX_ARRAY_LEN(s_shapes); s++) {
        const nn_config_t *cfg = &s_shapes[s];
        int B = s_batches[s], A = cfg->n_actions;
        nn_params_t p;
        nn_state_t st;
        nn_params_init(&p, cfg);
        nn_state_init(&st, cfg, 8, 1);
        nn_params_init_random(&p, &r);
        float obs[8 * 6], q[8 * 5];
        double qref[8 * 5], *theta = xmalloc(p.num_params * sizeof(double));
        s_fill(obs, (size_t)B * cfg->obs_dim, &r, 2.0f);
        for (size_t i = 0; i < p.num_params; i++) {
            theta[i] = p.data[i];
        }
        nn_forward(&st, &p, obs, B, q);
        nnref_forward(qref, cfg, theta, obs, B);
        double got[8 * 5];
        for (int i = 0; i < B * A; i++) {
            got[i] = q[i];
        }
        ck_assert(check_close_d(got, qref, (size_t)B * A, 1e-5, 1e-6, "q"));
        // Every row of a batch equals the same sample run alone (B = 1 takes the gemv path).
        for (int j = 0; j < B; j++) {
            float q1[5];
            nn_forward(&st, &p, obs + (size_t)j * cfg->obs_dim, 1, q1);
            ck_assert(check_close_f(q1, q + (size_t)j * A, (size_t)A, 1e-5, 1e-6, "q row"));
        }
        xfree(theta);
        nn_state_fini(&st);
        nn_params_fini(&p);
    }
}
END_TEST

START_TEST(test_dueling_mean_is_value) {
    // With dueling, mean_a Q(s, a) = V(s) exactly: compute V by hand from the head row 0.
    nn_config_t cfg = {.obs_dim = 2, .n_actions = 3, .n_hidden = 1, .hidden = {2}, .dueling = 1};
    nn_params_t p;
    nn_state_t st;
    nn_params_init(&p, &cfg);
    nn_state_init(&st, &cfg, 1, 1);
    // h = relu(I x): W1 = identity, b1 = 0. Head: V = h0 + h1 + 1, A = (h0, 2 h1, -h0).
    float w1[] = {1, 0, 0, 1}, wh[] = {1, 1, 1, 0, 0, 2, -1, 0}, bh[] = {1, 0, 0, 0};
    memcpy(p.layer[0].w, w1, sizeof w1);
    memcpy(p.layer[1].w, wh, sizeof wh);
    memcpy(p.layer[1].b, bh, sizeof bh);
    float obs[] = {3, 0.5f}, q[3];
    nn_forward(&st, &p, obs, 1, q);
    // V = 4.5, A = (3, 1, -3), mean(A) = 1/3: Q = 4.5 + A - 1/3.
    ck_assert_float_eq_tol(q[0], 4.5f + 3 - 1.0f / 3, 1e-6);
    ck_assert_float_eq_tol(q[1], 4.5f + 1 - 1.0f / 3, 1e-6);
    ck_assert_float_eq_tol(q[2], 4.5f - 3 - 1.0f / 3, 1e-6);
    ck_assert_int_eq(nn_argmax(q, 3), 0);
    nn_state_fini(&st);
    nn_params_fini(&p);
}
END_TEST

// Central differences in double of L = sum c . q against nn_backward for every parameter
// (which covers every layer's weights and biases, the dueling head and the ReLUs).
static void s_gradcheck(const nn_config_t *cfg, int B, rng_t *r) {
    int A = cfg->n_actions;
    nn_params_t p, g;
    nn_state_t st;
    nn_params_init(&p, cfg);
    nn_params_init(&g, cfg);
    nn_state_init(&st, cfg, B, 1);
    nn_params_init_random(&p, r);
    float obs[8 * 6], c[8 * 5], q[8 * 5];
    s_fill(obs, (size_t)B * cfg->obs_dim, r, 2.0f);
    s_fill(c, (size_t)B * A, r, 1.0f);
    nn_forward(&st, &p, obs, B, q);
    nn_backward(&st, &p, &g, c, B);
    size_t n = p.num_params;
    double *theta = xmalloc(n * sizeof(double)), *num = xmalloc(n * sizeof(double));
    double *ana = xmalloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) {
        theta[i] = p.data[i];
        ana[i] = g.data[i];
    }
    const double h = 1e-6;
    for (size_t i = 0; i < n; i++) {
        double keep = theta[i];
        theta[i] = keep + h;
        double lp = s_ref_loss(cfg, theta, obs, c, B);
        theta[i] = keep - h;
        double lm = s_ref_loss(cfg, theta, obs, c, B);
        theta[i] = keep;
        num[i] = (lp - lm) / (2 * h);
    }
    char what[64];
    nn_config_format(cfg, what, sizeof what);
    ck_assert_msg(check_close_d(ana, num, n, 1e-4, 1e-5, what), "gradcheck %s", what);
    // Backward accumulates: a second call doubles every gradient.
    nn_backward(&st, &p, &g, c, B);
    for (size_t i = 0; i < n; i++) {
        ana[i] *= 2;
        num[i] = g.data[i];
    }
    ck_assert(check_close_d(num, ana, n, 1e-6, 1e-7, "accumulate"));
    xfree(theta);
    xfree(num);
    xfree(ana);
    nn_state_fini(&st);
    nn_params_fini(&g);
    nn_params_fini(&p);
}

START_TEST(test_gradcheck_all_layers) {
    rng_t r;
    rng_init_stream(&r, 4, RNG_ROLE_TEST, 0);
    for (size_t s = 0; s < APEX_ARRAY_LEN(s_shapes); s++) {
        s_gradcheck(&s_shapes[s], s_batches[s], &r);
    }
}
END_TEST

// The n-step double-DQN target, worked by hand (B = 4, A = 3):
//   0: argmax online (1, 3, 2) = 1, target there 20: y = 1 + 0.5 * 20 = 11
//      (plain DQN, max over the target, would give 1 + 0.5 * 30 = 16)
//   1: online (5, 5, 1) ties: the first, 0; target -2: y = 0.5 + 0.9 * -2 = -1.3
//   2: online (NaN, 0, -1): NaN never wins, 1; target 4: y = -1 + 0.25 * 4 = 0
//   3: terminal (disc 0): y = R = 2.5 exactly, though the target there is NaN and Inf
START_TEST(test_double_dqn_targets) {
    const float q_online[] = {1, 3, 2, 5, 5, 1, NAN, 0, -1, 0, 1, 0};
    const float q_target[] = {10, 20, 30, -2, 7, 7, 100, 4, 0, 0, NAN, INFINITY};
    const float rew[] = {1.0f, 0.5f, -1.0f, 2.5f}, disc[] = {0.5f, 0.9f, 0.25f, 0.0f};
    float y[4];
    nn_double_dqn_targets(y, q_online, q_target, rew, disc, 4, 3);
    const float want[] = {11.0f, -1.3f, 0.0f, 2.5f};
    ck_assert(check_close_f(y, want, 4, 1e-6, 1e-6, "y"));
    ck_assert(y[3] == 2.5f);
    // online == target (the actors' priorities): the max of each row, the terminal still R.
    nn_double_dqn_targets(y, q_target, q_target, rew, disc, 3, 3);
    const float want_max[] = {1.0f + 0.5f * 30, 0.5f + 0.9f * 7, -1.0f + 0.25f * 100};
    ck_assert(check_close_f(y, want_max, 3, 1e-6, 1e-6, "y with online == target"));
}
END_TEST

START_TEST(test_td_priorities) {
    // Against nn_forward plus the formula done here by hand, including a terminal.
    nn_config_t cfg = {
        .obs_dim = 3, .n_actions = 4, .n_hidden = 2, .hidden = {16, 8}, .dueling = 1};
    enum { B = 6 };
    rng_t r;
    rng_init_stream(&r, 5, RNG_ROLE_TEST, 0);
    nn_params_t p;
    nn_state_t st;
    nn_params_init(&p, &cfg);
    nn_state_init(&st, &cfg, B, 1);
    nn_params_init_random(&p, &r);
    float obs[B * 3], nobs[B * 3], rew[B], disc[B], prio[B], q[B * 4], qn[B * 4];
    int32_t act[B] = {0, 1, 2, 3, 1, 0};
    s_fill(obs, B * 3, &r, 1.0f);
    s_fill(nobs, B * 3, &r, 1.0f);
    s_fill(rew, B, &r, 1.0f);
    for (int i = 0; i < B; i++) {
        disc[i] = i == 2 ? 0.0f : 0.97f;
    }
    nn_td_priorities(prio, &st, &p, obs, act, rew, disc, nobs, 1e-3f, B);
    nn_forward(&st, &p, obs, B, q);
    nn_forward(&st, &p, nobs, B, qn);
    for (int i = 0; i < B; i++) {
        float m = qn[i * 4];
        for (int a = 1; a < 4; a++) {
            m = fmaxf(m, qn[i * 4 + a]);
        }
        float y = rew[i] + (i == 2 ? 0.0f : 0.97f * m);
        ck_assert_float_eq_tol(prio[i], fabsf(y - q[i * 4 + act[i]]) + 1e-3f, 1e-6);
    }
    nn_state_fini(&st);
    nn_params_fini(&p);
}
END_TEST

// ---------------------------------------------------------------------------------------
// Conv nets: the layer sequence conv2d -> ReLU -> ... -> flatten -> linear -> head.

// Shapes with kernel 1..4, stride 1..3, 1..3 channels, non-square inputs, two conv layers,
// float32 and uint8 inputs with scales; small enough for central differences of every
// parameter.
static const nn_config_t s_conv_shapes[] = {
    {.obs_dim = 5 * 6 * 2,
     .in_h = 5,
     .in_w = 6,
     .in_c = 2,
     .n_conv = 1,
     .conv = {{3, 2, 1}},
     .n_actions = 3,
     .n_hidden = 1,
     .hidden = {8},
     .dueling = 1},
    {.obs_dim = 7 * 7 * 3,
     .in_h = 7,
     .in_w = 7,
     .in_c = 3,
     .in_dtype = NN_INPUT_U8,
     .in_scale = 1.0f / 255.0f,
     .n_conv = 2,
     .conv = {{4, 3, 2}, {5, 2, 1}},
     .n_actions = 2,
     .n_hidden = 1,
     .hidden = {6},
     .dueling = 0},
    {.obs_dim = 6 * 9 * 1,
     .in_h = 6,
     .in_w = 9,
     .in_c = 1,
     .in_scale = 0.5f,
     .n_conv = 1,
     .conv = {{2, 4, 3}},
     .n_actions = 4,
     .n_hidden = 2,
     .hidden = {5, 4},
     .dueling = 1},
    {.obs_dim = 4 * 4 * 2,
     .in_h = 4,
     .in_w = 4,
     .in_c = 2,
     .in_dtype = NN_INPUT_U8,
     .in_scale = 1.0f,
     .n_conv = 2,
     .conv = {{3, 1, 1}, {2, 3, 1}},
     .n_actions = 3,
     .n_hidden = 1,
     .hidden = {4},
     .dueling = 1},
};
static const int s_conv_batches[] = {3, 1, 4, 2};

// Observations of cfg's dtype: floats in [-2, 2], or bytes 0..255.
static void *s_obs(const nn_config_t *cfg, int B, rng_t *r) {
    size_t n = (size_t)B * cfg->obs_dim;
    if (cfg->in_dtype == NN_INPUT_U8) {
        uint8_t *u = xmalloc(n);
        for (size_t i = 0; i < n; i++) {
            u[i] = (uint8_t)(rng_next_u64(r) >> 56);
        }
        return u;
    }
    float *f = xmalloc(n * sizeof(float));
    s_fill(f, n, r, 2.0f);
    return f;
}

START_TEST(test_conv_forward_matches_reference) {
    rng_t r;
    rng_init_stream(&r, 13, RNG_ROLE_TEST, 0);
    for (size_t s = 0; s < APEX_ARRAY_LEN(s_conv_shapes); s++) {
        const nn_config_t *cfg = &s_conv_shapes[s];
        char why[160], what[160];
        ck_assert_msg(nn_config_check(cfg, why, sizeof why) == APEX_OK, "%s", why);
        nn_config_format(cfg, what, sizeof what);
        int B = s_conv_batches[s], A = cfg->n_actions;
        nn_params_t p;
        nn_state_t st, inf;
        nn_params_init(&p, cfg);
        nn_state_init(&st, cfg, B, 1);
        nn_state_init(&inf, cfg, B, 0);
        nn_params_init_random(&p, &r);
        void *obs = s_obs(cfg, B, &r);
        double *theta = xmalloc(p.num_params * sizeof(double)), qref[64], got[64];
        for (size_t i = 0; i < p.num_params; i++) {
            theta[i] = p.data[i];
        }
        float q[64], q_inf[64];
        nn_forward(&st, &p, obs, B, q);
        nn_forward(&inf, &p, obs, B, q_inf); // a forward-only state agrees
        nnref_forward(qref, cfg, theta, obs, B);
        for (int i = 0; i < B * A; i++) {
            got[i] = q[i];
        }
        ck_assert_msg(check_close_d(got, qref, (size_t)B * A, 1e-5, 1e-6, what), "%s", what);
        ck_assert_mem_eq(q, q_inf, (size_t)B * A * sizeof(float));
        free(obs);
        xfree(theta);
        nn_state_fini(&inf);
        nn_state_fini(&st);
        nn_params_fini(&p);
    }
}
END_TEST

// nn_forward_pair gives the two forwards' values (conv nets: one stacked first layer; an
// MLP: two passes), and a train state used as its second network backpropagates as after
// its own nn_forward.
START_TEST(test_forward_pair) {
    rng_t r;
    rng_init_stream(&r, 17, RNG_ROLE_TEST, 0);
    const nn_config_t mlp = {.obs_dim = 5, .n_actions = 3, .n_hidden = 1, .hidden = {6}};
    for (size_t s = 0; s <= APEX_ARRAY_LEN(s_conv_shapes); s++) {
        const nn_config_t *cfg = s < APEX_ARRAY_LEN(s_conv_shapes) ? &s_conv_shapes[s] : &mlp;
        int B = s < APEX_ARRAY_LEN(s_conv_batches) ? s_conv_batches[s] : 3, A = cfg->n_actions;
        nn_params_t pa, pb, ga, gb;
        nn_state_t sa, sb, ra, rb;
        nn_params_init(&pa, cfg), nn_params_init(&pb, cfg);
        nn_params_init(&ga, cfg), nn_params_init(&gb, cfg);
        nn_params_init_random(&pa, &r), nn_params_init_random(&pb, &r);
        nn_state_init(&sa, cfg, B, 0), nn_state_init(&sb, cfg, B, 1);
        nn_state_init(&ra, cfg, B, 0), nn_state_init(&rb, cfg, B, 1);
        void *obs = s_obs(cfg, B, &r);
        float qa[64], qb[64], wa[64], wb[64], c[64];
        s_fill(c, (size_t)B * A, &r, 1.0f);
        nn_forward_pair(&sa, &pa, &sb, &pb, obs, B, qa, qb);
        nn_forward(&ra, &pa, obs, B, wa);
        nn_forward(&rb, &pb, obs, B, wb);
        ck_assert(check_close_f(qa, wa, (size_t)B * A, 1e-6, 1e-7, "pair a"));
        ck_assert(check_close_f(qb, wb, (size_t)B * A, 1e-6, 1e-7, "pair b"));
        nn_backward(&sb, &pb, &gb, c, B);
        nn_backward(&rb, &pb, &ga, c, B);
        ck_assert(check_close_f(gb.data, ga.data, gb.num_params, 1e-5, 1e-6, "pair grads"));
        free(obs);
        nn_state_fini(&sa), nn_state_fini(&sb), nn_state_fini(&ra), nn_state_fini(&rb);
        nn_params_fini(&pa), nn_params_fini(&pb), nn_params_fini(&ga), nn_params_fini(&gb);
    }
}
END_TEST

// Central differences in double of L = sum c . q against nn_backward for every parameter
// of conv nets (conv weights and biases under their ReLUs, the flatten, the head).
START_TEST(test_conv_gradcheck_all_layers) {
    rng_t r;
    rng_init_stream(&r, 14, RNG_ROLE_TEST, 0);
    for (size_t s = 0; s < APEX_ARRAY_LEN(s_conv_shapes); s++) {
        const nn_config_t *cfg = &s_conv_shapes[s];
        int B = s_conv_batches[s], A = cfg->n_actions;
        nn_params_t p, g;
        nn_state_t st;
        nn_params_init(&p, cfg);
        nn_params_init(&g, cfg);
        nn_state_init(&st, cfg, B, 1);
        nn_params_init_random(&p, &r);
        void *obs = s_obs(cfg, B, &r);
        float c[64], q[64];
        s_fill(c, (size_t)B * A, &r, 1.0f);
        nn_forward(&st, &p, obs, B, q);
        nn_backward(&st, &p, &g, c, B);
        size_t n = p.num_params;
        double *theta = xmalloc(n * sizeof(double)), *num = xmalloc(n * sizeof(double));
        double *ana = xmalloc(n * sizeof(double));
        for (size_t i = 0; i < n; i++) {
            theta[i] = p.data[i];
            ana[i] = g.data[i];
        }
        const double h = 1e-6;
        for (size_t i = 0; i < n; i++) {
            double keep = theta[i];
            theta[i] = keep + h;
            double lp = s_ref_loss(cfg, theta, obs, c, B);
            theta[i] = keep - h;
            double lm = s_ref_loss(cfg, theta, obs, c, B);
            theta[i] = keep;
            num[i] = (lp - lm) / (2 * h);
        }
        char what[160];
        nn_config_format(cfg, what, sizeof what);
        ck_assert_msg(check_close_d(ana, num, n, 1e-4, 1e-5, what), "gradcheck %s", what);
        free(obs);
        xfree(theta);
        xfree(num);
        xfree(ana);
        nn_state_fini(&st);
        nn_params_fini(&g);
        nn_params_fini(&p);
    }
}
END_TEST

// The input scale and dtype: uint8 rows times 1/255 give exactly the network of the float
// rows u / 255 (MLP and conv net), and the scale is applied once (a float net on rows x with
// scale s equals the unscaled net on s x).
START_TEST(test_input_dtype_and_scale) {
    rng_t r;
    rng_init_stream(&r, 15, RNG_ROLE_TEST, 0);
    const nn_config_t mlp = {.obs_dim = 12,
                             .in_dtype = NN_INPUT_U8,
                             .in_scale = 1.0f / 255.0f,
                             .n_actions = 3,
                             .n_hidden = 1,
                             .hidden = {7},
                             .dueling = 1};
    const nn_config_t conv = s_conv_shapes[1];
    const nn_config_t *cfgs[] = {&mlp, &conv};
    for (int k = 0; k < 2; k++) {
        nn_config_t u8 = *cfgs[k], f32 = u8;
        f32.in_dtype = NN_INPUT_F32;
        f32.in_scale = 1.0f;
        enum { B = 3 };
        nn_params_t p;
        nn_params_init(&p, &u8);
        nn_params_init_random(&p, &r);
        nn_state_t su, sf;
        nn_state_init(&su, &u8, B, 0);
        nn_state_init(&sf, &f32, B, 0);
        size_t n = (size_t)B * u8.obs_dim;
        uint8_t *bytes = xmalloc(n);
        float *scaled = xmalloc(n * sizeof(float));
        for (size_t i = 0; i < n; i++) {
            bytes[i] = (uint8_t)(i * 37 % 256);
            scaled[i] = (float)bytes[i] * (1.0f / 255.0f);
        }
        float qu[16], qf[16];
        nn_forward(&su, &p, bytes, B, qu);
        nn_forward(&sf, &p, scaled, B, qf);
        ck_assert(check_close_f(qu, qf, (size_t)B * u8.n_actions, 1e-6, 1e-7, "u8 vs f32/255"));
        free(bytes);
        free(scaled);
        nn_state_fini(&su);
        nn_state_fini(&sf);
        nn_params_fini(&p);
    }
}
END_TEST

// The first layer's input as bytes (nn.c keeps uint8 observations as bytes when their float
// copy would exceed 1 MB: the Nature body from B = 10) gives the values of the float input
// it uses for smaller batches: q, gradients, and a forward pair whose second state trains.
START_TEST(test_byte_input_matches_float_input) {
    rng_t r;
    rng_init_stream(&r, 19, RNG_ROLE_TEST, 0);
    const nn_config_t cfg = nn_config_nature(6, 1);
    enum { B = 12, SMALL = 3, A = 6 };
    nn_params_t p, p2, g_big, g_small, g_pair;
    nn_params_init(&p, &cfg), nn_params_init(&p2, &cfg);
    nn_params_init(&g_big, &cfg), nn_params_init(&g_small, &cfg), nn_params_init(&g_pair, &cfg);
    nn_params_init_random(&p, &r), nn_params_init_random(&p2, &r);
    nn_state_t big, small, pa, pb;
    nn_state_init(&big, &cfg, B, 1), nn_state_init(&small, &cfg, SMALL, 1);
    nn_state_init(&pa, &cfg, B, 0), nn_state_init(&pb, &cfg, B, 1);
    uint8_t *obs = s_obs(&cfg, B, &r);
    float q_big[B * A], q_small[B * A], qa[B * A], qb[B * A], c[B * A];
    s_fill(c, (size_t)B * A, &r, 1.0f);
    nn_forward(&big, &p, obs, B, q_big);
    ck_assert_int_eq(big.in_t_u8, 1);
    nn_backward(&big, &p, &g_big, c, B);
    for (int b0 = 0; b0 < B; b0 += SMALL) {
        nn_forward(&small, &p, obs + (size_t)b0 * cfg.obs_dim, SMALL, q_small + b0 * A);
        ck_assert_int_eq(small.in_t_u8, 0);
        nn_backward(&small, &p, &g_small, c + b0 * A, SMALL); // accumulates over the slices
    }
    ck_assert(check_close_f(q_big, q_small, (size_t)B * A, 1e-5, 1e-6, "q bytes vs floats"));
    ck_assert(check_close_f(g_big.data, g_small.data, g_big.num_params, 1e-4, 1e-6,
                            "grads bytes vs floats"));
    // The pair on bytes: its train state keeps its own copy of the bytes for backward.
    nn_forward_pair(&pa, &p2, &pb, &p, obs, B, qa, qb);
    ck_assert_int_eq(pb.in_t_u8, 1);
    ck_assert(check_close_f(qb, q_big, (size_t)B * A, 1e-6, 1e-7, "pair b"));
    nn_forward(&big, &p2, obs, B, q_big);
    ck_assert(check_close_f(qa, q_big, (size_t)B * A, 1e-6, 1e-7, "pair a"));
    nn_backward(&pb, &p, &g_pair, c, B);
    ck_assert(check_close_f(g_pair.data, g_big.data, g_big.num_params, 1e-5, 1e-7, "pair grads"));
    free(obs);
    nn_state_fini(&big), nn_state_fini(&small), nn_state_fini(&pa), nn_state_fini(&pb);
    nn_params_fini(&p), nn_params_fini(&p2), nn_params_fini(&g_big), nn_params_fini(&g_small);
    nn_params_fini(&g_pair);
}
END_TEST

// The MinAtar DQN body (Young & Tian 2019, examples/dqn.py) and the Nature DQN body are
// expressible, with PyTorch's parameter counts (+ dueling's value row).
START_TEST(test_minatar_and_nature_bodies) {
    nn_config_t minatar = nn_config_minatar(4, 6, 0);
    ck_assert_int_eq(nn_config_check(&minatar, NULL, 0), APEX_OK);
    ck_assert_uint_eq(nn_num_params(&minatar), 132566); // the notes' count for C = 4
    minatar = nn_config_minatar(10, 6, 0);
    ck_assert_int_eq(minatar.obs_dim, 1000);
    ck_assert_uint_eq(nn_num_params(&minatar), 133430); // and for C = 10
    minatar = nn_config_minatar(4, 6, 1);
    ck_assert_uint_eq(nn_num_params(&minatar), 132695); // with dueling's value row (128 + 1)
    nn_config_t nature = nn_config_nature(6, 0);
    ck_assert_int_eq(nn_config_check(&nature, NULL, 0), APEX_OK);
    // conv 32*4*64+32, 64*32*16+64, 64*64*9+64; fc 3136*512+512; head 512*6+6
    ck_assert_uint_eq(nn_num_params(&nature), (size_t)(8224 + 32832 + 36928 + 1606144 + 3078));
    nn_tensor_t t[NN_MAX_TENSORS];
    int nt = nn_layout(&nature, t);
    ck_assert_int_eq(nt, 10);
    ck_assert_str_eq(t[0].name, "conv1.w");
    ck_assert_int_eq(t[0].rows, 32);
    ck_assert_int_eq(t[0].cols, 4 * 8 * 8);
    ck_assert_str_eq(t[6].name, "fc1.w");
    ck_assert_int_eq(t[6].cols, 3136);
    ck_assert_str_eq(t[8].name, "head.w");
    char why[160];
    nature.conv[2].kernel = 10; // 9x9 input after conv2: a 10x10 kernel does not fit
    ck_assert_int_eq(nn_config_check(&nature, why, sizeof why), APEX_EINVAL);
    ck_assert_msg(strstr(why, "conv layer 3"), "%s", why);
}
END_TEST

// The whole network against PyTorch on the same weights and inputs
// (tests/fixtures/nn_torch.bin, written by gen_nn_torch.py): q and every parameter's gradient
// of L = sum c . q, for conv bodies on uint8 and float32 frames with their input scales,
// strided layers, a flatten, several hidden layers, with and without the dueling head.
static int32_t s_i32(const unsigned char **p) {
    int32_t v;
    memcpy(&v, *p, 4);
    *p += 4;
    return v;
}

START_TEST(test_whole_network_matches_pytorch) {
    const char *root = getenv("APEX_SRC_DIR");
    char path[512];
    snprintf(path, sizeof path, "%s/tests/fixtures/nn_torch.bin", root && *root ? root : ".");
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s (run from the repository root)", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = xmalloc((size_t)len);
    ck_assert_uint_eq(fread(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    ck_assert(memcmp(buf, "APEXNNT1", 8) == 0);
    const unsigned char *p = buf + 8;
    uint32_t n_cases;
    memcpy(&n_cases, p, 4);
    p += 4;
    ck_assert_uint_eq(n_cases, 3);
    for (uint32_t k = 0; k < n_cases; k++) {
        nn_config_t cfg = {0};
        cfg.in_h = s_i32(&p), cfg.in_w = s_i32(&p), cfg.in_c = s_i32(&p);
        cfg.in_dtype = s_i32(&p);
        cfg.n_conv = s_i32(&p);
        for (int l = 0; l < cfg.n_conv; l++) {
            cfg.conv[l].filters = s_i32(&p), cfg.conv[l].kernel = s_i32(&p);
            cfg.conv[l].stride = s_i32(&p);
        }
        cfg.n_hidden = s_i32(&p);
        for (int l = 0; l < cfg.n_hidden; l++) {
            cfg.hidden[l] = s_i32(&p);
        }
        cfg.dueling = s_i32(&p);
        cfg.n_actions = s_i32(&p);
        int B = s_i32(&p), A = cfg.n_actions;
        memcpy(&cfg.in_scale, p, 4);
        uint32_t np;
        memcpy(&np, p + 4, 4);
        p += 8;
        cfg.obs_dim = cfg.in_h * cfg.in_w * cfg.in_c;
        char what[160];
        nn_config_format(&cfg, what, sizeof what);
        ck_assert_uint_eq(nn_num_params(&cfg), np); // PyTorch's parameter count
        nn_params_t prm, g;
        nn_params_init(&prm, &cfg);
        nn_params_init(&g, &cfg);
        memcpy(prm.data, p, np * 4);
        p += np * 4;
        const void *obs = p;
        p += (size_t)B * cfg.obs_dim * (cfg.in_dtype == NN_INPUT_U8 ? 1 : 4);
        float c[64], want_q[64], q[64];
        memcpy(c, p, (size_t)B * A * 4);
        memcpy(want_q, p + (size_t)B * A * 4, (size_t)B * A * 4);
        p += 2 * (size_t)B * A * 4;
        float *want_g = xmalloc(np * 4);
        memcpy(want_g, p, np * 4);
        p += np * 4;
        nn_state_t st;
        nn_state_init(&st, &cfg, B, 1);
        nn_forward(&st, &prm, obs, B, q);
        nn_backward(&st, &prm, &g, c, B);
        ck_assert_msg(check_close_f(q, want_q, (size_t)B * A, 1e-4, 1e-5, what), "q of %s", what);
        ck_assert_msg(check_close_f(g.data, want_g, np, 1e-3, 1e-5, what), "grads of %s", what);
        xfree(want_g);
        nn_state_fini(&st);
        nn_params_fini(&g);
        nn_params_fini(&prm);
    }
    ck_assert_ptr_eq(p, buf + len);
    xfree(buf);
}
END_TEST

// in_frames (frame-major observations, [env] frame_stack): a conv net reading F frames of
// C/F channels gives bitwise what the same net gives on the channels-last row of the same
// tensor; a frame count that does not divide in_c is refused by nn_config_check.
START_TEST(test_in_frames) {
    rng_t r;
    rng_init_stream(&r, 51, RNG_ROLE_TEST, 0);
    nn_config_t fm = nn_config_minatar(4, 6, 1), cl = fm;
    fm.in_frames = 2;
    char why[256] = "";
    ck_assert_int_eq(nn_config_check(&fm, why, sizeof why), APEX_OK);
    nn_params_t p;
    nn_params_init(&p, &fm);
    nn_params_init_random(&p, &r);
    enum { B = 5, O = 400, HW = 100 };
    uint8_t a[B * O], b[B * O];
    for (int i = 0; i < B * O; i++) {
        a[i] = (uint8_t)(rng_next_u64(&r) >> 63); // MinAtar's 0/1 cells
    }
    for (int s = 0; s < B; s++) {
        for (int f = 0; f < 2; f++) {
            for (int q = 0; q < HW; q++) {
                for (int c = 0; c < 2; c++) {
                    b[s * O + q * 4 + f * 2 + c] = a[s * O + f * HW * 2 + q * 2 + c];
                }
            }
        }
    }
    nn_state_t sf, sc;
    nn_state_init(&sf, &fm, B, 0);
    nn_state_init(&sc, &cl, B, 0);
    float qf[B * 6], qc[B * 6];
    nn_forward(&sf, &p, a, B, qf);
    nn_forward(&sc, &p, b, B, qc);
    ck_assert(memcmp(qf, qc, sizeof qf) == 0);
    // The same bytes read channels last are another input: the layout is not ignored.
    nn_forward(&sc, &p, a, B, qc);
    ck_assert(memcmp(qf, qc, sizeof qf) != 0);
    nn_state_fini(&sf), nn_state_fini(&sc);
    nn_params_fini(&p);
    fm.in_frames = 3;
    ck_assert_int_eq(nn_config_check(&fm, why, sizeof why), APEX_EINVAL);
    ck_assert_msg(strstr(why, "3 frames do not divide the 4 input channels") != NULL, "%s", why);
}
END_TEST

Suite *nn_suite(void) {
    Suite *s = suite_create("nn");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_layout);
    tcase_add_test(tc, test_init_bounds_and_determinism);
    tcase_add_test(tc, test_conv_forward_matches_reference);
    tcase_add_test(tc, test_forward_pair);
    tcase_add_test(tc, test_conv_gradcheck_all_layers);
    tcase_add_test(tc, test_input_dtype_and_scale);
    tcase_add_test(tc, test_byte_input_matches_float_input);
    tcase_add_test(tc, test_minatar_and_nature_bodies);
    tcase_add_test(tc, test_whole_network_matches_pytorch);
    tcase_add_test(tc, test_forward_matches_reference);
    tcase_add_test(tc, test_dueling_mean_is_value);
    tcase_add_test(tc, test_gradcheck_all_layers);
    tcase_add_test(tc, test_double_dqn_targets);
    tcase_add_test(tc, test_td_priorities);
    tcase_add_test(tc, test_in_frames);
    suite_add_tcase(s, tc);
    return s;
}
