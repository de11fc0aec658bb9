// nstep.c: per-env rings of the last n steps, folded into n-step transitions.
//
// Layout: env e's ring occupies slots [e*n, e*n + n) of obs/actions/rewards; head[e] is the
// oldest pending step and count[e] how many are pending. A push writes slot
// (head + count) % n; the ring can never hold more than n steps because a full window is
// emitted (and popped) in the same push that fills it.
#include "nstep.h"

#include "apex.h"
#include "xalloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------
// Lifetime

void nstep_init(nstep_t *ns, int n_envs, int obs_bytes, int n, double gamma) {
    nstep_init_actions(ns, n_envs, obs_bytes, (int)sizeof(int32_t), n, gamma);
}

void nstep_init_actions(nstep_t *ns, int n_envs, int obs_bytes, int action_bytes, int n,
                        double gamma) {
    APEX_ASSERT(n_envs > 0 && obs_bytes > 0 && action_bytes > 0 && n >= 1);
    APEX_ASSERT(gamma >= 0.0 && gamma <= 1.0);
    memset(ns, 0, sizeof(*ns));
    ns->n_envs = n_envs;
    ns->obs_bytes = obs_bytes;
    ns->action_bytes = action_bytes;
    ns->n = n;
    ns->gamma = gamma;
    const size_t slots = (size_t)n_envs * (size_t)n;
    ns->obs = xcalloc(slots, (size_t)obs_bytes);
    ns->actions = xcalloc(slots, (size_t)action_bytes);
    ns->rewards = xcalloc(slots, sizeof(float));
    ns->head = xcalloc((size_t)n_envs, sizeof(int32_t));
    ns->count = xcalloc((size_t)n_envs, sizeof(int32_t));
    ns->gamma_pow = xcalloc((size_t)n + 1, sizeof(double));
    ns->tags = xcalloc(slots, sizeof(uint64_t));
    // Repeated multiplication rather than pow(): gamma^k is then exactly what a reader
    // folding rewards by hand (R = r0 + g*(r1 + g*r2)...) would get, up to rounding.
    ns->gamma_pow[0] = 1.0;
    for (int k = 1; k <= n; k++) {
        ns->gamma_pow[k] = ns->gamma_pow[k - 1] * gamma;
    }
}

void nstep_fini(nstep_t *ns) {
    free(ns->obs);
    free(ns->actions);
    free(ns->rewards);
    free(ns->head);
    free(ns->count);
    free(ns->gamma_pow);
    free(ns->tags);
    memset(ns, 0, sizeof(*ns));
}

void nstep_clear_env(nstep_t *ns, int env) {
    APEX_ASSERT(env >= 0 && env < ns->n_envs);
    ns->head[env] = 0;
    ns->count[env] = 0;
}

int nstep_max_emit(const nstep_t *ns) { return ns->n_envs * ns->n; }

void nstep_out_init(nstep_out_t *out, int cap, int obs_bytes) {
    nstep_out_init_actions(out, cap, obs_bytes, (int)sizeof(int32_t));
}

void nstep_out_init_actions(nstep_out_t *out, int cap, int obs_bytes, int action_bytes) {
    APEX_ASSERT(cap > 0 && obs_bytes > 0 && action_bytes > 0);
    memset(out, 0, sizeof(*out));
    out->obs = xcalloc((size_t)cap, (size_t)obs_bytes);
    out->actions = xcalloc((size_t)cap, (size_t)action_bytes);
    out->action_bytes = action_bytes;
    out->rewards = xcalloc((size_t)cap, sizeof(float));
    out->discounts = xcalloc((size_t)cap, sizeof(float));
    out->next_obs = xcalloc((size_t)cap, (size_t)obs_bytes);
    out->obs_tag = xcalloc((size_t)cap, sizeof(uint64_t));
    out->next_tag = xcalloc((size_t)cap, sizeof(uint64_t));
    out->cap = cap;
}

void nstep_out_fini(nstep_out_t *out) {
    free(out->obs);
    free(out->actions);
    free(out->rewards);
    free(out->discounts);
    free(out->next_obs);
    free(out->obs_tag);
    free(out->next_tag);
    memset(out, 0, sizeof(*out));
}

// ---------------------------------------------------------------------------------------
// Folding

// Emits env's oldest pending step as a transition over its m = count pending steps, then
// pops it. terminal selects discount 0 (no bootstrap) over gamma^m.
static void s_nstep_emit_oldest(nstep_t *ns, int env, const void *next_obs, uint64_t next_tag,
                                int terminal, nstep_out_t *out) {
    const int n = ns->n, O = ns->obs_bytes;
    const size_t AB = (size_t)ns->action_bytes;
    APEX_ASSERT(out->action_bytes == ns->action_bytes);
    // m is the window length: n mid-episode, shorter in an end-of-episode flush.
    const int base = env * n, head = ns->head[env], m = ns->count[env];
    APEX_ASSERT(m >= 1 && out->count < out->cap);
    // R = sum_{k<m} gamma^k r_{t+k}, oldest first, in double so that the float result is
    // the correctly rounded sum for any n (the learner's target is only float anyway).
    double R = 0.0;
    for (int k = 0; k < m; k++) {
        R += ns->gamma_pow[k] * (double)ns->rewards[base + (head + k) % n];
    }
    const int row = out->count++;
    memcpy(out->obs + (size_t)row * (size_t)O, ns->obs + (size_t)(base + head) * (size_t)O,
           (size_t)O);
    memcpy(out->next_obs + (size_t)row * (size_t)O, next_obs, (size_t)O);
    memcpy(out->actions + (size_t)row * AB, ns->actions + (size_t)(base + head) * AB, AB);
    out->rewards[row] = (float)R;
    out->discounts[row] = terminal ? 0.0f : (float)ns->gamma_pow[m];
    out->obs_tag[row] = ns->tags[base + head];
    out->next_tag[row] = next_tag;
    ns->head[env] = (head + 1) % n;
    ns->count[env] = m - 1;
}

int nstep_push(nstep_t *ns, int env, const void *obs, const void *action, float reward,
               const void *next_obs, int terminated, int truncated, nstep_out_t *out) {
    return nstep_push_tag(ns, env, obs, 0, action, reward, next_obs, 0, terminated, truncated, out);
}

int nstep_push_tag(nstep_t *ns, int env, const void *obs, uint64_t obs_tag, const void *action,
                   float reward, const void *next_obs, uint64_t next_tag, int terminated,
                   int truncated, nstep_out_t *out) {
    APEX_ASSERT(env >= 0 && env < ns->n_envs);
    const int n = ns->n, O = ns->obs_bytes;
    // A full window is emitted in the push that fills it, so there is always a free slot.
    APEX_ASSERT(ns->count[env] < n);
    // Room is checked up front for the worst case (a flush of n rows), not per row, so a
    // too-small out fails on the first push and not only at the first long episode end.
    APEX_ASSERT(out->cap - out->count >= n);
    const int slot = env * n + (ns->head[env] + ns->count[env]) % n;
    memcpy(ns->obs + (size_t)slot * (size_t)O, obs, (size_t)O);
    memcpy(ns->actions + (size_t)slot * (size_t)ns->action_bytes, action, (size_t)ns->action_bytes);
    ns->rewards[slot] = reward;
    ns->tags[slot] = obs_tag;
    ns->count[env]++;

    int emitted = 0;
    if (terminated || truncated) {
        // Episode over: flush every pending step, each with its own (shorter) m. After a
        // truncation the value of next_obs is still real, so those bootstrap.
        while (ns->count[env] > 0) {
            s_nstep_emit_oldest(ns, env, next_obs, next_tag, terminated != 0, out);
            emitted++;
        }
        // The ring is empty; restarting at slot 0 keeps the next episode's layout the same
        // whatever happened before, which makes a failing run easier to read in a debugger.
        ns->head[env] = 0;
    } else if (ns->count[env] == n) {
        s_nstep_emit_oldest(ns, env, next_obs, next_tag, 0, out);
        emitted = 1;
    }
    return emitted;
}

int nstep_push_all(nstep_t *ns, const void *obs_v, const void *actions_v, const float *rewards,
                   const void *next_obs_v, const void *final_obs_v, const uint8_t *terminated,
                   const uint8_t *truncated, nstep_out_t *out) {
    const uint8_t *obs = obs_v, *next_obs = next_obs_v, *actions = actions_v;
    const uint8_t *final_obs = final_obs_v ? final_obs_v : next_obs_v;
    const size_t O = (size_t)ns->obs_bytes;
    int emitted = 0;
    // Env order, so the rows of one call are grouped by env (the tests rely on it; replay
    // does not care).
    for (int e = 0; e < ns->n_envs; e++) {
        const uint8_t *next = (terminated[e] || truncated[e] ? final_obs : next_obs);
        emitted += nstep_push(ns, e, obs + (size_t)e * O,
                              actions + (size_t)e * (size_t)ns->action_bytes, rewards[e],
                              next + (size_t)e * O, terminated[e], truncated[e], out);
    }
    return emitted;
}
