// env_mujoco.h: Gymnasium's MuJoCo v4 tasks as env specs (issue #28): HalfCheetah-v4,
// Hopper-v4, Walker2d-v4, Ant-v4, InvertedPendulum-v4 and InvertedDoublePendulum-v4, the
// rows of ENVINFO_MUJOCO_TABLE (envinfo.h), each transcribed from
// gymnasium/envs/mujoco/<task>_v4.py with its default options and stepped by the engine of
// mjenv.h (which says what is and is not exact to Gymnasium).
//
// Not exact to Gymnasium, and not tested against it: a trajectory comparison would need
// Gymnasium with the mujoco Python bindings at the C library's version (Debian's 2.2.2;
// pip's is 3.x) and Gymnasium's start states (numpy's PCG64, not apex's stream). What
// tests/check_mujoco.c checks instead is the task logic below, against hand-computed cases
// on apex's own test models: the observation layouts, the reward terms and weights, the
// healthy/termination rules at their boundaries, the reset noise, frame_skip and dt, the
// time limit, and the void step of a diverging simulation.
//
// The tasks (dt = the model's timestep x frame skip; Gymnasium's assets: 0.01 x 5 = 0.05 s
// for HalfCheetah and Ant, 0.002 x 4 = 0.008 s for Hopper and Walker2d, 0.02 x 2 = 0.04 s
// for InvertedPendulum, 0.01 x 5 = 0.05 s for InvertedDoublePendulum):
//   HalfCheetah-v4  obs qpos[1:], qvel (17); reward x_vel - 0.1 |a|^2; never terminates;
//                   reset qpos0 + U(-0.1, 0.1), qvel 0.1 N(0, 1).
//   Hopper-v4       obs qpos[1:], clip(qvel, -10, 10) (11); reward x_vel + 1 - 1e-3 |a|^2;
//                   terminates unless every value of qpos[2:] and qvel is in (-100, 100),
//                   z = qpos[1] > 0.7 and the angle qpos[2] is in (-0.2, 0.2);
//                   reset U(-5e-3, 5e-3) on qpos0 and on qvel.
//   Walker2d-v4     obs qpos[1:], clip(qvel, -10, 10) (17); reward x_vel + 1 - 1e-3 |a|^2;
//                   terminates unless 0.8 < z < 2 and -1 < angle < 1; reset as Hopper's.
//   Ant-v4          obs qpos[2:], qvel (27: no contact forces); reward x_vel of the torso's
//                   xpos + 1 - 0.5 |a|^2; terminates unless 0.2 <= z = qpos[2] <= 1 (and the
//                   state is finite); reset qpos0 + U(-0.1, 0.1), qvel 0.1 N(0, 1).
//   InvertedPendulum-v4        obs qpos, qvel (4); reward 1; terminates when |qpos[1]| >
//                   0.2 (or the observation is not finite); reset U(-0.01, 0.01) on both.
//   InvertedDoublePendulum-v4  obs qpos[0], sin(qpos[1:]), cos(qpos[1:]), clip(qvel, -10,
//                   10), clip(qfrc_constraint, -10, 10) (11); with (x, _, y) the first
//                   site's site_xpos (the tip), reward 10 - 0.01 x^2 - (y - 2)^2 - 1e-3
//                   qvel[1]^2 - 5e-3 qvel[2]^2; terminates when y <= 1; reset qpos0 +
//                   U(-0.1, 0.1), qvel 0.1 N(0, 1).
// x_vel = (x after - x before) / dt, x = qpos[0] (Ant: the torso body's xpos x); |a|^2 the
// sum of the squared action components as given, before MuJoCo clamps them. v4's quirks are
// kept: the healthy reward (1) is paid on every step, the terminating one included (v5 pays
// it only while healthy); Ant's and InvertedDoublePendulum's xpos and site_xpos are one
// substep behind qpos; InvertedDoublePendulum observes qfrc_constraint (v5 dropped it);
// Walker2d's feet have the friction its model file gives them (0.9 and 1.9 in v4's asset).
// Where Gymnasium terminates on a non-finite state (Ant, InvertedPendulum) apex's step is
// void instead (terminated = 2, mjenv.h): a NaN state is never a transition.
//
// The models: apex ships none. [env] model_xml names the task's MJCF file, normally
// Gymnasium's own (gymnasium/envs/mujoco/assets/<asset>, which scripts/fetch-mujoco-models
// installs into models/mujoco/ at a pinned commit, checking each file's sha256), loaded at
// start-up by env_mujoco_load; a model whose nq, nv, nu or ctrlrange are not the task's is
// refused. The states are mjenv_state_t: not copyable, released by spec->fini.
#ifndef APEX_ENV_MUJOCO_H
#define APEX_ENV_MUJOCO_H

#include "env.h"
#include "mjenv.h"

#include <stddef.h>

// The MuJoCo task behind spec, or NULL for any other spec (and NULL).
const mjenv_task_t *env_mujoco_task(const env_spec_t *spec);

// Start-up: when spec is a MuJoCo task, loads model_xml as its model (mjenv_load); for any
// other spec does nothing. Returns 0, or -1 with a message in err naming the env id and the
// file (with MuJoCo's own error text where MuJoCo refused it). Thread-safe.
int env_mujoco_load(const env_spec_t *spec, const char *model_xml, char *err, size_t errlen);

#endif
