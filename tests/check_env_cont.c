// check_env_cont.c: the continuous-action environments (Pendulum-v1, MountainCarContinuous-v0)
// against trajectories of Gymnasium's own code (tests/fixtures/gen_env_cont_trajectories.py),
// their quirks one by one, their reset distributions, and vecenv_step_cont: auto-reset,
// truncation, episode reports, and void steps (a spec's terminated = 2), with a test spec
// that diverges on purpose.
#include "check_apex.h"

#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "env.h"
#include "fixtures/env_cont_trajectories.h"
#include "rng.h"

#define N_TRAJS (int)(sizeof(ENV_CONT_FIX_TRAJS) / sizeof(ENV_CONT_FIX_TRAJS[0]))

// ---------------------------------------------------------------------------------------
// Registry

START_TEST(test_registry_rows) {
    const env_spec_t *pd = env_find("Pendulum-v1");
    ck_assert_ptr_eq(pd, &env_pendulum_spec);
    ck_assert_int_eq(pd->info->obs_dim, 3);
    ck_assert_int_eq(pd->info->obs_dtype, ENVINFO_OBS_F32);
    ck_assert_int_eq(pd->info->n_actions, 0);
    ck_assert_int_eq(pd->info->action_dim, 1);
    ck_assert(pd->info->action_low == -2.0f && pd->info->action_high == 2.0f);
    ck_assert_int_eq(pd->info->max_episode_steps, 200);
    ck_assert_int_eq(pd->state_dim, 2);
    const env_spec_t *mc = env_find("MountainCarContinuous-v0");
    ck_assert_ptr_eq(mc, &env_mountaincar_continuous_spec);
    ck_assert_int_eq(mc->info->obs_dim, 2);
    ck_assert_int_eq(mc->info->n_actions, 0);
    ck_assert_int_eq(mc->info->action_dim, 1);
    ck_assert(mc->info->action_low == -1.0f && mc->info->action_high == 1.0f);
    ck_assert_int_eq(mc->info->max_episode_steps, 999);
    ck_assert_int_eq(mc->state_dim, 2);
    const env_spec_t *specs[] = {pd, mc};
    for (int k = 0; k < 2; k++) {
        ck_assert_ptr_null(specs[k]->step);
        ck_assert_ptr_nonnull(specs[k]->step_cont);
        ck_assert_ptr_null(specs[k]->step_batch);
        ck_assert(strstr(envinfo_known_ids(), specs[k]->info->id) != NULL);
    }
    ck_assert_ptr_null(env_find("Pendulum-v0"));
    ck_assert_ptr_null(env_find("MountainCarContinuous"));
}
END_TEST

// ---------------------------------------------------------------------------------------
// Gymnasium's trajectories

// Replays fixture trajectory t through the C env from its start state and compares every
// step: with glibc (the libm Gymnasium's numbers come from) bit for bit, elsewhere within a
// few ulps.
static void s_replay_fixture(const env_cont_fix_traj_t *t) {
    const env_spec_t *spec = env_find(t->env_id);
    ck_assert_msg(spec != NULL && spec->step_cont != NULL, "unknown env %s", t->env_id);
    double state[ENV_MAX_STATE_DIM];
    float obs[ENV_MAX_OBS_DIM];
    env_set_state(spec, state, t->start, obs);
    const size_t S = (size_t)spec->state_dim, O = (size_t)spec->info->obs_dim;
    char what[160];
    for (int k = 0; k < t->n_steps; k++) {
        const env_cont_fix_step_t *want = &t->steps[k];
        float reward = NAN;
        uint8_t term = 3;
        spec->step_cont(state, want->action, obs, &reward, &term);
        const float want_r = (float)want->reward;
        snprintf(what, sizeof what, "%s/%s step %d", t->env_id, t->name, k);
#ifdef __GLIBC__
        for (size_t j = 0; j < S; j++) {
            ck_assert_msg(memcmp(&state[j], &want->state[j], sizeof(double)) == 0,
                          "%s: state[%zu] %.17g want %.17g", what, j, state[j], want->state[j]);
        }
        for (size_t j = 0; j < O; j++) {
            ck_assert_msg(memcmp(&obs[j], &want->obs[j], sizeof(float)) == 0,
                          "%s: obs[%zu] %.9g want %.9g", what, j, (double)obs[j],
                          (double)want->obs[j]);
        }
        ck_assert_msg(memcmp(&reward, &want_r, sizeof(float)) == 0, "%s: reward %.9g want %.9g",
                      what, (double)reward, (double)want_r);
#else
        ck_assert_msg(check_close_d(state, want->state, S, 1e-12, 1e-12, what), "%s state", what);
        ck_assert_msg(check_close_f(obs, want->obs, O, 1e-6, 1e-7, what), "%s obs", what);
        ck_assert_msg(fabsf(reward - want_r) <= 1e-6f * (1.0f + fabsf(want_r)), "%s reward", what);
#endif
        ck_assert_msg(term == want->terminated, "%s: terminated %d want %d", what, term,
                      want->terminated);
    }
}

START_TEST(test_fixture_trajectory) {
    // One test per trajectory (loop test over ENV_CONT_FIX_TRAJS).
    s_replay_fixture(&ENV_CONT_FIX_TRAJS[_i]);
}
END_TEST

START_TEST(test_fixture_covers_the_quirks) {
    // The trajectories must exercise every quirk a wrong transcription would get wrong, so a
    // regenerated fixture that lost one fails here rather than passing vacuously.
    int mcc_goal = 0, mcc_goal_f32_below = 0, mcc_wall = 0, mcc_vclip = 0, mcc_beyond = 0;
    int mcc_first_f64 = 0, pd_clip_pos = 0, pd_clip_neg = 0, pd_beyond = 0, pd_far = 0;
    for (int i = 0; i < N_TRAJS; i++) {
        const env_cont_fix_traj_t *t = &ENV_CONT_FIX_TRAJS[i];
        const int mcc = strcmp(t->env_id, "MountainCarContinuous-v0") == 0;
        if (mcc) {
            mcc_first_f64 |= t->start[0] != (double)(float)t->start[0];
        }
        for (int k = 0; k < t->n_steps; k++) {
            const env_cont_fix_step_t *s = &t->steps[k];
            if (mcc) {
                mcc_goal |= s->terminated && s->reward > 99.0;
                mcc_goal_f32_below |= s->terminated && s->state[0] < 0.45;
                mcc_wall |= s->state[0] == (double)-1.2f && s->state[1] == 0.0 && k > 0 &&
                            t->steps[k - 1].state[1] < 0;
                mcc_vclip |= s->state[1] == (double)0.07f;
                mcc_beyond |= fabsf(s->action[0]) > 1.0f;
            } else {
                pd_clip_pos |= s->state[1] == 8.0;
                pd_clip_neg |= s->state[1] == -8.0;
                pd_beyond |= fabsf(s->action[0]) > 2.0f;
                pd_far |= fabs(s->state[0]) > 4 * M_PI;
            }
        }
    }
    ck_assert_msg(mcc_goal && mcc_goal_f32_below, "MountainCarContinuous: goal, goal in float64");
    ck_assert_msg(mcc_wall && mcc_vclip && mcc_beyond && mcc_first_f64,
                  "MountainCarContinuous: wall %d, speed clip %d, |a| > 1 %d, float64 start %d",
                  mcc_wall, mcc_vclip, mcc_beyond, mcc_first_f64);
    ck_assert_msg(pd_clip_pos && pd_clip_neg && pd_beyond && pd_far,
                  "Pendulum: clip +8 %d, -8 %d, |u| > 2 %d, |theta| > 4 pi %d", pd_clip_pos,
                  pd_clip_neg, pd_beyond, pd_far);
}
END_TEST

// One step of spec from state values s0 with action a; writes the new state, observation,
// reward and flag.
static void s_step_from(const env_spec_t *spec, const double *s0, float a, double *s, float *obs,
                        float *r, uint8_t *term) {
    env_set_state(spec, s, s0, NULL);
    spec->step_cont(s, &a, obs, r, term);
}

START_TEST(test_mcc_reward_charges_the_unclipped_action) {
    // Beyond the bounds the car moves as at +-1, and pays 0.1 a^2 for the a it was given.
    const env_spec_t *spec = &env_mountaincar_continuous_spec;
    const double s0[2] = {-0.5, 0.01};
    double sa[2], sb[2];
    float oa[2], ob[2], ra, rb;
    uint8_t ta, tb;
    s_step_from(spec, s0, 1.0f, sa, oa, &ra, &ta);
    s_step_from(spec, s0, 1.5f, sb, ob, &rb, &tb);
    ck_assert(memcmp(sa, sb, sizeof sa) == 0 && memcmp(oa, ob, sizeof oa) == 0);
    ck_assert(ra == (float)-0.1 && rb == (float)-0.225);
    s_step_from(spec, s0, -1.0f, sa, oa, &ra, &ta);
    s_step_from(spec, s0, -3.0f, sb, ob, &rb, &tb);
    ck_assert(memcmp(sa, sb, sizeof sa) == 0 && rb == (float)(0.0 - 9.0 * 0.1));
}
END_TEST

START_TEST(test_mcc_state_is_float32_after_a_step) {
    // Reset leaves a float64 position; every step stores float32 values (Gymnasium's
    // np.array(..., dtype=np.float32)), which are also the observation. (That the first
    // step runs on the double is the fixture's random_actions and goal_rounding.)
    const env_spec_t *spec = &env_mountaincar_continuous_spec;
    const double s0[2] = {-0.4512345678901234, 0.0};
    double s[2];
    float obs[2], r;
    uint8_t term;
    s_step_from(spec, s0, 0.3f, s, obs, &r, &term);
    for (int j = 0; j < 2; j++) {
        ck_assert(s[j] == (double)(float)s[j] && (float)s[j] == obs[j]);
    }
}
END_TEST

START_TEST(test_pendulum_clips_torque_and_speed) {
    // A torque beyond +-2 acts (and costs) exactly as +-2; theta_dot stops at +-8; theta is
    // not wrapped.
    const env_spec_t *spec = &env_pendulum_spec;
    const double s0[2] = {8.0, 7.99}; // sin(8) > 0: the step would reach 9
    double sa[2], sb[2];
    float oa[3], ob[3], ra, rb;
    uint8_t ta, tb;
    s_step_from(spec, s0, 2.0f, sa, oa, &ra, &ta);
    s_step_from(spec, s0, 5.0f, sb, ob, &rb, &tb);
    ck_assert(memcmp(sa, sb, sizeof sa) == 0 && memcmp(oa, ob, sizeof oa) == 0 && ra == rb);
    ck_assert(sa[1] == 8.0 && sa[0] == 8.0 + 8.0 * 0.05 && ta == 0);
    const double s1[2] = {-8.0, -7.99};
    s_step_from(spec, s1, -3.0f, sa, oa, &ra, &ta);
    ck_assert(sa[1] == -8.0 && sa[0] == -8.0 + -8.0 * 0.05);
    // The cost normalises theta: 2 pi further round costs the same within rounding, and the
    // upright state at rest costs nothing.
    const double up[2] = {0.0, 0.0}, up2[2] = {4 * M_PI, 0.0};
    s_step_from(spec, up, 0.0f, sa, oa, &ra, &ta);
    ck_assert(ra == 0.0f && oa[0] == 1.0f);
    s_step_from(spec, up2, 0.0f, sb, ob, &rb, &tb);
    ck_assert(fabsf(rb) < 1e-20f);
}
END_TEST

// ---------------------------------------------------------------------------------------
// Reset distributions

START_TEST(test_reset_ranges) {
    // Pendulum: theta U(-pi, pi), theta_dot U(-1, 1); MountainCarContinuous: position
    // U(-0.6, -0.4), velocity 0 (a float64 position: not rounded to float32). Each sample
    // spans its range, and the observation is the state's.
    const env_spec_t *specs[] = {&env_pendulum_spec, &env_mountaincar_continuous_spec};
    const double lo[2][2] = {{-M_PI, -1.0}, {-0.6, 0.0}}, hi[2][2] = {{M_PI, 1.0}, {-0.4, 0.0}};
    rng_t r;
    rng_init_stream(&r, 11, RNG_ROLE_TEST, 0);
    for (int k = 0; k < 2; k++) {
        double s[2], mn[2] = {INFINITY, INFINITY}, mx[2] = {-INFINITY, -INFINITY};
        float obs[3], obs2[3];
        int not_f32 = 0;
        for (int n = 0; n < 20000; n++) {
            specs[k]->reset(s, &r, obs);
            specs[k]->observe(s, obs2);
            ck_assert(memcmp(obs, obs2, (size_t)specs[k]->info->obs_dim * sizeof(float)) == 0);
            for (int j = 0; j < 2; j++) {
                ck_assert(s[j] >= lo[k][j] && s[j] <= hi[k][j]);
                mn[j] = fmin(mn[j], s[j]);
                mx[j] = fmax(mx[j], s[j]);
            }
            not_f32 += s[0] != (double)(float)s[0];
        }
        for (int j = 0; j < 2; j++) {
            double span = hi[k][j] - lo[k][j];
            ck_assert(mn[j] <= lo[k][j] + 0.01 * span && mx[j] >= hi[k][j] - 0.01 * span);
        }
        ck_assert_int_gt(not_f32, 19000);
    }
}
END_TEST

// ---------------------------------------------------------------------------------------
// vecenv_step_cont

enum { VN = 3 };

typedef struct {
    float actions[VN];
    float rewards[VN];
    uint8_t term[VN], trunc[VN], void_step[VN];
} s_io_t;

static void s_step_all(vecenv_t *v, s_io_t *io, float a) {
    for (int i = 0; i < v->n; i++) {
        io->actions[i] = a;
    }
    memset(io->void_step, 0xee, sizeof io->void_step);
    vecenv_step_cont(v, io->actions, io->rewards, io->term, io->trunc, io->void_step);
}

START_TEST(test_vecenv_cont_truncates_and_matches_the_spec) {
    // Pendulum never terminates and MountainCarContinuous at rest-level pushes never reaches
    // the goal: both are cut at exactly max_episode_steps (200, 999). At every step each
    // env's vecenv_next_obs and reward are what spec->step_cont gives from a copy of its
    // state, so vecenv passes the actions on unclipped (0.7 * 4 = 2.8 is beyond Pendulum's 2,
    // and MountainCarContinuous charges 0.1 a^2 for the a given).
    const env_spec_t *specs[] = {&env_pendulum_spec, &env_mountaincar_continuous_spec};
    const float amp[] = {4.0f, 1.5f};
    for (int k = 0; k < 2; k++) {
        const env_spec_t *spec = specs[k];
        const int T = spec->info->max_episode_steps;
        vecenv_t v;
        s_io_t io;
        vecenv_init(&v, spec, VN, 5, 0, 2 * VN);
        double ret[VN] = {0};
        for (int t = 1; t <= T; t++) {
            double saved[VN][2];
            memcpy(saved, v.state, sizeof saved);
            // Beyond the bounds half of the time; alternating too fast to pump the car up.
            const float a = amp[k] * (float)sin(1.3 * t);
            s_step_all(&v, &io, a);
            for (int i = 0; i < VN; i++) {
                float want_obs[3], want_r;
                uint8_t want_t;
                spec->step_cont(saved[i], &a, want_obs, &want_r, &want_t);
                ck_assert(io.rewards[i] == want_r && io.term[i] == 0 && want_t == 0);
                ck_assert_int_eq(io.trunc[i], t == T);
                ck_assert_int_eq(io.void_step[i], 0);
                ck_assert(memcmp(vecenv_next_obs(&v, i, t == T), want_obs, v.obs_bytes) == 0);
                ret[i] += (double)want_r;
            }
            ck_assert_int_eq(v.done_count, t == T ? VN : 0);
        }
        vecenv_episode_t eps[2 * VN];
        ck_assert_int_eq(vecenv_drain_episodes(&v, eps, 2 * VN), VN);
        for (int i = 0; i < VN; i++) {
            ck_assert(eps[i].len == T && eps[i].env == i && eps[i].ret == ret[i]);
            ck_assert_int_eq(v.ep_len[i], 0);
        }
        ck_assert_uint_eq(v.steps, (uint64_t)VN * (uint64_t)T);
        ck_assert_uint_eq(v.episodes, VN);
        ck_assert_uint_eq(v.void_steps, 0);
        vecenv_fini(&v);
    }
}
END_TEST

START_TEST(test_vecenv_cont_mcc_goal_autoresets) {
    // The car one push from the goal: the step terminates (reward 100 - 0.1), the final
    // observation is past 0.45 and v->obs holds a fresh start (velocity 0).
    vecenv_t v;
    s_io_t io;
    vecenv_init(&v, &env_mountaincar_continuous_spec, 1, 2, 0, 1);
    const double near_goal[2] = {0.44, 0.05};
    env_set_state(v.spec, v.state, near_goal, v.obs);
    s_step_all(&v, &io, 1.0f);
    ck_assert(io.term[0] == 1 && io.trunc[0] == 0 && io.void_step[0] == 0);
    ck_assert(io.rewards[0] == (float)(100.0 - 0.1));
    const float *fin = vecenv_next_obs(&v, 0, 1), *o = (const float *)v.obs;
    ck_assert(fin[0] >= 0.45f && o[1] == 0.0f && o[0] >= -0.6f && o[0] <= -0.4f);
    ck_assert(v.done_count == 1 && v.done[0].len == 1 && v.done[0].ret == (double)io.rewards[0]);
    vecenv_fini(&v);
}
END_TEST

// A test spec that diverges on purpose: the state x starts at 1 and is multiplied by the
// action's 10th power; once it is no longer finite the step is void (terminated 2, reward
// NaN). It is not in the env table: its row is its own, with a time limit of 4.
static const envinfo_t s_diverge_info = {.id = "Diverge-v0",
                                         .obs_dim = 1,
                                         .obs_dtype = ENVINFO_OBS_F32,
                                         .obs_scale = 1.0f,
                                         .action_dim = 1,
                                         .action_low = -1.0f,
                                         .action_high = 1.0f,
                                         .max_episode_steps = 4};

static void s_diverge_observe(const void *s, void *obs) {
    const double x = *(const double *)s; // beyond FLT_MAX the float is inf, not UB
    *(float *)obs = fabs(x) <= FLT_MAX ? (float)x : (float)copysign(INFINITY, x);
}
static void s_diverge_reset(void *s, rng_t *rng, void *obs) {
    (void)rng;
    *(double *)s = 1.0;
    s_diverge_observe(s, obs);
}
static void s_diverge_step(void *s, const float *a, void *obs, float *r, uint8_t *t) {
    double *x = s;
    *x *= pow((double)a[0], 10.0);
    s_diverge_observe(s, obs);
    *t = isfinite(*x) ? 0 : 2;
    *r = isfinite(*x) ? 1.0f : NAN;
}

static const env_spec_t s_diverge_spec = {.info = &s_diverge_info,
                                          .state_dim = 1,
                                          .state_bytes = sizeof(double),
                                          .reset = s_diverge_reset,
                                          .step_cont = s_diverge_step,
                                          .observe = s_diverge_observe};

START_TEST(test_vecenv_cont_void_step) {
    // Env 0 overflows on its second step: that step is void (reported as such, reward 0,
    // neither terminated nor truncated), the env starts over, and the step counts nowhere:
    // not in v->steps, not as an episode step (its next episode is cut at 4 steps of its own)
    // and the cut episode is not reported. Envs 1 and 2 go on undisturbed.
    for (int with_flags = 1; with_flags >= 0; with_flags--) {
        vecenv_t v;
        vecenv_init(&v, &s_diverge_spec, VN, 1, 0, 2 * VN);
        float act[VN] = {1e30f, 1.0f, -1.0f}, rew[VN];
        uint8_t term[VN], trunc[VN], vd[VN];
        uint8_t *vp = with_flags ? vd : NULL;
        vecenv_step_cont(&v, act, rew, term, trunc, vp); // x0 = 1e300
        ck_assert(v.void_steps == 0 && v.steps == VN && v.ep_len[0] == 1);
        vecenv_step_cont(&v, act, rew, term, trunc, vp); // x0 = inf: void
        ck_assert(rew[0] == 0.0f && term[0] == 0 && trunc[0] == 0);
        if (with_flags) {
            ck_assert(vd[0] == 1 && vd[1] == 0 && vd[2] == 0);
        }
        ck_assert(rew[1] == 1.0f && rew[2] == 1.0f);
        ck_assert_uint_eq(v.void_steps, 1);
        ck_assert_uint_eq(v.steps, 2 * VN - 1);
        ck_assert(v.ep_len[0] == 0 && v.ep_return[0] == 0.0 && ((float *)v.obs)[0] == 1.0f);
        ck_assert(v.ep_len[1] == 2 && ((float *)v.obs)[2] == 1.0f);
        act[0] = 1.0f;
        for (int t = 3; t <= 6; t++) {
            vecenv_step_cont(&v, act, rew, term, trunc, vp);
            // Envs 1 and 2 reach 4 steps at t = 4; env 0 restarted at t = 2, so at t = 6.
            ck_assert_int_eq(trunc[1], t == 4);
            ck_assert_int_eq(trunc[0], t == 6);
            ck_assert(term[0] == 0 && (!with_flags || vd[0] == 0));
        }
        ck_assert_uint_eq(v.episodes, 3);
        vecenv_episode_t eps[2 * VN];
        ck_assert_int_eq(vecenv_drain_episodes(&v, eps, 2 * VN), 3);
        ck_assert(eps[2].env == 0 && eps[2].len == 4 && eps[2].ret == 4.0);
        ck_assert_uint_eq(v.steps, 6 * VN - 1);
        ck_assert_uint_eq(v.void_steps, 1);
        vecenv_fini(&v);
    }
}
END_TEST

START_TEST(test_vecenv_step_on_continuous_aborts) {
    vecenv_t v;
    vecenv_init(&v, &env_pendulum_spec, 1, 1, 0, 1);
    int32_t a = 0;
    float r;
    uint8_t t, tr;
    vecenv_step(&v, &a, &r, &t, &tr); // Pendulum steps with vecenv_step_cont
}
END_TEST

START_TEST(test_vecenv_step_cont_on_discrete_aborts) {
    vecenv_t v;
    vecenv_init(&v, &env_cartpole_spec, 1, 1, 0, 1);
    float a = 0.0f, r;
    uint8_t t, tr;
    vecenv_step_cont(&v, &a, &r, &t, &tr, NULL); // CartPole steps with vecenv_step
}
END_TEST

START_TEST(test_vecenv_step_cont_nan_action_aborts) {
    vecenv_t v;
    vecenv_init(&v, &env_mountaincar_continuous_spec, 2, 1, 0, 1);
    float a[2] = {0.5f, NAN}, r[2];
    uint8_t t[2], tr[2];
    vecenv_step_cont(&v, a, r, t, tr, NULL);
}
END_TEST

Suite *env_cont_suite(void) {
    Suite *s = suite_create("env_cont");
    TCase *tc = tcase_create("registry");
    tcase_add_test(tc, test_registry_rows);
    suite_add_tcase(s, tc);

    tc = tcase_create("gymnasium_trajectories");
    tcase_add_loop_test(tc, test_fixture_trajectory, 0, N_TRAJS);
    tcase_add_test(tc, test_fixture_covers_the_quirks);
    tcase_add_test(tc, test_mcc_reward_charges_the_unclipped_action);
    tcase_add_test(tc, test_mcc_state_is_float32_after_a_step);
    tcase_add_test(tc, test_pendulum_clips_torque_and_speed);
    suite_add_tcase(s, tc);

    tc = tcase_create("reset");
    tcase_add_test(tc, test_reset_ranges);
    suite_add_tcase(s, tc);

    tc = tcase_create("vecenv_cont");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_vecenv_cont_truncates_and_matches_the_spec);
    tcase_add_test(tc, test_vecenv_cont_mcc_goal_autoresets);
    tcase_add_test(tc, test_vecenv_cont_void_step);
    tcase_add_test_raise_signal(tc, test_vecenv_step_on_continuous_aborts, SIGABRT);
    tcase_add_test_raise_signal(tc, test_vecenv_step_cont_on_discrete_aborts, SIGABRT);
    tcase_add_test_raise_signal(tc, test_vecenv_step_cont_nan_action_aborts, SIGABRT);
    suite_add_tcase(s, tc);
    return s;
}
