// train.c: the learner's update step (see train.h). B = batch, O = obs_dim, A = n_actions.
#define LOG_MODULE "train"
#include "train.h"

#include "apex.h"
#include "clock.h"
#include "log.h"
#include "loss.h"
#include "xalloc.h"

#include <string.h>

// Everything an update touches is allocated here, once, sized for cfg.batch_size (STYLE
// S8). Three nn states rather than one: online(s') and target(s') run before online(s),
// and backward needs online(s)'s activations intact, so each pass keeps its own.
struct trainer {
    train_config_t cfg;
    nn_params_t online;
    nn_params_t target;
    nn_params_t grads;
    optim_t optim;
    nn_state_t st_obs;         // online(s): the only pass that is backpropagated
    nn_state_t st_next_online; // online(s'): argmax for double DQN
    nn_state_t st_next_target; // target(s'): bootstrap value
    float *q;                  // (B x A) online(s)
    float *q_next_online;      // (B x A)
    float *q_next_target;      // (B x A)
    float *dq;                 // (B x A) dL/dq
    float *y;                  // (B) targets
    float *td;                 // (B) y - Q(s, a)
    int64_t step;
    rng_t rng;
};

void train_config_default(train_config_t *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->batch_size = 512;
    optim_config_default(&cfg->optim, OPTIM_ADAM);
    cfg->grad_clip = 40.0f;
    cfg->huber_delta = 1.0f;
    cfg->target_update = 2500;
    cfg->priority_eps = 1e-6f;
}

// Startup-class validation (STYLE S6.3): the learner's config loader should already have
// range-checked these; this catches a programmatic caller and logs what is wrong.
static int s_config_check(const train_config_t *cfg) {
    char why[128];
    if (nn_config_check(&cfg->net, why, sizeof why) != APEX_OK) {
        log_error("network config: %s", why);
        return APEX_EINVAL;
    }
    if (cfg->batch_size < 1 || cfg->target_update < 1 || !(cfg->optim.lr > 0.0f) ||
        !(cfg->huber_delta > 0.0f) ||
        (cfg->optim.kind != OPTIM_ADAM && cfg->optim.kind != OPTIM_RMSPROP)) {
        log_error("trainer config: need batch_size >= 1, target_update >= 1, lr > 0, "
                  "huber_delta > 0, optimizer adam|rmsprop");
        return APEX_EINVAL;
    }
    return APEX_OK;
}

trainer_t *trainer_new(const train_config_t *cfg) {
    if (s_config_check(cfg) != APEX_OK) {
        return NULL;
    }
    trainer_t *self = xcalloc(1, sizeof *self);
    self->cfg = *cfg;
    const nn_config_t *net = &cfg->net;
    nn_params_init(&self->online, net);
    nn_params_init(&self->target, net);
    nn_params_init(&self->grads, net);
    optim_init(&self->optim, &cfg->optim, self->online.num_params);
    nn_state_init(&self->st_obs, net, cfg->batch_size, 1);
    nn_state_init(&self->st_next_online, net, cfg->batch_size, 0);
    nn_state_init(&self->st_next_target, net, cfg->batch_size, 0);
    size_t ba = (size_t)cfg->batch_size * net->n_actions * sizeof(float);
    self->q = xaligned_alloc(ba);
    self->q_next_online = xaligned_alloc(ba);
    self->q_next_target = xaligned_alloc(ba);
    self->dq = xaligned_alloc(ba);
    self->y = xaligned_alloc((size_t)cfg->batch_size * sizeof(float));
    self->td = xaligned_alloc((size_t)cfg->batch_size * sizeof(float));
    // Network init draws from its own stream, so the learner RNG's sequence (checkpointed)
    // does not depend on the network's size.
    rng_t init;
    rng_init_stream(&init, cfg->seed, RNG_ROLE_NET_INIT, 0);
    nn_params_init_random(&self->online, &init);
    nn_params_copy(&self->target, &self->online);
    rng_init_stream(&self->rng, cfg->seed, RNG_ROLE_LEARNER, 0);
    return self;
}

void trainer_destroy(trainer_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    trainer_t *self = *self_p;
    xfree(self->q);
    xfree(self->q_next_online);
    xfree(self->q_next_target);
    xfree(self->dq);
    xfree(self->y);
    xfree(self->td);
    nn_state_fini(&self->st_next_target);
    nn_state_fini(&self->st_next_online);
    nn_state_fini(&self->st_obs);
    optim_fini(&self->optim);
    nn_params_fini(&self->grads);
    nn_params_fini(&self->target);
    nn_params_fini(&self->online);
    xfree(self);
    *self_p = NULL;
}

float trainer_step(trainer_t *self, const train_batch_t *batch, float *priorities_out,
                   train_stats_t *stats) {
    const int B = batch->size, A = self->cfg.net.n_actions;
    APEX_ASSERT(B >= 1 && B <= self->cfg.batch_size);
    int64_t t0 = clock_now_ns();
    // (1) forward passes. Only online(s) keeps activations that backward will use.
    // online(s') and target(s') read the same s': a conv net's first layer runs once for both.
    nn_forward_pair(&self->st_next_online, &self->online, &self->st_next_target, &self->target,
                    batch->next_obs, B, self->q_next_online, self->q_next_target);
    nn_forward(&self->st_obs, &self->online, batch->obs, B, self->q);
    // (2) double-DQN n-step targets, Huber loss, priorities.
    loss_double_dqn_targets(self->y, self->q_next_online, self->q_next_target, batch->rewards,
                            batch->discounts, B, A);
    float loss = loss_huber_td(self->dq, self->td, self->q, self->y, batch->actions,
                               batch->is_weights, self->cfg.huber_delta, B, A);
    loss_priorities(priorities_out, self->td, self->cfg.priority_eps, B);
    int64_t t1 = clock_now_ns();
    // (3) backward; nn_backward accumulates, so start from zero.
    nn_params_zero(&self->grads);
    nn_backward(&self->st_obs, &self->online, &self->grads, self->dq, B);
    int64_t t2 = clock_now_ns();
    // (4) clip + optimizer, (5) target sync.
    float norm = optim_clip_grad_norm(self->grads.data, self->grads.num_params,
                                      self->cfg.grad_clip);
    optim_step(&self->optim, self->online.data, self->grads.data);
    self->step++;
    // Hard target update (DQN): every target_update steps, counted after this step, so
    // the first sync happens after exactly target_update updates.
    if (self->step % self->cfg.target_update == 0) {
        nn_params_copy(&self->target, &self->online);
    }
    int64_t t3 = clock_now_ns();
    if (stats) {
        double qsum = 0.0;
        for (int i = 0; i < B; i++) {
            qsum += self->y[i] - self->td[i]; // = Q(s_i, a_i)
        }
        *stats = (train_stats_t){loss, norm, (float)(qsum / B), t1 - t0, t2 - t1, t3 - t2};
    }
    return loss;
}

const nn_params_t *trainer_online(const trainer_t *self) { return &self->online; }
const nn_params_t *trainer_target(const trainer_t *self) { return &self->target; }
size_t trainer_num_params(const trainer_t *self) { return self->online.num_params; }
int64_t trainer_steps(const trainer_t *self) { return self->step; }
const optim_t *trainer_optim(const trainer_t *self) { return &self->optim; }
const train_config_t *trainer_config(const trainer_t *self) { return &self->cfg; }
rng_t *trainer_rng(trainer_t *self) { return &self->rng; }

// ----------------------------------------------------------------------------
// checkpoints: payload = online, target, optimizer m, optimizer v (nn_params_t layout).

enum { TRAINER_CKPT_ARRAYS = 4 };

// Everything that trainer_step reads and that is not derived from the config goes into the
// file: params, target, both moments, both step counters (optimizer's t drives Adam's bias
// correction) and the RNG, which is what makes a resumed run bit-identical.
int trainer_save(const trainer_t *self, const char *path, const ckpt_extra_t *extra) {
    ckpt_header_t hdr;
    ckpt_header_init(&hdr, &self->cfg.net);
    hdr.learner_step = (uint64_t)self->step;
    hdr.optim_kind = (uint32_t)self->optim.cfg.kind;
    hdr.optim_step = (uint64_t)self->optim.step;
    memcpy(hdr.rng_state, self->rng.s, sizeof hdr.rng_state);
    if (extra) {
        hdr.extra = *extra;
    }
    const float *arrays[TRAINER_CKPT_ARRAYS] = {self->online.data, self->target.data, self->optim.m,
                                                self->optim.v};
    return ckpt_write(path, &hdr, arrays, TRAINER_CKPT_ARRAYS);
}

int trainer_load(trainer_t *self, const char *path, ckpt_extra_t *extra_out) {
    // Stage into scratch: the optimizer kind can only be checked once ckpt_read has
    // returned, and a mismatch must leave the trainer unchanged. Not a hot path.
    ckpt_header_t hdr;
    size_t n = self->online.num_params;
    float *staged = xaligned_alloc(TRAINER_CKPT_ARRAYS * n * sizeof(float));
    float *arrays[TRAINER_CKPT_ARRAYS] = {staged, staged + n, staged + 2 * n, staged + 3 * n};
    int rc = ckpt_read(path, &self->cfg.net, &hdr, arrays, TRAINER_CKPT_ARRAYS);
    if (rc == APEX_OK && hdr.optim_kind != (uint32_t)self->optim.cfg.kind) {
        log_error("%s: checkpoint optimizer is %s, configured optimizer is %s", path,
                  optim_kind_name((optim_kind)hdr.optim_kind),
                  optim_kind_name(self->optim.cfg.kind));
        rc = APEX_EINVAL;
    }
    if (rc == APEX_OK) {
        memcpy(self->online.data, arrays[0], n * sizeof(float));
        memcpy(self->target.data, arrays[1], n * sizeof(float));
        memcpy(self->optim.m, arrays[2], n * sizeof(float));
        memcpy(self->optim.v, arrays[3], n * sizeof(float));
        self->optim.step = (int64_t)hdr.optim_step;
        self->step = (int64_t)hdr.learner_step;
        memcpy(self->rng.s, hdr.rng_state, sizeof self->rng.s);
        if (extra_out) {
            *extra_out = hdr.extra;
        }
    }
    xfree(staged);
    return rc;
}
