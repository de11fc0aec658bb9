// check_explore.c: Ape-X epsilon schedule against its closed form, argmax ties, and the
// epsilon-greedy selection frequencies.
#include "check_apex.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "explore.h"
#include "nn.h"
#include "rng.h"

START_TEST(test_epsilon_closed_form) {
    // Endpoints: eps_0 = 0.4, eps_{N-1} = 0.4^8; the midpoint of N = 3 is 0.4^4.5.
    ck_assert_double_eq_tol(explore_epsilon(0, 8, 0.4, 7), 0.4, 1e-15);
    ck_assert_double_eq_tol(explore_epsilon(7, 8, 0.4, 7), 0.00065536, 1e-15);
    ck_assert_double_eq_tol(explore_epsilon(1, 3, 0.4, 7), pow(0.4, 4.5), 1e-15);
    // General i, N: 0.4^(1 + 7 i / (N - 1)), here N = 256.
    for (int i = 0; i < 256; i++) {
        double want = exp(log(0.4) * (1.0 + 7.0 * i / 255.0));
        ck_assert_double_eq_tol(explore_epsilon(i, 256, 0.4, 7), want, 1e-14);
    }
    // Configurable base and exponent: 0.5^(1 + 2 * 1/1) = 0.125.
    ck_assert_double_eq_tol(explore_epsilon(1, 2, 0.5, 2), 0.125, 1e-15);
}
END_TEST

START_TEST(test_epsilon_single_env_is_base) {
    ck_assert(explore_epsilon(0, 1, 0.4, 7) == 0.4);
    float e;
    explore_epsilons(&e, 1, 0, 1, 0.3, 7);
    ck_assert(e == 0.3f);
}
END_TEST

START_TEST(test_epsilons_use_global_index) {
    // Actor 2 of 4 with 8 envs each owns global indices 16..23 of N = 32.
    float eps[8];
    explore_epsilons(eps, 8, 2 * 8, 4 * 8, EXPLORE_EPS_BASE_DEFAULT, EXPLORE_EPS_ALPHA_DEFAULT);
    for (int k = 0; k < 8; k++) {
        float want = (float)pow(0.4, 1.0 + 7.0 * (16 + k) / 31.0);
        ck_assert_float_eq_tol(eps[k], want, 1e-7f * want);
        if (k > 0) {
            ck_assert(eps[k] < eps[k - 1]); // monotone decreasing in i
        }
    }
}
END_TEST

START_TEST(test_epsilon_index_out_of_range_aborts) { (void)explore_epsilon(4, 4, 0.4, 7); }
END_TEST

START_TEST(test_argmax_ties_and_nan) {
    const float a[] = {1, 3, 3, 2};
    ck_assert_int_eq(nn_argmax(a, 4), 1);
    const float b[] = {5, 5, 5};
    ck_assert_int_eq(nn_argmax(b, 3), 0);
    const float c[] = {-2, -1, -3};
    ck_assert_int_eq(nn_argmax(c, 3), 1);
    const float d[] = {NAN, 1, 2, NAN};
    ck_assert_int_eq(nn_argmax(d, 4), 2);
    const float e[] = {NAN, NAN};
    ck_assert_int_eq(nn_argmax(e, 2), 0);
    const float f[] = {7};
    ck_assert_int_eq(nn_argmax(f, 1), 0);
}
END_TEST

START_TEST(test_select_greedy_and_random) {
    // Row 0 eps = 0: always greedy. Row 1 eps = 1: uniform over A. Row 2 eps = 0.3: greedy
    // with probability 0.7 + 0.3/A. Q rows are (B, A) row-major.
    enum { B = 3, A = 4, N = 100000 };
    const float q[B * A] = {0, 0, 9, 0, 0, 0, 0, 5, 1, 0, 0, 0};
    const float eps[B] = {0.0f, 1.0f, 0.3f};
    int counts[B][A] = {{0}};
    rng_t r;
    rng_init_stream(&r, 1, RNG_ROLE_TEST, 0);
    int32_t act[B];
    for (int k = 0; k < N; k++) {
        explore_select(act, q, eps, B, A, &r);
        for (int b = 0; b < B; b++) {
            ck_assert(act[b] >= 0 && act[b] < A);
            counts[b][act[b]]++;
        }
    }
    ck_assert_int_eq(counts[0][2], N);
    // Binomial sd for p = 0.25 is sqrt(N p (1-p)) ~ 137; allow 6 sd.
    for (int a = 0; a < A; a++) {
        ck_assert_int_lt(abs(counts[1][a] - N / 4), 6 * 137);
    }
    double p_greedy = 0.7 + 0.3 / A; // 0.775, sd ~ 132
    ck_assert_int_lt(abs(counts[2][0] - (int)(N * p_greedy)), 6 * 132);
}
END_TEST

START_TEST(test_select_reproducible) {
    const float q[2 * 3] = {1, 2, 3, 3, 2, 1};
    const float eps[2] = {0.5f, 0.5f};
    rng_t r1, r2;
    rng_init(&r1, 9);
    rng_init(&r2, 9);
    for (int k = 0; k < 1000; k++) {
        int32_t a1[2], a2[2];
        explore_select(a1, q, eps, 2, 3, &r1);
        explore_select(a2, q, eps, 2, 3, &r2);
        ck_assert(a1[0] == a2[0] && a1[1] == a2[1]);
    }
}
END_TEST

// Gaussian exploration: sigma 0 is mu itself (clipped, no draw); a non-finite mu gives the
// bounds' middle; with sigma s the noise has standard deviation s * half per component
// (bounds [-1, 3] and [0, 10]: halves 2 and 5), every action inside the bounds, and the
// same rng state gives the same actions.
START_TEST(test_gaussian_noise) {
    enum { B = 4000, D = 2 };
    const float low[D] = {-1.0f, 0.0f}, high[D] = {3.0f, 10.0f};
    static float mu[B * D], out[B * D], out2[B * D], sigma[B];
    for (int b = 0; b < B; b++) {
        mu[b * D] = 1.0f;
        mu[b * D + 1] = 5.0f;
        sigma[b] = 0.1f;
    }
    rng_t r, r2;
    rng_init(&r, 5);
    // sigma 0: mu exactly (clipped), and no draw from the rng.
    float m0[2 * D] = {0.25f, 11.0f, NAN, -INFINITY}, o0[2 * D], s0[2] = {0.0f, 0.0f};
    rng_t before = r;
    explore_gaussian(o0, m0, s0, 2, D, low, high, &r);
    ck_assert_float_eq(o0[0], 0.25f);
    ck_assert_float_eq(o0[1], 10.0f);
    ck_assert_float_eq(o0[2], 1.0f); // NaN: the middle of [-1, 3]
    ck_assert_float_eq(o0[3], 5.0f); // -inf: the middle of [0, 10]
    ck_assert(memcmp(&before, &r, sizeof r) == 0);
    r2 = r;
    explore_gaussian(out, mu, sigma, B, D, low, high, &r);
    explore_gaussian(out2, mu, sigma, B, D, low, high, &r2);
    ck_assert(memcmp(out, out2, sizeof out) == 0);
    for (int j = 0; j < D; j++) {
        double sum = 0, sum2 = 0, half = 0.5 * (double)(high[j] - low[j]);
        for (int b = 0; b < B; b++) {
            float a = out[b * D + j];
            ck_assert(a >= low[j] && a <= high[j]);
            double d = (double)a - (double)mu[b * D + j];
            sum += d;
            sum2 += d * d;
        }
        double sd = sqrt(sum2 / B - (sum / B) * (sum / B));
        ck_assert_msg(fabs(sd - 0.1 * half) < 0.1 * 0.1 * half, "component %d: sd %.4g, want %.4g",
                      j, sd, 0.1 * half);
        ck_assert_msg(fabs(sum / B) < 0.05 * 0.1 * half * 3, "component %d: mean %.4g", j, sum / B);
    }
    // A large sigma clips at the bounds, never past them.
    for (int b = 0; b < B; b++) {
        sigma[b] = 1.0f;
    }
    explore_gaussian(out, mu, sigma, B, D, low, high, &r);
    int at_bound = 0;
    for (int k = 0; k < B * D; k++) {
        ck_assert(out[k] >= low[k % D] && out[k] <= high[k % D]);
        at_bound += out[k] == low[k % D] || out[k] == high[k % D];
    }
    ck_assert_int_gt(at_bound, 0);
}
END_TEST

// Ornstein-Uhlenbeck: over a long run one env's noise (wide bounds: no clipping) has the
// process's closed forms: lag-1 autocorrelation 1 - theta, stationary deviation sigma /
// sqrt(theta (2 - theta)) half ranges. A second env with sigma 0 stays at mu with x = 0 and
// draws nothing (its neighbour's stream is that of a run without it); theta = 1 is white.
START_TEST(test_ou_noise) {
    enum { T = 50000 };
    const float low[1] = {-1000.0f}, high[1] = {1000.0f}; // half range 1000
    const double thetas[] = {0.15, 0.5, 1.0};
    for (size_t c = 0; c < sizeof thetas / sizeof thetas[0]; c++) {
        const double th = thetas[c];
        rng_t r, r1;
        rng_init_stream(&r, 77, RNG_ROLE_TEST, 0);
        r1 = r;
        float mu[2] = {3.0f, -7.0f}, sigma[2] = {0.01f, 0.0f}, out[2];
        double x[2] = {0, 0.5}, x1 = 0, sum = 0, sum2 = 0, lag = 0, prev = 0;
        int bad = 0; // flags, not an assert per step (a Check assert costs a call)
        for (int t = 0; t < T; t++) {
            explore_ou(out, x, mu, sigma, th, 2, 1, low, high, &r);
            bad |= out[1] != -7.0f || x[1] != 0.0;
            // Env 0 alone, in its own explore_ou call: the same stream.
            float o1;
            explore_ou(&o1, &x1, mu, sigma, th, 1, 1, low, high, &r1);
            bad |= (o1 != out[0]) << 1;
            double d = ((double)out[0] - 3.0) / 1000.0;
            sum += d, sum2 += d * d, lag += d * prev, prev = d;
        }
        ck_assert_msg(!(bad & 1), "theta %g: a sigma-0 env moved", th);
        ck_assert_msg(!(bad & 2), "theta %g: env 0 depends on env 1", th);
        double mean = sum / T, var = sum2 / T - mean * mean;
        double rho = (lag / (T - 1) - mean * mean) / var;
        double want_sd = 0.01 / sqrt(th * (2.0 - th));
        ck_assert_msg(fabs(rho - (1.0 - th)) < 0.02, "theta %g: lag-1 autocorrelation %.4f", th,
                      rho);
        ck_assert_msg(fabs(sqrt(var) / want_sd - 1.0) < 0.05, "theta %g: sd %.5g, want %.5g", th,
                      sqrt(var), want_sd);
    }
}
END_TEST

Suite *explore_suite(void) {
    Suite *s = suite_create("explore");
    TCase *tc = tcase_create("schedule");
    tcase_add_test(tc, test_epsilon_closed_form);
    tcase_add_test(tc, test_epsilon_single_env_is_base);
    tcase_add_test(tc, test_epsilons_use_global_index);
    tcase_add_test_raise_signal(tc, test_epsilon_index_out_of_range_aborts, SIGABRT);
    suite_add_tcase(s, tc);
    tc = tcase_create("select");
    tcase_set_timeout(tc, 60); // 300k ck_asserts take seconds on a loaded machine
    tcase_add_test(tc, test_argmax_ties_and_nan);
    tcase_add_test(tc, test_select_greedy_and_random);
    tcase_add_test(tc, test_select_reproducible);
    tcase_add_test(tc, test_gaussian_noise);
    tcase_add_test(tc, test_ou_noise);
    suite_add_tcase(s, tc);
    return s;
}
