// check_nn_dpg.c: nn.h's continuous-control networks (the DPG trainer's, issue #28): a
// policy's bounded head (mid + half tanh), a critic's action inputs concatenated after the
// observation, and the gradient with respect to the first layer's inputs, each against the
// independent double-precision reference (check_nn_ref.c) and central differences of it in
// double (STYLE S22). The Q-network paths are check_nn.c's, unchanged.
#include "check_apex.h"

#include "apex.h"
#include "check_nn_ref.h"
#include "nn.h"
#include "rng.h"
#include "xalloc.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void s_fill(float *x, size_t n, rng_t *r, float scale) {
    for (size_t i = 0; i < n; i++) {
        x[i] = scale * (2.0f * rng_uniform_f(r) - 1.0f);
    }
}

// A policy: O inputs, hidden sizes, A bounded outputs with asymmetric per-dimension bounds.
static nn_config_t s_policy(int O, int A, int h1, int h2) {
    nn_config_t c = {.obs_dim = O, .n_actions = A, .n_hidden = h2 ? 2 : 1, .hidden = {h1, h2}};
    c.out_bounded = 1;
    for (int a = 0; a < A && a < NN_MAX_BOUNDED; a++) {
        c.out_low[a] = -1.0f - 0.5f * (float)a;
        c.out_high[a] = 0.25f + 0.75f * (float)a;
    }
    return c;
}

// A critic on O observations of dtype/scale and A action inputs, scalar output.
static nn_config_t s_critic(int O, int A, int h1, int h2, int dtype, float scale) {
    return (nn_config_t){.obs_dim = O,
                         .in_dtype = dtype,
                         .in_scale = scale,
                         .action_inputs = A,
                         .n_actions = 1,
                         .n_hidden = h2 ? 2 : 1,
                         .hidden = {h1, h2}};
}

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

static double *s_to_double(const float *x, size_t n) {
    double *d = xmalloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) {
        d[i] = x[i];
    }
    return d;
}

// L = sum c . out of the reference on obs (and actions for a critic).
static double s_ref_loss(const nn_config_t *cfg, const double *theta, const void *obs,
                         const double *act, const float *c, int B) {
    double out[256];
    if (cfg->action_inputs > 0) {
        nnref_forward_sa(out, cfg, theta, obs, act, B);
    } else {
        nnref_forward(out, cfg, theta, obs, B);
    }
    double L = 0;
    for (int i = 0; i < B * cfg->n_actions; i++) {
        L += c[i] * out[i];
    }
    return L;
}

// ----------------------------------------------------------------------------

START_TEST(test_layout_and_counts) {
    // HalfCheetah's networks (the torch peer's): PyTorch's counts for Linear(17, 256),
    // Linear(256, 256), Linear(256, 6) and for Linear(17 + 6, 256), ..., Linear(256, 1).
    nn_config_t pol = s_policy(17, 6, 256, 256);
    nn_config_t cri = s_critic(17, 6, 256, 256, NN_INPUT_F32, 1.0f);
    ck_assert_uint_eq(nn_num_params(&pol), 17 * 256 + 256 + 256 * 256 + 256 + 256 * 6 + 6);
    ck_assert_uint_eq(nn_num_params(&pol), 71942);
    ck_assert_uint_eq(nn_num_params(&cri), 23 * 256 + 256 + 256 * 256 + 256 + 256 + 1);
    ck_assert_uint_eq(nn_num_params(&cri), 72193);
    nn_tensor_t t[NN_MAX_TENSORS];
    ck_assert_int_eq(nn_layout(&cri, t), 6);
    ck_assert_int_eq(t[0].cols, 23); // fc1.w (256 x (17 + 6)): the observation, then a
    ck_assert_int_eq(t[4].rows, 1);
    char buf[64];
    nn_config_format(&cri, buf, sizeof buf);
    ck_assert_str_eq(buf, "17+a6-256-256-1");
    nn_config_format(&pol, buf, sizeof buf);
    ck_assert_str_eq(buf, "17-256-256-tanh(6)");
    // Action inputs change the parameters, bounds do not (as dtype and scale).
    nn_config_t other = cri;
    other.action_inputs = 5;
    ck_assert(!nn_config_equal(&cri, &other));
    other = pol;
    other.out_high[0] = 7.0f;
    ck_assert(nn_config_equal(&pol, &other));
    // A view over a flat array is the network nn_params_init would make, at that address.
    float *flat = xaligned_alloc((nn_num_params(&pol) + 3) * sizeof(float));
    nn_params_t v, p;
    nn_params_view(&v, &pol, flat + 3);
    nn_params_init(&p, &pol);
    ck_assert_uint_eq(v.num_params, p.num_params);
    ck_assert_int_eq(v.n_layers, p.n_layers);
    for (int l = 0; l < p.n_layers; l++) {
        ck_assert_int_eq(v.layer[l].w - v.data, p.layer[l].w - p.data);
        ck_assert_int_eq(v.layer[l].b - v.data, p.layer[l].b - p.data);
        ck_assert_int_eq(v.layer[l].in_dim, p.layer[l].in_dim);
    }
    ck_assert_ptr_eq(v.data, flat + 3);
    nn_params_fini(&p);
    xfree(flat);
}
END_TEST

START_TEST(test_config_check) {
    char why[160];
    nn_config_t c = s_policy(3, 2, 8, 0);
    ck_assert_int_eq(nn_config_check(&c, why, sizeof why), APEX_OK);
    c.out_low[1] = c.out_high[1]; // low < high
    ck_assert_int_eq(nn_config_check(&c, why, sizeof why), APEX_EINVAL);
    ck_assert_msg(strstr(why, "low < high"), "%s", why);
    c = s_policy(3, 2, 8, 0);
    c.out_high[0] = NAN;
    ck_assert_int_eq(nn_config_check(&c, why, sizeof why), APEX_EINVAL);
    c = s_policy(3, 2, 8, 0);
    c.out_low[0] = -FLT_MAX, c.out_high[0] = FLT_MAX; // the half-range overflows
    ck_assert_int_eq(nn_config_check(&c, why, sizeof why), APEX_EINVAL);
    c = s_policy(3, 2, 8, 0);
    c.dueling = 1;
    ck_assert_int_eq(nn_config_check(&c, why, sizeof why), APEX_EINVAL);
    ck_assert_msg(strstr(why, "bounded head"), "%s", why);
    c = s_policy(3, NN_MAX_BOUNDED + 1, 8, 0);
    ck_assert_int_eq(nn_config_check(&c, why, sizeof why), APEX_EINVAL);
    c = s_policy(3, NN_MAX_BOUNDED, 8, 0);
    ck_assert_int_eq(nn_config_check(&c, why, sizeof why), APEX_OK);
    // Conv nets have neither.
    c = nn_config_minatar(4, 3, 0);
    c.action_inputs = 2;
    ck_assert_int_eq(nn_config_check(&c, why, sizeof why), APEX_EINVAL);
    ck_assert_msg(strstr(why, "MLPs"), "%s", why);
    c = s_critic(3, -1, 8, 0, NN_INPUT_F32, 1.0f);
    ck_assert_int_eq(nn_config_check(&c, why, sizeof why), APEX_EINVAL);
}
END_TEST

// A policy's outputs against the reference, within their bounds, and saturating at them for
// huge pre-activations; every parameter's gradient of L = sum c . out against central
// differences (the tanh, the per-dimension scaling, the layers below).
START_TEST(test_policy_forward_and_gradcheck) {
    rng_t r;
    rng_init_stream(&r, 31, RNG_ROLE_TEST, 0);
    const nn_config_t cfgs[] = {s_policy(4, 3, 7, 5), s_policy(2, 1, 6, 0)};
    const int batches[] = {5, 1};
    for (size_t k = 0; k < APEX_ARRAY_LEN(cfgs); k++) {
        const nn_config_t *cfg = &cfgs[k];
        int B = batches[k], A = cfg->n_actions;
        nn_params_t p, g;
        nn_state_t st;
        nn_params_init(&p, cfg), nn_params_init(&g, cfg);
        nn_state_init(&st, cfg, B, 1);
        nn_params_init_random(&p, &r);
        // Larger weights than the init so that some outputs sit near their bounds.
        for (size_t i = 0; i < p.num_params; i++) {
            p.data[i] *= 3.0f;
        }
        void *obs = s_obs(cfg, B, &r);
        float out[64], c[64];
        s_fill(c, (size_t)B * A, &r, 1.0f);
        nn_forward(&st, &p, obs, B, out);
        double *theta = s_to_double(p.data, p.num_params), want[64], got[64];
        nnref_forward(want, cfg, theta, obs, B);
        for (int i = 0; i < B * A; i++) {
            got[i] = out[i];
            int a = i % A;
            ck_assert(out[i] >= cfg->out_low[a] && out[i] <= cfg->out_high[a]);
        }
        ck_assert(check_close_d(got, want, (size_t)B * A, 1e-5, 1e-6, "policy out"));
        nn_backward(&st, &p, &g, c, B);
        size_t n = p.num_params;
        double *num = xmalloc(n * sizeof(double)), *ana = s_to_double(g.data, n);
        for (size_t i = 0; i < n; i++) {
            double keep = theta[i], h = 1e-6;
            theta[i] = keep + h;
            double lp = s_ref_loss(cfg, theta, obs, NULL, c, B);
            theta[i] = keep - h;
            num[i] = (lp - s_ref_loss(cfg, theta, obs, NULL, c, B)) / (2 * h);
            theta[i] = keep;
        }
        ck_assert(check_close_d(ana, num, n, 1e-4, 1e-6, "policy dL/dtheta"));
        // Saturation: a head bias of +-1e4 pins every output to its bound exactly.
        const nn_linear_t *head = &p.layer[p.n_layers - 1];
        for (int a = 0; a < A; a++) {
            head->b[a] = a % 2 ? -1e4f : 1e4f;
        }
        nn_forward(&st, &p, obs, B, out);
        for (int j = 0; j < B; j++) {
            for (int a = 0; a < A; a++) {
                float want_b = a % 2 ? cfg->out_low[a] : cfg->out_high[a];
                ck_assert_float_eq(out[j * A + a], want_b);
            }
        }
        free(obs);
        xfree(theta), xfree(num), xfree(ana);
        nn_state_fini(&st);
        nn_params_fini(&p), nn_params_fini(&g);
    }
}
END_TEST

// Critics on [s, a] for float32 observations (in place and scaled) and uint8 ones scaled
// 1/255: q against the reference, every parameter's gradient against central differences,
// and the state's copy of the rows (obs and actions may change after the forward).
START_TEST(test_critic_forward_and_gradcheck) {
    rng_t r;
    rng_init_stream(&r, 32, RNG_ROLE_TEST, 0);
    const nn_config_t cfgs[] = {s_critic(3, 2, 8, 6, NN_INPUT_F32, 1.0f),
                                s_critic(4, 3, 7, 0, NN_INPUT_F32, 0.5f),
                                s_critic(5, 1, 6, 5, NN_INPUT_U8, 1.0f / 255.0f)};
    const int batches[] = {4, 1, 6};
    for (size_t k = 0; k < APEX_ARRAY_LEN(cfgs); k++) {
        const nn_config_t *cfg = &cfgs[k];
        int B = batches[k], A_in = cfg->action_inputs;
        char what[64];
        nn_config_format(cfg, what, sizeof what);
        nn_params_t p, g;
        nn_state_t st;
        nn_params_init(&p, cfg), nn_params_init(&g, cfg);
        nn_state_init(&st, cfg, B, 1);
        nn_params_init_random(&p, &r);
        void *obs = s_obs(cfg, B, &r);
        size_t obs_bytes = (size_t)B * cfg->obs_dim * (cfg->in_dtype == NN_INPUT_U8 ? 1 : 4);
        float act[64], q[16], c[16];
        s_fill(act, (size_t)B * A_in, &r, 1.5f);
        s_fill(c, (size_t)B, &r, 1.0f);
        double *da = s_to_double(act, (size_t)B * A_in), want[16], got[16];
        double *theta = s_to_double(p.data, p.num_params);
        nn_forward_sa(&st, &p, obs, act, B, q);
        nnref_forward_sa(want, cfg, theta, obs, da, B);
        for (int i = 0; i < B; i++) {
            got[i] = q[i];
        }
        ck_assert_msg(check_close_d(got, want, (size_t)B, 1e-5, 1e-6, what), "q of %s", what);
        // The rows were copied: overwrite the inputs before backward.
        void *keep_obs = xmalloc(obs_bytes);
        memcpy(keep_obs, obs, obs_bytes);
        memset(obs, 0x7f, obs_bytes);
        memset(act, 0x7f, sizeof act);
        nn_backward(&st, &p, &g, c, B);
        size_t n = p.num_params;
        double *num = xmalloc(n * sizeof(double)), *ana = s_to_double(g.data, n);
        for (size_t i = 0; i < n; i++) {
            double kp = theta[i], h = 1e-6;
            theta[i] = kp + h;
            double lp = s_ref_loss(cfg, theta, keep_obs, da, c, B);
            theta[i] = kp - h;
            num[i] = (lp - s_ref_loss(cfg, theta, keep_obs, da, c, B)) / (2 * h);
            theta[i] = kp;
        }
        ck_assert_msg(check_close_d(ana, num, n, 1e-4, 1e-6, what), "dL/dtheta of %s", what);
        free(obs), xfree(keep_obs);
        xfree(da), xfree(theta), xfree(num), xfree(ana);
        nn_state_fini(&st);
        nn_params_fini(&p), nn_params_fini(&g);
    }
}
END_TEST

// nn_backward_input: dL/dx for any range of the first layer's input columns (a critic's
// action columns are what the policy's update needs: dQ/da) against central differences of
// the reference in the inputs themselves, for a critic and for a bounded policy (through its
// tanh); it accumulates, and leaves the parameters' gradients alone (it has none to write).
START_TEST(test_input_gradient) {
    rng_t r;
    rng_init_stream(&r, 33, RNG_ROLE_TEST, 0);
    const nn_config_t cfgs[] = {s_critic(3, 2, 9, 7, NN_INPUT_F32, 1.0f), s_policy(3, 2, 6, 5),
                                s_critic(2, 4, 5, 0, NN_INPUT_F32, 1.0f)};
    const int batches[] = {5, 3, 2};
    for (size_t k = 0; k < APEX_ARRAY_LEN(cfgs); k++) {
        const nn_config_t *cfg = &cfgs[k];
        int B = batches[k], W = cfg->obs_dim + cfg->action_inputs, A = cfg->n_actions;
        nn_params_t p;
        nn_state_t st;
        nn_params_init(&p, cfg);
        nn_state_init(&st, cfg, B, 1);
        nn_params_init_random(&p, &r);
        float rows[64], out[64], c[64];
        s_fill(rows, (size_t)B * W, &r, 1.5f);
        s_fill(c, (size_t)B * A, &r, 1.0f);
        float obs[64], act[64];
        for (int j = 0; j < B; j++) {
            memcpy(obs + j * cfg->obs_dim, rows + j * W, sizeof(float) * cfg->obs_dim);
            memcpy(act + j * cfg->action_inputs, rows + j * W + cfg->obs_dim,
                   sizeof(float) * cfg->action_inputs);
        }
        if (cfg->action_inputs > 0) {
            nn_forward_sa(&st, &p, obs, act, B, out);
        } else {
            nn_forward(&st, &p, obs, B, out);
        }
        double *theta = s_to_double(p.data, p.num_params), *x = s_to_double(rows, (size_t)B * W);
        double num[64], q[64];
        for (int i = 0; i < B * W; i++) {
            double keep = x[i], h = 1e-6, lp = 0, lm = 0;
            x[i] = keep + h;
            nnref_forward_rows(q, cfg, theta, x, B);
            for (int m = 0; m < B * A; m++) {
                lp += c[m] * q[m];
            }
            x[i] = keep - h;
            nnref_forward_rows(q, cfg, theta, x, B);
            for (int m = 0; m < B * A; m++) {
                lm += c[m] * q[m];
            }
            x[i] = keep;
            num[i] = (lp - lm) / (2 * h);
        }
        // Every column at once, then two sub-ranges (the action columns; one column), each
        // against the matching columns of the numerical gradient.
        int ranges[3][2] = {{0, W}, {cfg->obs_dim, cfg->action_inputs}, {W - 1, 1}};
        for (int rr = 0; rr < 3; rr++) {
            int col0 = ranges[rr][0], n = ranges[rr][1];
            if (n < 1) {
                continue;
            }
            float din[64];
            double got[64], want[64];
            memset(din, 0, sizeof din);
            nn_backward_input(&st, &p, c, B, col0, n, din);
            for (int j = 0; j < B; j++) {
                for (int m = 0; m < n; m++) {
                    got[j * n + m] = din[j * n + m];
                    want[j * n + m] = num[j * W + col0 + m];
                }
            }
            ck_assert(check_close_d(got, want, (size_t)B * n, 1e-4, 1e-6, "dL/dx"));
            nn_backward_input(&st, &p, c, B, col0, n, din); // accumulates: twice as much
            for (int i = 0; i < B * n; i++) {
                want[i] = 2 * got[i];
                got[i] = din[i];
            }
            ck_assert(check_close_d(got, want, (size_t)B * n, 1e-6, 1e-7, "accumulate"));
        }
        xfree(theta), xfree(x);
        nn_state_fini(&st);
        nn_params_fini(&p);
    }
}
END_TEST

// nn_dpg_td_priorities (the actors' initial priorities with their copy of the critic)
// against the reference: y = R + disc Q(s', mu(s')) in double through nnref, |y - Q(s, a)|
// + eps; a terminal row (disc 0) bootstraps nothing, whatever its s' (here the largest
// float, which a finite network may turn into anything).
START_TEST(test_dpg_td_priorities) {
    rng_t r;
    rng_init_stream(&r, 34, RNG_ROLE_TEST, 0);
    const int O = 3, A = 2, B = 5;
    const nn_config_t mu_cfg = s_policy(O, A, 8, 6);
    nn_config_t q_cfg;
    nn_critic_config(&q_cfg, &mu_cfg);
    ck_assert_int_eq(q_cfg.action_inputs, A);
    ck_assert_int_eq(q_cfg.n_actions, 1);
    ck_assert_int_eq(q_cfg.out_bounded, 0);
    nn_params_t mu, q;
    nn_state_t smu, sq;
    nn_params_init(&mu, &mu_cfg), nn_params_init(&q, &q_cfg);
    nn_params_init_random(&mu, &r), nn_params_init_random(&q, &r);
    nn_state_init(&smu, &mu_cfg, B, 0), nn_state_init(&sq, &q_cfg, B, 0);
    float obs[B * 3], next[B * 3], act[B * 2], rew[B], disc[B], prio[B];
    s_fill(obs, sizeof obs / sizeof obs[0], &r, 2.0f);
    s_fill(next, sizeof next / sizeof next[0], &r, 2.0f);
    s_fill(act, sizeof act / sizeof act[0], &r, 0.9f);
    s_fill(rew, B, &r, 3.0f);
    for (int i = 0; i < B; i++) {
        disc[i] = 0.99f * 0.99f * 0.99f;
    }
    disc[3] = 0.0f;
    next[3 * O] = FLT_MAX;
    const float eps = 1e-3f;
    nn_dpg_td_priorities(prio, &smu, &mu, &sq, &q, obs, act, rew, disc, next, eps, B);
    double *tmu = s_to_double(mu.data, mu.num_params), *tq = s_to_double(q.data, q.num_params);
    double *da = s_to_double(act, (size_t)B * A);
    double a_next[B * 2], q_next[B], q_sa[B], want[B], got[B];
    nnref_forward(a_next, &mu_cfg, tmu, next, B);
    nnref_forward_sa(q_next, &q_cfg, tq, next, a_next, B);
    nnref_forward_sa(q_sa, &q_cfg, tq, obs, da, B);
    for (int i = 0; i < B; i++) {
        double y = disc[i] != 0.0f ? (double)rew[i] + (double)disc[i] * q_next[i] : rew[i];
        want[i] = fabs(y - q_sa[i]) + eps;
        got[i] = prio[i];
    }
    ck_assert_msg(check_close_d(got, want, B, 1e-5, 1e-6, "dpg priorities"), "priorities");
    ck_assert_double_eq_tol(prio[3], fabs((double)rew[3] - q_sa[3]) + eps, 1e-5);
    xfree(tmu), xfree(tq), xfree(da);
    nn_state_fini(&smu), nn_state_fini(&sq);
    nn_params_fini(&mu), nn_params_fini(&q);
}
END_TEST

Suite *nn_dpg_suite(void) {
    Suite *s = suite_create("nn_dpg");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_layout_and_counts);
    tcase_add_test(tc, test_config_check);
    tcase_add_test(tc, test_policy_forward_and_gradcheck);
    tcase_add_test(tc, test_critic_forward_and_gradcheck);
    tcase_add_test(tc, test_input_gradient);
    tcase_add_test(tc, test_dpg_td_priorities);
    suite_add_tcase(s, tc);
    return s;
}
