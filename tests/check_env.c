// check_env.c: environments against Gymnasium reference trajectories (STYLE S22), the
// registry, reset distributions, and vecenv_t (auto-reset, truncation, episode reports,
// reproducible per-env streams).
#include "check_apex.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "env.h"
#include "fixtures/env_trajectories.h"
#include "rng.h"

// ---------------------------------------------------------------------------------------
// Registry

START_TEST(test_registry_find) {
    const env_spec_t *cp = env_find("CartPole-v1");
    ck_assert_ptr_eq(cp, &env_cartpole_spec);
    ck_assert_int_eq(cp->info->obs_dim, 4);
    ck_assert_int_eq(cp->info->n_actions, 2);
    ck_assert_int_eq(cp->info->max_episode_steps, 500);
    const env_spec_t *ab = env_find("Acrobot-v1");
    ck_assert_ptr_eq(ab, &env_acrobot_spec);
    ck_assert_int_eq(ab->info->obs_dim, 6);
    ck_assert_int_eq(ab->info->n_actions, 3);
    ck_assert_int_eq(ab->info->max_episode_steps, 500);
    const env_spec_t *mc = env_find("MountainCar-v0");
    ck_assert_ptr_eq(mc, &env_mountaincar_spec);
    ck_assert_int_eq(mc->info->obs_dim, 2);
    ck_assert_int_eq(mc->info->n_actions, 3);
    ck_assert_int_eq(mc->info->max_episode_steps, 200);
    // Unknown, differently-cased, versionless and NULL ids are not found.
    ck_assert_ptr_null(env_find("cartpole-v1"));
    ck_assert_ptr_null(env_find("CartPole"));
    ck_assert_ptr_null(env_find("Pong-v5"));
    ck_assert_ptr_null(env_find(""));
    ck_assert_ptr_null(env_find(NULL));
}
END_TEST

START_TEST(test_registry_known_ids_lists_every_spec) {
    const char *ids = envinfo_known_ids();
    const env_spec_t *specs[] = {&env_cartpole_spec, &env_acrobot_spec, &env_mountaincar_spec};
    for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
        ck_assert_msg(strstr(ids, specs[i]->info->id) != NULL, "%s missing from '%s'",
                      specs[i]->info->id, ids);
        ck_assert_ptr_eq(env_find(specs[i]->info->id), specs[i]);
    }
}
END_TEST

// ---------------------------------------------------------------------------------------
// Reference trajectories (tests/fixtures/gen_env_trajectories.py)

// Replays fixture trajectory t through the C env and compares every step. Returns the
// number of state doubles that were bit-identical to the reference.
static int s_replay_fixture(const env_fix_traj_t *t) {
    const env_spec_t *spec = env_find(t->env_id);
    ck_assert_msg(spec != NULL, "unknown env %s", t->env_id);
    double state[ENV_MAX_STATE_DIM];
    float obs[ENV_MAX_OBS_DIM];
    env_set_state(spec, state, t->start, obs);
    int exact = 0;
    char what[128];
    for (int k = 0; k < t->n_steps; k++) {
        const env_fix_step_t *want = &t->steps[k];
        float reward = NAN;
        uint8_t term = 2;
        spec->step(state, want->action, obs, &reward, &term);
        snprintf(what, sizeof(what), "%s/%s step %d state", t->env_id, t->name, k);
        ck_assert_msg(
            check_close_d(state, want->state, (size_t)spec->state_dim, 1e-12, 1e-12, what), "%s",
            what);
        snprintf(what, sizeof(what), "%s/%s step %d obs", t->env_id, t->name, k);
        ck_assert_msg(check_close_f(obs, want->obs, (size_t)spec->info->obs_dim, 1e-6, 1e-7, what),
                      "%s", what);
        ck_assert_msg(reward == want->reward, "%s/%s step %d reward %g want %g", t->env_id, t->name,
                      k, reward, want->reward);
        ck_assert_msg(term == want->terminated, "%s/%s step %d terminated %d want %d", t->env_id,
                      t->name, k, term, want->terminated);
        for (int j = 0; j < spec->state_dim; j++) {
            exact += memcmp(&state[j], &want->state[j], sizeof(double)) == 0;
        }
    }
    return exact;
}

START_TEST(test_fixture_trajectory) {
    // One test per fixture trajectory (loop test over ENV_FIX_TRAJS).
    (void)s_replay_fixture(&ENV_FIX_TRAJS[_i]);
}
END_TEST

START_TEST(test_fixture_terminal_episodes_present) {
    // The fixture must exercise termination in every env, so a wrong threshold shows.
    const char *ids[] = {"CartPole-v1", "Acrobot-v1", "MountainCar-v0"};
    for (size_t e = 0; e < 3; e++) {
        int found = 0;
        for (size_t i = 0; i < sizeof(ENV_FIX_TRAJS) / sizeof(ENV_FIX_TRAJS[0]); i++) {
            const env_fix_traj_t *t = &ENV_FIX_TRAJS[i];
            found |= strcmp(t->env_id, ids[e]) == 0 && t->steps[t->n_steps - 1].terminated;
        }
        ck_assert_msg(found, "no terminating trajectory for %s", ids[e]);
    }
}
END_TEST

#ifdef __GLIBC__
START_TEST(test_fixture_bit_exact_with_glibc) {
    // The transcription keeps Gymnasium's operand order and glibc's sin/cos are correctly
    // rounded, so with glibc (what Python's math module uses) the states agree bit for bit.
    // A failure here with the tolerance tests passing means an operation was reordered.
    for (size_t i = 0; i < sizeof(ENV_FIX_TRAJS) / sizeof(ENV_FIX_TRAJS[0]); i++) {
        const env_fix_traj_t *t = &ENV_FIX_TRAJS[i];
        int total = t->n_steps * env_find(t->env_id)->state_dim;
        int exact = s_replay_fixture(t);
        ck_assert_msg(exact == total, "%s/%s: %d of %d state values bit-exact", t->env_id, t->name,
                      exact, total);
    }
}
END_TEST
#endif

START_TEST(test_step_batch_matches_step) {
    // step_batch is an optimisation only: bit-identical to step, across chunk boundaries.
    const env_spec_t *specs[] = {&env_cartpole_spec, &env_acrobot_spec, &env_mountaincar_spec};
    // OB bounds these classic-control observations (ENV_MAX_OBS_DIM, a rendered MinAtar
    // frame, would put 4 MB of them on the stack).
    enum { NB = 70, OB = 8 };
    for (size_t si = 0; si < 3; si++) {
        const env_spec_t *spec = specs[si];
        if (spec->step_batch == NULL) {
            continue;
        }
        const int S = spec->state_dim, O = spec->info->obs_dim;
        ck_assert_int_le(O, OB);
        double a[NB * ENV_MAX_STATE_DIM], b[NB * ENV_MAX_STATE_DIM];
        float oa[NB * OB], ob[NB * OB], ra[NB], rb[NB];
        uint8_t ta[NB], tb[NB];
        int32_t act[NB];
        rng_t r;
        rng_init_stream(&r, 4, RNG_ROLE_TEST, si);
        for (int i = 0; i < NB; i++) {
            spec->reset(a + i * S, &r, oa + i * O);
            for (int j = 0; j < S; j++) {
                a[i * S + j] *= 1.0 + 8.0 * rng_uniform(&r); // some beyond the thresholds
            }
        }
        memcpy(b, a, sizeof(a));
        for (int t = 0; t < 30; t++) {
            for (int i = 0; i < NB; i++) {
                act[i] = (int32_t)rng_below(&r, (uint32_t)spec->info->n_actions);
                spec->step(a + i * S, act[i], oa + i * O, &ra[i], &ta[i]);
            }
            spec->step_batch(b, NB, act, ob, rb, tb);
            ck_assert(memcmp(a, b, (size_t)(NB * S) * sizeof(double)) == 0);
            ck_assert(memcmp(oa, ob, (size_t)(NB * O) * sizeof(float)) == 0);
            ck_assert(memcmp(ra, rb, sizeof(ra)) == 0 && memcmp(ta, tb, sizeof(ta)) == 0);
        }
    }
}
END_TEST

// ---------------------------------------------------------------------------------------
// Reset distributions

// Draws n resets of spec and checks each state component lies in [lo[j], hi[j]] and that
// the sample spans the range (min and max within 1% of the bounds when lo < hi).
static void s_check_resets(const env_spec_t *spec, const double *lo, const double *hi) {
    rng_t r;
    rng_init_stream(&r, 11, RNG_ROLE_TEST, 0);
    double s[ENV_MAX_STATE_DIM], mn[ENV_MAX_STATE_DIM], mx[ENV_MAX_STATE_DIM];
    float obs[ENV_MAX_OBS_DIM], obs2[ENV_MAX_OBS_DIM];
    for (int j = 0; j < spec->state_dim; j++) {
        mn[j] = INFINITY;
        mx[j] = -INFINITY;
    }
    for (int k = 0; k < 20000; k++) {
        spec->reset(s, &r, obs);
        spec->observe(s, obs2);
        ck_assert(memcmp(obs, obs2, (size_t)spec->info->obs_dim * sizeof(float)) == 0);
        for (int j = 0; j < spec->state_dim; j++) {
            ck_assert_msg(s[j] >= lo[j] && s[j] <= hi[j], "%s state[%d] = %g outside [%g, %g]",
                          spec->info->id, j, s[j], lo[j], hi[j]);
            mn[j] = fmin(mn[j], s[j]);
            mx[j] = fmax(mx[j], s[j]);
        }
    }
    for (int j = 0; j < spec->state_dim; j++) {
        double span = hi[j] - lo[j];
        ck_assert(mn[j] <= lo[j] + 0.01 * span && mx[j] >= hi[j] - 0.01 * span);
    }
}

START_TEST(test_reset_ranges) {
    const double cp_lo[4] = {-0.05, -0.05, -0.05, -0.05}, cp_hi[4] = {0.05, 0.05, 0.05, 0.05};
    s_check_resets(&env_cartpole_spec, cp_lo, cp_hi);
    // Acrobot's bounds are float32-rounded like its draws.
    const double ab = (double)0.1f;
    const double ab_lo[4] = {-ab, -ab, -ab, -ab}, ab_hi[4] = {ab, ab, ab, ab};
    s_check_resets(&env_acrobot_spec, ab_lo, ab_hi);
    const double mc_lo[2] = {-0.6, 0.0}, mc_hi[2] = {-0.4, 0.0};
    s_check_resets(&env_mountaincar_spec, mc_lo, mc_hi);
}
END_TEST

START_TEST(test_acrobot_reset_is_float32) {
    // Gymnasium does .astype(np.float32) on Acrobot's start state.
    rng_t r;
    rng_init(&r, 3);
    double s[4];
    float obs[6];
    for (int k = 0; k < 1000; k++) {
        env_acrobot_spec.reset(s, &r, obs);
        for (int j = 0; j < 4; j++) {
            ck_assert(s[j] == (double)(float)s[j]);
        }
    }
}
END_TEST

// ---------------------------------------------------------------------------------------
// vecenv_t

enum { VN = 4 };

typedef struct {
    float next_obs[VN * ENV_MAX_OBS_DIM]; // vecenv_next_obs of each env, gathered
    float rewards[VN];
    uint8_t term[VN];
    uint8_t trunc[VN];
    int32_t actions[VN];
} s_vec_io_t;

static void s_vec_step_const(vecenv_t *v, s_vec_io_t *io, int32_t action) {
    for (int i = 0; i < v->n; i++) {
        io->actions[i] = action;
    }
    vecenv_step(v, io->actions, io->rewards, io->term, io->trunc);
    for (int i = 0; i < v->n; i++) {
        memcpy((uint8_t *)io->next_obs + (size_t)i * v->obs_bytes,
               vecenv_next_obs(v, i, io->term[i] || io->trunc[i]), v->obs_bytes);
    }
}

// The same step taken outside vecenv: copies of the VN states before it (taken by
// s_vec_save), each stepped alone by spec->step with `action`. Asserts that every env's
// vecenv_next_obs is the observation its own step produced, whether the episode went on or
// ended (then vecenv has reset the env: it must not hand out the reset observation).
typedef struct {
    _Alignas(64) uint8_t state[VN][ENV_MAX_STATE_BYTES]; // states are doubles or minatar_t
} s_vec_saved_t;

static void s_vec_save(const vecenv_t *v, s_vec_saved_t *sv) {
    for (int i = 0; i < v->n; i++) {
        memcpy(sv->state[i], v->state + (size_t)i * v->spec->state_bytes, v->spec->state_bytes);
    }
}

static void s_vec_check_next_obs(const vecenv_t *v, s_vec_saved_t *sv, const s_vec_io_t *io,
                                 int32_t action) {
    for (int i = 0; i < v->n; i++) {
        float want[ENV_MAX_OBS_DIM], r;
        uint8_t term;
        v->spec->step(sv->state[i], action, want, &r, &term);
        ck_assert_msg(memcmp((const uint8_t *)io->next_obs + (size_t)i * v->obs_bytes, want,
                             v->obs_bytes) == 0,
                      "env %d: vecenv_next_obs is not the observation of its step", i);
        ck_assert(r == io->rewards[i] && term == io->term[i]);
    }
}

START_TEST(test_vecenv_truncates_at_limit) {
    // MountainCar with "no push" and Acrobot with zero torque never reach their goals, so
    // every episode is cut by the time limit at exactly max_episode_steps.
    const env_spec_t *specs[] = {&env_mountaincar_spec, &env_acrobot_spec};
    for (int si = 0; si < 2; si++) {
        const env_spec_t *spec = specs[si];
        const int T = spec->info->max_episode_steps;
        vecenv_t v;
        s_vec_io_t io;
        vecenv_init(&v, spec, VN, 5, 0, 2 * VN);
        s_vec_saved_t sv;
        for (int t = 1; t <= T; t++) {
            s_vec_save(&v, &sv);
            s_vec_step_const(&v, &io, 1);
            // Truncated at T: the final observation (what the n-step target bootstraps
            // from) is the step's own, kept apart from the reset one now in v.obs.
            s_vec_check_next_obs(&v, &sv, &io, 1);
            for (int i = 0; i < VN; i++) {
                ck_assert_int_eq(io.term[i], 0);
                ck_assert_int_eq(io.trunc[i], t == T);
                if (t == T) {
                    ck_assert(memcmp((const uint8_t *)io.next_obs + (size_t)i * v.obs_bytes,
                                     v.obs + (size_t)i * v.obs_bytes, v.obs_bytes) != 0);
                }
            }
            ck_assert_int_eq(v.done_count, t == T ? VN : 0);
        }
        vecenv_episode_t eps[2 * VN];
        ck_assert_int_eq(vecenv_drain_episodes(&v, eps, 2 * VN), VN);
        for (int i = 0; i < VN; i++) {
            ck_assert_int_eq(eps[i].len, T);
            ck_assert_int_eq(eps[i].env, i);
            ck_assert(eps[i].ret == -(double)T);
            ck_assert_int_eq(v.ep_len[i], 0);
        }
        ck_assert_int_eq(v.done_count, 0);
        ck_assert_uint_eq(v.steps, (uint64_t)VN * (uint64_t)T);
        ck_assert_uint_eq(v.episodes, VN);
        vecenv_fini(&v);
    }
}
END_TEST

START_TEST(test_vecenv_autoreset_keeps_terminal_obs) {
    // CartPole pushed right always falls within ~10 steps. On the terminating step next_obs
    // must be the terminal observation (pole past 12 degrees) and v->obs a fresh reset.
    vecenv_t v;
    s_vec_io_t io;
    vecenv_init(&v, &env_cartpole_spec, VN, 9, 100, VN);
    int finished = 0;
    s_vec_saved_t sv;
    for (int t = 1; t <= 100 && finished < VN; t++) {
        s_vec_save(&v, &sv);
        s_vec_step_const(&v, &io, 1);
        s_vec_check_next_obs(&v, &sv, &io, 1);
        for (int i = 0; i < VN; i++) {
            const float *no = io.next_obs + i * 4, *o = (const float *)v.obs + i * 4;
            ck_assert(io.rewards[i] == 1.0f);
            if (!io.term[i]) {
                continue;
            }
            finished++;
            ck_assert(fabsf(no[2]) > (float)(12 * 2 * M_PI / 360) || fabsf(no[0]) > 2.4f);
            for (int j = 0; j < 4; j++) {
                ck_assert(fabsf(o[j]) <= 0.05f); // reset observation
            }
            ck_assert_int_eq(v.ep_len[i], 0);
            ck_assert(v.ep_return[i] == 0.0);
        }
    }
    ck_assert_int_eq(finished, VN);
    vecenv_episode_t eps[VN];
    int k = vecenv_drain_episodes(&v, eps, VN);
    ck_assert_int_eq(k, VN);
    for (int i = 0; i < k; i++) {
        ck_assert(eps[i].ret == (double)eps[i].len); // reward 1 per step, terminal included
        ck_assert(eps[i].len >= 5 && eps[i].len <= 20);
    }
    vecenv_fini(&v);
}
END_TEST

START_TEST(test_vecenv_terminated_and_truncated_together) {
    // TimeLimit reports truncated on the last allowed step even when that step terminates.
    vecenv_t v;
    s_vec_io_t io;
    vecenv_init(&v, &env_mountaincar_spec, 1, 1, 0, 1);
    const double near_goal[2] = {0.49, 0.05};
    env_set_state(v.spec, v.state, near_goal, v.obs);
    v.ep_len[0] = 199;
    s_vec_step_const(&v, &io, 2);
    ck_assert_int_eq(io.term[0], 1);
    ck_assert_int_eq(io.trunc[0], 1);
    ck_assert_int_eq(v.done_count, 1);
    ck_assert_int_eq(v.done[0].len, 200);
    vecenv_fini(&v);
}
END_TEST

START_TEST(test_vecenv_streams_follow_global_index) {
    // Env i of an actor whose first global index is 10 must behave exactly like env 0 of a
    // vecenv starting at global index 10 + i: seeds depend on the global index only.
    vecenv_t a, b;
    s_vec_io_t ia, ib;
    vecenv_init(&a, &env_cartpole_spec, VN, 77, 10, 64);
    for (int i = 0; i < VN; i++) {
        vecenv_init(&b, &env_cartpole_spec, 1, 77, 10 + (uint64_t)i, 64);
        vecenv_t a2;
        vecenv_init(&a2, &env_cartpole_spec, VN, 77, 10, 64);
        for (int t = 0; t < 300; t++) { // several auto-resets
            s_vec_step_const(&a2, &ia, t % 3 == 0);
            s_vec_step_const(&b, &ib, t % 3 == 0);
            ck_assert(memcmp(ia.next_obs + i * 4, ib.next_obs, 4 * sizeof(float)) == 0);
            ck_assert(memcmp(a2.obs + i * 4 * sizeof(float), b.obs, 4 * sizeof(float)) == 0);
            ck_assert_int_eq(ia.term[i], ib.term[0]);
        }
        ck_assert_uint_gt(b.episodes, 3);
        vecenv_fini(&a2);
        vecenv_fini(&b);
    }
    // A different seed gives different start states.
    vecenv_init(&b, &env_cartpole_spec, VN, 78, 10, 64);
    ck_assert(memcmp(a.obs, b.obs, VN * 4 * sizeof(float)) != 0);
    vecenv_fini(&b);
    vecenv_fini(&a);
    vecenv_fini(&a); // fini twice is a no-op
}
END_TEST

START_TEST(test_vecenv_episode_buffer_bounded) {
    // Room for 1 episode: the others are counted as dropped; draining frees room again.
    vecenv_t v;
    s_vec_io_t io;
    vecenv_init(&v, &env_mountaincar_spec, VN, 3, 0, 1);
    for (int t = 0; t < 200; t++) {
        s_vec_step_const(&v, &io, 1);
    }
    ck_assert_int_eq(v.done_count, 1);
    ck_assert_uint_eq(v.episodes_dropped, VN - 1);
    vecenv_episode_t e;
    ck_assert_int_eq(vecenv_drain_episodes(&v, &e, 0), 0);
    ck_assert_int_eq(vecenv_drain_episodes(&v, &e, 1), 1);
    ck_assert_int_eq(e.env, 0);
    ck_assert_int_eq(vecenv_drain_episodes(&v, &e, 1), 0);
    vecenv_fini(&v);
}
END_TEST

START_TEST(test_vecenv_bad_action_aborts) {
    vecenv_t v;
    s_vec_io_t io;
    vecenv_init(&v, &env_cartpole_spec, 1, 1, 0, 1);
    s_vec_step_const(&v, &io, 2); // CartPole has actions 0 and 1 only
}
END_TEST

Suite *env_suite(void) {
    Suite *s = suite_create("env");
    TCase *tc = tcase_create("registry");
    tcase_add_test(tc, test_registry_find);
    tcase_add_test(tc, test_registry_known_ids_lists_every_spec);
    suite_add_tcase(s, tc);

    tc = tcase_create("gymnasium_trajectories");
    tcase_add_loop_test(tc, test_fixture_trajectory, 0,
                        (int)(sizeof(ENV_FIX_TRAJS) / sizeof(ENV_FIX_TRAJS[0])));
    tcase_add_test(tc, test_fixture_terminal_episodes_present);
    tcase_add_test(tc, test_step_batch_matches_step);
#ifdef __GLIBC__
    tcase_add_test(tc, test_fixture_bit_exact_with_glibc);
#endif
    suite_add_tcase(s, tc);

    tc = tcase_create("reset");
    tcase_add_test(tc, test_reset_ranges);
    tcase_add_test(tc, test_acrobot_reset_is_float32);
    suite_add_tcase(s, tc);

    tc = tcase_create("vecenv");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_vecenv_truncates_at_limit);
    tcase_add_test(tc, test_vecenv_autoreset_keeps_terminal_obs);
    tcase_add_test(tc, test_vecenv_terminated_and_truncated_together);
    tcase_add_test(tc, test_vecenv_streams_follow_global_index);
    tcase_add_test(tc, test_vecenv_episode_buffer_bounded);
    tcase_add_test_raise_signal(tc, test_vecenv_bad_action_aborts, SIGABRT);
    suite_add_tcase(s, tc);
    return s;
}
