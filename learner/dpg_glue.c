// dpg_glue.c: the DPG kind of algo.h: train_dpg.h's trainer as the learner daemon drives it
// for a run with continuous actions (issue #28): its config from [learner], the batch the
// prefetcher brings, its statistics in metrics.csv, what it publishes and checkpoints.
#define LOG_MODULE "learner"
#include "algo.h"

#include <stdio.h>
#include <string.h>

void dpg_config_from_run(train_dpg_config_t *t, const apex_config_t *c) {
    const config_learner_t *L = &c->learner;
    train_dpg_config_default(t);
    nn_config_from_run(&t->actor, c); // the policy: bounded head in the run's bounds
    t->twin = L->twin_critics;
    t->batch_size = (int)L->batch_size;
    optim_config_default(&t->critic_optim,
                         L->optimizer == CONFIG_OPTIM_RMSPROP ? OPTIM_RMSPROP : OPTIM_ADAM);
    t->critic_optim.lr = (float)L->lr;
    t->critic_optim.adam_beta1 = (float)L->adam_beta1;
    t->critic_optim.adam_beta2 = (float)L->adam_beta2;
    t->critic_optim.adam_eps = (float)L->adam_eps;
    t->critic_optim.rms_decay = (float)L->rms_decay;
    t->critic_optim.rms_eps = (float)L->rms_eps;
    t->actor_optim = t->critic_optim;
    t->actor_optim.lr = (float)(L->actor_lr > 0 ? L->actor_lr : L->lr);
    t->grad_clip = (float)L->grad_clip;
    t->actor_grad_value_clip = (float)L->actor_grad_clip;
    t->huber_delta = 0.0f; // the squared error (TD3); [learner] huber_delta is DQN's
    t->policy_delay = (int)L->policy_delay;
    t->target_noise = (float)L->target_noise;
    t->target_noise_clip = (float)L->target_noise_clip;
    t->tau = (float)L->tau;
    t->target_update = L->target_update;
    t->priority_eps = (float)L->priority_eps;
    t->seed = (uint64_t)c->run.seed;
    // A group's stage; a single learner ignores it.
    t->zero_stage = (int)c->learner.zero_stage;
    t->precision = c->learner.precision;
}

static void s_destroy(void *impl) {
    train_dpg_t *t = impl;
    train_dpg_destroy(&t);
}

static float s_step(void *impl, const train_batch_t *b, float *prio, metrics_t *mt) {
    train_dpg_batch_t db = {.obs = b->obs,
                            .actions = b->cont_actions,
                            .rewards = b->rewards,
                            .discounts = b->discounts,
                            .next_obs = b->next_obs,
                            .is_weights = b->is_weights,
                            .size = b->size};
    train_dpg_stats_t st;
    float loss = train_dpg_step(impl, &db, prio, &st);
    mt->train_ns += st.forward_ns + st.backward_ns + st.actor_ns;
    mt->optim_ns += st.optim_ns;
    mt->q_mean = st.q_mean;
    mt->critic_grad_norm = st.critic_grad_norm;
    if (st.policy_step) {
        mt->actor_loss = st.actor_loss;
        mt->actor_grad_norm = st.actor_grad_norm;
        mt->policy_updates++;
    }
    mt->skipped_steps = train_dpg_skipped_steps(impl);
    return loss;
}

static int64_t s_steps(const void *impl) { return train_dpg_steps(impl); }
static size_t s_published_n(const void *impl) { return train_dpg_published_params(impl); }
static void s_publish(void *impl, void *dst) {
    if (dst) { // [ mu | Q_1 ] is the prefix of the online model
        memcpy(dst, train_dpg_online(impl), train_dpg_published_params(impl) * sizeof(float));
    }
}
static int s_save(void *impl, const char *path, const ckpt_extra_t *x) {
    return train_dpg_save(impl, path, x);
}
static int s_load(void *impl, const char *path, ckpt_extra_t *x) {
    return train_dpg_load(impl, path, x);
}

static void s_memory(const void *impl, train_memory_t *out) { train_dpg_memory(impl, out); }

static void s_describe(const void *impl, const apex_config_t *cfg, char *buf, size_t n) {
    const train_dpg_config_t *c = train_dpg_config(impl);
    train_memory_t m;
    s_memory(impl, &m);
    char targets[64];
    if (c->tau > 0) {
        snprintf(targets, sizeof targets, "tau %g", (double)c->tau);
    } else {
        snprintf(targets, sizeof targets, "target copies every %lld", (long long)c->target_update);
    }
    snprintf(buf, n,
             "DPG (%s): policy %zu and critic %zu published of %zu parameters (%zu bytes of "
             "params, gradients and "
             "moments), batch %lld, prefetch %lld x %lld batches per request, %s, lr %g, actor lr "
             "%g, policy delay %d, target noise %g clip %g, %s",
             c->twin ? "TD3, twin critics" : "one critic", train_dpg_policy(impl)->num_params,
             train_dpg_critic(impl, 0)->num_params, train_dpg_num_params(impl),
             m.param_bytes + m.grad_bytes + m.opt_bytes, (long long)cfg->learner.batch_size,
             (long long)cfg->learner.prefetch, (long long)cfg->learner.batches_per_request,
             cfg->learner.optimizer == CONFIG_OPTIM_RMSPROP ? "rmsprop" : "adam",
             (double)c->critic_optim.lr, (double)c->actor_optim.lr, c->policy_delay,
             (double)c->target_noise, (double)c->target_noise_clip, targets);
}

const algo_ops_t algo_dpg_ops = {.name = "dpg",
                                 .destroy = s_destroy,
                                 .step = s_step,
                                 .steps = s_steps,
                                 .published_n = s_published_n,
                                 .publish = s_publish,
                                 .save = s_save,
                                 .load = s_load,
                                 .memory = s_memory,
                                 .describe = s_describe};
