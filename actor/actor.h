// actor.h: the apex-actor daemon: step environments, fold n-step transitions, compute
// initial priorities, and ship them to the replay server.
//
// One thread, one loop (common/loop.h) whose idle handler takes one vector step of
// [actor] envs_per_actor environments:
//   Q = nn_forward(obs) on the local network -> epsilon-greedy actions (each env has its
//   own Ape-X epsilon) -> vecenv_step (auto-reset) -> nstep_push_all. Every send_batch
//   transitions get initial priorities |TD| from the local network (two batched forward
//   passes) and go out as one TransitionBatch.
// Continuous actions ([env] action_dim > 0, built-in envs only; id = python is refused): the
//   local network is DPG's policy mu(s) (nn_config_from_run), the actions
//   clip(mu(s) + sigma_i * half * N(0, 1), low, high) with each env's Ape-X sigma_i ([actor]
//   noise_sigma, noise_alpha; explore.h), stepped by vecenv_step_cont; n-step windows keep
//   their first action's floats; batches carry cont_actions and initial priorities from the
//   actor's copy of DPG's first critic (the weights message is [ mu | Q_1 ]:
//   nn_dpg_td_priorities, three batched forward passes). A void step (terminated = 2, a
//   diverging MuJoCo simulation) resets that env, drops its pending window and is counted
//   (void_steps, logged at most every 5 s). ActorStats report each episode's sigma_i in
//   the epsilons field.
// Sockets:
//   insert (DEALER -> replay's ROUTER, ZMQ_IMMEDIATE): batches out, InsertAcks back. Each
//          batch is named (actor, epoch, seq) and kept in a window of max_pending_batches
//          until acknowledged; unacknowledged batches are re-sent after ack_timeout_ms (the
//          server stores each name once). When the window is full the oldest batch is
//          dropped and counted. The actor never blocks and never exits because a peer is
//          missing.
//   weights (DEALER -> learner, weights_client.h): one WeightsRequest in flight, with the
//          newest version held; answers are decoded as they arrive and the newest valid one
//          is staged; every weight_sync_steps steps it replaces the local network. Until the
//          first one arrives the actor acts with its own initial network (seeded from
//          [run] seed), with its exploration: a random policy mu(s) plus noise for
//          continuous actions, as a random Q-network plus epsilon for discrete ones.
//   stats  (PUSH -> learner): ActorStats (frames, finished episodes, epsilons) every
//          stats_interval_ms.
// Determinism: with the same config, seed and index, and before any weights arrive, the
// transitions are identical byte for byte (all randomness comes from rng_t streams).
#ifndef APEX_ACTOR_H
#define APEX_ACTOR_H

#include <stdint.h>

#include "config.h"

typedef struct actor actor_t;

typedef struct {
    uint64_t steps; // env steps (summed over envs)
    uint64_t episodes;
    uint64_t batches_sent;
    uint64_t batches_acked;
    uint64_t rows_acked;      // transitions in the acknowledged batches
    uint64_t batches_resent;  // sent again after ack_timeout_ms without an ack
    uint64_t batches_dropped; // dropped unacknowledged from the full window
    uint64_t weights_version; // version of the weights in use (0 = initial network)
    uint64_t weight_updates;  // times new weights were taken
    uint64_t weight_syncs;    // times the actor looked for new weights (weight_sync_steps)
    uint64_t bad_messages;
    uint64_t bad_priorities;   // batches sent without priorities (outside the wire's range)
    uint64_t env_faults;       // [env] id = python: env steps that faulted (void, not frames)
    uint64_t episodes_dropped; // id = python: running episodes dropped (faults, lost workers)
    uint64_t void_steps;       // continuous envs: void steps (a diverging simulation: the env
                               // was reset, its pending n-step window dropped, nothing stored)
} actor_stats_t;

// Creates the actor with global index `index` (0 <= index < [actor] num_actors) and connects
// its sockets (connecting never fails for an absent peer). NULL after logging why.
actor_t *actor_new(const apex_config_t *cfg, int index);
void actor_destroy(actor_t **self_p);
// Runs until SIGINT/SIGTERM, actor_stop, or max_vector_steps (> 0) vector steps, counted
// since actor_new (so a second call continues up to the new total). Returns 0.
int actor_run(actor_t *self, uint64_t max_vector_steps);
void actor_stop(actor_t *self); // thread-safe
// Copies the counters into *out. Thread-safe: while actor_run runs in another thread the
// copy is at most ~20 ms old; after actor_run returned it is exact.
void actor_get_stats(const actor_t *self, actor_stats_t *out);

// The actor's loop (its timers: common/loop.h), for tests that observe what the
// configuration does (tests/check_keys.c). Borrowed, valid until actor_destroy.
const struct loop *actor_loop(const actor_t *self);

#endif
