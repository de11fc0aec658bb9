// check_explore.c: Ape-X epsilon schedule against its closed form, argmax ties, and the
// epsilon-greedy selection frequencies.
#include "check_apex.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>

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
    suite_add_tcase(s, tc);
    return s;
}
