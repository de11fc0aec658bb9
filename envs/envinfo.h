// envinfo.h: the dimensions of each environment id, known to every daemon.
//
// The replay server and the learner must validate messages against the observation size and
// action count of the run's environment, but they do not step environments and must not
// depend on actor/. This table is the one place those numbers live outside actor/; a unit
// test checks it against the environment registry in envs/env.c.
#ifndef APEX_ENVINFO_H
#define APEX_ENVINFO_H

typedef struct {
    const char *id;          // Gymnasium id, e.g. "CartPole-v1"
    int obs_dim;             // observation length, in elements
    int n_actions;           // discrete actions 0..n_actions-1
    int max_episode_steps;   // truncation limit (Gymnasium TimeLimit; 0 = none)
    int obs_dtype;           // config_obs_dtype: float32, or uint8 for MinAtar's frames
    int obs_h, obs_w, obs_c; // image shape, channels last (0, 0, 0: a vector)
    float obs_scale;         // what the network multiplies observations by
} envinfo_t;

// Returns the entry for id, or NULL when the id is unknown.
const envinfo_t *envinfo_find(const char *id);
// Comma-separated list of known ids, for error messages. Static storage.
const char *envinfo_known_ids(void);

#endif
