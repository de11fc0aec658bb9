// learner.h: the apex-learner daemon: sample, train, send priorities, publish, checkpoint.
//
// One thread runs a loop (common/loop.h) whose idle handler trains whenever a batch is
// ready. learner.c is the orchestration; the work is in modules, each with a suite:
//   prefetch.h        [learner] prefetch SampleRequests in flight on the replay's sockets
//                     (one DEALER per [replay] shard, shards.h choosing the shard and holding
//                     the replay ratio when there are several); the batches their replies
//                     bring, and the PriorityUpdate of each batch trained, to the shard it
//                     came from. A request unanswered for request_timeout_ms is re-issued, so
//                     a restarted replay server is picked up without a restart.
//   weights_server.h  (common/) the weights endpoint, a ROUTER: actors and apex-eval ask
//                     with the version they hold and are answered with a newer one at once,
//                     or when the next one is published (every publish_every updates), or
//                     after a second with the current one, so a quiet link can be told from
//                     a dead one. Not a PUB: docs/architecture.md says why.
//   stats             (PULL, bound) ActorStats from the actors, folded into metrics.csv
//                     (metrics.h) and TensorBoard.
//   algo.h            the update, by the action space: double DQN (train.h) for discrete
//                     actions, Ape-X DPG / TD3 (train_dpg.h, dpg_glue.c) for continuous ones
//                     ([env] action_dim > 0), which publishes its policy and first critic
//                     (the actors' priorities) and writes a DPG checkpoint; round.h how the ranks of a learner group step together
//                     (a continuous run's group too: ZeRO stages 0-2).
// Learning starts when the replay server first answers OK (its limiter enforces
// min_size_to_sample); "not ready" replies are simply re-requested.
// Checkpoints (<run dir>/checkpoint.bin) every checkpoint_interval_s and at shutdown; with
// resume set, an existing checkpoint is loaded at start-up and training continues exactly.
// Under mpirun/srun (group.h) the process is one rank of a learner group: every rank samples,
// trains its own batches and sends its own priority updates; the ranks step together, one
// round (round.h) before every step; rank 0 alone binds the weights and stats endpoints,
// publishes, writes metrics.csv with the group's sums and times the checkpoints, which every
// rank writes together (train.h: sharded optimizer state, [learner] zero_stage).
// Without a launcher nothing of this exists and MPI is never initialised.
#ifndef APEX_LEARNER_H
#define APEX_LEARNER_H

#include "config.h"

#include <stddef.h>
#include <stdint.h>

// A deterministic run's metrics.csv row cadence when [learner] metrics_every_updates is 0.
#define LEARNER_DET_METRICS_EVERY 1000

typedef struct learner learner_t;

// Creates the trainer (loading <run dir>/checkpoint.bin when resume and it exists), opens
// the run directory's metrics.csv, binds the weights and stats endpoints (rank 0) and connects
// to the replay server.
// Returns NULL after logging why (bad checkpoint, address in use, unwritable run dir).
learner_t *learner_new(const apex_config_t *cfg, int resume);
void learner_destroy(learner_t **self_p);
// Runs until SIGINT/SIGTERM, [learner] max_steps, or learner_stop; then writes the final
// checkpoint. Returns 0, or -1 when the final checkpoint could not be written.
int learner_run(learner_t *self);
void learner_stop(learner_t *self); // thread-safe

// The endpoints actually bound for weights and stats (ephemeral ports resolved, e.g.
// "tcp://127.0.0.1:41234" for a bind of "tcp://127.0.0.1:*"). Borrowed strings, fixed by
// learner_new and valid until learner_destroy; thread-safe.
const char *learner_weights_endpoint(const learner_t *self);
// Updates done so far, counting those restored from a checkpoint (0 for a fresh learner).
// Thread-safe: may be polled while learner_run is running in another thread.
int64_t learner_updates(const learner_t *self);

// Paths inside the run directory, e.g. for tests: "<out_dir>/<name>/checkpoint.bin".
void learner_checkpoint_path(const apex_config_t *cfg, char *buf, size_t n);

// For tests that observe what the configuration does (tests/check_keys.c). Borrowed, valid
// until learner_destroy; only while learner_run is not running in another thread. The
// trainer (learner/train.h) the learner steps (NULL with continuous actions), or the DPG
// trainer (learner/train_dpg.h; NULL with discrete actions); its loop (timers: common/loop.h); the stats
// endpoint as bound; the sample requests that timed out ([learner] request_timeout_ms) and
// were re-issued, read after learner_run returned.
struct trainer *learner_trainer(learner_t *self);
struct train_dpg *learner_dpg(learner_t *self);
const struct loop *learner_loop(const learner_t *self);
const char *learner_stats_endpoint(const learner_t *self);
uint64_t learner_request_timeouts(const learner_t *self);

#endif
