// nstep.h: folds single environment steps into n-step transitions, per environment.
//
// For every env it keeps a preallocated ring of its last n (obs, action, reward) steps. Each
// push may emit transitions (s_t, a_t, R, discount, s_{t+m}) with
//   R        = sum_{k<m} gamma^k r_{t+k}          (summed in double, stored as float)
//   discount = gamma^m   if the episode goes on or was truncated (the learner bootstraps
//                        from s_{t+m}: target = R + discount * max_a Q(s_{t+m}, a))
//            = 0         if the episode terminated within the window
// where m = n mid-episode. When an episode ends (terminated or truncated) every pending step
// is flushed with its shorter m, and s_{t+m} is the episode's final observation (vecenv's
// next_obs, never the reset observation). terminated wins over truncated when both are set.
//
// What it does not do: pick actions, compute priorities, or allocate after nstep_init.
// Plain data (STYLE S2): caller owns the struct; not thread-safe.
#ifndef APEX_NSTEP_H
#define APEX_NSTEP_H

#include <stdint.h>

#define NSTEP_N_DEFAULT 3
#define NSTEP_GAMMA_DEFAULT 0.99

typedef struct {
    int n_envs;
    int obs_bytes;     // one observation, of the run's dtype: nstep only copies them
    int action_bytes;  // one action: 4 (an int32 discrete action) or action_dim * 4 floats
    int n;             // steps folded into one transition
    double gamma;      // per-step discount
    uint8_t *obs;      // (n_envs, n, obs_bytes) ring of s_t
    uint8_t *actions;  // (n_envs, n, action_bytes)
    float *rewards;    // (n_envs, n)
    int32_t *head;     // (n_envs) ring slot of the oldest pending step
    int32_t *count;    // (n_envs) pending steps, 0 .. n-1 between pushes
    double *gamma_pow; // (n + 1) gamma^k
    uint64_t *tags;    // (n_envs, n) each pending step's obs tag (nstep_push_tag)
} nstep_t;

// Caller-provided flat output arrays for emitted transitions. Emission appends at index
// count; the caller resets count to 0 after consuming them. cap is the rows allocated.
typedef struct {
    uint8_t *obs;      // (cap, obs_bytes) s_t
    uint8_t *actions;  // (cap, action_bytes) a_t: int32 or action_dim floats (memcpy'd)
    float *rewards;    // (cap) n-step return R
    float *discounts;  // (cap) gamma^m, or 0 at a terminal
    uint8_t *next_obs; // (cap, obs_bytes) s_{t+m}
    // Tags of s_t and s_{t+m} as given to nstep_push_tag (0 from nstep_push): the actor's
    // frame numbers of their newest frames in frame mode (issue #27), carried untouched.
    uint64_t *obs_tag, *next_tag; // (cap)
    int action_bytes;
    int count;
    int cap;
} nstep_out_t;

// Allocates the rings (aborts on OOM) for discrete actions (one int32 each). Asserts
// n_envs > 0, obs_bytes > 0, n >= 1 and 0 <= gamma <= 1.
void nstep_init(nstep_t *ns, int n_envs, int obs_bytes, int n, double gamma);
// nstep_init for actions of action_bytes bytes each (continuous: action_dim floats), which
// nstep only copies: the window keeps its first step's action, whatever its type.
void nstep_init_actions(nstep_t *ns, int n_envs, int obs_bytes, int action_bytes, int n,
                        double gamma);
// Frees the rings. A zeroed or finished nstep_t is a no-op.
void nstep_fini(nstep_t *ns);
// Drops env's pending steps without emitting them (e.g. when an env is restarted by hand).
void nstep_clear_env(nstep_t *ns, int env);

// Pushes one step of env: obs is s_t, action points at its action_bytes bytes (an int32, or
// action_dim floats), next_obs the observation the step produced. Appends
// the transitions this completes to out and returns how many (0 .. n). Asserts that out has
// room for n more rows: size out with nstep_max_emit.
int nstep_push(nstep_t *ns, int env, const void *obs, const void *action, float reward,
               const void *next_obs, int terminated, int truncated, nstep_out_t *out);
// nstep_push with a tag for obs and one for next_obs, which the emitted rows carry in
// out->obs_tag and out->next_tag.
int nstep_push_tag(nstep_t *ns, int env, const void *obs, uint64_t obs_tag, const void *action,
                   float reward, const void *next_obs, uint64_t next_tag, int terminated,
                   int truncated, nstep_out_t *out);
// nstep_push for every env e in order, with (n_envs), (n_envs, action_bytes) and
// (n_envs, obs_bytes) inputs as
// vecenv_step leaves them: next_obs is what each step produced, except for an env whose
// episode ended (terminated or truncated), whose row of final_obs is taken instead (vecenv's
// obs and final_obs, env.h). final_obs may be NULL when next_obs holds every env's own.
// Returns the number of transitions appended.
int nstep_push_all(nstep_t *ns, const void *obs, const void *actions, const float *rewards,
                   const void *next_obs, const void *final_obs, const uint8_t *terminated,
                   const uint8_t *truncated, nstep_out_t *out);
// The most transitions one nstep_push_all can append: n_envs * n.
int nstep_max_emit(const nstep_t *ns);

// Allocates out's arrays for cap rows of obs_bytes observations and int32 actions (aborts on
// OOM), count = 0. nstep_out_init_actions: actions of action_bytes bytes (as the nstep_t's).
void nstep_out_init(nstep_out_t *out, int cap, int obs_bytes);
void nstep_out_init_actions(nstep_out_t *out, int cap, int obs_bytes, int action_bytes);
// Frees out's arrays. A zeroed or finished nstep_out_t is a no-op.
void nstep_out_fini(nstep_out_t *out);

#endif
