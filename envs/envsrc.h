// envsrc.h: where an actor's (or an evaluator's) environment steps come from: the built-in
// envs (vecenv_t, env.h) or Gymnasium-style Python envs stepped by env workers over the
// bridge (pyenv.h, [env] id = python), behind one interface, so that the caller's loop is
// one loop for both.
//
// The envs are stepped in G groups of GE = n / G (G = 1 for built-in envs; [python] groups
// for the bridge), each group alternating envsrc_send (its actions) and envsrc_recv (their
// results), starting with a recv. A caller overlaps Python's stepping of one group with its
// own work on another by sending group g and then receiving group g + 1:
//   recv(0)                                   start: group 0's first observations
//   loop: act(g) send(g) recv(g+1) fold(g+1)  (g+1 mod G; with G = 1 the lock step)
// With built-in envs envsrc_recv does the step (vecenv_step) and returns at once; the
// results are then exactly vecenv's, so an actor's transitions do not depend on this layer.
//
// Per-env status (envsrc_result_t status, pyenv_status values): OK, the env stepped; FAULT
// (the Python env raised, returned NaN or a wrong shape: logged by the bridge with its
// message) or NO_STEP (its worker died, hung or restarted; every env at the first recv of
// its group): the step is void, the env's running episode was dropped, and the caller must
// not fold the step and must clear the env's pending n-step steps (nstep_clear_env). Built-
// in envs are always OK after the first recv, except for a continuous env's void step
// (terminated = 2 from its step_cont: a diverging MuJoCo simulation, env.h): NO_STEP, the env
// was reset, and the step is counted in envsrc_stats_t void_steps.
//
// What it does not do: pick actions, fold n-steps, or install signal handlers (the bridge
// reaps its workers by pid: SIGCHLD must not be ignored). Not thread-safe: one thread.
// Memory: sized at envsrc_new; stepping allocates nothing.
//
// For an evaluator: envsrc_new(cfg, n, first, -1) with first far from the training envs'
// indices (apex-eval's EVAL_STREAM_BASE), then the loop above with greedy actions and
// envsrc_drain_episodes for the returns; envs_per_actor / [python] workers and groups of
// cfg are not used (n is split over [python] workers in one group each when it divides).
#ifndef APEX_ENVSRC_H
#define APEX_ENVSRC_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "env.h"   // vecenv_episode_t
#include "pyenv.h" // pyenv_status

typedef struct envsrc envsrc_t;

// One group's results, owned by the envsrc: valid until that group's next envsrc_recv.
typedef struct {
    const void *obs;       // (GE, obs) the observations to act on next
    const void *final_obs; // (GE, obs) rows of the envs whose episode ended on this step
                           // (terminated or truncated): the final observation (the n-step
                           // target bootstraps from it on truncation); stale for the others.
                           // What a step produced is final_obs's row if its episode ended,
                           // else obs's (vecenv's convention, env.h)
    const float *rewards;  // (GE)
    const uint8_t *terminated, *truncated;
    const uint8_t *status; // (GE) pyenv_status
    int ok;                // envs with status OK
} envsrc_result_t;

typedef struct {
    uint64_t steps;            // env steps that happened (status OK)
    uint64_t episodes;         // finished episodes
    uint64_t episodes_dropped; // running episodes dropped (faults, lost workers)
    uint64_t env_faults;       // steps with status FAULT
    uint64_t workers_lost;     // Python env workers lost (died, hung, unreadable)
    uint64_t void_steps;       // continuous built-in envs: void steps (status NO_STEP)
} envsrc_stats_t;

// Creates n envs of cfg's [env] (global env indices first .. first + n - 1 seed them, as
// vecenv and pyenv do) for actor `index` (-1: not an actor: an evaluator, whose workers' envs
// get [env] eval_kwargs merged over kwargs). With id =
// python this starts the env workers and waits for them ([python] hello_timeout_ms); a
// mismatch between the workers' spaces and [env] obs_dim / obs_dtype / n_actions is refused
// with a message naming both. NULL after logging why (start-up error; id = external, which
// nothing here can step, included). Continuous actions ([env] action_dim > 0) are stepped
// with envsrc_send_cont, for the built-in envs (G = 1) and for id = python (whose workers'
// envs must have a Box action space of shape (action_dim,) with the run's bounds, [env]
// action_low/high: a mismatch is refused naming both). Destroy with envsrc_destroy.
envsrc_t *envsrc_new(const apex_config_t *cfg, int n, uint64_t first, int index);
// Stops the workers (if any) and frees. NULL-safe.
void envsrc_destroy(envsrc_t **self_p);

int envsrc_groups(const envsrc_t *self);     // G
int envsrc_group_size(const envsrc_t *self); // GE
size_t envsrc_obs_bytes(const envsrc_t *self);
// "CartPole-v1", or "python (MODULE:CALLABLE)", for messages.
const char *envsrc_name(const envsrc_t *self);
// Floats per continuous action (0: discrete actions, envsrc_send).
int envsrc_action_dim(const envsrc_t *self);

// Sends group g's GE actions (each in [0, n_actions): asserted, as is the order). Never
// blocks.
void envsrc_send(envsrc_t *self, int g, const int32_t *actions);
// envsrc_send for continuous envs (envsrc_action_dim > 0; built-in envs have G = 1, so g =
// 0): (GE, action_dim) finite floats, which the caller keeps in the bounds (asserted: by
// vecenv_step_cont finite, by pyenv_send_cont finite and within [env] action_low/high).
void envsrc_send_cont(envsrc_t *self, int g, const float *actions);
// Waits for group g's results (the bridge: at most [python] step_timeout_ms; a shutdown
// signal ends the wait early) and points out at them. Returns out->ok.
int envsrc_recv(envsrc_t *self, int g, envsrc_result_t *out);

// Copies up to cap finished episodes (oldest first; env = index 0 .. n-1 in group order,
// g * GE + j) and removes them.
int envsrc_drain_episodes(envsrc_t *self, vecenv_episode_t *out, int cap);
void envsrc_get_stats(const envsrc_t *self, envsrc_stats_t *out);

// The bridge's options for cfg (n envs from first, actor index or -1), as envsrc_new uses
// them; for tests and tools. Returns 0, or -1 after logging why (a worker script that
// cannot be found).
int envsrc_pyenv_opts(const apex_config_t *cfg, int n, uint64_t first, int index, pyenv_opts_t *o);

#endif
