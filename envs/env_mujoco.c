// env_mujoco.c: Gymnasium's six MuJoCo v4 tasks (env_mujoco.h) as mjenv tasks and env
// specs. Each task's observation and reward hooks are transcribed from its
// gymnasium/envs/mujoco/<task>_v4.py (_get_obs, step, is_healthy) with the defaults of its
// __init__, keeping the Python's comparisons (strict or inclusive) and its order of
// operations; the numbers are in each task's table entry.
#include "env_mujoco.h"

#include "apex.h"

#include <math.h>
#include <string.h>

_Static_assert(sizeof(mjenv_state_t) <= ENV_MAX_STATE_BYTES, "a MuJoCo state fits vecenv's bound");

// ---------------------------------------------------------------------------------------
// Shared pieces

// Gymnasium's control_cost: weight * np.sum(np.square(action)), of the action as given
// (before MuJoCo clamps it), in double here.
// numpy's float32 pairwise sum of a[0..n) (pairwise_sum_FLOAT in numpy's loops_utils.h.src:
// a plain loop under 8 elements, 8 accumulators up to 128, halves above), float arithmetic.
static float s_np_pairwise_f32(const float *a, int n) {
    if (n < 8) {
        float res = 0.0f;
        for (int i = 0; i < n; i++) {
            res += a[i];
        }
        return res;
    }
    if (n <= 128) {
        float r[8];
        int i;
        for (int j = 0; j < 8; j++) {
            r[j] = a[j];
        }
        for (i = 8; i < n - (n % 8); i += 8) {
            for (int j = 0; j < 8; j++) {
                r[j] += a[i + j];
            }
        }
        float res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) {
            res += a[i];
        }
        return res;
    }
    int n2 = n / 2;
    n2 -= n2 % 8;
    return s_np_pairwise_f32(a, n2) + s_np_pairwise_f32(a + n2, n - n2);
}

// weight * np.sum(np.square(action)) as Gymnasium computes it for a float32 action: the
// squares in float32, numpy's pairwise sum of them in float32 (checked against numpy 1.24's
// np.sum for 1 to 11 elements: identical), the product with the Python float weight in
// float64. Summing in double
// instead differed from Gymnasium by one float32 step of the reward on ~0.1 % of Hopper's
// steps (tests/fixtures/mujoco: Gymnasium's own hopper_v4.py on this libmujoco).
static double s_ctrl_cost(const mjenv_step_t *s, double weight) {
    float sq[MJENV_MAX_ACTIONS];
    const int nu = s->m->nu;
    APEX_ASSERT(nu <= MJENV_MAX_ACTIONS); // mjenv_load: nu is the task's action_dim
    for (int i = 0; i < nu; i++) {
        sq[i] = s->action[i] * s->action[i];
    }
    return weight * (double)s_np_pairwise_f32(sq, nu);
}

static double s_x_velocity(const mjenv_step_t *s) { return (s->x_after - s->x_before) / s->dt; }

// np.clip(x, lo, hi) of n values into out.
static void s_clip(double *out, const double *x, int n, double lo, double hi) {
    for (int i = 0; i < n; i++) {
        out[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
    }
}

// qpos[skip:], then qvel (clipped to +-10 when clip_vel): exclude_current_positions.
static void s_obs_positions_velocities(const mjModel *m, const mjData *d, double *obs, int skip,
                                       int clip_vel) {
    memcpy(obs, d->qpos + skip, (size_t)(m->nq - skip) * sizeof(double));
    if (clip_vel) {
        s_clip(obs + m->nq - skip, d->qvel, m->nv, -10.0, 10.0);
    } else {
        memcpy(obs + m->nq - skip, d->qvel, (size_t)m->nv * sizeof(double));
    }
}

// Hopper's and Walker2d's reward: forward_reward + healthy_reward - ctrl_cost, with the
// healthy reward of v4 (float(is_healthy or terminate_when_unhealthy) * 1.0: 1 on every step,
// the terminating one included).
static double s_healthy_walker_reward(const mjenv_step_t *s, int healthy, uint8_t *terminated) {
    double forward_reward = 1.0 * s_x_velocity(s);
    double healthy_reward = 1.0;
    double rewards = forward_reward + healthy_reward;
    double costs = s_ctrl_cost(s, 1e-3);
    *terminated = (uint8_t)!healthy;
    return rewards - costs;
}

// ---------------------------------------------------------------------------------------
// HalfCheetah-v4 (half_cheetah_v4.py)

static void s_half_cheetah_observe(const mjModel *m, const mjData *d, double *obs) {
    s_obs_positions_velocities(m, d, obs, 1, 0);
}

static double s_half_cheetah_reward(const mjenv_step_t *s, uint8_t *terminated) {
    double forward_reward = 1.0 * s_x_velocity(s);
    double ctrl_cost = s_ctrl_cost(s, 0.1);
    *terminated = 0;
    return forward_reward - ctrl_cost;
}

static const mjenv_task_t s_half_cheetah = {
    .info = &envinfo_table[ENVINFO_HALF_CHEETAH],
    .asset = "half_cheetah.xml",
    .nq = 9,
    .nv = 9,
    .frame_skip = 5,
    .qpos_noise = MJENV_NOISE_UNIFORM,
    .qpos_noise_scale = 0.1,
    .qvel_noise = MJENV_NOISE_NORMAL,
    .qvel_noise_scale = 0.1,
    .observe = s_half_cheetah_observe,
    .reward = s_half_cheetah_reward,
};

// ---------------------------------------------------------------------------------------
// Hopper-v4 (hopper_v4.py)

static void s_hopper_observe(const mjModel *m, const mjData *d, double *obs) {
    s_obs_positions_velocities(m, d, obs, 1, 1);
}

// is_healthy: state_vector()[2:] (qpos[2:] then qvel) all in (-100, 100), 0.7 < z < inf,
// -0.2 < angle < 0.2, with z, angle = qpos[1:3].
static int s_hopper_healthy(const mjModel *m, const mjData *d) {
    int healthy_state = 1;
    for (int i = 2; i < m->nq + m->nv; i++) {
        double x = i < m->nq ? d->qpos[i] : d->qvel[i - m->nq];
        healthy_state &= -100.0 < x && x < 100.0;
    }
    double z = d->qpos[1], angle = d->qpos[2];
    int healthy_z = 0.7 < z && z < INFINITY;
    int healthy_angle = -0.2 < angle && angle < 0.2;
    return healthy_state && healthy_z && healthy_angle;
}

static double s_hopper_reward(const mjenv_step_t *s, uint8_t *terminated) {
    return s_healthy_walker_reward(s, s_hopper_healthy(s->m, s->d), terminated);
}

static const mjenv_task_t s_hopper = {
    .info = &envinfo_table[ENVINFO_HOPPER],
    .asset = "hopper.xml",
    .nq = 6,
    .nv = 6,
    .frame_skip = 4,
    .qpos_noise = MJENV_NOISE_UNIFORM,
    .qpos_noise_scale = 5e-3,
    .qvel_noise = MJENV_NOISE_UNIFORM,
    .qvel_noise_scale = 5e-3,
    .observe = s_hopper_observe,
    .reward = s_hopper_reward,
};

// ---------------------------------------------------------------------------------------
// Walker2d-v4 (walker2d_v4.py)

// is_healthy: 0.8 < z < 2.0 and -1.0 < angle < 1.0, with z, angle = qpos[1:3].
static int s_walker2d_healthy(const mjData *d) {
    double z = d->qpos[1], angle = d->qpos[2];
    int healthy_z = 0.8 < z && z < 2.0;
    int healthy_angle = -1.0 < angle && angle < 1.0;
    return healthy_z && healthy_angle;
}

static double s_walker2d_reward(const mjenv_step_t *s, uint8_t *terminated) {
    return s_healthy_walker_reward(s, s_walker2d_healthy(s->d), terminated);
}

static const mjenv_task_t s_walker2d = {
    .info = &envinfo_table[ENVINFO_WALKER2D],
    .asset = "walker2d.xml",
    .nq = 9,
    .nv = 9,
    .frame_skip = 4,
    .qpos_noise = MJENV_NOISE_UNIFORM,
    .qpos_noise_scale = 5e-3,
    .qvel_noise = MJENV_NOISE_UNIFORM,
    .qvel_noise_scale = 5e-3,
    .observe = s_hopper_observe, // the same layout: qpos[1:], clip(qvel, -10, 10)
    .reward = s_walker2d_reward,
};

// ---------------------------------------------------------------------------------------
// Ant-v4 (ant_v4.py, use_contact_forces = False)

static void s_ant_observe(const mjModel *m, const mjData *d, double *obs) {
    s_obs_positions_velocities(m, d, obs, 2, 0);
}

// is_healthy: np.isfinite(state).all() and 0.2 <= state[2] <= 1.0 (inclusive), state =
// state_vector() = qpos then qvel, so state[2] = qpos[2].
static int s_ant_healthy(const mjModel *m, const mjData *d) {
    for (int i = 0; i < m->nq; i++) {
        if (!isfinite(d->qpos[i])) {
            return 0;
        }
    }
    for (int i = 0; i < m->nv; i++) {
        if (!isfinite(d->qvel[i])) {
            return 0;
        }
    }
    return 0.2 <= d->qpos[2] && d->qpos[2] <= 1.0;
}

// The forward coordinate is the torso's xpos x (get_body_com("torso")), forward_body.
static double s_ant_reward(const mjenv_step_t *s, uint8_t *terminated) {
    double forward_reward = s_x_velocity(s);
    double healthy_reward = 1.0; // v4: paid whether healthy or not (terminate_when_unhealthy)
    double rewards = forward_reward + healthy_reward;
    double costs = s_ctrl_cost(s, 0.5);
    *terminated = (uint8_t)!s_ant_healthy(s->m, s->d);
    return rewards - costs;
}

static const mjenv_task_t s_ant = {
    .info = &envinfo_table[ENVINFO_ANT],
    .asset = "ant.xml",
    .nq = 15,
    .nv = 14,
    .frame_skip = 5,
    .qpos_noise = MJENV_NOISE_UNIFORM,
    .qpos_noise_scale = 0.1,
    .qvel_noise = MJENV_NOISE_NORMAL,
    .qvel_noise_scale = 0.1,
    .forward_body = "torso",
    .observe = s_ant_observe,
    .reward = s_ant_reward,
};

// ---------------------------------------------------------------------------------------
// InvertedPendulum-v4 (inverted_pendulum_v4.py)

static void s_inv_pendulum_observe(const mjModel *m, const mjData *d, double *obs) {
    s_obs_positions_velocities(m, d, obs, 0, 0);
}

// reward 1.0; terminated = not np.isfinite(ob).all() or np.abs(ob[1]) > 0.2, ob[1] = qpos[1].
static double s_inv_pendulum_reward(const mjenv_step_t *s, uint8_t *terminated) {
    int finite = 1;
    for (int i = 0; i < s->m->nq; i++) {
        finite &= isfinite(s->d->qpos[i]) != 0;
    }
    for (int i = 0; i < s->m->nv; i++) {
        finite &= isfinite(s->d->qvel[i]) != 0;
    }
    *terminated = (uint8_t)(!finite || fabs(s->d->qpos[1]) > 0.2);
    return 1.0;
}

static const mjenv_task_t s_inv_pendulum = {
    .info = &envinfo_table[ENVINFO_INV_PENDULUM],
    .asset = "inverted_pendulum.xml",
    .nq = 2,
    .nv = 2,
    .frame_skip = 2,
    .qpos_noise = MJENV_NOISE_UNIFORM,
    .qpos_noise_scale = 0.01,
    .qvel_noise = MJENV_NOISE_UNIFORM,
    .qvel_noise_scale = 0.01,
    .observe = s_inv_pendulum_observe,
    .reward = s_inv_pendulum_reward,
};

// ---------------------------------------------------------------------------------------
// InvertedDoublePendulum-v4 (inverted_double_pendulum_v4.py)

// [qpos[:1], sin(qpos[1:]), cos(qpos[1:]), clip(qvel, -10, 10), clip(qfrc_constraint, -10,
// 10)]: 1 + 2 + 2 + 3 + 3 = 11.
static void s_inv_double_pendulum_observe(const mjModel *m, const mjData *d, double *obs) {
    const int nh = m->nq - 1; // the hinges
    obs[0] = d->qpos[0];
    for (int i = 0; i < nh; i++) {
        obs[1 + i] = sin(d->qpos[1 + i]);
        obs[1 + nh + i] = cos(d->qpos[1 + i]);
    }
    s_clip(obs + 1 + 2 * nh, d->qvel, m->nv, -10.0, 10.0);
    s_clip(obs + 1 + 2 * nh + m->nv, d->qfrc_constraint, m->nv, -10.0, 10.0);
}

// x, _, y = site_xpos[0]; dist_penalty = 0.01 * x**2 + (y - 2) ** 2; v1, v2 = qvel[1:3];
// vel_penalty = 1e-3 * v1**2 + 5e-3 * v2**2; r = alive_bonus - dist_penalty - vel_penalty
// with alive_bonus 10 (paid on the terminating step too); terminated = y <= 1.
static double s_inv_double_pendulum_reward(const mjenv_step_t *s, uint8_t *terminated) {
    const double x = s->d->site_xpos[0], y = s->d->site_xpos[2];
    const double v1 = s->d->qvel[1], v2 = s->d->qvel[2];
    double dist_penalty = 0.01 * (x * x) + (y - 2) * (y - 2);
    double vel_penalty = 1e-3 * (v1 * v1) + 5e-3 * (v2 * v2);
    double alive_bonus = 10;
    *terminated = (uint8_t)(y <= 1);
    return alive_bonus - dist_penalty - vel_penalty;
}

static const mjenv_task_t s_inv_double_pendulum = {
    .info = &envinfo_table[ENVINFO_INV_DOUBLE_PENDULUM],
    .asset = "inverted_double_pendulum.xml",
    .nq = 3,
    .nv = 3,
    .frame_skip = 5,
    .qpos_noise = MJENV_NOISE_UNIFORM,
    .qpos_noise_scale = 0.1,
    .qvel_noise = MJENV_NOISE_NORMAL,
    .qvel_noise_scale = 0.1,
    .needs_site = 1,
    .observe = s_inv_double_pendulum_observe,
    .reward = s_inv_double_pendulum_reward,
};

// ---------------------------------------------------------------------------------------
// The specs: env.h's untyped interface over mjenv's typed one

static void s_step(void *state, const float *action, void *obs, float *reward,
                   uint8_t *terminated) {
    mjenv_step(state, action, obs, reward, terminated);
}
static void s_observe(const void *state, void *obs) { mjenv_observe(state, obs); }
static void s_fini(void *state) { mjenv_fini(state); }

#define MUJOCO_SPEC(var, key, task)                                                                \
    static void s_reset_##var(void *state, rng_t *rng, void *obs) {                                \
        mjenv_reset(state, &task, rng, obs);                                                       \
    }                                                                                              \
    const env_spec_t var = {.info = &envinfo_table[ENVINFO_##key],                                 \
                            .state_dim = 0,                                                        \
                            .state_bytes = sizeof(mjenv_state_t),                                  \
                            .reset = s_reset_##var,                                                \
                            .step_cont = s_step,                                                   \
                            .observe = s_observe,                                                  \
                            .fini = s_fini}

MUJOCO_SPEC(env_mujoco_half_cheetah_spec, HALF_CHEETAH, s_half_cheetah);
MUJOCO_SPEC(env_mujoco_hopper_spec, HOPPER, s_hopper);
MUJOCO_SPEC(env_mujoco_walker2d_spec, WALKER2D, s_walker2d);
MUJOCO_SPEC(env_mujoco_ant_spec, ANT, s_ant);
MUJOCO_SPEC(env_mujoco_inv_pendulum_spec, INV_PENDULUM, s_inv_pendulum);
MUJOCO_SPEC(env_mujoco_inv_double_pendulum_spec, INV_DOUBLE_PENDULUM, s_inv_double_pendulum);

const mjenv_task_t *env_mujoco_task(const env_spec_t *spec) {
    static const struct {
        const env_spec_t *spec;
        const mjenv_task_t *task;
    } map[] = {{&env_mujoco_half_cheetah_spec, &s_half_cheetah},
               {&env_mujoco_hopper_spec, &s_hopper},
               {&env_mujoco_walker2d_spec, &s_walker2d},
               {&env_mujoco_ant_spec, &s_ant},
               {&env_mujoco_inv_pendulum_spec, &s_inv_pendulum},
               {&env_mujoco_inv_double_pendulum_spec, &s_inv_double_pendulum}};
    for (size_t i = 0; i < APEX_ARRAY_LEN(map); i++) {
        if (map[i].spec == spec) {
            return map[i].task;
        }
    }
    return NULL;
}

int env_mujoco_load(const env_spec_t *spec, const char *model_xml, char *err, size_t errlen) {
    const mjenv_task_t *task = env_mujoco_task(spec);
    return task ? mjenv_load(task, model_xml, err, errlen) : 0;
}
