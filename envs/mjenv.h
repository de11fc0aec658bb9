// mjenv.h: the MuJoCo engine under apex's MuJoCo tasks (env_mujoco.h): what Gymnasium's
// MujocoEnv (gymnasium/envs/mujoco/mujoco_env.py) does for its v4 tasks, over MuJoCo's C
// library, with what differs between tasks (frame skip, observation, reward, termination,
// reset noise) given per task as numbers and hooks (mjenv_task_t).
//
// What it does:
// - Models: one mjModel per task per process, loaded from an MJCF file at start-up
//   (mjenv_load) and shared read-only by every env of the task. A file MuJoCo cannot load is
//   refused with MuJoCo's own error text; so is a model that is not the task's (nq, nv or nu,
//   an actuator's ctrlrange, the body or site the reward reads) or that MuJoCo cannot step
//   from its initial state.
// - Per env: mjenv_state_t, a small struct that owns one mjData, made by the env's first
//   reset and freed by mjenv_fini. It is plain data in the sense of env.h (a fixed size,
//   no hidden state elsewhere) but must not be copied: two copies would step and free one
//   simulation.
// - reset (Gymnasium's reset + reset_model + set_state): mj_resetData; qpos = qpos0 + noise
//   (nq draws), then qvel = 0 + noise (nv draws), in that order; mj_forward. Noise is
//   uniform U(-s, s), computed as numpy's uniform(-s, s) is (-s + (s - -s) * u), or normal
//   s * N(0, 1), drawn from the env's apex stream (rng_t: xoshiro256** and Box-Muller), not
//   numpy's PCG64: the distributions are Gymnasium's, the streams are not, and no seed gives
//   Gymnasium's start states.
// - step (Gymnasium's do_simulation): ctrl = the action as given, mj_step frame_skip times,
//   then the task's observation, reward and termination. MuJoCo clamps ctrl to the
//   actuators' ctrlrange inside the step (every actuator is ctrllimited: mjenv_load checks),
//   while the task's ctrl_cost reads the action unclamped, as Gymnasium's does. The step's
//   duration is dt = timestep (the model's) * frame_skip. Quantities MuJoCo computes before
//   integrating (xpos, site_xpos) are read as mj_step leaves them, one substep behind qpos,
//   which is what Gymnasium's v4 tasks read (MuJoCo issue #889).
// - Divergence. A step is void when, during it, MuJoCo reports a bad qpos, qvel or qacc
//   (mjWARN_BADQPOS/BADQVEL/BADQACC: MuJoCo then silently resets the simulation to qpos0
//   itself, which would otherwise look like a teleport), or raises an error (mju_error, e.g.
//   "Stack overflow" in a model whose <size nstack> is too small: its default handler would
//   exit the process); when qpos or qvel afterwards hold a value MuJoCo's own check would
//   reject at the next step (NaN, +-inf or beyond +-mjMAXVAL = 1e10); when the observation
//   (as float32) or the reward is not finite; or when the action is not finite (it is then
//   not stepped). A void step reports terminated = 2 (env.h), reward 0 and an observation of
//   zeros, leaves the simulation reset to qpos0 without noise, and the caller resets the env
//   before its next step. It is counted (mjenv_void_steps, and per env) and logged with the
//   env id and MuJoCo's own words, at most once per MJENV_LOG_INTERVAL_MS per task.
//
// Against Gymnasium: on the same MuJoCo library, apex's tasks are Gymnasium's v4 tasks bit
// for bit. Gymnasium's own task files (hopper, walker2d, half_cheetah, ant,
// inverted_(double_)pendulum _v4.py), run on Debian's libmujoco 2.2.2 through our ctypes
// stand-in for the `mujoco` package, with np_random replaced by apex's env stream (the one
// thing that differs: no seed gives Gymnasium's start states from numpy's PCG64), give the
// same float32 observations, rewards, episode ends and reset states as apex:
// tests/smoke/mujoco_gymnasium.sh replays the fixtures tests/fixtures/mujoco/gymref/ wrote
// from Gymnasium alone (the ctrl_cost is summed in numpy's float32 order for that; 14 300
// more steps on Gymnasium's own hopper.xml matched too). What does differ is the library:
// Gymnasium users run the pip mujoco (3.x today), whose solver and integrators differ in
// detail, so their trajectories drift from the first contact on. tests/check_mujoco.c
// checks the task logic against hand computation.
//
// What it does not do:
// - Call mj_rnePostConstraint after a step (Gymnasium does): it only fills cacc, cfrc_int
//   and cfrc_ext, which no default v4 observation or reward reads and no later step uses.
// - Rendering, v5, options other than the v4 defaults, or anything allocated per step.
//
// MuJoCo's error and warning handlers (mju_user_error, mju_user_warning) are installed by
// the first mjenv_load: warnings are logged (rate-limited) instead of printed to stdout and
// appended to MUJOCO_LOG.TXT in the working directory; an error inside mjenv's own calls
// into MuJoCo (a reset's mj_forward, a step's mj_step) unwinds to the call (longjmp: the C
// engine holds nothing across it but its mjData's stack, which mj_resetData clears), and one
// anywhere else (mj_makeData out of memory) is fatal: logged, then abort (STYLE S6.2).
//
// Thread-safety: mjenv_load and mjenv_unload take a lock (MuJoCo's XML parser is not
// thread-safe); reset, step, observe and fini are thread-safe on distinct states (the model
// is read-only; counters are atomic).
#ifndef APEX_MJENV_H
#define APEX_MJENV_H

#include "envinfo.h"
#include "rng.h"

#include <mujoco/mujoco.h>

#include <stddef.h>
#include <stdint.h>

#define MJENV_MAX_OBS_DIM 256       // doubles of a task's observation (Ant's is 27)
#define MJENV_MAX_ACTIONS 32        // a task's actuators (Ant's 8)
#define MJENV_MAX_TASKS 16          // tasks with a model loaded at once, per process
#define MJENV_LOG_INTERVAL_MS 10000 // at most one divergence line per task per interval
#define MJENV_WHY_LEN 256           // bytes of a void step's reason, with its terminator

typedef enum { MJENV_NOISE_UNIFORM = 0, MJENV_NOISE_NORMAL = 1 } mjenv_noise;

// What a task's reward sees of one step.
typedef struct {
    const mjModel *m;
    const mjData *d;          // the simulation after the step
    const float *action;      // the action as given (unclamped), nu floats
    double x_before, x_after; // the forward coordinate before and after the step: qpos[0],
                              // or the x of forward_body's xpos (mjenv_task_t)
    double dt;                // the step's duration: timestep * frame_skip [s]
} mjenv_step_t;

// One task: Gymnasium's <Task>Env's numbers and its _get_obs / step logic as hooks.
typedef struct mjenv_task {
    // Its row of the env table: id, obs_dim, action_dim (= the model's nu), action_low and
    // action_high (= every actuator's ctrlrange, as float32: Gymnasium's Box), time limit.
    const envinfo_t *info;
    const char *asset; // the model's file name in Gymnasium's assets/, for messages
    int nq, nv;        // the model's generalized coordinates and velocities
    int frame_skip;    // mj_step calls per env step
    mjenv_noise qpos_noise, qvel_noise;
    double qpos_noise_scale, qvel_noise_scale; // uniform: U(-s, s); normal: s * N(0, 1)
    const char *forward_body; // the body whose xpos x is the forward coordinate (Ant:
                              // "torso"), or NULL: qpos[0]
    int needs_site;           // 1: the reward reads site_xpos[0] (the model needs a site)
    // Writes info->obs_dim doubles (Gymnasium's _get_obs).
    void (*observe)(const mjModel *m, const mjData *d, double *obs);
    // Returns the step's reward and sets *terminated to 1 when the state after the step is
    // terminal for the task (unhealthy), else 0.
    double (*reward)(const mjenv_step_t *s, uint8_t *terminated);
} mjenv_task_t;

struct mjenv_slot; // the process's record of one task's model (mjenv.c)

// One env. Zero it (vecenv allocates states zeroed) and let mjenv_reset make its mjData;
// release it with mjenv_fini. Not copyable (see the top). The fields are for reading: tests
// and tools look at d (d->qpos, d->qvel, d->time) and may set d->qpos/qvel before a step.
typedef struct {
    const mjenv_task_t *task; // bound by the first reset
    const mjModel *m;         // the task's model (borrowed from the process's slot)
    mjData *d;                // owned: made by the first reset, freed by mjenv_fini
    struct mjenv_slot *slot;  // counters and the log limiter of the task
    double dt;                // m->opt.timestep * frame_skip [s]
    int forward_body;         // body id of task->forward_body, -1: qpos[0]
    uint64_t void_steps;      // this env's void steps
    char why[MJENV_WHY_LEN];  // the last void step's reason ("" until one)
} mjenv_state_t;

// ---------------------------------------------------------------------------------------
// Models (start-up)

// Loads the MJCF file path as task's model, replacing a model loaded before for it. Returns
// 0, or -1 with a message in err naming the task's id and the file: the path is empty,
// MuJoCo cannot load it (MuJoCo's error text), the model is not the task's (the numbers it
// has and the task's), it cannot compute its initial state, or envs of the task still use
// the model loaded before. Thread-safe (a lock); at start-up, before any env is reset.
int mjenv_load(const mjenv_task_t *task, const char *path, char *err, size_t errlen);
// Frees task's model (no-op if none). Its envs must all be finished (asserted).
void mjenv_unload(const mjenv_task_t *task);
// task's model, or NULL when none is loaded. Borrowed: valid until mjenv_unload or a load.
const mjModel *mjenv_model(const mjenv_task_t *task);
// Void steps of task's envs in this process since its model was loaded.
uint64_t mjenv_void_steps(const mjenv_task_t *task);

// ---------------------------------------------------------------------------------------
// One env (env.h's spec functions, typed)

// Starts an episode of task in s (a zeroed s is bound to task and gets its mjData; the
// model must be loaded: a programming error otherwise) and writes its observation (obs_dim
// floats). Draws nq + nv noise values from rng (two uniforms per normal draw).
void mjenv_reset(mjenv_state_t *s, const mjenv_task_t *task, rng_t *rng, float *obs);
// One env step with action (nu floats). Writes the observation, the reward and terminated:
// 0, 1 (the task's termination) or 2 (void, see the top). s must have been reset.
void mjenv_step(mjenv_state_t *s, const float *action, float *obs, float *reward,
                uint8_t *terminated);
// Writes s's current observation (obs_dim floats). s must have been reset.
void mjenv_observe(const mjenv_state_t *s, float *obs);
// Frees s's mjData and zeroes s. A zeroed s is a no-op.
void mjenv_fini(mjenv_state_t *s);

#endif
