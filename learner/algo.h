// algo.h: the learner's update behind one small interface, chosen by the run's action space:
// double DQN (train.h) for discrete actions, Ape-X DPG / TD3 (train_dpg.h; dpg_glue.c) for
// continuous ones ([env] action_dim > 0, issue #28). learner.c drives an algo_t and never
// asks which it is: each kind is a table of the operations below.
//
// What the learner publishes (the weights message, nn_run_weights_params floats) is
// algo_publish's: DQN's online Q-network; DPG's policy then its first critic, [ mu | Q_1 ]
// (train_dpg_published): the actors act with mu and compute initial priorities with Q_1,
// apex-eval runs mu. Checkpoints are each kind's own file
// (model/ckpt.h: CKPT_MAGIC or CKPT_DPG_MAGIC), so a DQN checkpoint is refused by a DPG
// learner and the reverse, with a hint naming the other kind.
// Not thread-safe; algo_step allocates nothing, logs nothing.
#ifndef APEX_LEARNER_ALGO_H
#define APEX_LEARNER_ALGO_H

#include "ckpt.h"
#include "config.h"
#include "metrics.h"
#include "nn.h"
#include "train.h"
#include "train_dpg.h"

#include <stddef.h>
#include <stdint.h>

struct group;

typedef struct {
    const char *name; // "dqn", "dpg"
    void (*destroy)(void *impl);
    // One update on b; writes priorities (b->size) and folds its timings and statistics into
    // mt (train_ns, optim_ns, and the kind's own columns). Returns the loss of metrics.csv's
    // loss column (DPG: the critics').
    float (*step)(void *impl, const train_batch_t *b, float *priorities, metrics_t *mt);
    int64_t (*steps)(const void *impl);
    // The weights message's floats: how many, and written to dst (possibly unaligned: the
    // message's own bytes, weights_server_publish_fill). Every rank of a group calls publish at
    // the same update (ZeRO stage 3 gathers to rank 0 then), the others with dst NULL.
    size_t (*published_n)(const void *impl);
    void (*publish)(void *impl, void *dst);
    int (*save)(void *impl, const char *path, const ckpt_extra_t *extra);
    int (*load)(void *impl, const char *path, ckpt_extra_t *extra_out);
    void (*memory)(const void *impl, train_memory_t *out);
    // The start-up log line's description: parameters, batch, optimizer, rates.
    void (*describe)(const void *impl, const apex_config_t *cfg, char *buf, size_t n);
} algo_ops_t;

typedef struct {
    const algo_ops_t *ops;
    void *impl; // trainer_t or train_dpg_t
} algo_t;

extern const algo_ops_t algo_dqn_ops;
extern const algo_ops_t algo_dpg_ops;

// Builds the run's update into a (plain data, STYLE S2: the caller's, e.g. embedded in the
// learner; it owns the trainer; group: a learner group's rank, borrowed, or NULL; both kinds
// run a group in ZeRO stages 0-2, DQN in stage 3 too). Returns 0, or -1 after logging why; *a
// is zeroed on failure.
int algo_init(algo_t *a, const apex_config_t *cfg, struct group *group);
void algo_fini(algo_t *a); // frees the trainer; a no-op on a zeroed one

static inline float algo_step(algo_t *a, const train_batch_t *b, float *prio, metrics_t *mt) {
    return a->ops->step(a->impl, b, prio, mt);
}
static inline int64_t algo_steps(const algo_t *a) { return a->ops->steps(a->impl); }
static inline size_t algo_published_n(const algo_t *a) { return a->ops->published_n(a->impl); }
static inline void algo_publish(algo_t *a, void *dst) { a->ops->publish(a->impl, dst); }
static inline int algo_save(algo_t *a, const char *path, const ckpt_extra_t *x) {
    return a->ops->save(a->impl, path, x);
}
static inline int algo_load(algo_t *a, const char *path, ckpt_extra_t *x) {
    return a->ops->load(a->impl, path, x);
}
static inline void algo_memory(const algo_t *a, train_memory_t *out) {
    a->ops->memory(a->impl, out);
}

// The trainers themselves, for tests: NULL when the algo is of the other kind.
struct trainer *algo_trainer(const algo_t *a);
train_dpg_t *algo_dpg(const algo_t *a);

// dpg_glue.c: the DPG trainer a continuous run's config describes: the policy
// (nn_config_from_run), [learner] twin_critics, batch_size, optimizer (kind, betas, eps) for
// both networks with lr for the critics and actor_lr (0: lr) for the policy, grad_clip (per
// network), actor_grad_clip, policy_delay, target_noise, target_noise_clip, tau,
// target_update, priority_eps, [run] seed. huber_delta is DQN's: the critics use the squared
// error (TD3); lr_end / lr_steps are DQN's too.
void dpg_config_from_run(train_dpg_config_t *out, const apex_config_t *cfg);

#endif
