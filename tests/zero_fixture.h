// zero_fixture.h: what tests/check_group.c and tests/zero_ranks.c (the program the check
// runs under mpirun) must agree on: the networks, the trainer config, and the fixed batches
// of every step, so that N ranks on their slices of a step's batch can be compared with one
// learner on the whole of it. Header-only (static inline): two binaries include it.
#ifndef APEX_ZERO_FIXTURE_H
#define APEX_ZERO_FIXTURE_H

#include "nn.h"
#include "rng.h"
#include "train.h"
#include "xalloc.h"

#include <stdint.h>
#include <string.h>

#define ZF_MAX_ROWS 64

// "mlp": 8-32-32-dueling(4); "conv": 6x6x2 -c4k3s1-16-dueling(3) (conv layer pieces);
// "large": bench_learner's 84-512-512-dueling(18), 315 923 parameters (the memory test).
static inline int zf_net(nn_config_t *n, const char *name) {
    memset(n, 0, sizeof *n);
    n->dueling = 1;
    n->n_hidden = 2;
    if (strcmp(name, "mlp") == 0) {
        n->obs_dim = 8, n->n_actions = 4, n->hidden[0] = 32, n->hidden[1] = 32;
    } else if (strcmp(name, "conv") == 0) {
        n->obs_dim = 72, n->in_h = 6, n->in_w = 6, n->in_c = 2, n->n_actions = 3;
        n->n_conv = 1, n->conv[0] = (nn_conv_t){4, 3, 1};
        n->n_hidden = 1, n->hidden[0] = 16;
    } else if (strcmp(name, "large") == 0) {
        n->obs_dim = 84, n->n_actions = 18, n->hidden[0] = 512, n->hidden[1] = 512;
    } else {
        return -1;
    }
    return 0;
}

// lr 3e-3, so that 50 steps move the parameters far enough for a wrong update to show.
static inline void zf_train_config(train_config_t *t, const nn_config_t *net, optim_kind kind,
                                   int batch, int stage, float clip) {
    train_config_default(t);
    t->net = *net;
    t->batch_size = batch;
    optim_config_default(&t->optim, kind);
    t->optim.lr = 3e-3f;
    t->grad_clip = clip;
    t->target_update = 7; // several syncs in 50 steps
    t->seed = 11;
    t->zero_stage = stage;
}

typedef struct {
    float obs[ZF_MAX_ROWS * 84], next_obs[ZF_MAX_ROWS * 84];
    int32_t actions[ZF_MAX_ROWS];
    float rewards[ZF_MAX_ROWS], discounts[ZF_MAX_ROWS], is_w[ZF_MAX_ROWS];
} zf_batch_t;

// The whole batch of global step `step`: the same on every rank and in the reference.
// Rewards are large every third step, so that the gradient norm crosses a clip of ~1
// in some steps and not in others.
static inline void zf_batch(zf_batch_t *b, const nn_config_t *net, int64_t step, int rows) {
    rng_t r;
    rng_init_stream(&r, 99, RNG_ROLE_LEARNER, (uint64_t)step);
    float scale = step % 3 == 0 ? 8.0f : 0.5f;
    for (int i = 0; i < rows * net->obs_dim; i++) {
        b->obs[i] = 2.0f * rng_uniform_f(&r) - 1.0f;
        b->next_obs[i] = 2.0f * rng_uniform_f(&r) - 1.0f;
    }
    for (int i = 0; i < rows; i++) {
        b->actions[i] = (int32_t)(rng_next_u64(&r) % (uint64_t)net->n_actions);
        b->rewards[i] = scale * (2.0f * rng_uniform_f(&r) - 1.0f);
        b->discounts[i] = rng_uniform_f(&r) < 0.1f ? 0.0f : 0.97f;
        b->is_w[i] = 0.2f + 0.8f * rng_uniform_f(&r);
    }
}

// Rows [r0, r0 + n) of b as a trainer batch.
static inline train_batch_t zf_slice(const zf_batch_t *b, const nn_config_t *net, int r0, int n) {
    size_t o = (size_t)r0 * net->obs_dim;
    return (train_batch_t){.obs = b->obs + o,
                           .actions = b->actions + r0,
                           .rewards = b->rewards + r0,
                           .discounts = b->discounts + r0,
                           .next_obs = b->next_obs + o,
                           .is_weights = b->is_w + r0,
                           .size = n};
}

#endif
