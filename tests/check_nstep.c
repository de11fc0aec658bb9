// check_nstep.c: n-step folding against hand-computed returns and discounts, and against a
// brute-force reference on random episodes.
#include "check_apex.h"

#include <math.h>
#include <signal.h>
#include <string.h>

#include "nstep.h"
#include "rng.h"

// Observations are (t, 100 e): the step index and env, so every emitted row says where it
// came from. obs_dim = 2 throughout.
enum { OD = 2, OB = OD * sizeof(float) }; // elements, bytes

static void s_obs(float *o, int t, int e) {
    o[0] = (float)t;
    o[1] = (float)(100 * e);
}

// Pushes step t of env e with reward r; obs is s_t = (t, 100e), next_obs s_{t+1}.
static int s_push(nstep_t *ns, int e, int t, float r, int term, int trunc, nstep_out_t *out) {
    float o[OD], no[OD];
    s_obs(o, t, e);
    s_obs(no, t + 1, e);
    int32_t a = (int32_t)(10 * e + t);
    return nstep_push(ns, e, o, &a, r, no, term, trunc, out);
}

// Checks out row i: from step t of env e, n-step return R, discount d, next step tn.
static void s_expect(const nstep_out_t *out, int i, int e, int t, double R, double d, int tn) {
    ck_assert_int_lt(i, out->count);
    ck_assert_msg(((const float *)out->obs)[i * OD] == (float)t &&
                      ((const float *)out->obs)[i * OD + 1] == (float)(100 * e),
                  "row %d: obs (%g, %g), want step %d env %d", i, ((const float *)out->obs)[i * OD],
                  ((const float *)out->obs)[i * OD + 1], t, e);
    ck_assert_int_eq(((const int32_t *)(const void *)out->actions)[i], 10 * e + t);
    ck_assert_msg(fabs(out->rewards[i] - R) <= 1e-5 * fabs(R) + 1e-6, "row %d: R %.9g want %.9g", i,
                  out->rewards[i], R);
    ck_assert_msg(fabs(out->discounts[i] - d) <= 1e-6, "row %d: discount %.9g want %.9g", i,
                  out->discounts[i], d);
    ck_assert_msg(((const float *)out->next_obs)[i * OD] == (float)tn,
                  "row %d: next step %g want %d", i, ((const float *)out->next_obs)[i * OD], tn);
}

// ---------------------------------------------------------------------------------------
// Hand-computed cases, gamma = 0.99, rewards r_t = t + 1.

START_TEST(test_n3_mid_episode) {
    nstep_t ns;
    nstep_out_t out;
    nstep_init(&ns, 1, OB, 3, 0.99);
    nstep_out_init(&out, 16, OB);
    ck_assert_int_eq(s_push(&ns, 0, 0, 1, 0, 0, &out), 0);
    ck_assert_int_eq(s_push(&ns, 0, 1, 2, 0, 0, &out), 0);
    ck_assert_int_eq(s_push(&ns, 0, 2, 3, 0, 0, &out), 1);
    ck_assert_int_eq(s_push(&ns, 0, 3, 4, 0, 0, &out), 1);
    ck_assert_int_eq(s_push(&ns, 0, 4, 5, 0, 0, &out), 1);
    // 1 + .99*2 + .9801*3 = 5.9203; 2 + .99*3 + .9801*4 = 8.8904; 3 + .99*4 + .9801*5 = 11.8605
    s_expect(&out, 0, 0, 0, 5.9203, 0.970299, 3);
    s_expect(&out, 1, 0, 1, 8.8904, 0.970299, 4);
    s_expect(&out, 2, 0, 2, 11.8605, 0.970299, 5);
    ck_assert_int_eq(out.count, 3);
    nstep_out_fini(&out);
    nstep_fini(&ns);
}
END_TEST

START_TEST(test_n3_terminal_within_window) {
    nstep_t ns;
    nstep_out_t out;
    nstep_init(&ns, 1, OB, 3, 0.99);
    nstep_out_init(&out, 16, OB);
    s_push(&ns, 0, 0, 1, 0, 0, &out);
    s_push(&ns, 0, 1, 2, 0, 0, &out);
    s_push(&ns, 0, 2, 3, 0, 0, &out);
    // Step 3 terminates: flush s1 (m=3), s2 (m=2), s3 (m=1), all with discount 0.
    ck_assert_int_eq(s_push(&ns, 0, 3, 4, 1, 0, &out), 3);
    s_expect(&out, 0, 0, 0, 5.9203, 0.970299, 3);
    s_expect(&out, 1, 0, 1, 8.8904, 0.0, 4); // 2 + .99*3 + .9801*4
    s_expect(&out, 2, 0, 2, 6.96, 0.0, 4);   // 3 + .99*4
    s_expect(&out, 3, 0, 3, 4.0, 0.0, 4);
    ck_assert_int_eq(ns.count[0], 0);
    nstep_out_fini(&out);
    nstep_fini(&ns);
}
END_TEST

// Tags (frame mode's frame numbers) travel with their steps: a row's obs tag is its first
// step's, its next tag the one given with the step that completed it, through mid-episode
// emission and an end-of-episode flush.
START_TEST(test_tags_follow_their_steps) {
    nstep_t ns;
    nstep_out_t out;
    nstep_init(&ns, 2, OB, 3, 0.99);
    nstep_out_init(&out, 16, OB);
    float o[OB] = {0};
    int32_t a = 0;
    for (uint64_t t = 0; t < 4; t++) { // env 1: tags 100 + t, interleaved with env 0's
        nstep_push_tag(&ns, 0, o, 10 + t, &a, 1.0f, o, 11 + t, 0, 0, &out);
        nstep_push_tag(&ns, 1, o, 100 + t, &a, 1.0f, o, 101 + t, t == 3, 0, &out);
    }
    // env 0: row of t = 0 at t = 2 (tags 10 -> 13), t = 1 at t = 3 (11 -> 14); env 1: t = 0
    // at t = 2 (100 -> 103), then the flush at t = 3 of t = 1, 2, 3, all ending at 104.
    uint64_t want_obs[] = {10, 100, 11, 101, 102, 103}, want_next[] = {13, 103, 14, 104, 104, 104};
    ck_assert_int_eq(out.count, 6);
    for (int i = 0; i < 6; i++) {
        ck_assert_uint_eq(out.obs_tag[i], want_obs[i]);
        ck_assert_uint_eq(out.next_tag[i], want_next[i]);
    }
    nstep_out_fini(&out);
    nstep_fini(&ns);
}
END_TEST

START_TEST(test_n3_truncation_bootstraps) {
    nstep_t ns;
    nstep_out_t out;
    nstep_init(&ns, 1, OB, 3, 0.99);
    nstep_out_init(&out, 16, OB);
    s_push(&ns, 0, 0, 1, 0, 0, &out);
    s_push(&ns, 0, 1, 2, 0, 0, &out);
    s_push(&ns, 0, 2, 3, 0, 0, &out);
    ck_assert_int_eq(s_push(&ns, 0, 3, 4, 0, 1, &out), 3);
    // Same returns as the terminal case, but each bootstraps from the final obs (step 4).
    s_expect(&out, 1, 0, 1, 8.8904, 0.970299, 4);
    s_expect(&out, 2, 0, 2, 6.96, 0.9801, 4);
    s_expect(&out, 3, 0, 3, 4.0, 0.99, 4);
    nstep_out_fini(&out);
    nstep_fini(&ns);
}
END_TEST

START_TEST(test_terminated_wins_over_truncated) {
    nstep_t ns;
    nstep_out_t out;
    nstep_init(&ns, 1, OB, 3, 0.99);
    nstep_out_init(&out, 16, OB);
    s_push(&ns, 0, 0, 1, 0, 0, &out);
    ck_assert_int_eq(s_push(&ns, 0, 1, 2, 1, 1, &out), 2);
    s_expect(&out, 0, 0, 0, 2.98, 0.0, 2);
    s_expect(&out, 1, 0, 1, 2.0, 0.0, 2);
    nstep_out_fini(&out);
    nstep_fini(&ns);
}
END_TEST

START_TEST(test_n_longer_than_episode) {
    // n = 5, episodes of 2 steps: nothing is emitted until the end, then both steps.
    nstep_t ns;
    nstep_out_t out;
    nstep_init(&ns, 1, OB, 5, 0.99);
    nstep_out_init(&out, 16, OB);
    ck_assert_int_eq(s_push(&ns, 0, 0, 1, 0, 0, &out), 0);
    ck_assert_int_eq(s_push(&ns, 0, 1, 2, 1, 0, &out), 2);
    s_expect(&out, 0, 0, 0, 2.98, 0.0, 2); // 1 + .99*2
    s_expect(&out, 1, 0, 1, 2.0, 0.0, 2);
    // Next episode, truncated after 2 steps: discounts gamma^2, gamma.
    ck_assert_int_eq(s_push(&ns, 0, 10, 1, 0, 0, &out), 0);
    ck_assert_int_eq(s_push(&ns, 0, 11, 2, 0, 1, &out), 2);
    s_expect(&out, 2, 0, 10, 2.98, 0.9801, 12);
    s_expect(&out, 3, 0, 11, 2.0, 0.99, 12);
    nstep_out_fini(&out);
    nstep_fini(&ns);
}
END_TEST

START_TEST(test_n1_is_one_step) {
    nstep_t ns;
    nstep_out_t out;
    nstep_init(&ns, 1, OB, 1, 0.99);
    nstep_out_init(&out, 16, OB);
    ck_assert_int_eq(s_push(&ns, 0, 0, 1, 0, 0, &out), 1);
    ck_assert_int_eq(s_push(&ns, 0, 1, 2, 0, 0, &out), 1);
    ck_assert_int_eq(s_push(&ns, 0, 2, 3, 1, 0, &out), 1);
    ck_assert_int_eq(s_push(&ns, 0, 3, 4, 0, 1, &out), 1);
    s_expect(&out, 0, 0, 0, 1.0, 0.99, 1);
    s_expect(&out, 1, 0, 1, 2.0, 0.99, 2);
    s_expect(&out, 2, 0, 2, 3.0, 0.0, 3);
    s_expect(&out, 3, 0, 3, 4.0, 0.99, 4);
    nstep_out_fini(&out);
    nstep_fini(&ns);
}
END_TEST

START_TEST(test_envs_interleaved) {
    // Three envs pushed together; env 1 terminates at step 1 and restarts, env 2 truncates
    // at step 2. Rows come out in env order, each env's flush oldest first. Run 0 passes
    // every step's own observation in next; run 1 passes vecenv's layout: an ended env's
    // row of next holds a reset observation (step -1) and its final one is in final.
    const int split = _i;
    nstep_t ns;
    nstep_out_t out;
    nstep_init(&ns, 3, OB, 3, 0.99);
    nstep_out_init(&out, nstep_max_emit(&ns), OB);
    float obs[3 * OD], next[3 * OD], final[3 * OD], rew[3];
    int32_t act[3];
    uint8_t term[3], trunc[3];
    const int T = 4;
    int total = 0;
    for (int t = 0; t < T; t++) {
        for (int e = 0; e < 3; e++) {
            s_obs(obs + e * OD, t, e);
            s_obs(next + e * OD, t + 1, e);
            act[e] = 10 * e + t;
            rew[e] = (float)(e + 1); // env e earns e + 1 per step
            term[e] = e == 1 && t == 1;
            trunc[e] = e == 2 && t == 2;
            s_obs(final + e * OD, split ? -2 : t + 1, e); // stale unless the episode ended
            if (split && (term[e] || trunc[e])) {
                s_obs(final + e * OD, t + 1, e);
                s_obs(next + e * OD, -1, e);
            }
        }
        out.count = 0;
        int k = nstep_push_all(&ns, obs, act, rew, next, split ? final : NULL, term, trunc, &out);
        ck_assert_int_eq(k, out.count);
        total += k;
        if (t == 1) { // env 1 terminal: (s0, 2 + .99*2, 0), (s1, 2, 0)
            ck_assert_int_eq(k, 2);
            s_expect(&out, 0, 1, 0, 3.98, 0.0, 2);
            s_expect(&out, 1, 1, 1, 2.0, 0.0, 2);
        } else if (t == 2) { // env 0 full window; env 2 truncated: 3 rows
            ck_assert_int_eq(k, 4);
            s_expect(&out, 0, 0, 0, 2.9701, 0.970299, 3); // 1 + .99 + .9801
            s_expect(&out, 1, 2, 0, 8.9103, 0.970299, 3); // 3 * 2.9701
            s_expect(&out, 2, 2, 1, 5.97, 0.9801, 3);
            s_expect(&out, 3, 2, 2, 3.0, 0.99, 3);
        } else if (t == 3) { // env 0 window from 1; env 1's new episode has 2 pending steps
            ck_assert_int_eq(k, 1);
            s_expect(&out, 0, 0, 1, 2.9701, 0.970299, 4);
        }
    }
    ck_assert_int_eq(total, 7);
    ck_assert_int_eq(ns.count[0], 2);
    ck_assert_int_eq(ns.count[1], 2);
    ck_assert_int_eq(ns.count[2], 1);
    nstep_out_fini(&out);
    nstep_fini(&ns);
}
END_TEST

// ---------------------------------------------------------------------------------------
// Brute force: random episodes, each emitted row checked against a direct computation.

START_TEST(test_random_episodes_match_brute_force) {
    enum { T = 2000 };
    static float rew[T];
    static uint8_t term[T], trunc[T];
    rng_t r;
    rng_init_stream(&r, 5, RNG_ROLE_TEST, 0);
    for (int t = 0; t < T; t++) {
        rew[t] = (float)(rng_uniform(&r) * 2 - 1);
        double u = rng_uniform(&r);
        term[t] = u < 0.05;
        trunc[t] = u >= 0.05 && u < 0.08;
    }
    for (int n = 1; n <= 5; n++) {
        const double g = 0.97;
        nstep_t ns;
        nstep_out_t out;
        nstep_init(&ns, 1, OB, n, g);
        nstep_out_init(&out, T + n, OB);
        for (int t = 0; t < T; t++) {
            s_push(&ns, 0, t, rew[t], term[t], trunc[t], &out);
        }
        // Every step before the last episode boundary is emitted exactly once, in order.
        int row = 0;
        for (int t = 0; t < T && row < out.count; t++, row++) {
            double R = 0, gk = 1;
            int m = 0, end = 0;
            while (m < n && t + m < T) {
                R += gk * rew[t + m];
                gk *= g;
                m++;
                if (term[t + m - 1] || trunc[t + m - 1]) {
                    end = term[t + m - 1] ? 2 : 1;
                    break;
                }
            }
            s_expect(&out, row, 0, t, R, end == 2 ? 0.0 : pow(g, m), t + m);
        }
        ck_assert_int_eq(row, out.count);
        ck_assert_int_ge(out.count, T - n);
        nstep_out_fini(&out);
        nstep_fini(&ns);
    }
}
END_TEST

// Continuous actions (2 floats each): every row carries its window's first action, bytes
// and all, next to the same n-step return a discrete action would get.
START_TEST(test_float_actions_first_of_window) {
    nstep_t ns;
    nstep_out_t out;
    const int D = 2, AB = D * (int)sizeof(float);
    nstep_init_actions(&ns, 1, OB, AB, 3, 0.5);
    nstep_out_init_actions(&out, 16, OB, AB);
    float o[OD], no[OD];
    for (int t = 0; t < 4; t++) {
        float a[2] = {0.25f * (float)t, -1.5f - (float)t};
        s_obs(o, t, 0);
        s_obs(no, t + 1, 0);
        nstep_push(&ns, 0, o, a, (float)(t + 1), no, t == 3, 0, &out);
    }
    // Steps 0..3 with rewards 1..4, gamma 0.5, terminal at step 3: (s0: 1 + 1 + 0.75,
    // 0.125), then the flush (s1: 2 + 1.5 + 1, 0), (s2: 3 + 2, 0), (s3: 4, 0).
    const double R[4] = {2.75, 4.5, 5.0, 4.0}, d[4] = {0.125, 0, 0, 0};
    ck_assert_int_eq(out.count, 4);
    for (int i = 0; i < 4; i++) {
        const float *a = (const float *)(const void *)(out.actions + (size_t)i * (size_t)AB);
        ck_assert_float_eq(a[0], 0.25f * (float)i);
        ck_assert_float_eq(a[1], -1.5f - (float)i);
        ck_assert_float_eq(((const float *)out.obs)[i * OD], (float)i);
        ck_assert_double_eq_tol(out.rewards[i], R[i], 1e-6);
        ck_assert_double_eq_tol(out.discounts[i], d[i], 1e-7);
    }
    nstep_out_fini(&out);
    nstep_fini(&ns);
}
END_TEST

START_TEST(test_out_too_small_aborts) {
    nstep_t ns;
    nstep_out_t out;
    nstep_init(&ns, 1, OB, 3, 0.99);
    nstep_out_init(&out, 2, OB); // fewer than n rows free
    s_push(&ns, 0, 0, 1, 0, 0, &out);
}
END_TEST

Suite *nstep_suite(void) {
    Suite *s = suite_create("nstep");
    TCase *tc = tcase_create("hand_computed");
    tcase_add_test(tc, test_n3_mid_episode);
    tcase_add_test(tc, test_n3_terminal_within_window);
    tcase_add_test(tc, test_n3_truncation_bootstraps);
    tcase_add_test(tc, test_tags_follow_their_steps);
    tcase_add_test(tc, test_terminated_wins_over_truncated);
    tcase_add_test(tc, test_n_longer_than_episode);
    tcase_add_test(tc, test_n1_is_one_step);
    tcase_add_loop_test(tc, test_envs_interleaved, 0, 2);
    tcase_add_test(tc, test_float_actions_first_of_window);
    suite_add_tcase(s, tc);
    tc = tcase_create("reference");
    tcase_add_test(tc, test_random_episodes_match_brute_force);
    tcase_add_test_raise_signal(tc, test_out_too_small_aborts, SIGABRT);
    suite_add_tcase(s, tc);
    return s;
}
