// envinfo.h: the dimensions of each environment id, known to every daemon.
//
// The replay server and the learner must validate messages against the observation size and
// action count of the run's environment, but they do not step environments and must not
// depend on actor/. This table is the one place those numbers live outside actor/; a unit
// test checks it against the environment registry in actor/env.c.
#ifndef APEX_ENVINFO_H
#define APEX_ENVINFO_H

typedef struct {
    const char *id;        // Gymnasium id, e.g. "CartPole-v1"
    int obs_dim;           // float32 observation length
    int n_actions;         // discrete actions 0..n_actions-1
    int max_episode_steps; // truncation limit (Gymnasium TimeLimit)
} envinfo_t;

// Returns the entry for id, or NULL when the id is unknown.
const envinfo_t *envinfo_find(const char *id);
// Comma-separated list of known ids, for error messages. Static storage.
const char *envinfo_known_ids(void);

#endif
