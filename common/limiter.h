// limiter.h: the samples-per-insert rate limiter, as plain data.
//
// Who holds it: the replay server when [replay] shards = 1 (it sees every insert and every
// sample), the learner when shards > 1 (learner/shards.c: only the learner sees the run's
// samples and, through the shards' stats, the run's inserts; docs/architecture.md "Sharded
// replay"). Hence its place in common/.
//
// The limiter keeps one number, the credit: how many more transitions the learner may
// sample before it runs ahead of [replay] samples_per_insert. Each inserted transition adds
// samples_per_insert to it, each sampled one takes one away, and it is kept within
// [-spi_tolerance, spi_tolerance + max_batch]:
//   - a sample of n is allowed while credit - n >= -spi_tolerance (sampling may lead the
//     ratio by at most the tolerance, as before);
//   - credit above spi_tolerance + max_batch is dropped: a learner that fell behind (paused,
//     restarted, slower than the ratio) may catch up by at most that, never in a burst that
//     samples the same data tens of times over. (The max_batch, the rows of the largest
//     request, keeps a tolerance of 0 from refusing every request.)
// Together: over any window, sampled <= samples_per_insert * inserted + 2 * spi_tolerance +
// max_batch, whatever happened before the window, which is what "hold the replay ratio"
// means when inserts are never blocked.
//
// The credit is part of the replay's state: snapshots save it, and a restore brings it back
// with the data (replay/persist.c). Log records replayed after the snapshot are inserts (the
// log holds no samples), so they only raise it, and the clamp bounds that raise. A restore can
// therefore never release a burst (the failure of the old "reset the sample count on
// restore", which let the learner sample millions of transitions at once and wrecked
// CartPole), nor hold sampling back by more than the tolerance (Reverb issue #118, restored
// counters that blocked sampling for good). docs/architecture.md has the reasoning.
// Not thread-safe; one thread (the replay server's, or the learner's) owns it.
#ifndef APEX_LIMITER_H
#define APEX_LIMITER_H

#include <stdint.h>

typedef struct {
    double samples_per_insert; // 0: no ratio limit (every sample allowed, credit unused)
    double tolerance;          // spi_tolerance, in sampled transitions
    double max_credit;         // tolerance + the rows of the largest request
    double credit;             // see the top; starts at 0
} limiter_t;

// Sets up a limiter with zero credit; max_request: the rows of the largest sample request.
void limiter_init(limiter_t *l, double samples_per_insert, double tolerance, uint64_t max_request);
// n transitions were inserted.
void limiter_inserted(limiter_t *l, uint64_t n);
// 1 when a sample of n transitions is allowed now, else 0.
int limiter_can_sample(const limiter_t *l, uint64_t n);
// n transitions were sampled (only after limiter_can_sample said yes).
void limiter_sampled(limiter_t *l, uint64_t n);
// n transitions counted by limiter_sampled were not sampled after all (a sharded learner
// counts a request when it sends it; a shard that answers NOT_READY or REFUSED served
// nothing). The credit comes back, within the same bounds.
void limiter_refund(limiter_t *l, uint64_t n);
// Restores a saved credit (from a snapshot), clamped to the current bounds: a snapshot
// written with another tolerance still cannot release a burst or block for long.
void limiter_restore(limiter_t *l, double credit);

#endif
