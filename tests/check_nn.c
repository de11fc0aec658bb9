// check_nn.c: the MLP against an independent double-precision reference forward, and
// nn_backward against central differences of that reference (STYLE S22).
#include "check_apex.h"

#include "apex.h"
#include "check_nn_ref.h"
#include "nn.h"
#include "rng.h"
#include "xalloc.h"

#include <math.h>
#include <string.h>

// L(theta) = sum_{j,a} c[j,a] * q[j,a], so dL/dq = c.
static double s_ref_loss(const nn_config_t *cfg, const double *theta, const float *obs,
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
    {3, 2, 1, {5}, 0},    {4, 3, 2, {7, 6}, 1},    {2, 4, 4, {4, 5, 3, 6}, 1},
    {5, 1, 2, {8, 8}, 1}, {6, 5, 3, {9, 4, 7}, 0},
};
static const int s_batches[] = {1, 4, 7, 3, 5};

// ----------------------------------------------------------------------------

START_TEST(test_layout) {
    nn_config_t small = {4, 2, 2, {256, 256}, 1};
    nn_config_t large = {84, 18, 2, {512, 512}, 1};
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
    nn_config_t cfg = {10, 3, 2, {64, 32}, 1};
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
        nn_state_init(&st, cfg, 8);
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
    nn_config_t cfg = {2, 3, 1, {2}, 1};
    nn_params_t p;
    nn_state_t st;
    nn_params_init(&p, &cfg);
    nn_state_init(&st, &cfg, 1);
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
    nn_state_init(&st, cfg, B);
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

START_TEST(test_td_priorities) {
    // Against nn_forward plus the formula done here by hand, including a terminal.
    nn_config_t cfg = {3, 4, 2, {16, 8}, 1};
    enum { B = 6 };
    rng_t r;
    rng_init_stream(&r, 5, RNG_ROLE_TEST, 0);
    nn_params_t p;
    nn_state_t st;
    nn_params_init(&p, &cfg);
    nn_state_init(&st, &cfg, B);
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

Suite *nn_suite(void) {
    Suite *s = suite_create("nn");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_layout);
    tcase_add_test(tc, test_init_bounds_and_determinism);
    tcase_add_test(tc, test_forward_matches_reference);
    tcase_add_test(tc, test_dueling_mean_is_value);
    tcase_add_test(tc, test_gradcheck_all_layers);
    tcase_add_test(tc, test_td_priorities);
    suite_add_tcase(s, tc);
    return s;
}
