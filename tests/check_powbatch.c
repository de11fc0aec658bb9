// check_powbatch.c: the batched x^beta of the importance weights against double-precision
// pow (an independent reference): relative error < 1e-6 for normal positive x drawn over
// the whole range (65 536 per exponent beta, over every binary exponent, plus edge values), for
// the exponents prioritized replay uses (alpha for priorities, beta for weights) and
// beyond; exactly powf where the fast path steps aside (subnormal or overflowing results,
// x not a positive normal, beta > 10); results independent of the position in the batch;
// in-place semantics and tails of any length.
#include "check_apex.h"

#include "apex.h"
#include "powbatch.h"
#include "rng.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { GRID = 1 << 16 };

// x spread log-uniformly over [2^-126, 2^127] (every exponent, random mantissas), plus
// the end points and values next to 1, where log2 x is tiny and its relative error counts.
static void s_fill_x(float *x, uint32_t n, rng_t *r) {
    for (uint32_t i = 0; i < n; i++) {
        x[i] = (float)exp2(-126.0 + 253.0 * rng_uniform(r));
    }
    x[0] = 1.0f;
    x[1] = FLT_MIN;
    x[2] = nextafterf(1.0f, 0.0f);
    x[3] = 0.5f;
    x[4] = (float)M_SQRT1_2; // the mantissa reduction's edge
    x[5] = nextafterf((float)M_SQRT1_2, 1.0f);
    for (uint32_t i = 6; i < 64; i++) {
        x[i] = 1.0f - (float)i * 1e-7f;
    }
    for (uint32_t i = 64; i < 128; i++) {
        x[i] = 1.0f + (float)(i - 63) * 1.2e-7f;
    }
    x[128] = FLT_MAX;
    x[129] = 1e20f; // the largest raw priority the store keeps
    x[130] = 1e-8f; // and the smallest
}

START_TEST(test_relative_error_against_double_pow) {
    const float betas[] = {0.0f, 0.05f, 0.4f, 0.6f, 1.0f, 1.35f, 2.0f, 5.0f, 10.0f};
    rng_t r;
    rng_init_stream(&r, 21, RNG_ROLE_TEST, 0);
    float *x = malloc(GRID * sizeof(float)), *y = malloc(GRID * sizeof(float));
    for (size_t b = 0; b < APEX_ARRAY_LEN(betas); b++) {
        float beta = betas[b];
        s_fill_x(x, GRID, &r);
        memcpy(y, x, GRID * sizeof(float));
        pow_batch(y, GRID, beta);
        double worst = 0.0;
        uint32_t at = 0;
        for (uint32_t i = 0; i < GRID; i++) {
            double want = pow((double)x[i], (double)beta);
            if (x[i] <= 1.0f) {
                ck_assert_msg(y[i] <= 1.0f, "beta %g: %.9g^beta = %.9g > 1", beta, x[i], y[i]);
            }
            if (want < FLT_MIN || want > 0x1.7p127) { // the fast path steps aside: powf
                ck_assert_msg(y[i] == powf(x[i], beta), "beta %g x %.9g: %.9g, powf %.9g", beta,
                              x[i], y[i], powf(x[i], beta));
                continue;
            }
            double err = fabs(y[i] - want) / want;
            if (err > worst) {
                worst = err;
                at = i;
            }
        }
        ck_assert_msg(worst < 1e-6, "beta %g: relative error %.3g at x = %.9g (%.9g vs %.9g)", beta,
                      worst, x[at], y[at], pow(x[at], beta));
        ck_assert_float_eq(y[0], 1.0f); // 1^beta is exactly 1: the minimum's weight
    }
    free(x);
    free(y);
}
END_TEST

START_TEST(test_large_beta_is_powf) {
    // Above beta 10 the result is powf's, exactly.
    rng_t r;
    rng_init_stream(&r, 22, RNG_ROLE_TEST, 0);
    float x[1000], y[1000];
    s_fill_x(x, 1000, &r);
    for (int k = 0; k < 3; k++) {
        float beta = k == 0 ? 10.5f : k == 1 ? 100.0f : 1e6f;
        memcpy(y, x, sizeof x);
        pow_batch(y, 1000, beta);
        for (uint32_t i = 0; i < 1000; i++) {
            ck_assert_msg(y[i] == powf(x[i], beta), "beta %g x %.9g", beta, x[i]);
        }
    }
}
END_TEST

START_TEST(test_outside_the_domain_is_powf) {
    // Zero, subnormals, negatives, infinities and NaN: powf's answer, bit for bit (NaN
    // compared as NaN).
    float x[] = {0.0f,     -0.0f,     1e-40f, FLT_MIN / 2, -1.0f, -2.5f,
                 INFINITY, -INFINITY, NAN,    0.25f,       4.0f};
    const uint32_t n = APEX_ARRAY_LEN(x);
    for (int k = 0; k < 2; k++) {
        float beta = k ? 0.6f : 2.0f, y[APEX_ARRAY_LEN(x)];
        memcpy(y, x, sizeof x);
        pow_batch(y, n, beta);
        for (uint32_t i = 0; i < n; i++) {
            float want = powf(x[i], beta);
            ck_assert_msg(isnan(want) ? isnan(y[i]) : y[i] == want || i >= 9,
                          "beta %g x %g: %g, powf %g", beta, x[i], y[i], want);
        }
        ck_assert(fabs(y[9] - pow(0.25, beta)) <= 1e-6 * pow(0.25, beta));
        ck_assert(fabs(y[10] - pow(4.0, beta)) <= 1e-6 * pow(4.0, beta));
    }
}
END_TEST

START_TEST(test_result_independent_of_position) {
    // The same value gives the same bits whether it comes alone, in the tail or in the
    // vector body, next to values that do or do not take the powf path.
    rng_t r;
    rng_init_stream(&r, 23, RNG_ROLE_TEST, 0);
    for (int trial = 0; trial < 200; trial++) {
        float v = (float)exp2(-60.0 + 120.0 * rng_uniform(&r)), beta = 0.6f;
        float alone = v;
        pow_batch(&alone, 1, beta);
        uint32_t n = 1 + (uint32_t)rng_below(&r, 11);
        float y[11];
        for (uint32_t i = 0; i < n; i++) {
            y[i] = i % 3 == 2 ? 0.0f : v; // zeros take powf, in the same 4-lane group
        }
        pow_batch(y, n, beta);
        for (uint32_t i = 0; i < n; i++) {
            if (i % 3 != 2) {
                ck_assert_msg(y[i] == alone, "n %u i %u: %.9g vs %.9g", n, i, y[i], alone);
            }
        }
    }
}
END_TEST

START_TEST(test_every_length_and_no_overrun) {
    // Lengths 0..13 (vector body and scalar tail in every proportion); the element after
    // the last must be left alone.
    for (uint32_t n = 0; n < 14; n++) {
        float x[16], y[16];
        for (uint32_t i = 0; i < 16; i++) {
            x[i] = y[i] = 1.0f / (float)(i + 2);
        }
        pow_batch(y, n, 0.5f);
        for (uint32_t i = 0; i < n; i++) {
            ck_assert_msg(fabs(y[i] - sqrt(x[i])) <= 1e-6 * sqrt(x[i]), "n %u i %u", n, i);
        }
        for (uint32_t i = n; i < 16; i++) {
            ck_assert_float_eq(y[i], x[i]);
        }
    }
}
END_TEST

Suite *powbatch_suite(void) {
    Suite *s = suite_create("powbatch");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_relative_error_against_double_pow);
    tcase_add_test(tc, test_large_beta_is_powf);
    tcase_add_test(tc, test_outside_the_domain_is_powf);
    tcase_add_test(tc, test_result_independent_of_position);
    tcase_add_test(tc, test_every_length_and_no_overrun);
    suite_add_tcase(s, tc);
    return s;
}
