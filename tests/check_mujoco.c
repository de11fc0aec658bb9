// check_mujoco.c: the MuJoCo v4 tasks (envs/env_mujoco.h) over the engine (envs/mjenv.h), on
// apex's own test models (tests/fixtures/mujoco/*.xml, with the tasks' dimensions).
//
// Exactness to Gymnasium cannot be tested here: that needs the mujoco Python bindings, and
// Gymnasium's pip mujoco (3.x) would not step like Debian's 2.2.2 anyway (env_mujoco.h). What
// is tested is the task logic, against numbers computed by hand from the v4 sources:
// - each task's observation layout, written by its hook from a hand-set mjData (qpos, qvel,
//   qfrc_constraint), with the clipping;
// - each task's reward terms and weights and its healthy/termination rule at the
//   boundaries (strict or inclusive as Gymnasium's comparisons are), through its reward
//   hook on a hand-set mjData; v4's healthy reward on the terminating step too;
// - through the spec (reset/step_cont/observe/fini): the reset noise (qpos draws first,
//   then qvel, uniform or normal), frame_skip (the simulated time of one step), dt, the
//   forward velocity and the unclamped ctrl_cost of a real step, TimeLimit 1000 in the
//   table, HalfCheetah never terminating;
// - Hopper and Walker2d through the spec and vecenv: both qpos and qvel noised U(-5e-3,
//   5e-3) around qpos0 at reset, and a reset of a used mjData starting the same episode as
//   a fresh one; health judged on the state after the step; a fall terminated (discount 0
//   in the actor's n-step transitions) and the 1 000th step truncated (they bootstrap);
// - divergence: a bad qacc (MuJoCo's warning), NaN after an RK4 step, a MuJoCo error (stack
//   overflow) and a non-finite action each make a void step (terminated = 2, zeros, reward 0)
//   with one log line, never a crash, and the env steps again after its reset;
// - start-up errors: an empty, missing, unparsable or wrong model is refused with a message;
// - states are released by spec->fini (vecenv_fini), which ASan's leak check sees.
// Optional: one of MuJoCo's own models (libmujoco-samples) is parsed and refused as a task's
// model; skipped when the package is absent, failing under CI=true (check_reference_missing).
#include "check_apex.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "env.h"
#include "env_mujoco.h"
#include "log.h"
#include "nstep.h"
#include "rng.h"

#define FIX "tests/fixtures/mujoco/"
#define SAMPLE_MODEL "/usr/share/mujoco/model/humanoid/humanoid.xml" // libmujoco-samples

// ---------------------------------------------------------------------------------------
// Helpers

// Loads path as spec's model, asserting success.
static const mjenv_task_t *s_load(const env_spec_t *spec, const char *path) {
    char err[512] = "";
    ck_assert_msg(env_mujoco_load(spec, path, err, sizeof err) == 0, "%s", err);
    const mjenv_task_t *t = env_mujoco_task(spec);
    ck_assert_ptr_nonnull(t);
    return t;
}

// Expects loading path as spec's model to fail with a message containing want.
static void s_load_fails(const env_spec_t *spec, const char *path, const char *want) {
    char err[512] = "";
    ck_assert_int_eq(env_mujoco_load(spec, path, err, sizeof err), -1);
    ck_assert_msg(strstr(err, want) != NULL, "got '%s', want '%s' in it", err, want);
}

// A fresh mjData of task's model with qpos, qvel and qfrc_constraint zero (hand-set by
// the test). The caller frees it with mj_deleteData.
static mjData *s_data(const mjenv_task_t *t) {
    const mjModel *m = mjenv_model(t);
    ck_assert_ptr_nonnull(m);
    mjData *d = mj_makeData(m);
    mj_resetData(m, d);
    memset(d->qpos, 0, (size_t)m->nq * sizeof(double));
    return d;
}

// The reward hook on (d, action, x_before, x_after, dt); *term gets the termination.
static double s_reward(const mjenv_task_t *t, const mjData *d, const float *action, double x0,
                       double x1, double dt, uint8_t *term) {
    const mjenv_step_t st = {
        .m = mjenv_model(t), .d = d, .action = action, .x_before = x0, .x_after = x1, .dt = dt};
    *term = 9;
    return t->reward(&st, term);
}

static void s_close(double got, double want, const char *what) {
    ck_assert_msg(fabs(got - want) <= 1e-12 * (1.0 + fabs(want)), "%s: got %.17g, want %.17g", what,
                  got, want);
}

// ---------------------------------------------------------------------------------------
// Observation layouts (the hooks on hand-set states)

// HalfCheetah qpos[1:], qvel (17); Hopper and Walker2d qpos[1:], clip(qvel, -10, 10).
START_TEST(test_obs_planar) {
    const env_spec_t *specs[] = {&env_mujoco_half_cheetah_spec, &env_mujoco_hopper_spec,
                                 &env_mujoco_walker2d_spec};
    const char *files[] = {FIX "planar.xml", FIX "pogo.xml", FIX "planar.xml"};
    for (int k = 0; k < 3; k++) {
        const mjenv_task_t *t = s_load(specs[k], files[k]);
        const int nq = t->nq, nv = t->nv, clip = k > 0;
        mjData *d = s_data(t);
        for (int i = 0; i < nq; i++) {
            d->qpos[i] = 0.5 * (i + 1);
        }
        for (int i = 0; i < nv; i++) {
            d->qvel[i] = (i % 2 ? -1.0 : 1.0) * 4.0 * i; // 0, -4, 8, -12, 16, ...
        }
        double obs[MJENV_MAX_OBS_DIM];
        t->observe(mjenv_model(t), d, obs);
        ck_assert_int_eq(t->info->obs_dim, nq - 1 + nv);
        for (int i = 0; i < nq - 1; i++) {
            ck_assert(obs[i] == 0.5 * (i + 2)); // qpos[1:]: x excluded
        }
        for (int i = 0; i < nv; i++) {
            double v = (i % 2 ? -1.0 : 1.0) * 4.0 * i;
            double want = clip ? fmin(fmax(v, -10.0), 10.0) : v;
            ck_assert_msg(obs[nq - 1 + i] == want, "%s obs[%d] = %g, want %g", t->info->id,
                          nq - 1 + i, obs[nq - 1 + i], want);
        }
        mj_deleteData(d);
        mjenv_unload(t);
    }
}
END_TEST

// Ant qpos[2:] (z and the quaternion included), qvel (27, not clipped); InvertedPendulum
// qpos, qvel (4).
START_TEST(test_obs_ant_pendulum) {
    const mjenv_task_t *t = s_load(&env_mujoco_ant_spec, FIX "quadruped.xml");
    mjData *d = s_data(t);
    for (int i = 0; i < 15; i++) {
        d->qpos[i] = 0.25 * i;
    }
    for (int i = 0; i < 14; i++) {
        d->qvel[i] = -20.0 * i;
    }
    double obs[MJENV_MAX_OBS_DIM];
    t->observe(mjenv_model(t), d, obs);
    for (int i = 0; i < 13; i++) {
        ck_assert(obs[i] == 0.25 * (i + 2));
    }
    for (int i = 0; i < 14; i++) {
        ck_assert(obs[13 + i] == -20.0 * i);
    }
    mj_deleteData(d);
    mjenv_unload(t);

    t = s_load(&env_mujoco_inv_pendulum_spec, FIX "pendulum.xml");
    d = s_data(t);
    const double q[2] = {0.3, -0.15}, v[2] = {12.0, -0.5};
    memcpy(d->qpos, q, sizeof q);
    memcpy(d->qvel, v, sizeof v);
    t->observe(mjenv_model(t), d, obs);
    ck_assert(obs[0] == 0.3 && obs[1] == -0.15 && obs[2] == 12.0 && obs[3] == -0.5);
    mj_deleteData(d);
    mjenv_unload(t);
}
END_TEST

// InvertedDoublePendulum [qpos[0], sin(qpos[1:]), cos(qpos[1:]), clip(qvel, -10, 10),
// clip(qfrc_constraint, -10, 10)] (11).
START_TEST(test_obs_double_pendulum) {
    const mjenv_task_t *t = s_load(&env_mujoco_inv_double_pendulum_spec, FIX "double_pendulum.xml");
    mjData *d = s_data(t);
    const double q[3] = {0.4, 0.5, -1.25}, v[3] = {11.0, -3.0, -10.5}, f[3] = {-15.0, 2.5, 10.0};
    memcpy(d->qpos, q, sizeof q);
    memcpy(d->qvel, v, sizeof v);
    memcpy(d->qfrc_constraint, f, sizeof f);
    double obs[MJENV_MAX_OBS_DIM];
    t->observe(mjenv_model(t), d, obs);
    const double want[11] = {0.4,  sin(0.5), sin(-1.25), cos(0.5), cos(-1.25), 10.0,
                             -3.0, -10.0,    -10.0,      2.5,      10.0};
    for (int i = 0; i < 11; i++) {
        ck_assert_msg(obs[i] == want[i], "obs[%d] = %.17g, want %.17g", i, obs[i], want[i]);
    }
    mj_deleteData(d);
    mjenv_unload(t);
}
END_TEST

// ---------------------------------------------------------------------------------------
// Rewards and termination (the hooks on hand-set states)

// HalfCheetah: x_vel - 0.1 |a|^2 of the unclamped action; never terminates.
START_TEST(test_reward_half_cheetah) {
    const mjenv_task_t *t = s_load(&env_mujoco_half_cheetah_spec, FIX "planar.xml");
    mjData *d = s_data(t);
    const float a[6] = {0.5f, -0.5f, 0.5f, -0.5f, 2.0f, 0.0f}; // 2.0 beyond ctrlrange
    uint8_t term;
    // forward (0.1 - 0) / 0.05 = 2; ctrl 0.1 * (4 * 0.25 + 4) = 0.5
    s_close(s_reward(t, d, a, 0.0, 0.1, 0.05, &term), 2.0 - 0.5, "HalfCheetah reward");
    ck_assert_int_eq(term, 0);
    d->qpos[1] = -50.0; // far below any floor, upside down: still not terminal
    d->qpos[2] = 3.0;
    s_close(s_reward(t, d, a, 1.0, 0.95, 0.05, &term), -1.0 - 0.5, "backwards");
    ck_assert_int_eq(term, 0);
    mj_deleteData(d);
    mjenv_unload(t);
}
END_TEST

// Hopper: x_vel + 1 - 1e-3 |a|^2, healthy iff qpos[2:] and qvel in (-100, 100), z > 0.7,
// |angle| < 0.2 (all strict); the healthy reward is paid on the terminating step too (v4).
START_TEST(test_reward_hopper) {
    const mjenv_task_t *t = s_load(&env_mujoco_hopper_spec, FIX "pogo.xml");
    mjData *d = s_data(t);
    const float a[3] = {1.0f, -2.0f, 0.5f};
    const double want = 0.02 / 0.008 + 1.0 - 1e-3 * (1.0 + 4.0 + 0.25); // 3.49475
    struct {
        int index; // into qpos then qvel (6 + i)
        double value;
        int terminal;
    } cases[] = {
        {-1, 0, 0},          // z 1.25, all zero: healthy
        {1, 0.7, 1},         // z > 0.7 strictly
        {1, 0.7000001, 0},   //
        {1, 150.0, 0},       // z has no upper bound and is not in state_vector()[2:]
        {2, 0.2, 1},         // |angle| < 0.2 strictly
        {2, -0.2, 1},        //
        {2, 0.1999999, 0},   //
        {3, 100.0, 1},       // qpos[2:] in (-100, 100)
        {3, 99.999, 0},      //
        {6, 100.0, 1},       // qvel[0] (x velocity) is in state_vector()[2:] as well
        {6, -99.999, 0},     //
        {6 + 5, -100.0, 1},  //
        {6 + 5, -99.999, 0}, //
        {0, -1e6, 0},        // x itself is not checked
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        memset(d->qpos, 0, 6 * sizeof(double));
        memset(d->qvel, 0, 6 * sizeof(double));
        d->qpos[1] = 1.25;
        if (cases[c].index >= 6) {
            d->qvel[cases[c].index - 6] = cases[c].value;
        } else if (cases[c].index >= 0) {
            d->qpos[cases[c].index] = cases[c].value;
        }
        uint8_t term;
        s_close(s_reward(t, d, a, 1.0, 1.02, 0.008, &term), want, "Hopper reward");
        ck_assert_msg(term == cases[c].terminal, "case %zu: terminated %d, want %d", c, term,
                      cases[c].terminal);
    }
    mj_deleteData(d);
    mjenv_unload(t);
}
END_TEST

// Walker2d: the same reward; healthy iff 0.8 < z < 2.0 and -1 < angle < 1 (strict), nothing
// else checked.
START_TEST(test_reward_walker2d) {
    const mjenv_task_t *t = s_load(&env_mujoco_walker2d_spec, FIX "planar.xml");
    mjData *d = s_data(t);
    const float a[6] = {0.1f, 0.2f, 0.3f, -0.4f, 1.5f, 0.0f};
    // Gymnasium's np.sum(np.square(action)) of this float32 action, computed by numpy
    // 1.24 (float32 throughout: 2.55 in double).
    const double sq = 2.549999952316284;
    const double want = -0.016 / 0.008 + 1.0 - 1e-3 * sq;
    const double z[] = {0.8, 0.8000001, 1.9999999, 2.0, 1.2, 1.2, 1.2, 1.2, 1.2};
    const double ang[] = {0.0, 0.0, 0.0, 0.0, 1.0, -1.0, 0.9999999, -0.9999999, 0.0};
    const int terminal[] = {1, 0, 0, 1, 1, 1, 0, 0, 0};
    for (int c = 0; c < 9; c++) {
        d->qpos[1] = z[c];
        d->qpos[2] = ang[c];
        d->qvel[3] = c == 8 ? 1e6 : 0.0; // velocities are not checked
        uint8_t term;
        s_close(s_reward(t, d, a, 0.5, 0.484, 0.008, &term), want, "Walker2d reward");
        ck_assert_msg(term == terminal[c], "case %d: terminated %d", c, term);
    }
    mj_deleteData(d);
    mjenv_unload(t);
}
END_TEST

// Ant: x_vel (of the torso) + 1 - 0.5 |a|^2; healthy iff finite and 0.2 <= z <= 1.0
// (inclusive), z = qpos[2].
START_TEST(test_reward_ant) {
    const mjenv_task_t *t = s_load(&env_mujoco_ant_spec, FIX "quadruped.xml");
    mjData *d = s_data(t);
    const float a[8] = {0.5f, 0.5f, 0.5f, 0.5f, -0.5f, -0.5f, -0.5f, -0.5f};
    const double z[] = {0.2, 0.1999999, 1.0, 1.0000001, 0.55};
    const int terminal[] = {0, 1, 0, 1, 0};
    for (int c = 0; c < 5; c++) {
        d->qpos[2] = z[c];
        uint8_t term;
        // forward (0.05 - 0) / 0.05 = 1; ctrl 0.5 * 8 * 0.25 = 1
        s_close(s_reward(t, d, a, 0.0, 0.05, 0.05, &term), 1.0 + 1.0 - 1.0, "Ant reward");
        ck_assert_msg(term == terminal[c], "z %.9g: terminated %d", z[c], term);
    }
    mj_deleteData(d);
    mjenv_unload(t);
}
END_TEST

// InvertedPendulum: reward 1; terminated iff |qpos[1]| > 0.2. InvertedDoublePendulum: 10 -
// 0.01 x^2 - (y - 2)^2 - 1e-3 v1^2 - 5e-3 v2^2 from the tip site and qvel[1:3]; terminated
// iff y <= 1.
START_TEST(test_reward_pendulums) {
    const mjenv_task_t *t = s_load(&env_mujoco_inv_pendulum_spec, FIX "pendulum.xml");
    mjData *d = s_data(t);
    const float a1[1] = {5.0f};
    const double ang[] = {0.2, -0.2, 0.2000001, -0.2000001, 0.0};
    const int terminal[] = {0, 0, 1, 1, 0};
    for (int c = 0; c < 5; c++) {
        d->qpos[1] = ang[c];
        d->qpos[0] = 7.0; // the cart's position is not checked
        uint8_t term;
        s_close(s_reward(t, d, a1, 0, 0, 0.04, &term), 1.0, "InvertedPendulum reward");
        ck_assert_msg(term == terminal[c], "angle %.9g: terminated %d", ang[c], term);
    }
    mj_deleteData(d);
    mjenv_unload(t);

    t = s_load(&env_mujoco_inv_double_pendulum_spec, FIX "double_pendulum.xml");
    d = s_data(t);
    d->qvel[0] = 50.0; // the cart's velocity is not penalised
    d->qvel[1] = 2.0;
    d->qvel[2] = -2.0;
    const double y[] = {1.5, 1.0, 1.0000001, 0.5};
    const int dp_terminal[] = {0, 1, 0, 1};
    for (int c = 0; c < 4; c++) {
        d->site_xpos[0] = 1.0; // x
        d->site_xpos[1] = 9.0; // ignored
        d->site_xpos[2] = y[c];
        uint8_t term;
        const double want = 10.0 - 0.01 - (y[c] - 2) * (y[c] - 2) - 0.004 - 0.02;
        double r = s_reward(t, d, a1, 0, 0, 0.05, &term);
        ck_assert_msg(fabs(r - want) < 1e-12, "y %g: reward %.17g, want %.17g", y[c], r, want);
        ck_assert_msg(term == dp_terminal[c], "y %.9g: terminated %d", y[c], term);
    }
    // The case worked by hand: y 1.5 gives 10 - 0.01 - 0.25 - 0.004 - 0.02 = 9.716.
    d->site_xpos[2] = 1.5;
    uint8_t term;
    ck_assert(fabs(s_reward(t, d, a1, 0, 0, 0.05, &term) - 9.716) < 1e-12);
    mj_deleteData(d);
    mjenv_unload(t);
}
END_TEST

// ---------------------------------------------------------------------------------------
// Through the spec: reset noise, frame skip, a real step's reward, time limit

// The reset draws qpos noise first (nq), then qvel (nv), from the env's stream: uniform
// -s + 2s u for Hopper and InvertedPendulum, s N(0, 1) for qvel of HalfCheetah, Ant and
// InvertedDoublePendulum.
START_TEST(test_reset_noise) {
    const env_spec_t *specs[] = {&env_mujoco_inv_pendulum_spec, &env_mujoco_half_cheetah_spec};
    const char *files[] = {FIX "pendulum.xml", FIX "planar.xml"};
    const double qpos_s[] = {0.01, 0.1}, qvel_s[] = {0.01, 0.1};
    const int normal_qvel[] = {0, 1};
    for (int k = 0; k < 2; k++) {
        const mjenv_task_t *t = s_load(specs[k], files[k]);
        const mjModel *m = mjenv_model(t);
        mjenv_state_t s = {0};
        rng_t rng, ref;
        rng_init_stream(&rng, 7, RNG_ROLE_ENV, 3);
        ref = rng;
        float obs[64];
        specs[k]->reset(&s, &rng, obs);
        for (int i = 0; i < m->nq; i++) {
            double u = rng_uniform(&ref);
            double want = m->qpos0[i] + (-qpos_s[k] + (qpos_s[k] - -qpos_s[k]) * u);
            ck_assert_msg(s.d->qpos[i] == want, "%s qpos[%d]", t->info->id, i);
        }
        for (int i = 0; i < m->nv; i++) {
            double want = normal_qvel[k]
                              ? qvel_s[k] * rng_normal(&ref)
                              : -qvel_s[k] + (qvel_s[k] - -qvel_s[k]) * rng_uniform(&ref);
            ck_assert_msg(s.d->qvel[i] == 0.0 + want, "%s qvel[%d]", t->info->id, i);
        }
        ck_assert_msg(rng_uniform(&ref) == rng_uniform(&rng), "nq + nv draws and no more");
        ck_assert(s.d->time == 0.0);
        float want_obs[64];
        specs[k]->observe(&s, want_obs);
        ck_assert_int_eq(memcmp(obs, want_obs, (size_t)t->info->obs_dim * sizeof(float)), 0);
        specs[k]->fini(&s);
        ck_assert_ptr_null(s.d);
        mjenv_unload(t);
    }
}
END_TEST

// One step is frame_skip substeps of the model's timestep; its reward is the forward
// velocity over dt = timestep x frame_skip minus the unclamped action's ctrl_cost; its
// observation is the observe hook's of the state after the step.
START_TEST(test_step_frame_skip) {
    const env_spec_t *specs[] = {&env_mujoco_half_cheetah_spec, &env_mujoco_hopper_spec,
                                 &env_mujoco_walker2d_spec, &env_mujoco_inv_pendulum_spec};
    const char *files[] = {FIX "planar.xml", FIX "pogo.xml", FIX "planar.xml", FIX "pendulum.xml"};
    const int skip[] = {5, 4, 4, 2};
    const double w[] = {0.1, 1e-3, 1e-3, 0.0}, healthy[] = {0.0, 1.0, 1.0, 1.0};
    for (int k = 0; k < 4; k++) {
        const mjenv_task_t *t = s_load(specs[k], files[k]);
        ck_assert_int_eq(t->frame_skip, skip[k]);
        const mjModel *m = mjenv_model(t);
        mjenv_state_t s = {0};
        rng_t rng;
        rng_init(&rng, 1);
        float obs[64], a[8];
        specs[k]->reset(&s, &rng, obs);
        double sq = 0.0;
        for (int i = 0; i < m->nu; i++) {
            a[i] = (i % 2 ? -1.5f : 0.25f) * t->info->action_high; // some beyond ctrlrange
            sq += (double)a[i] * (double)a[i];
        }
        const double x0 = s.d->qpos[0], dt = m->opt.timestep * skip[k];
        float r;
        uint8_t term = 9;
        specs[k]->step_cont(&s, a, obs, &r, &term);
        ck_assert_msg(term <= 1, "%s: terminated %d (%s)", t->info->id, term, s.why);
        ck_assert_msg(fabs(s.d->time - dt) < 1e-12, "%s: time %g after one step, dt %g",
                      t->info->id, s.d->time, dt);
        ck_assert(s.dt == dt);
        double want = k == 3 ? 1.0 : (s.d->qpos[0] - x0) / dt + healthy[k] - w[k] * sq;
        ck_assert_msg(r == (float)want, "%s: reward %.9g, want %.9g", t->info->id, r, want);
        float want_obs[64];
        specs[k]->observe(&s, want_obs);
        ck_assert_int_eq(memcmp(obs, want_obs, (size_t)t->info->obs_dim * sizeof(float)), 0);
        specs[k]->fini(&s);
        mjenv_unload(t);
    }
}
END_TEST

// Ant's forward coordinate is the torso's xpos, as mj_step leaves it (one substep behind
// qpos): the reward's x_before is the xpos after reset, x_after the xpos after the step.
START_TEST(test_step_ant_torso) {
    const mjenv_task_t *t = s_load(&env_mujoco_ant_spec, FIX "quadruped.xml");
    const mjModel *m = mjenv_model(t);
    const int torso = mj_name2id(m, mjOBJ_BODY, "torso");
    mjenv_state_t s = {0};
    rng_t rng;
    rng_init(&rng, 2);
    float obs[32], r;
    env_mujoco_ant_spec.reset(&s, &rng, obs);
    const float a[8] = {1, -1, 1, -1, 1, -1, 1, -1};
    const double x0 = s.d->xpos[3 * torso];
    uint8_t term = 9;
    env_mujoco_ant_spec.step_cont(&s, a, obs, &r, &term);
    ck_assert_int_le(term, 1);
    const double want = (s.d->xpos[3 * torso] - x0) / 0.05 + 1.0 - 0.5 * 8.0;
    ck_assert_msg(r == (float)want, "reward %.9g, want %.9g", r, want);
    ck_assert(s.d->xpos[3 * torso] != s.d->qpos[0]); // the lag: xpos is not this qpos's
    env_mujoco_ant_spec.fini(&s);
    mjenv_unload(t);
}
END_TEST

// Every task's time limit is Gymnasium's TimeLimit 1000 (vecenv and the actor truncate by
// it); HalfCheetah steps all 1000 without terminating or a void step.
START_TEST(test_time_limit) {
    const env_spec_t *all[] = {&env_mujoco_half_cheetah_spec, &env_mujoco_hopper_spec,
                               &env_mujoco_walker2d_spec,     &env_mujoco_ant_spec,
                               &env_mujoco_inv_pendulum_spec, &env_mujoco_inv_double_pendulum_spec};
    for (int k = 0; k < 6; k++) {
        ck_assert_int_eq(all[k]->info->max_episode_steps, 1000);
        ck_assert_ptr_eq(env_mujoco_task(all[k])->info, all[k]->info);
        ck_assert_uint_eq(all[k]->state_bytes, sizeof(mjenv_state_t));
        ck_assert_ptr_nonnull(all[k]->fini);
    }
    ck_assert_ptr_null(env_mujoco_task(&env_cartpole_spec));
    char err[8] = "";
    ck_assert_int_eq(env_mujoco_load(&env_cartpole_spec, "", err, sizeof err), 0);
    const mjenv_task_t *t = s_load(&env_mujoco_half_cheetah_spec, FIX "planar.xml");
    mjenv_state_t s = {0};
    rng_t rng;
    rng_init(&rng, 3);
    float obs[32], r, a[6];
    env_mujoco_half_cheetah_spec.reset(&s, &rng, obs);
    for (int n = 0; n < 1000; n++) {
        for (int i = 0; i < 6; i++) {
            a[i] = (float)(2.0 * rng_uniform(&rng) - 1.0);
        }
        uint8_t term = 9;
        env_mujoco_half_cheetah_spec.step_cont(&s, a, obs, &r, &term);
        ck_assert_msg(term == 0, "step %d: terminated %d (%s)", n, term, s.why);
    }
    ck_assert_uint_eq(mjenv_void_steps(t), 0);
    env_mujoco_half_cheetah_spec.fini(&s);
    mjenv_unload(t);
}
END_TEST

// ---------------------------------------------------------------------------------------
// Hopper and Walker2d through the spec: reset, the state the health is judged on, the end
// of an episode (termination or the time limit) as the actor's n-step folding sees it

// reset_model: qpos = init_qpos + U(-5e-3, 5e-3) (nq draws), then qvel = init_qvel +
// U(-5e-3, 5e-3) (nv draws), both noised, around qpos0 (rootz's ref: the standing height)
// and zero; a reset of an mjData that has stepped starts the same episode as a fresh one
// (mj_resetData first: no time, warm start or velocity left from the episode before).
START_TEST(test_reset_walkers) {
    const env_spec_t *specs[] = {&env_mujoco_hopper_spec, &env_mujoco_walker2d_spec};
    const char *files[] = {FIX "pogo.xml", FIX "planar.xml"};
    const double z0[] = {1.1, 1.25};
    for (int k = 0; k < 2; k++) {
        const mjenv_task_t *t = s_load(specs[k], files[k]);
        const mjModel *m = mjenv_model(t);
        ck_assert(t->qpos_noise == MJENV_NOISE_UNIFORM && t->qvel_noise == MJENV_NOISE_UNIFORM);
        ck_assert(t->qpos_noise_scale == 5e-3 && t->qvel_noise_scale == 5e-3);
        ck_assert(m->qpos0[1] == z0[k]);
        mjenv_state_t fresh = {0}, used = {0};
        rng_t rng, ref, other;
        rng_init_stream(&rng, 8, RNG_ROLE_ENV, (uint64_t)k);
        rng_init(&other, 99);
        float obs[32], obs2[32], r, r2;
        uint8_t term, term2;
        // used: an episode of full-torque steps first (it moves, then is reset).
        specs[k]->reset(&used, &other, obs2);
        const float push[6] = {1, -1, 1, -1, 1, -1};
        term2 = 0;
        for (int n = 0; n < 30 && term2 == 0; n++) {
            specs[k]->step_cont(&used, push, obs2, &r2, &term2);
        }
        ck_assert(term2 <= 1 && used.d->time > 0.0);
        ref = rng;
        rng_t rng2 = rng;
        specs[k]->reset(&fresh, &rng, obs);
        specs[k]->reset(&used, &rng2, obs2);
        int moved_q = 0, moved_v = 0;
        for (int i = 0; i < m->nq; i++) {
            double u = rng_uniform(&ref), want = m->qpos0[i] + (-5e-3 + (5e-3 - -5e-3) * u);
            ck_assert_msg(fresh.d->qpos[i] == want, "%s qpos[%d]", t->info->id, i);
            ck_assert(fabs(fresh.d->qpos[i] - m->qpos0[i]) <= 5e-3);
            moved_q += fresh.d->qpos[i] != m->qpos0[i];
        }
        for (int i = 0; i < m->nv; i++) {
            double want = -5e-3 + (5e-3 - -5e-3) * rng_uniform(&ref);
            ck_assert_msg(fresh.d->qvel[i] == 0.0 + want, "%s qvel[%d]", t->info->id, i);
            ck_assert(fabs(fresh.d->qvel[i]) <= 5e-3);
            moved_v += fresh.d->qvel[i] != 0.0;
        }
        ck_assert_int_eq(moved_q, m->nq); // every coordinate noised, x included
        ck_assert_int_eq(moved_v, m->nv);
        ck_assert_msg(rng_uniform(&ref) == rng_uniform(&rng), "nq + nv draws and no more");
        // The reused mjData: the same start, then the same steps, bit for bit.
        ck_assert(used.d->time == 0.0);
        const int O = t->info->obs_dim;
        ck_assert_int_eq(memcmp(obs, obs2, (size_t)O * sizeof(float)), 0);
        for (int n = 0; n < 50; n++) {
            const float a[6] = {0.3f, -0.2f, 0.1f, 0.5f, -0.4f, 0.2f};
            specs[k]->step_cont(&fresh, a, obs, &r, &term);
            specs[k]->step_cont(&used, a, obs2, &r2, &term2);
            ck_assert_msg(memcmp(obs, obs2, (size_t)O * sizeof(float)) == 0 && r == r2 &&
                              term == term2,
                          "%s: step %d differs after a reset of a used mjData", t->info->id, n);
            if (term) {
                break;
            }
        }
        specs[k]->fini(&fresh);
        specs[k]->fini(&used);
        mjenv_unload(t);
    }
}
END_TEST

// is_healthy reads the state after do_simulation: a step from a state outside the healthy
// range that ends inside it does not terminate, and one from inside that ends outside does.
// Hopper's pitch (qpos[2]) from 0.25 at -10 rad/s is 0.25 - 10 x 0.008 = 0.17 after the
// step (the pogo stick rotates rigidly in the air: every part on one line, no contact in one
// step); Walker2d's from 1.05 is about 0.97 (its feet are off the line, so its legs swing a
// little: 0.964), and its height from 2.01 at -5 m/s is 2.01 - 0.04 - g 0.008^2 / 2 = 1.9697.
// Either way the step pays the healthy reward (v4).
START_TEST(test_healthy_after_step) {
    const env_spec_t *specs[] = {&env_mujoco_hopper_spec, &env_mujoco_walker2d_spec};
    const char *files[] = {FIX "pogo.xml", FIX "planar.xml"};
    struct {
        int spec, index;      // into qpos, whose velocity qvel[index] is set as well
        double from, vel, to; // the coordinate before the step, its velocity, after (approx.)
        int terminal;
    } cases[] = {
        {0, 2, 0.25, -10.0, 0.17, 0},   {0, 2, 0.15, 10.0, 0.23, 1},  {0, 2, -0.25, 10.0, -0.17, 0},
        {0, 2, -0.15, -10.0, -0.23, 1}, {1, 2, 1.05, -10.0, 0.97, 0}, {1, 2, 0.95, 10.0, 1.03, 1},
        {1, 1, 2.01, -5.0, 1.9697, 0},  {1, 1, 1.99, 5.0, 2.0297, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const env_spec_t *spec = specs[cases[c].spec];
        const mjenv_task_t *t = s_load(spec, files[cases[c].spec]);
        const mjModel *m = mjenv_model(t);
        mjenv_state_t s = {0};
        rng_t rng;
        rng_init(&rng, 10);
        float obs[32], r;
        const float zero[6] = {0};
        spec->reset(&s, &rng, obs);
        memcpy(s.d->qpos, m->qpos0, (size_t)m->nq * sizeof(double));
        memset(s.d->qvel, 0, (size_t)m->nv * sizeof(double));
        const int i = cases[c].index;
        s.d->qpos[i] = cases[c].from;
        s.d->qvel[i] = cases[c].vel;
        uint8_t term = 9;
        spec->step_cont(&s, zero, obs, &r, &term);
        ck_assert_msg(fabs(s.d->qpos[i] - cases[c].to) < 1e-2, "case %zu: qpos[%d] = %g, want ~%g",
                      c, i, s.d->qpos[i], cases[c].to);
        ck_assert_msg(term == cases[c].terminal, "case %zu (%s): terminated %d, want %d", c,
                      t->info->id, term, cases[c].terminal);
        ck_assert_msg(obs[i - 1] == (float)s.d->qpos[i], "the observation is of the same state");
        ck_assert(r == (float)(s.d->qpos[0] / 0.008 + 1.0)); // x from 0, no ctrl cost
        spec->fini(&s);
        mjenv_unload(t);
    }
}
END_TEST

// The end of an episode as the actor folds it: Hopper held upright (its state set back to
// qpos0 at rest before each step, as a perfect policy would keep it) runs 1 000 steps and is
// then truncated, not terminated (TimeLimit), so its last n-step transitions bootstrap
// (discount gamma^m from the final observation); a fall is terminated (discount 0); a fall
// on the 1 000th step is both, and terminated wins.
START_TEST(test_episode_end_walkers) {
    const env_spec_t *specs[] = {&env_mujoco_hopper_spec, &env_mujoco_walker2d_spec};
    const char *files[] = {FIX "pogo.xml", FIX "planar.xml"};
    const double gamma = 0.99;
    for (int k = 0; k < 2; k++) {
        const env_spec_t *spec = specs[k];
        const mjenv_task_t *t = s_load(spec, files[k]);
        const mjModel *m = mjenv_model(t);
        const int O = t->info->obs_dim, D = t->info->action_dim;
        const size_t OB = (size_t)O * sizeof(float), AB = (size_t)D * sizeof(float);
        for (int fall_at = 0; fall_at <= 1000; fall_at += 500) { // 0: no fall
            vecenv_t v;
            vecenv_init(&v, spec, 1, 12, 0, 4);
            mjenv_state_t *s = (mjenv_state_t *)(void *)v.state;
            nstep_t ns;
            nstep_out_t out;
            nstep_init_actions(&ns, 1, (int)OB, (int)AB, 3, gamma);
            nstep_out_init_actions(&out, 4096, (int)OB, (int)AB);
            float obs_t[32], a[6] = {0}, r;
            uint8_t term = 0, trunc = 0;
            int n = 0;
            while (!term && !trunc) {
                memcpy(obs_t, v.obs, OB);
                memcpy(s->d->qpos, m->qpos0, (size_t)m->nq * sizeof(double));
                memset(s->d->qvel, 0, (size_t)m->nv * sizeof(double));
                if (++n == fall_at) {
                    s->d->qpos[2] = 1.5; // pitched over: unhealthy after the step
                }
                vecenv_step_cont(&v, a, &r, &term, &trunc, NULL);
                nstep_push_all(&ns, obs_t, a, &r, v.obs, v.final_obs, &term, &trunc, &out);
            }
            const int want_n = fall_at ? fall_at : 1000;
            ck_assert_msg(n == want_n, "%s: the episode ended at step %d, want %d", t->info->id, n,
                          want_n);
            ck_assert_int_eq(term, fall_at != 0);
            ck_assert_int_eq(trunc, n == 1000);
            ck_assert_int_eq(out.count, n); // one transition per step
            ck_assert(v.done_count == 1 && v.done[0].len == n && v.ep_len[0] == 0);
            // The last three transitions end at the final observation (not the reset one):
            // discounts 0.99^3, 0.99^2, 0.99 after a truncation, 0 after a fall.
            for (int j = 0; j < 3; j++) {
                const int row = out.count - 3 + j, m_steps = 3 - j;
                const float want = term ? 0.0f : (float)pow(gamma, m_steps);
                ck_assert_msg(out.discounts[row] == want, "%s fall_at %d: discount[%d] %g, want %g",
                              t->info->id, fall_at, row, (double)out.discounts[row], (double)want);
                ck_assert_int_eq(memcmp(out.next_obs + (size_t)row * OB, v.final_obs, OB), 0);
            }
            ck_assert(out.discounts[0] == (float)pow(gamma, 3)); // mid-episode: n = 3 steps
            ck_assert_int_ne(memcmp(v.final_obs, v.obs, OB), 0); // the env was reset
            nstep_out_fini(&out);
            nstep_fini(&ns);
            vecenv_fini(&v);
        }
        mjenv_unload(t);
    }
}
END_TEST

// ---------------------------------------------------------------------------------------
// Divergence: void steps, never a crash

// Reads the whole file at path into buf (n bytes at most, terminated).
static void s_slurp(const char *path, char *buf, size_t n) {
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t got = fread(buf, 1, n - 1, f);
    buf[got] = '\0';
    fclose(f);
}

// Checks a void step's outputs.
static void s_expect_void(const float *obs, int obs_dim, float r, uint8_t term) {
    ck_assert_int_eq(term, 2);
    ck_assert(r == 0.0f);
    for (int i = 0; i < obs_dim; i++) {
        ck_assert(obs[i] == 0.0f);
    }
}

// diverge.xml: a gear of 1e12, so an action of 3 is a bad qacc (MuJoCo's warning, after
// which MuJoCo would silently reset the simulation): a void step, one log line naming the
// env and MuJoCo's words; the env steps normally after its reset. A non-finite action is
// void without being stepped.
START_TEST(test_void_bad_qacc) {
    const char *dir = check_tmpdir();
    char logpath[600], text[8192];
    snprintf(logpath, sizeof logpath, "%s/log", dir);
    log_set_level(LOG_WARN);
    ck_assert_int_eq(log_open_file(logpath), 0);
    const env_spec_t *spec = &env_mujoco_inv_pendulum_spec;
    const mjenv_task_t *t = s_load(spec, FIX "diverge.xml");
    mjenv_state_t s = {0};
    rng_t rng;
    rng_init(&rng, 4);
    float obs[4], r;
    uint8_t term = 9;
    spec->reset(&s, &rng, obs);
    const float zero[1] = {0.0f}, three[1] = {3.0f}, nan1[1] = {NAN};
    spec->step_cont(&s, zero, obs, &r, &term);
    ck_assert_int_eq(term, 0);
    spec->step_cont(&s, three, obs, &r, &term);
    s_expect_void(obs, 4, r, term);
    ck_assert_msg(strstr(s.why, "QACC") != NULL, "why: %s", s.why);
    ck_assert_uint_eq(s.void_steps, 1);
    ck_assert_uint_eq(mjenv_void_steps(t), 1);
    // The caller resets; the env then steps normally.
    spec->reset(&s, &rng, obs);
    spec->step_cont(&s, zero, obs, &r, &term);
    ck_assert_int_eq(term, 0);
    ck_assert(r == 1.0f);
    // A NaN action: void, and not stepped.
    spec->reset(&s, &rng, obs);
    spec->step_cont(&s, nan1, obs, &r, &term);
    s_expect_void(obs, 4, r, term);
    ck_assert_msg(strstr(s.why, "action[0]") != NULL, "why: %s", s.why);
    ck_assert_uint_eq(mjenv_void_steps(t), 2);
    log_close_file();
    s_slurp(logpath, text, sizeof text);
    ck_assert_msg(strstr(text, "InvertedPendulum-v4: the simulation diverged") != NULL &&
                      strstr(text, "the step is void and the env resets") != NULL,
                  "log: %s", text);
    // Rate-limited: two void steps within the interval, one line.
    ck_assert_msg(strstr(strstr(text, "diverged") + 1, "diverged") == NULL, "log: %s", text);
    spec->fini(&s);
    mjenv_unload(t);
    check_rmtree(dir);
}
END_TEST

// stiff.xml: a spring of stiffness 1e300. From a cart velocity of 1, one RK4 step ends with
// NaN qpos/qvel that MuJoCo itself would notice only at the next step: void now.
START_TEST(test_void_nan_state) {
    const env_spec_t *spec = &env_mujoco_inv_pendulum_spec;
    const mjenv_task_t *t = s_load(spec, FIX "stiff.xml");
    mjenv_state_t s = {0};
    rng_t rng;
    rng_init(&rng, 5);
    float obs[4], r;
    uint8_t term = 9;
    spec->reset(&s, &rng, obs);
    memset(s.d->qpos, 0, 2 * sizeof(double));
    s.d->qvel[0] = 1.0;
    s.d->qvel[1] = 0.0;
    const float zero[1] = {0.0f};
    spec->step_cont(&s, zero, obs, &r, &term);
    s_expect_void(obs, 4, r, term);
    ck_assert_msg(strstr(s.why, "after the step") != NULL || strstr(s.why, "Nan") != NULL ||
                      strstr(s.why, "QPOS") != NULL || strstr(s.why, "QVEL") != NULL,
                  "why: %s", s.why);
    ck_assert_uint_eq(mjenv_void_steps(t), 1);
    spec->reset(&s, &rng, obs); // qpos near 0, qvel ~0.01: a finite, if violent, world
    ck_assert(isfinite(s.d->qpos[0]));
    spec->fini(&s);
    mjenv_unload(t);
}
END_TEST

// A task of the test's own over mjenv (the engine takes any mjenv_task_t): stack.xml, a box
// falling onto a floor with MuJoCo's stack too small for the landing's contacts. MuJoCo
// raises an error (its default handler would exit the process): the step is void and the
// process lives on.
static void s_box_observe(const mjModel *m, const mjData *d, double *obs) {
    memcpy(obs, d->qpos, (size_t)m->nq * sizeof(double));
    memcpy(obs + m->nq, d->qvel, 4 * sizeof(double));
}
static double s_box_reward(const mjenv_step_t *s, uint8_t *terminated) {
    (void)s;
    *terminated = 0;
    return 0.0;
}

START_TEST(test_void_mujoco_error) {
    // info: a row with obs_dim 11 (7 + 4 written above), nu 1 and ctrlrange [-1, 1].
    const mjenv_task_t box = {.info = &envinfo_table[ENVINFO_INV_DOUBLE_PENDULUM],
                              .asset = "stack.xml",
                              .nq = 7,
                              .nv = 6,
                              .frame_skip = 1,
                              .observe = s_box_observe,
                              .reward = s_box_reward};
    char err[512] = "";
    ck_assert_msg(mjenv_load(&box, FIX "stack.xml", err, sizeof err) == 0, "%s", err);
    mjenv_state_t s = {0};
    rng_t rng;
    rng_init(&rng, 6);
    float obs[11], r;
    uint8_t term = 0;
    mjenv_reset(&s, &box, &rng, obs);
    const float zero[1] = {0.0f};
    int n = 0;
    for (; n < 200 && term == 0; n++) { // the box lands after about 0.2 s (20 steps)
        mjenv_step(&s, zero, obs, &r, &term);
    }
    ck_assert_msg(term == 2, "no void step in %d steps", n);
    s_expect_void(obs, 11, r, term);
    ck_assert_msg(strstr(s.why, "MuJoCo error") != NULL, "why: %s", s.why);
    // The env resets and falls again, as far as the landing.
    mjenv_reset(&s, &box, &rng, obs);
    mjenv_step(&s, zero, obs, &r, &term);
    ck_assert_int_eq(term, 0);
    mjenv_fini(&s);
    mjenv_unload(&box);
}
END_TEST

// ---------------------------------------------------------------------------------------
// Start-up errors, ownership

START_TEST(test_load_errors) {
    s_load_fails(&env_mujoco_hopper_spec, "", "Hopper-v4 needs [env] model_xml");
    s_load_fails(&env_mujoco_hopper_spec, FIX "missing.xml",
                 "Hopper-v4: cannot load model_xml 'tests/fixtures/mujoco/missing.xml': XML");
    // Not MJCF at all: MuJoCo's parser refuses it, in one line.
    char err[512] = "";
    ck_assert_int_eq(
        env_mujoco_load(&env_mujoco_hopper_spec, "tests/check_mujoco.c", err, sizeof err), -1);
    ck_assert_msg(strstr(err, "cannot load model_xml") && !strchr(err, '\n'), "%s", err);
    s_load_fails(&env_mujoco_hopper_spec, FIX "pendulum.xml",
                 "model_xml 'tests/fixtures/mujoco/pendulum.xml' has nq 2, nv 2, nu 1; "
                 "Hopper-v4's model (hopper.xml) has nq 6, nv 6, nu 3");
    s_load_fails(&env_mujoco_ant_spec, FIX "planar.xml", "has nq 9, nv 9, nu 6");
    // The task's dimensions with another ctrlrange: pendulum.xml with [-1, 1].
    const char *dir = check_tmpdir();
    char path[600], cmd[1400];
    snprintf(path, sizeof path, "%s/range.xml", dir);
    snprintf(cmd, sizeof cmd, "sed 's/ctrlrange=\"-3 3\"/ctrlrange=\"-1 1\"/' %s > %s",
             FIX "pendulum.xml", path);
    ck_assert_int_eq(system(cmd), 0);
    s_load_fails(&env_mujoco_inv_pendulum_spec, path,
                 "actuator 0's ctrlrange is [-1, 1]; InvertedPendulum-v4's actions are in [-3, 3]");
    // Ant's reward reads the body "torso": a model without it is refused.
    snprintf(path, sizeof path, "%s/notorso.xml", dir);
    snprintf(cmd, sizeof cmd, "sed 's/name=\"torso\"/name=\"trunk\"/' %s > %s", FIX "quadruped.xml",
             path);
    ck_assert_int_eq(system(cmd), 0);
    s_load_fails(&env_mujoco_ant_spec, path, "has no body 'torso'");
    check_rmtree(dir);
}
END_TEST

// Envs still bound to a model block loading another one; vecenv_fini releases every env
// (spec->fini), after which the load goes through. Under ASan the leak check at exit sees
// any mjData left behind.
START_TEST(test_vecenv_fini) {
    const mjenv_task_t *t = s_load(&env_mujoco_walker2d_spec, FIX "planar.xml");
    vecenv_t v;
    vecenv_init(&v, &env_mujoco_walker2d_spec, 3, 11, 0, 8);
    const mjenv_state_t *s1 = (const mjenv_state_t *)(v.state + sizeof(mjenv_state_t));
    ck_assert_ptr_nonnull(s1->d);
    ck_assert_ptr_eq(s1->task, t);
    s_load_fails(&env_mujoco_walker2d_spec, FIX "planar.xml", "3 envs still use the model");
    vecenv_fini(&v);
    vecenv_fini(&v); // no-op
    s_load(&env_mujoco_walker2d_spec, FIX "planar.xml");
    mjenv_state_t z = {0};
    env_mujoco_walker2d_spec.fini(&z); // a zeroed state: no-op
    mjenv_unload(t);
    mjenv_unload(t); // no-op
    ck_assert_ptr_null(mjenv_model(t));
}
END_TEST

// Optional: MuJoCo's own humanoid (libmujoco-samples) parses with this libmujoco and is
// refused as Hopper's model by its dimensions, not by the parser.
START_TEST(test_sample_model) {
    if (access(SAMPLE_MODEL, R_OK) != 0) {
        check_reference_missing("test_sample_model",
                                SAMPLE_MODEL " (libmujoco-samples, scripts/install-deps.sh)");
        return;
    }
    s_load_fails(&env_mujoco_hopper_spec, SAMPLE_MODEL, "has nq 28, nv 27, nu 21");
}
END_TEST

Suite *mujoco_suite(void) {
    Suite *s = suite_create("mujoco");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_obs_planar);
    tcase_add_test(tc, test_obs_ant_pendulum);
    tcase_add_test(tc, test_obs_double_pendulum);
    tcase_add_test(tc, test_reward_half_cheetah);
    tcase_add_test(tc, test_reward_hopper);
    tcase_add_test(tc, test_reward_walker2d);
    tcase_add_test(tc, test_reward_ant);
    tcase_add_test(tc, test_reward_pendulums);
    tcase_add_test(tc, test_reset_noise);
    tcase_add_test(tc, test_step_frame_skip);
    tcase_add_test(tc, test_step_ant_torso);
    tcase_add_test(tc, test_time_limit);
    tcase_add_test(tc, test_reset_walkers);
    tcase_add_test(tc, test_healthy_after_step);
    tcase_add_test(tc, test_episode_end_walkers);
    tcase_add_test(tc, test_void_bad_qacc);
    tcase_add_test(tc, test_void_nan_state);
    tcase_add_test(tc, test_void_mujoco_error);
    tcase_add_test(tc, test_load_errors);
    tcase_add_test(tc, test_vecenv_fini);
    tcase_add_test(tc, test_sample_model);
    suite_add_tcase(s, tc);
    return s;
}
