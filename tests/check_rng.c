// check_rng.c: reproducible streams, distinct streams per role/index, ranges.
#include "check_apex.h"
#include <math.h>

#include "rng.h"

START_TEST(test_same_seed_same_stream) {
    rng_t a, b;
    rng_init_stream(&a, 42, RNG_ROLE_ACTOR, 3);
    rng_init_stream(&b, 42, RNG_ROLE_ACTOR, 3);
    for (int i = 0; i < 1000; i++) {
        ck_assert_uint_eq(rng_next_u64(&a), rng_next_u64(&b));
    }
}
END_TEST

START_TEST(test_distinct_streams) {
    // Different seed, role or index must give different first draws.
    rng_t r;
    uint64_t firsts[3 * 3 * 4];
    int k = 0;
    for (uint64_t seed = 0; seed < 3; seed++) {
        for (int role = 1; role <= 3; role++) {
            for (uint64_t idx = 0; idx < 4; idx++) {
                rng_init_stream(&r, seed, (rng_role)role, idx);
                firsts[k++] = rng_next_u64(&r);
            }
        }
    }
    for (int i = 0; i < k; i++) {
        for (int j = i + 1; j < k; j++) {
            ck_assert_uint_ne(firsts[i], firsts[j]);
        }
    }
}
END_TEST

START_TEST(test_known_xoshiro_output) {
    // xoshiro256** reference: state {1,2,3,4} gives 11520, 0, 1509978240, 1215971899390074240.
    rng_t r = {{1, 2, 3, 4}};
    ck_assert_uint_eq(rng_next_u64(&r), 11520ULL);
    ck_assert_uint_eq(rng_next_u64(&r), 0ULL);
    ck_assert_uint_eq(rng_next_u64(&r), 1509978240ULL);
    ck_assert_uint_eq(rng_next_u64(&r), 1215971899390074240ULL);
}
END_TEST

START_TEST(test_uniform_range_and_mean) {
    rng_t r;
    rng_init(&r, 7);
    double sum = 0;
    const int n = 200000;
    for (int i = 0; i < n; i++) {
        double u = rng_uniform(&r);
        float f = rng_uniform_f(&r);
        ck_assert(u >= 0.0 && u < 1.0);
        ck_assert(f >= 0.0f && f < 1.0f);
        sum += u;
    }
    // Mean of U(0,1) has sd 1/sqrt(12 n) ~ 0.00065; 6 sd bound.
    ck_assert(fabs(sum / n - 0.5) < 0.004);
}
END_TEST

START_TEST(test_below_unbiased) {
    rng_t r;
    rng_init(&r, 11);
    int counts[7] = {0};
    const int n = 70000;
    for (int i = 0; i < n; i++) {
        uint32_t v = rng_below(&r, 7);
        ck_assert_uint_lt(v, 7);
        counts[v]++;
    }
    // chi-square with 6 dof: 99.9th percentile is 22.46.
    double chi2 = 0;
    for (int i = 0; i < 7; i++) {
        double e = n / 7.0;
        chi2 += (counts[i] - e) * (counts[i] - e) / e;
    }
    ck_assert_msg(chi2 < 22.46, "chi2 = %f", chi2);
}
END_TEST

START_TEST(test_normal_moments) {
    rng_t r;
    rng_init(&r, 5);
    double s = 0, s2 = 0;
    const int n = 100000;
    for (int i = 0; i < n; i++) {
        double x = rng_normal(&r);
        s += x;
        s2 += x * x;
    }
    ck_assert(fabs(s / n) < 0.02);
    ck_assert(fabs(s2 / n - 1.0) < 0.03);
}
END_TEST

Suite *rng_suite(void) {
    Suite *s = suite_create("rng");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_same_seed_same_stream);
    tcase_add_test(tc, test_distinct_streams);
    tcase_add_test(tc, test_known_xoshiro_output);
    tcase_add_test(tc, test_uniform_range_and_mean);
    tcase_add_test(tc, test_below_unbiased);
    tcase_add_test(tc, test_normal_moments);
    suite_add_tcase(s, tc);
    return s;
}
