// metrics.h: what the learner knows about the run, and metrics.csv (STYLE S20).
//
// Collects ActorStats (frames, finished episodes, weights version per actor) and the
// learner's own counters, keeps the mean return of the last 100 episodes, and appends one
// row per interval to <run dir>/metrics.csv with a fixed header. The CSV is append-only:
// a resumed learner keeps adding rows to the same file. Not thread-safe.
#ifndef APEX_LEARNER_METRICS_H
#define APEX_LEARNER_METRICS_H

#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "tbevents.h"
#include "wire.h"

#define METRICS_RETURN_WINDOW 100
#define METRICS_MAX_ACTORS CONFIG_MAX_ACTORS
#define METRICS_MAX_COLUMNS 40

typedef struct {
    uint64_t frames;          // latest total reported by the actor process
    uint64_t weights_version; // version the actor acts with
    uint64_t dropped_batches;
    uint64_t env_faults, episodes_dropped; // its latest totals (since it started)
    int64_t last_seen_ms;                  // monotonic time of its last ActorStats; 0 = never
} metrics_actor_t;

typedef struct {
    FILE *csv;
    // TensorBoard: every row is also one event of scalars (NULL: none). Set by the caller
    // after metrics_init; metrics_fini destroys it. tb_err: the last write's apex_err.
    tbevents_t *tb;
    int tb_err;
    const char *tags[METRICS_MAX_COLUMNS];
    int64_t start_wall_ms;
    int64_t start_mono_ms;
    double returns[METRICS_RETURN_WINDOW]; // ring of the latest episode returns
    int n_returns;
    int next_return;
    // Run totals, continuous across restarts of any daemon: a resumed learner starts them
    // from its checkpoint (metrics_resume), and frames are summed from the actors'
    // frames_delta, so neither a restarted actor nor a restarted learner counts twice.
    uint64_t episodes;
    uint64_t frames;
    // Python env faults and dropped episodes of all actors since this learner started
    // (summed from each actor's totals; an actor's restart starts its totals again).
    uint64_t env_faults, episodes_dropped;
    int64_t elapsed_base_ms; // run time before this learner process started
    metrics_actor_t actors[METRICS_MAX_ACTORS];
    // Learner counters, updated by the learner.
    uint64_t updates;
    uint64_t sampled_rows;
    double last_loss;
    uint64_t weights_version;
    wire_replay_stats_t replay; // from the latest sample reply
    uint64_t own_bad_messages;  // refused by the learner itself (the CSV column adds both)
    // The weights endpoint (learner.c s_reader_weights), since this learner started: answers
    // sent, requests refused (malformed, or dropped with WAITERS_MAX already held), and the
    // requests held right now for the next version.
    uint64_t weights_answers, weights_refused, weights_held;
    // Continuous actions (the DPG learner): metrics.csv has these columns after the common
    // ones, and last_loss is the critics' loss. Each the last update's (train_dpg_stats_t),
    // but actor_loss and actor_grad_norm those of the last policy update; the counters are
    // the trainer's totals.
    int dpg;
    // [run] deterministic: the actors' columns (env_frames, episodes, mean_return_100,
    // actor_version_min) are those of the trained batch's replay stats (ReplayStats.det_*:
    // counted in the schedule's order), not of the ActorStats that came on a timer.
    int det;
    double actor_loss, q_mean, critic_grad_norm, actor_grad_norm;
    uint64_t policy_updates, skipped_steps;
    int64_t wait_ns, train_ns, optim_ns, net_ns; // per-stage time since the last row
    // Values at the previous row, for rates.
    int64_t prev_ms;
    uint64_t prev_updates, prev_rows, prev_frames;
} metrics_t;

// Opens (appending) path and writes the header if the file is new. A file with another
// header (an older build's columns, or the other kind of run's) is renamed to <path>.old and
// a new one started. dpg: a continuous run's file, with the DPG columns (critic_loss,
// actor_loss, q_mean, critic_grad_norm, actor_grad_norm, policy_updates, skipped_steps) after
// the common ones. Returns 0 or -1 with errno set (the caller logs and runs without metrics).
int metrics_init(metrics_t *m, const char *path, int dpg);
void metrics_fini(metrics_t *m);
// Continues the run totals of a resumed learner (from its checkpoint).
void metrics_resume(metrics_t *m, uint64_t frames, uint64_t episodes, int64_t elapsed_ms);
// Run time so far, including the time before a resume.
int64_t metrics_elapsed_ms(const metrics_t *m, int64_t now_ms);
// Folds one decoded ActorStats message in.
void metrics_add_actor_stats(metrics_t *m, const wire_actor_stats_t *s, int64_t now_ms);
// Takes one message of the stats socket (peer input): decoded with dec, which holds the run's
// limits (the actor ids among them), and folded in when it is an ActorStats. Returns NULL, or
// why it was refused (static or the decoder's, for the caller's rate-limited log line).
const char *metrics_take_message(metrics_t *m, wire_decoder_t *dec, const void *buf, size_t len,
                                 int64_t now_ms);
double metrics_mean_return(const metrics_t *m); // NaN when no episode finished yet
uint64_t metrics_frames(const metrics_t *m);    // env frames of the whole run
// Writes one row (and flushes it), and the same values to the event file if there is one,
// and resets the per-interval stage timers. Returns 0, or -1 with errno set when the CSV row
// could not be written (full disk): the caller logs it; an event-file error is in tb_err.
int metrics_write_row(metrics_t *m, int64_t now_ms);
// One status line for the log.
void metrics_format_status(const metrics_t *m, char *buf, size_t n);

#endif
