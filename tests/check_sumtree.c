// check_sumtree.c: the 16-ary sum/min tree against brute force (STYLE S22): totals and minima
// after random batched sets, prefix search, stratification, sampling frequencies (chi-square),
// no drift after millions of updates, and the out-of-range assert.
#include "check_apex.h"

#include "apex.h"
#include "rng.h"
#include "sumtree.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>

// Capacities that exercise 0, 1, 2 and 3 levels above the leaves, full and partial nodes.
static const uint32_t s_caps[] = {1, 3, 16, 17, 256, 257, 1000, 4097, 65543};

// ---------------------------------------------------------------------------------------
// Brute-force references (double)
// ---------------------------------------------------------------------------------------

static double s_ref_total(const float *v, uint32_t n) {
    double t = 0;
    for (uint32_t i = 0; i < n; i++) {
        t += v[i];
    }
    return t;
}

static float s_ref_min(const float *v, uint32_t n) {
    float m = INFINITY;
    for (uint32_t i = 0; i < n; i++) {
        if (v[i] > 0 && v[i] < m) {
            m = v[i];
        }
    }
    return m;
}

// prefix[i] = sum of v[0..i), prefix[n] = total.
static void s_ref_prefix(const float *v, uint32_t n, double *prefix) {
    prefix[0] = 0;
    for (uint32_t i = 0; i < n; i++) {
        prefix[i + 1] = prefix[i] + v[i];
    }
}

// Upper 99.99th percentile of chi-square with k degrees of freedom (Wilson-Hilferty; the
// normal quantile z(0.9999) = 3.719). Strict enough to catch any real bias at 1e5+ draws,
// and a correct sampler fails it about once in 10^4 seeds (the seeds here are fixed).
static double s_chi2_bound(double k) {
    double a = 2.0 / (9.0 * k);
    double c = 1.0 - a + 3.719 * sqrt(a);
    return k * c * c * c;
}

// A random value for leaf i: 0 (empty) with probability `empty`, else log-uniform over
// [lo, hi] so that sums mix very different magnitudes.
static float s_rand_value(rng_t *r, double empty, double lo, double hi) {
    if (rng_uniform(r) < empty) {
        return 0.0f;
    }
    return (float)(lo * pow(hi / lo, rng_uniform(r)));
}

// ---------------------------------------------------------------------------------------
// Totals and minima
// ---------------------------------------------------------------------------------------

START_TEST(test_empty_tree) {
    for (size_t c = 0; c < APEX_ARRAY_LEN(s_caps); c++) {
        sumtree_t t;
        sumtree_init(&t, s_caps[c]);
        ck_assert_float_eq(sumtree_total(&t), 0.0f);
        ck_assert(isinf(sumtree_min(&t)));
        ck_assert_uint_ge(sumtree_bytes(s_caps[c]), s_caps[c] * sizeof(float));
        sumtree_fini(&t);
        sumtree_fini(&t); // idempotent on a finished tree
    }
}
END_TEST

START_TEST(test_total_min_vs_brute_force) {
    rng_t r;
    rng_init_stream(&r, 11, RNG_ROLE_TEST, 0);
    uint32_t idx[700];
    float val[700];
    for (size_t c = 0; c < APEX_ARRAY_LEN(s_caps); c++) {
        uint32_t cap = s_caps[c];
        sumtree_t t;
        sumtree_init(&t, cap);
        float *ref = calloc(cap, sizeof(float));
        for (int round = 0; round < 40; round++) {
            // Batches include duplicates (last wins) and empties (value 0).
            uint32_t n = 1 + rng_below(&r, 700);
            for (uint32_t j = 0; j < n; j++) {
                idx[j] = rng_below(&r, cap);
                val[j] = s_rand_value(&r, 0.2, 1e-4, 1e3);
                ref[idx[j]] = val[j];
            }
            sumtree_set(&t, n, idx, val);
            double want = s_ref_total(ref, cap);
            ck_assert_msg(fabs(sumtree_total(&t) - want) <= 1e-5 * want,
                          "cap %u round %d: total %.9g want %.9g", cap, round, sumtree_total(&t),
                          want);
            ck_assert_float_eq(sumtree_min(&t), s_ref_min(ref, cap)); // min is exact
            for (uint32_t i = 0; i < cap; i += 1 + cap / 64) {
                ck_assert_float_eq(sumtree_get(&t, i), ref[i]);
            }
        }
        free(ref);
        sumtree_fini(&t);
    }
}
END_TEST

START_TEST(test_min_tracks_empties_and_overwrites) {
    sumtree_t t;
    sumtree_init(&t, 1000);
    uint32_t idx[3] = {5, 700, 999};
    float val[3] = {0.5f, 0.25f, 2.0f};
    sumtree_set(&t, 3, idx, val);
    ck_assert_float_eq(sumtree_min(&t), 0.25f);
    // Overwrite the minimum with a larger value: the min moves to the next smallest.
    uint32_t i700 = 700;
    float big = 4.0f;
    sumtree_set(&t, 1, &i700, &big);
    ck_assert_float_eq(sumtree_min(&t), 0.5f);
    // Empty a leaf: an empty slot never counts as the minimum.
    uint32_t i5 = 5;
    float zero = 0.0f;
    sumtree_set(&t, 1, &i5, &zero);
    ck_assert_float_eq(sumtree_min(&t), 2.0f);
    ck_assert_float_eq_tol(sumtree_total(&t), 6.0f, 1e-6f);
    sumtree_clear(&t);
    ck_assert(isinf(sumtree_min(&t)));
    ck_assert_float_eq(sumtree_total(&t), 0.0f);
    sumtree_fini(&t);
}
END_TEST

START_TEST(test_no_drift_after_many_updates) {
    // Two million random updates, then the tree must be bit-identical at the root to one
    // built from scratch with the same leaves: every node is a function of the leaves only.
    const uint32_t cap = 4101;
    rng_t r;
    rng_init_stream(&r, 12, RNG_ROLE_TEST, 0);
    sumtree_t t, fresh;
    sumtree_init(&t, cap);
    sumtree_init(&fresh, cap);
    uint32_t idx[512];
    float val[512];
    for (int round = 0; round < 4000; round++) {
        for (uint32_t j = 0; j < 512; j++) {
            idx[j] = rng_below(&r, cap);
            val[j] = s_rand_value(&r, 0.05, 1e-4, 1e4);
        }
        sumtree_set(&t, 512, idx, val);
    }
    float *leaves = malloc(cap * sizeof(float));
    uint32_t *all = malloc(cap * sizeof(uint32_t));
    for (uint32_t i = 0; i < cap; i++) {
        leaves[i] = sumtree_get(&t, i);
        all[i] = i;
    }
    sumtree_set(&fresh, cap, all, leaves);
    ck_assert_float_eq(sumtree_total(&t), sumtree_total(&fresh));
    double want = s_ref_total(leaves, cap);
    ck_assert_msg(fabs(sumtree_total(&t) - want) <= 1e-5 * want, "total %.9g want %.9g",
                  sumtree_total(&t), want);
    free(leaves);
    free(all);
    sumtree_fini(&t);
    sumtree_fini(&fresh);
}
END_TEST

// ---------------------------------------------------------------------------------------
// Search and sampling
// ---------------------------------------------------------------------------------------

// Fills a tree of cap leaves with random values (some empty), returning the values.
static float *s_fill_random(sumtree_t *t, uint32_t cap, rng_t *r, double empty) {
    float *v = malloc(cap * sizeof(float));
    uint32_t *idx = malloc(cap * sizeof(uint32_t));
    for (uint32_t i = 0; i < cap; i++) {
        idx[i] = i;
        v[i] = s_rand_value(r, empty, 0.2, 5.0);
    }
    v[cap / 2] = 1.0f; // at least one non-empty leaf
    sumtree_set(t, cap, idx, v);
    free(idx);
    return v;
}

// Checks find's answers out[0..n) for mass[0..n) against the brute-force prefix sums of v
// (cap leaves): in range, non-empty, and covering the clamped mass within tol.
static void s_check_found(const float *v, const double *prefix, uint32_t cap, double tol,
                          const float *mass, const uint32_t *out, uint32_t n) {
    double total = prefix[cap];
    for (uint32_t j = 0; j < n; j++) {
        uint32_t i = out[j];
        ck_assert_uint_lt(i, cap);
        ck_assert_msg(v[i] > 0, "cap %u mass %.9g: empty leaf %u chosen", cap, mass[j], i);
        double u = fmin(fmax(mass[j], 0.0), total);
        ck_assert_msg(prefix[i] - tol <= u && u <= prefix[i + 1] + tol,
                      "cap %u: mass %.9g gave leaf %u covering [%.9g, %.9g)", cap, u, i, prefix[i],
                      prefix[i + 1]);
    }
}

START_TEST(test_find_matches_prefix_sums) {
    rng_t r;
    rng_init_stream(&r, 13, RNG_ROLE_TEST, 0);
    for (size_t c = 0; c < APEX_ARRAY_LEN(s_caps); c++) {
        uint32_t cap = s_caps[c];
        sumtree_t t;
        sumtree_init(&t, cap);
        float *v = s_fill_random(&t, cap, &r, 0.3);
        double *prefix = malloc((cap + 1) * sizeof(double));
        s_ref_prefix(v, cap, prefix);
        double total = prefix[cap], tol = 1e-5 * total;
        enum { N = 2000 };
        float mass[N];
        uint32_t out[N];
        for (uint32_t j = 0; j < N; j++) {
            mass[j] = (float)(rng_uniform(&r) * total);
        }
        mass[0] = 0.0f;
        mass[1] = sumtree_total(&t); // the top edge, and beyond it: clamped to the end
        mass[2] = 1e30f;
        mass[3] = -1.0f; // below 0: clamped to the start
        sumtree_find(&t, N, mass, out);
        s_check_found(v, prefix, cap, tol, mass, out, N);
        free(prefix);
        free(v);
        sumtree_fini(&t);
    }
}
END_TEST

START_TEST(test_single_leaf_at_either_end) {
    // Only the first or only the last leaf is non-empty: every mass must find it.
    uint32_t ends[2] = {0, 4096};
    for (int e = 0; e < 2; e++) {
        sumtree_t t;
        sumtree_init(&t, 4097);
        float one = 3.0f;
        sumtree_set(&t, 1, &ends[e], &one);
        float mass[5] = {0.0f, 1.5f, 2.9999f, 3.0f, 1e9f};
        uint32_t out[5];
        sumtree_find(&t, 5, mass, out);
        for (int j = 0; j < 5; j++) {
            ck_assert_uint_eq(out[j], ends[e]);
        }
        sumtree_fini(&t);
    }
}
END_TEST

START_TEST(test_find_at_subtree_edges) {
    // Whole subtrees empty (runs of 256 and 4096 zero leaves) between occupied ones, with
    // values of very different magnitudes, and masses exactly at and one float ulp either
    // side of every occupied run's edges: where rounding in the upper levels' prefix sums
    // can put a search past the end of a node, it must still land on a non-empty leaf
    // next to the edge, at every level (4 levels above the leaves at 70 000).
    const uint32_t cap = 70000;
    sumtree_t t;
    sumtree_init(&t, cap);
    float *v = calloc(cap, sizeof(float));
    uint32_t *idx = malloc(cap * sizeof(uint32_t));
    rng_t r;
    rng_init_stream(&r, 19, RNG_ROLE_TEST, 0);
    for (uint32_t i = 0; i < cap; i++) {
        idx[i] = i;
        uint32_t run = i / 256 % 16 < 8 ? i / 256 : i / 4096; // mixed run lengths
        if (run % 3 == 1) {
            v[i] = (float)(1e-3 * pow(1e6, rng_uniform(&r)));
        }
    }
    sumtree_set(&t, cap, idx, v);
    double *prefix = malloc((cap + 1) * sizeof(double));
    s_ref_prefix(v, cap, prefix);
    double total = prefix[cap], tol = 1e-5 * total;
    enum { MAX_MASS = 6 * 300 };
    float mass[MAX_MASS];
    uint32_t out[MAX_MASS], n = 0;
    for (uint32_t i = 1; i < cap && n + 6 <= MAX_MASS; i++) {
        if ((v[i] > 0) != (v[i - 1] > 0)) { // an edge between an empty and an occupied run
            float e = (float)prefix[i];
            float around[3] = {nextafterf(e, 0.0f), e, nextafterf(e, INFINITY)};
            for (int k = 0; k < 3; k++) {
                mass[n++] = around[k];
                mass[n++] = around[k] * (1.0f + 1e-6f);
            }
        }
    }
    ck_assert_uint_gt(n, 100);
    sumtree_find(&t, n, mass, out);
    s_check_found(v, prefix, cap, tol, mass, out, n);
    free(prefix);
    free(idx);
    free(v);
    sumtree_fini(&t);
}
END_TEST

// The stored prefix lines above the leaves (see sumtree.h) against their raw sums: each
// is non-decreasing, rises exactly where its child is non-empty (the search relies on it
// to never enter an empty subtree), and ends on the parent's sum (or the total at the root).
static void s_check_prefix_lines(const sumtree_t *t) {
    for (uint32_t l = 1; l <= t->levels; l++) {
        uint32_t lines = (t->entries[l] + SUMTREE_FANOUT - 1) / SUMTREE_FANOUT;
        for (uint32_t g = 0; g < lines; g++) {
            const float *pre = t->pre[l] + (size_t)g * SUMTREE_FANOUT;
            const float *raw = t->sum[l] + (size_t)g * SUMTREE_FANOUT;
            for (uint32_t k = 0; k < SUMTREE_FANOUT; k++) {
                float below = k ? pre[k - 1] : 0.0f;
                ck_assert_msg(pre[k] >= below, "level %u line %u: prefix falls at %u", l, g, k);
                ck_assert_msg((pre[k] > below) == (raw[k] > 0.0f) || raw[k] < 1e-6f * pre[k],
                              "level %u line %u child %u: sum %g but prefix %.9g -> %.9g", l, g, k,
                              raw[k], below, pre[k]);
            }
            float parent = l < t->levels ? t->sum[l + 1][g] : sumtree_total(t);
            ck_assert_float_eq(pre[SUMTREE_FANOUT - 1], parent);
        }
    }
}

START_TEST(test_no_empty_subtree_is_entered) {
    // Sibling subtrees of which the first three of a quad are occupied and the fourth is
    // empty, as while the ring fills (capacity 50 000, 3 x 4096 slots written), and full
    // rings whose last node is partial (100 000 and 20 000, the shipped configs' sizes).
    // find(total), find at every subtree edge and many stratified batches must all land
    // on occupied leaves inside the capacity.
    rng_t r;
    rng_init_stream(&r, 20, RNG_ROLE_TEST, 0);
    const struct {
        uint32_t cap, filled;
        int fills;
    } cases[] = {{50000, 3 * 4096, 40}, {100000, 100000, 20}, {20000, 20000, 40}};
    for (size_t c = 0; c < APEX_ARRAY_LEN(cases); c++) {
        uint32_t cap = cases[c].cap, filled = cases[c].filled;
        sumtree_t t;
        sumtree_init(&t, cap);
        uint32_t *idx = malloc(filled * sizeof(uint32_t));
        float *v = malloc(filled * sizeof(float));
        uint32_t out[512];
        for (int f = 0; f < cases[c].fills; f++) {
            for (uint32_t i = 0; i < filled; i++) {
                idx[i] = i;
                v[i] = s_rand_value(&r, 0.0, 1e-3, 10.0);
            }
            sumtree_set(&t, filled, idx, v);
            s_check_prefix_lines(&t);
            float mass[3] = {sumtree_total(&t), nextafterf(sumtree_total(&t), 0.0f), 1e30f};
            sumtree_find(&t, 3, mass, out);
            for (int j = 0; j < 3; j++) {
                ck_assert_msg(out[j] < filled, "cap %u fill %d: mass %.9g gave leaf %u", cap, f,
                              mass[j], out[j]);
            }
            for (int b = 0; b < 20; b++) {
                sumtree_sample(&t, &r, 512, out);
                for (uint32_t j = 0; j < 512; j++) {
                    ck_assert_msg(out[j] < filled, "cap %u fill %d: sampled leaf %u", cap, f,
                                  out[j]);
                }
            }
        }
        free(idx);
        free(v);
        sumtree_fini(&t);
    }
}
END_TEST

START_TEST(test_stratified_one_per_stratum) {
    rng_t r;
    rng_init_stream(&r, 14, RNG_ROLE_TEST, 0);
    const uint32_t ns[] = {1, 7, 64, 512, 1500};
    for (size_t c = 0; c < APEX_ARRAY_LEN(s_caps); c++) {
        uint32_t cap = s_caps[c];
        sumtree_t t;
        sumtree_init(&t, cap);
        float *v = s_fill_random(&t, cap, &r, 0.3);
        double *prefix = malloc((cap + 1) * sizeof(double));
        s_ref_prefix(v, cap, prefix);
        double total = sumtree_total(&t), tol = 1e-5 * total;
        for (size_t k = 0; k < APEX_ARRAY_LEN(ns); k++) {
            uint32_t n = ns[k];
            uint32_t *out = malloc(n * sizeof(uint32_t));
            sumtree_sample(&t, &r, n, out);
            // Sample j's leaf must overlap stratum j = [j, j+1) * total / n.
            for (uint32_t j = 0; j < n; j++) {
                double lo = j * total / n, hi = (j + 1) * total / n;
                uint32_t i = out[j];
                ck_assert_msg(v[i] > 0 && prefix[i] <= hi + tol && prefix[i + 1] >= lo - tol,
                              "cap %u n %u: sample %u leaf %u [%.9g, %.9g) misses [%.9g, %.9g)",
                              cap, n, j, i, prefix[i], prefix[i + 1], lo, hi);
            }
            free(out);
        }
        free(prefix);
        free(v);
        sumtree_fini(&t);
    }
}
END_TEST

START_TEST(test_strata_chunks_match_whole_batch) {
    // Sampling strata in chunks with the same rng stream draws the very same leaves.
    rng_t r, a, b;
    rng_init_stream(&r, 15, RNG_ROLE_TEST, 0);
    sumtree_t t;
    sumtree_init(&t, 1000);
    float *v = s_fill_random(&t, 1000, &r, 0.1);
    uint32_t whole[1300], parts[1300];
    rng_init(&a, 99);
    rng_init(&b, 99);
    sumtree_sample(&t, &a, 1300, whole);
    sumtree_sample_strata(&t, &b, 0, 600, 1300, parts);
    sumtree_sample_strata(&t, &b, 600, 700, 1300, parts + 600);
    for (uint32_t j = 0; j < 1300; j++) {
        ck_assert_uint_eq(whole[j], parts[j]);
    }
    free(v);
    sumtree_fini(&t);
}
END_TEST

// Draws `batches` stratified batches of n and checks the leaf frequencies against
// v_i / sum(v) with a chi-square test; empty leaves must never be drawn.
// Stratification makes the counts less variable than multinomial ones, so the chi-square
// bound is conservative for a correct sampler, while any bias in the descent (a wrong
// subtraction, an off-by-one child) blows it up by orders of magnitude.
static void s_check_frequencies(uint32_t cap, double empty, uint32_t n, uint32_t batches,
                                uint64_t seed) {
    rng_t r;
    rng_init_stream(&r, seed, RNG_ROLE_TEST, cap);
    sumtree_t t;
    sumtree_init(&t, cap);
    float *v = s_fill_random(&t, cap, &r, empty);
    uint64_t *count = calloc(cap, sizeof(uint64_t));
    uint32_t *out = malloc(n * sizeof(uint32_t));
    for (uint32_t b = 0; b < batches; b++) {
        sumtree_sample(&t, &r, n, out);
        for (uint32_t j = 0; j < n; j++) {
            count[out[j]]++;
        }
    }
    double total = s_ref_total(v, cap), draws = (double)n * batches, chi2 = 0;
    uint32_t bins = 0;
    for (uint32_t i = 0; i < cap; i++) {
        if (v[i] == 0) {
            ck_assert_msg(count[i] == 0, "empty leaf %u drawn %llu times", i,
                          (unsigned long long)count[i]);
            continue;
        }
        double e = draws * v[i] / total;
        chi2 += (count[i] - e) * (count[i] - e) / e;
        bins++;
    }
    double bound = s_chi2_bound(bins - 1);
    ck_assert_msg(chi2 < bound, "cap %u: chi2 %.1f over %u bins exceeds %.1f", cap, chi2, bins,
                  bound);
    free(out);
    free(count);
    free(v);
    sumtree_fini(&t);
}

START_TEST(test_sampling_frequencies_chi_square) {
    s_check_frequencies(300, 0.2, 512, 200, 16);   // 102 400 draws, 1 level
    s_check_frequencies(5000, 0.1, 512, 2000, 17); // 1 024 000 draws, 3 levels
    s_check_frequencies(7, 0.0, 3, 40000, 18);     // n not dividing anything, no levels
}
END_TEST

START_TEST(test_set_out_of_range_asserts) {
    sumtree_t t;
    sumtree_init(&t, 100);
    uint32_t bad = 100;
    float one = 1.0f;
    sumtree_set(&t, 1, &bad, &one); // programming error: aborts
}
END_TEST

START_TEST(test_negative_value_asserts) {
    sumtree_t t;
    sumtree_init(&t, 100);
    uint32_t i = 3;
    float neg = -1.0f;
    sumtree_set(&t, 1, &i, &neg);
}
END_TEST

START_TEST(test_too_large_value_asserts) {
    // Two leaves of 3e38 would sum past FLT_MAX: the total would be +inf and sampling no
    // longer proportional. The largest accepted value keeps 2^30 leaves finite.
    sumtree_t t;
    sumtree_init(&t, 100);
    uint32_t i[2] = {3, 4};
    float ok[2] = {SUMTREE_VALUE_MAX, SUMTREE_VALUE_MAX};
    sumtree_set(&t, 2, i, ok);
    ck_assert(isfinite(sumtree_total(&t)));
    float big = 3e38f;
    sumtree_set(&t, 1, i, &big);
}
END_TEST

Suite *sumtree_suite(void) {
    Suite *s = suite_create("sumtree");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_empty_tree);
    tcase_add_test(tc, test_total_min_vs_brute_force);
    tcase_add_test(tc, test_min_tracks_empties_and_overwrites);
    tcase_add_test(tc, test_no_drift_after_many_updates);
    tcase_add_test(tc, test_find_matches_prefix_sums);
    tcase_add_test(tc, test_single_leaf_at_either_end);
    tcase_add_test(tc, test_find_at_subtree_edges);
    tcase_add_test(tc, test_no_empty_subtree_is_entered);
    tcase_add_test(tc, test_stratified_one_per_stratum);
    tcase_add_test(tc, test_strata_chunks_match_whole_batch);
    tcase_add_test(tc, test_sampling_frequencies_chi_square);
    tcase_add_test_raise_signal(tc, test_set_out_of_range_asserts, SIGABRT);
    tcase_add_test_raise_signal(tc, test_negative_value_asserts, SIGABRT);
    tcase_add_test_raise_signal(tc, test_too_large_value_asserts, SIGABRT);
    suite_add_tcase(s, tc);
    return s;
}
