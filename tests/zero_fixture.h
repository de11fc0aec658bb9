// zero_fixture.h: what tests/check_group.c and tests/zero_ranks.c (the program the check
// runs under mpirun) must agree on: the networks, the trainer config, and the fixed batches
// of every step, so that N ranks on their slices of a step's batch can be compared with one
// learner on the whole of it. Header-only (static inline): two binaries include it.
#ifndef APEX_ZERO_FIXTURE_H
#define APEX_ZERO_FIXTURE_H

#include "nn.h"
#include "rng.h"
#include "train.h"
#include "train_dpg.h"
#include "xalloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ZF_MAX_ROWS 64

// "mlp": 8-32-32-dueling(4); "conv": 6x6x2 -c4k3s1-16-dueling(3) (conv layer pieces);
// "large": bench_learner's 84-512-512-dueling(18), 315 923 parameters (the memory test);
// "wide:H": 84-H-H-dueling(18) (bench/run_zero_memory.sh).
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
    } else if (strncmp(name, "wide:", 5) == 0 && atoi(name + 5) >= 1) {
        // The ZeRO memory benchmarks' width search: 84-H-H-dueling(18), H^2 + 105 H + 19.
        n->obs_dim = 84, n->n_actions = 18;
        n->hidden[0] = n->hidden[1] = atoi(name + 5);
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

// ---------------------------------------------------------------------------------------
// The DPG trainer's group (ZeRO stage 0): a 5-16-16-tanh(2) policy in asymmetric bounds,
// twin critics, TD3's options with a policy delay of 2 and Polyak targets, the norm clip
// active in some steps and the policy's value clip in others, lr 3e-3. target_noise > 0
// with the batch's noise hook, so that N ranks smooth their rows exactly as one learner.
#define ZF_DPG_O 5
#define ZF_DPG_A 2

static inline void zf_dpg_config(train_dpg_config_t *t, optim_kind kind, int batch) {
    train_dpg_config_default(t);
    nn_config_t *a = &t->actor;
    memset(a, 0, sizeof *a);
    a->obs_dim = ZF_DPG_O, a->n_actions = ZF_DPG_A, a->n_hidden = 2;
    a->hidden[0] = 16, a->hidden[1] = 16;
    a->out_bounded = 1;
    a->out_low[0] = -2.0f, a->out_high[0] = 2.0f;
    a->out_low[1] = -0.5f, a->out_high[1] = 1.5f;
    t->batch_size = batch;
    optim_config_default(&t->actor_optim, kind);
    t->actor_optim.lr = 3e-3f;
    t->critic_optim = t->actor_optim;
    t->grad_clip = 2.0f;
    t->actor_grad_value_clip = 0.05f;
    t->tau = 0.05f;
    t->seed = 13;
}

typedef struct {
    float obs[ZF_MAX_ROWS * ZF_DPG_O], next_obs[ZF_MAX_ROWS * ZF_DPG_O];
    float actions[ZF_MAX_ROWS * ZF_DPG_A], noise[ZF_MAX_ROWS * ZF_DPG_A];
    float rewards[ZF_MAX_ROWS], discounts[ZF_MAX_ROWS], is_w[ZF_MAX_ROWS];
} zf_dpg_batch_t;

// The whole batch of global step `step`, actions in the bounds; rewards large every third
// step (the norm clip's turn).
static inline void zf_dpg_batch(zf_dpg_batch_t *b, int64_t step, int rows) {
    rng_t r;
    rng_init_stream(&r, 98, RNG_ROLE_LEARNER, (uint64_t)step);
    float scale = step % 3 == 0 ? 20.0f : 0.5f;
    for (int i = 0; i < rows * ZF_DPG_O; i++) {
        b->obs[i] = 2.0f * rng_uniform_f(&r) - 1.0f;
        b->next_obs[i] = 2.0f * rng_uniform_f(&r) - 1.0f;
    }
    for (int i = 0; i < rows; i++) {
        b->actions[i * ZF_DPG_A] = 4.0f * rng_uniform_f(&r) - 2.0f;
        b->actions[i * ZF_DPG_A + 1] = 2.0f * rng_uniform_f(&r) - 0.5f;
        b->noise[i * ZF_DPG_A] = (float)rng_normal(&r);
        b->noise[i * ZF_DPG_A + 1] = (float)rng_normal(&r);
        b->rewards[i] = scale * (2.0f * rng_uniform_f(&r) - 1.0f);
        b->discounts[i] = rng_uniform_f(&r) < 0.1f ? 0.0f : 0.97f;
        b->is_w[i] = 0.2f + 0.8f * rng_uniform_f(&r);
    }
}

// Rows [r0, r0 + n) of b as a DPG batch, its smoothing noise included.
static inline train_dpg_batch_t zf_dpg_slice(const zf_dpg_batch_t *b, int r0, int n) {
    size_t o = (size_t)r0 * ZF_DPG_O, a = (size_t)r0 * ZF_DPG_A;
    return (train_dpg_batch_t){.obs = b->obs + o,
                               .actions = b->actions + a,
                               .rewards = b->rewards + r0,
                               .discounts = b->discounts + r0,
                               .next_obs = b->next_obs + o,
                               .is_weights = b->is_w + r0,
                               .size = n,
                               .target_noise = b->noise + a};
}

#endif
