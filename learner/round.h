// round.h: how the ranks of a learner group step together (docs/architecture.md "Learner
// group").
//
// Ranks cannot leave a collective, so the group decides together: before every step each
// rank joins a round, a small all-reduce (group_round) of flags and counters: whether it has
// a batch, whether it wants to stop, (rank 0) whether its checkpoint timer fired, and its
// totals (rows trained, stage times, bad messages, the last loss). Every rank sees the same
// sums and so decides the same:
//   - every rank has a batch: every rank trains its own next batch;
//   - some rank wants to stop: every rank stops after this same step;
//   - rank 0's checkpoint is due: every rank writes its part of the checkpoint now.
// A rank without a batch joins a round every ROUND_IDLE_MS anyway, so that a stop or a
// checkpoint never waits for the replay server. Rank 0 writes the group's metrics from the
// sums of the latest round (round_metrics): rows and bad messages summed, time fractions
// averaged over the ranks, the loss the group's mean.
//
// Plain data (STYLE S2): embed it, round_init / no fini (the group is borrowed). Without a
// group (a single learner) nothing here is used. Not thread-safe.
#ifndef APEX_ROUND_H
#define APEX_ROUND_H

#include <stdint.h>

#include "group.h"
#include "metrics.h"

#define ROUND_IDLE_MS 50 // a rank without a batch still joins a round this often

// A round's values, summed over the ranks: flags, then each rank's totals.
enum {
    ROUND_READY, // ranks with a batch: all of them -> a training step
    ROUND_STOP,  // ranks that want to stop
    ROUND_CKPT,  // rank 0's checkpoint timer fired
    ROUND_ROWS,  // sampled rows trained
    ROUND_WAIT_NS,
    ROUND_TRAIN_NS,
    ROUND_OPTIM_NS,
    ROUND_NET_NS,
    ROUND_COMM_NS,
    ROUND_BAD, // bad messages
    ROUND_LOSS,
    ROUND_N
};

typedef struct {
    group_t *group; // borrowed
    int rank, n_ranks;
    int stopped;         // a round said stop: no further round
    int ckpt_due;        // rank 0: the checkpoint timer fired since the last round
    int64_t last_ms;     // monotonic time of the last round
    double own[ROUND_N]; // this rank's totals (from ROUND_ROWS on)
    double sum[ROUND_N], sum_prev[ROUND_N]; // rank 0: the group's, at the last round / row
} round_t;

// What a round decided.
typedef enum {
    ROUND_DECIDED_WAIT = 0,  // some rank has no batch: nobody trains
    ROUND_DECIDED_TRAIN = 1, // every rank has a batch: each trains its own
    ROUND_DECIDED_STOP = -1, // some rank wants to stop: everyone stops now
} round_decision;

void round_init(round_t *r, group_t *group, int64_t now_ms);

// Whether a rank should join a round now: with a batch at once, without one every
// ROUND_IDLE_MS.
int round_due(const round_t *r, int have_batch, int64_t now_ms);

// Joins one round. mt's interval timers (wait, train, optim, net) move into this rank's
// totals; rows, bad and loss are this rank's current ones. *checkpoint is set when the group
// must write a checkpoint now (after the round, before any step). Collective: every rank
// joins the same rounds.
round_decision round_join(round_t *r, metrics_t *mt, int ready, int stop, uint64_t bad,
                          int *checkpoint, int64_t now_ms);

// Rank 0's metrics row from the group's sums of the latest round: mt's rows and bad messages
// become the group's, its stage times the ranks' mean since the previous row.
void round_metrics(round_t *r, metrics_t *mt);

// Logs the share of the training steps' time this rank spent in collectives (for the
// operator and bench/run_zero.sh, which reads the line).
void round_report(const round_t *r);

#endif
