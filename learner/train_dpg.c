// train_dpg.c: the DPG / TD3 learner update (see train_dpg.h). B = batch, O = obs_dim, A =
// action dimension, K = number of critics (1 or 2), P_mu / P_q = parameters of the policy and
// of one critic.
#define LOG_MODULE "train_dpg"
#include "train_dpg.h"

#include "apex.h"
#include "clock.h"
#include "group.h"
#include "log.h"
#include "loss.h"
#include "train.h"
#include "xalloc.h"

#include <math.h>
#include <string.h>

#define DPG_MAX_CRITICS 2

// One network kind's range of the flat model ([0, P_mu) the policy's, [P_mu, n_total) the
// critics'), and this rank's shard of it: its optimizer's moments and, in ZeRO stages 1 and 2,
// the gradient it reduces and the parameters it steps. A single learner and stage 0 own it
// whole.
typedef struct {
    size_t off, n;        // the range in the flat arrays
    size_t s_off, s_n;    // this rank's shard: [off + s_off, off + s_off + s_n)
    int *counts, *displs; // (n_ranks) every rank's shard of the range (stages 1, 2)
    float *gshard;        // stage 2: this rank's gradient shard (s_n floats, into gshard_all)
} s_range;

// Everything an update touches is allocated here, once, sized for cfg.batch_size (STYLE S8).
// Two nn states: every pass of a network runs after the previous one of the same network is
// done with its activations (mu'(s') before mu(s); Q'_k, then Q_k forward and backward one
// critic at a time, then Q_1 for the policy), so one state per network kind is enough.
struct train_dpg {
    train_dpg_config_t cfg;
    nn_config_t critic_cfg;
    int n_critics;  // K
    size_t n_actor; // P_mu: the policy is [0, P_mu) of every flat array
    size_t n_total; // P_mu + K P_q
    float *online;  // (n_total) [mu | Q_1 | Q_2]
    float *target;  // (n_total)
    float *grads;   // (n_total); NULL in stage 2, which has no full-size gradient
    float *m, *v;   // (n_total) both optimizers' moments, the same layout
    // Views into online, target and grads.
    nn_params_t actor, critic[DPG_MAX_CRITICS];
    nn_params_t actor_t, critic_t[DPG_MAX_CRITICS];
    nn_params_t g_actor, g_critic[DPG_MAX_CRITICS];
    optim_t actor_opt;   // over [0, P_mu) of online, grads, m, v
    optim_t critic_opt;  // over [P_mu, n_total)
    nn_state_t st_actor; // mu'(s') and mu(s) (train)
    nn_state_t st_q;     // every critic pass (train)
    int32_t *zeros;      // (B) action index 0 for loss_huber_td on a scalar Q
    float *a_next;       // (B x A) a'
    float *a_pi;         // (B x A) mu(s)
    float *da;           // (B x A) dL/da, then the policy's dL/d(output)
    float *q;            // (B) a critic's output
    float *q_next;       // (B) min_k Q'_k(s', a')
    float *y;            // (B) targets
    float *td;           // (B) a critic's y - Q
    float *td1;          // (B) critic 1's, for the priorities
    float *dq;           // (B) dL/dQ
    int64_t step;
    rng_t rng;
    uint64_t skipped;
    // A learner group (NULL: a single learner). ZeRO stage 0: every rank holds and steps the
    // whole model on the group's averaged gradients. Stage 1: m and v hold this rank's
    // shards only ([policy shard | critics' shard]), each rank reduces and steps its shards
    // and the parameters are all-gathered after each optimizer step. Stage 2: the gradients
    // too; backward hands each piece to s_piece_done, which reduce-scatters it into gshard.
    group_t *group;
    int rank, n_ranks, zero;
    s_range ra, rc;         // the policy's range, the critics'
    float *gshard_all;      // stage 2: [policy shard | critics' shard] of the gradient
    int *piece_counts;      // stage 2: (n_ranks) one piece's share of each rank
    nn_pieces_t pieces;     // stage 2: the piece buffer, its callback
    const s_range *piece_r; // stage 2: the range of the network in backward
    size_t piece_base;      // ... and where that network starts in the range (critic k)
    train_memory_t mem;     // what the constructor allocated, by part (xalloc tallies)
};

void train_dpg_config_default(train_dpg_config_t *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->twin = 1;
    cfg->batch_size = 256;
    optim_config_default(&cfg->actor_optim, OPTIM_ADAM);
    cfg->actor_optim.lr = 3e-4f;
    cfg->critic_optim = cfg->actor_optim;
    cfg->policy_delay = 2;
    cfg->target_noise = 0.2f;
    cfg->target_noise_clip = 0.5f;
    cfg->tau = 0.005f;
    cfg->target_update = 100;
    cfg->priority_eps = 1e-6f;
}

// Startup-class validation (STYLE S6.3), as train.c's: a programmatic caller's mistakes are
// logged and refused.
static int s_config_check(const train_dpg_config_t *c) {
    char why[160];
    if (nn_config_check(&c->actor, why, sizeof why) != APEX_OK) {
        log_error("policy network config: %s", why);
        return APEX_EINVAL;
    }
    const nn_config_t *a = &c->actor;
    if (a->n_conv != 0 || !a->out_bounded || a->action_inputs != 0 || a->dueling) {
        log_error("policy network config: need an MLP with a bounded head (out_bounded 1, no "
                  "conv layers, no action inputs, no dueling)");
        return APEX_EINVAL;
    }
    if (c->batch_size < 1 || (c->twin != 0 && c->twin != 1) || c->policy_delay < 1 ||
        !(c->actor_optim.lr > 0.0f) || !(c->critic_optim.lr > 0.0f) ||
        c->actor_optim.kind != c->critic_optim.kind ||
        (c->actor_optim.kind != OPTIM_ADAM && c->actor_optim.kind != OPTIM_RMSPROP) ||
        !(c->huber_delta >= 0.0f) || !(c->target_noise >= 0.0f) ||
        !(c->target_noise_clip >= 0.0f) || !(c->tau >= 0.0f && c->tau <= 1.0f) ||
        (c->tau == 0.0f && c->target_update < 1) || !(c->priority_eps >= 0.0f) ||
        (c->zero_stage < 0 || c->zero_stage > 2) || !(c->actor_grad_value_clip >= 0.0f) ||
        isnan(c->grad_clip)) {
        log_error("DPG trainer config: need batch_size >= 1, twin 0|1, policy_delay >= 1, lr > "
                  "0, one optimizer kind (adam|rmsprop) for both networks, huber_delta >= 0, "
                  "target_noise and its clip >= 0, tau in [0, 1] (0: target_update >= 1), "
                  "priority_eps >= 0, actor_grad_value_clip >= 0, zero_stage 0, 1 or 2");
        return APEX_EINVAL;
    }
    return APEX_OK;
}

static float *s_floats(size_t n) {
    float *p = xaligned_alloc(APEX_MAX(n, (size_t)1) * sizeof(float));
    memset(p, 0, n * sizeof(float));
    return p;
}

// The views of every network into the flat arrays: mu at 0, Q_k at P_mu + k P_q.
static void s_views(train_dpg_t *self) {
    size_t n_q = nn_num_params(&self->critic_cfg);
    nn_params_view(&self->actor, &self->cfg.actor, self->online);
    nn_params_view(&self->actor_t, &self->cfg.actor, self->target);
    if (self->grads) { // stage 2 has no full-size gradient to view
        nn_params_view(&self->g_actor, &self->cfg.actor, self->grads);
    }
    for (int k = 0; k < self->n_critics; k++) {
        size_t off = self->n_actor + (size_t)k * n_q;
        nn_params_view(&self->critic[k], &self->critic_cfg, self->online + off);
        nn_params_view(&self->critic_t[k], &self->critic_cfg, self->target + off);
        if (self->grads) {
            nn_params_view(&self->g_critic[k], &self->critic_cfg, self->grads + off);
        }
    }
}

// Range [off, off + n) and this rank's shard of it (group_shard_range; stages 1 and 2 only: a
// single learner and stage 0 own the range whole).
static void s_range_init(train_dpg_t *self, s_range *r, size_t off, size_t n) {
    *r = (s_range){.off = off, .n = n, .s_off = 0, .s_n = n};
    if (self->zero < 1) {
        return;
    }
    r->counts = xcalloc((size_t)self->n_ranks, sizeof(int));
    r->displs = xcalloc((size_t)self->n_ranks, sizeof(int));
    for (int k = 0; k < self->n_ranks; k++) {
        size_t o, c;
        group_shard_range(n, self->n_ranks, k, &o, &c);
        r->counts[k] = (int)c;
        r->displs[k] = (int)o;
        if (k == self->rank) {
            r->s_off = o, r->s_n = c;
        }
    }
}

// Stage 2's piece callback (train.c's s_piece_done over one range): the piece is [offset,
// offset + n) of the network in backward, piece_base + offset of its range; it is
// reduce-scattered over the ranks whose shards of the range it overlaps (laid out rank by
// rank already), this rank's share landing at its place in the range's gshard. Every element
// of a shard is written by exactly one piece per backward.
static void s_piece_done(void *arg, const float *piece, size_t offset, size_t n) {
    train_dpg_t *self = arg;
    const s_range *r = self->piece_r;
    const size_t lo_p = self->piece_base + offset, hi_p = lo_p + n;
    for (int k = 0; k < self->n_ranks; k++) {
        size_t lo = APEX_MAX(lo_p, (size_t)r->displs[k]);
        size_t hi = APEX_MIN(hi_p, (size_t)r->displs[k] + (size_t)r->counts[k]);
        self->piece_counts[k] = hi > lo ? (int)(hi - lo) : 0;
    }
    float *recv = self->piece_counts[self->rank] > 0
                      ? r->gshard + (APEX_MAX(lo_p, r->s_off) - r->s_off)
                      : r->gshard;
    group_reduce_scatter_f32(self->group, piece, recv, self->piece_counts);
}

// Backward of network p (of range r, starting at base in it) on state s for dL/d(output)
// dout: into its zeroed view g (a single learner, stages 0 and 1), or piece by piece into
// the range's gradient shard (stage 2).
static void s_backward(train_dpg_t *self, nn_state_t *s, const nn_params_t *p, nn_params_t *g,
                       const s_range *r, size_t base, const float *dout, int B) {
    if (self->zero == 2) {
        self->piece_r = r;
        self->piece_base = base;
        nn_backward_pieces(s, p, &self->pieces, dout, B);
        return;
    }
    nn_params_zero(g);
    nn_backward(s, p, g, dout, B);
}

// The gradient buffers: the whole model's (a single learner, stages 0 and 1), or (stage 2)
// this rank's shards of the two ranges and a piece buffer of a quarter of the larger shard
// (train.h's ZERO_PIECE_DIV, at least the widest piece either network has).
static void s_alloc_grads(train_dpg_t *self) {
    if (self->zero != 2) {
        self->grads = s_floats(self->n_total);
        return;
    }
    self->gshard_all = s_floats(self->ra.s_n + self->rc.s_n);
    self->ra.gshard = self->gshard_all;
    self->rc.gshard = self->gshard_all + self->ra.s_n;
    self->piece_counts = xcalloc((size_t)self->n_ranks, sizeof(int));
    size_t cap = APEX_MAX(group_shard_max(self->ra.n, self->n_ranks),
                          group_shard_max(self->rc.n, self->n_ranks)) /
                 ZERO_PIECE_DIV;
    cap = APEX_MAX(cap, nn_piece_min(&self->cfg.actor));
    cap = APEX_MAX(cap, nn_piece_min(&self->critic_cfg));
    self->pieces = (nn_pieces_t){s_floats(cap), cap, s_piece_done, self};
}

train_dpg_t *train_dpg_new(const train_dpg_config_t *cfg) { return train_dpg_new_group(cfg, NULL); }

train_dpg_t *train_dpg_new_group(const train_dpg_config_t *cfg, struct group *group) {
    if (s_config_check(cfg) != APEX_OK) {
        return NULL;
    }
    blas_gemm_fn gemm;
    if (train_precision_here(cfg->precision, &gemm) != 0) {
        return NULL;
    }
    train_dpg_t *self = xcalloc(1, sizeof *self);
    self->cfg = *cfg;
    self->group = group && group_size(group) > 1 ? group : NULL;
    self->rank = self->group ? group_rank(group) : 0;
    self->n_ranks = self->group ? group_size(group) : 1;
    nn_critic_config(&self->critic_cfg, &cfg->actor);
    self->n_critics = cfg->twin ? 2 : 1;
    self->n_actor = nn_num_params(&cfg->actor);
    self->n_total = self->n_actor + (size_t)self->n_critics * nn_num_params(&self->critic_cfg);
    // Measured, as train.c's train_memory_t: what each part asked the allocator for.
    xalloc_tally_t params, grad, opt;
    xalloc_tally_begin(&params);
    self->online = s_floats(self->n_total);
    self->target = s_floats(self->n_total);
    xalloc_tally_end(&params);
    self->zero = self->group ? cfg->zero_stage : 0;
    s_range_init(self, &self->ra, 0, self->n_actor);
    s_range_init(self, &self->rc, self->n_actor, self->n_total - self->n_actor);
    xalloc_tally_begin(&grad);
    s_alloc_grads(self);
    xalloc_tally_end(&grad);
    const size_t nm = self->ra.s_n + self->rc.s_n; // stage 0: n_total
    xalloc_tally_begin(&opt);
    self->m = s_floats(nm);
    self->v = s_floats(nm);
    xalloc_tally_end(&opt);
    self->mem = (train_memory_t){
        .param_bytes = params.bytes, .grad_bytes = grad.bytes, .opt_bytes = opt.bytes};
    s_views(self);
    optim_view(&self->actor_opt, &cfg->actor_optim, self->ra.s_n, self->m, self->v);
    optim_view(&self->critic_opt, &cfg->critic_optim, self->rc.s_n, self->m + self->ra.s_n,
               self->v + self->ra.s_n);
    const int B = cfg->batch_size, A = cfg->actor.n_actions;
    nn_state_init(&self->st_actor, &cfg->actor, B, 1);
    nn_state_init(&self->st_q, &self->critic_cfg, B, 1);
    nn_state_set_gemm(&self->st_actor, gemm); // mu and mu': their passes share the state
    nn_state_set_gemm(&self->st_q, gemm);     // every critic, online and target
    self->zeros = xcalloc((size_t)B, sizeof(int32_t));
    self->a_next = s_floats((size_t)B * A);
    self->a_pi = s_floats((size_t)B * A);
    self->da = s_floats((size_t)B * A);
    self->q = s_floats((size_t)B);
    self->q_next = s_floats((size_t)B);
    self->y = s_floats((size_t)B);
    self->td = s_floats((size_t)B);
    self->td1 = s_floats((size_t)B);
    self->dq = s_floats((size_t)B);
    // Network init from its own stream (as train.c), the networks in layout order.
    rng_t init;
    rng_init_stream(&init, cfg->seed, RNG_ROLE_NET_INIT, 0);
    nn_params_init_random(&self->actor, &init);
    for (int k = 0; k < self->n_critics; k++) {
        nn_params_init_random(&self->critic[k], &init);
    }
    memcpy(self->target, self->online, self->n_total * sizeof(float));
    // Each rank smooths its own rows' targets with its own stream; rank 0's is a single
    // learner's.
    rng_init_stream(&self->rng, cfg->seed, RNG_ROLE_LEARNER, (uint64_t)self->rank);
    return self;
}

void train_dpg_destroy(train_dpg_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    train_dpg_t *self = *self_p;
    nn_state_fini(&self->st_actor);
    nn_state_fini(&self->st_q);
    float *bufs[] = {self->online, self->target, self->grads,      self->m,
                     self->v,      self->a_next, self->a_pi,       self->da,
                     self->q,      self->q_next, self->y,          self->td,
                     self->td1,    self->dq,     self->gshard_all, self->pieces.buf};
    for (size_t i = 0; i < APEX_ARRAY_LEN(bufs); i++) {
        xfree(bufs[i]);
    }
    xfree(self->zeros);
    free(self->piece_counts);
    free(self->ra.counts), free(self->ra.displs), free(self->rc.counts), free(self->rc.displs);
    xfree(self);
    *self_p = NULL;
}

// ----------------------------------------------------------------------------
// the update's pieces

// Step 1's target smoothing, in place on a' (B x A): a' = clamp(a' + clamp(sigma z, -c, c)
// half, low, high) with z from noise (the test hook) or the RNG, drawn sample by sample.
static void s_smooth(train_dpg_t *self, const float *noise, int B) {
    const nn_config_t *a = &self->cfg.actor;
    const int A = a->n_actions;
    const float sigma = self->cfg.target_noise, c = self->cfg.target_noise_clip;
    for (int j = 0; j < B; j++) {
        for (int k = 0; k < A; k++) {
            size_t i = (size_t)j * A + k;
            float z = noise ? noise[i] : (float)rng_normal(&self->rng);
            float e = fminf(fmaxf(sigma * z, -c), c) * ((a->out_high[k] - a->out_low[k]) * 0.5f);
            self->a_next[i] = fminf(fmaxf(self->a_next[i] + e, a->out_low[k]), a->out_high[k]);
        }
    }
}

// Steps 1-2: y = R + disc min_k Q'_k(s', a'). disc 0 marks a terminal: y = R exactly, even
// with a non-finite bootstrap value from an untrained target (as nn_double_dqn_targets).
static void s_targets(train_dpg_t *self, const train_dpg_batch_t *b) {
    const int B = b->size;
    nn_forward(&self->st_actor, &self->actor_t, b->next_obs, B, self->a_next);
    if (self->cfg.target_noise > 0.0f) {
        s_smooth(self, b->target_noise, B);
    }
    for (int k = 0; k < self->n_critics; k++) {
        float *out = k == 0 ? self->q_next : self->q;
        nn_forward_sa(&self->st_q, &self->critic_t[k], b->next_obs, self->a_next, B, out);
        if (k > 0) {
            for (int i = 0; i < B; i++) {
                self->q_next[i] = fminf(self->q_next[i], out[i]); // TD3's clipped double Q
            }
        }
    }
    for (int i = 0; i < B; i++) {
        float d = b->discounts[i];
        self->y[i] = d != 0.0f ? b->rewards[i] + d * self->q_next[i] : b->rewards[i];
    }
}

// Step 3 for critic k: its loss on (s, a) against y; dq and td as loss.h writes them.
static float s_critic_loss(train_dpg_t *self, const float *w, int B) {
    if (self->cfg.huber_delta > 0.0f) {
        return loss_huber_td(self->dq, self->td, self->q, self->y, self->zeros, w,
                             self->cfg.huber_delta, B, 1);
    }
    return loss_mse_td(self->dq, self->td, self->q, self->y, w, B);
}

// Whether to step with gradient norm norm (train.c's s_step_ok without its log: nothing in
// train_dpg_step logs; the caller reports train_dpg_skipped_steps): a non-finite one is
// skipped and counted.
static int s_step_ok(train_dpg_t *self, double norm) {
    if (isfinite(norm)) {
        return 1;
    }
    self->skipped++;
    return 0;
}

// A group's data-parallel step (ZeRO stage 0): the mean over the ranks of each rank's
// gradient of [off, off + n), in place. Every rank's loss is its own batch's mean, so the
// mean of the N gradients is that of one learner on the N x B rows (with equal B). No-op for
// a single learner.
static void s_average(train_dpg_t *self, size_t off, size_t n) {
    if (!self->group) {
        return;
    }
    float *g = self->grads + off;
    group_allreduce_f32(self->group, g, n);
    const float inv = 1.0f / (float)self->n_ranks;
    for (size_t i = 0; i < n; i++) {
        g[i] *= inv;
    }
}

// Stage 1: the mean over the ranks of range r's gradient, this rank's shard of it landing at
// the range's start (reduce-scatter in place); stage 2: the shard the pieces summed, made a
// mean. Otherwise s_average over the whole range. Returns the shard: r->s_n floats, element
// i being the model's off + s_off + i.
static float *s_reduce(train_dpg_t *self, const s_range *r) {
    if (self->zero == 2) {
        const float inv = 1.0f / (float)self->n_ranks;
        for (size_t i = 0; i < r->s_n; i++) {
            r->gshard[i] *= inv;
        }
        return r->gshard;
    }
    float *g = self->grads + r->off;
    if (self->zero != 1) {
        s_average(self, r->off, r->n);
        return g;
    }
    group_reduce_scatter_f32(self->group, NULL, g, r->counts);
    const float inv = 1.0f / (float)self->n_ranks;
    for (size_t i = 0; i < r->s_n; i++) {
        g[i] *= inv;
    }
    return g;
}

// Stages 1 and 2, after a shard of range r stepped: every rank's shard to every rank.
static void s_gather(train_dpg_t *self, const s_range *r) {
    if (self->zero >= 1) {
        group_allgather_f32(self->group, self->online + r->off, r->counts, r->displs);
    }
}

// Sums of squares of the gradient shard g of the critics' range, critic by critic (critic k
// is [k P_q, (k + 1) P_q) of the range), over the group in stages 1 and 2.
static void s_critic_ss(train_dpg_t *self, const float *g, double *ss) {
    const size_t nq = self->critic[0].num_params, lo = self->rc.s_off, hi = lo + self->rc.s_n;
    for (int k = 0; k < self->n_critics; k++) {
        size_t a = APEX_MAX(lo, (size_t)k * nq), b = APEX_MIN(hi, (size_t)(k + 1) * nq);
        ss[k] = a < b ? optim_sum_squares(g + (a - lo), b - a) : 0.0;
    }
    if (self->zero >= 1) {
        group_allreduce_f64(self->group, ss, self->n_critics);
    }
}

// Step 4 after backward: the critics' gradient (a group's mean), each critic's norm (clipped
// to grad_clip when all are finite), and the critics' optimizer step on this rank's shard.
// Returns 1 when it stepped; *norm_out: the critics' joint norm.
static int s_critic_update(train_dpg_t *self, float *norm_out) {
    float *g = s_reduce(self, &self->rc);
    double norms[DPG_MAX_CRITICS], ss = 0.0;
    s_critic_ss(self, g, norms);
    for (int k = 0; k < self->n_critics; k++) {
        ss += norms[k];
        norms[k] = sqrt(norms[k]);
    }
    *norm_out = (float)sqrt(ss);
    if (!s_step_ok(self, sqrt(ss))) {
        return 0;
    }
    const size_t nq = self->critic[0].num_params, lo = self->rc.s_off, hi = lo + self->rc.s_n;
    for (int k = 0; k < self->n_critics; k++) {
        size_t a = APEX_MAX(lo, (size_t)k * nq), b = APEX_MIN(hi, (size_t)(k + 1) * nq);
        if (a < b) {
            optim_clip_scale(g + (a - lo), b - a, norms[k], self->cfg.grad_clip);
        }
    }
    optim_step(&self->critic_opt, self->online + self->rc.off + lo, g);
    s_gather(self, &self->rc);
    return 1;
}

// Step 5: the policy's loss -mean Q_1(s, mu(s)), its gradient through Q_1's action inputs
// and mu, the clips and the policy's optimizer step. Returns the loss; *stepped, *norm_out.
static float s_policy_update(train_dpg_t *self, const train_dpg_batch_t *b, int *stepped,
                             float *norm_out) {
    const int B = b->size, A = self->cfg.actor.n_actions, O = self->cfg.actor.obs_dim;
    nn_forward(&self->st_actor, &self->actor, b->obs, B, self->a_pi);
    nn_forward_sa(&self->st_q, &self->critic[0], b->obs, self->a_pi, B, self->q);
    double qsum = 0.0;
    for (int i = 0; i < B; i++) {
        qsum += self->q[i];
        self->dq[i] = -1.0f / (float)B; // d(-mean Q)/dQ_i
    }
    // dL/da through the critic's action columns, then through mu (tanh and bounds included).
    memset(self->da, 0, (size_t)B * A * sizeof(float));
    nn_backward_input(&self->st_q, &self->critic[0], self->dq, B, O, A, self->da);
    s_backward(self, &self->st_actor, &self->actor, &self->g_actor, &self->ra, 0, self->da, B);
    // A group's mean (stages 1, 2: this rank's shard of it), before the clips, as one learner's
    // whole gradient.
    float *g = s_reduce(self, &self->ra);
    const size_t n = self->ra.s_n;
    const float vc = self->cfg.actor_grad_value_clip;
    if (vc > 0.0f) { // torch.nn.utils.clip_grad_value_; NaN stays NaN for the check below
        for (size_t i = 0; i < n; i++) {
            g[i] = g[i] > vc ? vc : (g[i] < -vc ? -vc : g[i]);
        }
    }
    double ss = optim_sum_squares(g, n);
    if (self->zero >= 1) {
        group_allreduce_f64(self->group, &ss, 1);
    }
    double norm = sqrt(ss);
    *norm_out = (float)norm;
    *stepped = s_step_ok(self, norm);
    if (*stepped) {
        optim_clip_scale(g, n, norm, self->cfg.grad_clip);
        optim_step(&self->actor_opt, self->online + self->ra.s_off, g);
        s_gather(self, &self->ra);
    }
    return (float)(-qsum / B);
}

// Step 6 on the whole model: theta' = (1 - tau) theta' + tau theta (the peer's
// pt.mul_(1 - tau).add_(p, alpha=tau)), or a copy.
static void s_target_update(train_dpg_t *self, int policy_turn) {
    const float tau = self->cfg.tau;
    if (tau > 0.0f) {
        if (!policy_turn) {
            return;
        }
        const float keep = 1.0f - tau;
        for (size_t i = 0; i < self->n_total; i++) {
            self->target[i] = self->target[i] * keep + tau * self->online[i];
        }
    } else if ((self->step + 1) % self->cfg.target_update == 0) {
        memcpy(self->target, self->online, self->n_total * sizeof(float));
    }
}

float train_dpg_step(train_dpg_t *self, const train_dpg_batch_t *b, float *priorities_out,
                     train_dpg_stats_t *stats) {
    const int B = b->size;
    APEX_ASSERT(B >= 1 && B <= self->cfg.batch_size);
    int64_t t0 = clock_now_ns();
    // (1, 2) target actions and targets.
    s_targets(self, b);
    // (3) each critic on (s, a): loss, then (4) its backward into its zeroed gradient while
    // its activations are in the state.
    float loss = 0.0f;
    int64_t t_bwd = 0;
    for (int k = 0; k < self->n_critics; k++) {
        nn_forward_sa(&self->st_q, &self->critic[k], b->obs, b->actions, B, self->q);
        loss += s_critic_loss(self, b->is_weights, B);
        if (k == 0) {
            memcpy(self->td1, self->td, (size_t)B * sizeof(float));
        }
        int64_t tb = clock_now_ns();
        s_backward(self, &self->st_q, &self->critic[k], &self->g_critic[k], &self->rc,
                   (size_t)k * self->critic[k].num_params, self->dq, B);
        t_bwd += clock_now_ns() - tb;
    }
    loss_priorities(priorities_out, self->td1, self->cfg.priority_eps, B);
    // A group's critics step on the mean gradient (s_critic_update): every rank then takes
    // the same decisions (norms, skips, the policy's turn) and keeps the same parameters.
    int64_t t1 = clock_now_ns();
    float critic_norm;
    int critic_ok = s_critic_update(self, &critic_norm);
    int64_t t2 = clock_now_ns();
    // (5) the policy, every policy_delay-th step from the first, after the critics' step.
    int policy_turn = self->step % self->cfg.policy_delay == 0, policy_stepped = 0;
    float actor_loss = 0.0f, actor_norm = 0.0f;
    int64_t t_actor = 0, t_aopt = 0;
    if (policy_turn && critic_ok) {
        int64_t ta = clock_now_ns();
        actor_loss = s_policy_update(self, b, &policy_stepped, &actor_norm);
        t_actor = clock_now_ns() - ta;
    }
    // (6) targets, (7) the step.
    int64_t t3 = clock_now_ns();
    s_target_update(self, policy_turn);
    self->step++;
    t_aopt = clock_now_ns() - t3;
    if (stats) {
        double qsum = 0.0;
        for (int i = 0; i < B; i++) {
            qsum += self->y[i] - self->td1[i]; // = Q_1(s_i, a_i)
        }
        *stats = (train_dpg_stats_t){.critic_loss = loss,
                                     .actor_loss = actor_loss,
                                     .policy_step = policy_stepped,
                                     .critic_grad_norm = critic_norm,
                                     .actor_grad_norm = actor_norm,
                                     .q_mean = (float)(qsum / B),
                                     .forward_ns = t1 - t0 - t_bwd,
                                     .backward_ns = t_bwd,
                                     .actor_ns = t_actor,
                                     .optim_ns = t2 - t1 + t_aopt};
    }
    return loss;
}

// ----------------------------------------------------------------------------
// accessors

size_t train_dpg_num_params(const train_dpg_t *self) { return self->n_total; }
size_t train_dpg_moment_floats(const train_dpg_t *self) { return self->ra.s_n + self->rc.s_n; }
void train_dpg_memory(const train_dpg_t *self, train_memory_t *out) { *out = self->mem; }
const float *train_dpg_online(const train_dpg_t *self) { return self->online; }
const float *train_dpg_target(const train_dpg_t *self) { return self->target; }
const float *train_dpg_grads(const train_dpg_t *self) { return self->grads; }
const nn_params_t *train_dpg_policy(const train_dpg_t *self) { return &self->actor; }
size_t train_dpg_published_params(const train_dpg_t *self) {
    return self->n_actor + self->critic[0].num_params;
}
const nn_params_t *train_dpg_target_policy(const train_dpg_t *self) { return &self->actor_t; }
int train_dpg_n_critics(const train_dpg_t *self) { return self->n_critics; }
int64_t train_dpg_steps(const train_dpg_t *self) { return self->step; }
uint64_t train_dpg_skipped_steps(const train_dpg_t *self) { return self->skipped; }
const optim_t *train_dpg_actor_optim(const train_dpg_t *self) { return &self->actor_opt; }
const optim_t *train_dpg_critic_optim(const train_dpg_t *self) { return &self->critic_opt; }
const train_dpg_config_t *train_dpg_config(const train_dpg_t *self) { return &self->cfg; }
rng_t *train_dpg_rng(train_dpg_t *self) { return &self->rng; }

const nn_params_t *train_dpg_critic(const train_dpg_t *self, int k) {
    APEX_ASSERT(k >= 0 && k < self->n_critics);
    return &self->critic[k];
}

const nn_params_t *train_dpg_target_critic(const train_dpg_t *self, int k) {
    APEX_ASSERT(k >= 0 && k < self->n_critics);
    return &self->critic_t[k];
}

void train_dpg_set_params(train_dpg_t *self, const float *online, const float *target) {
    memcpy(self->online, online, self->n_total * sizeof(float));
    memcpy(self->target, target ? target : online, self->n_total * sizeof(float));
}

// ----------------------------------------------------------------------------
// checkpoints: payload = online, target, m, v (the whole model's layout each)

enum { DPG_CKPT_ARRAYS = 4 };

// Stages 1 and 2: the whole model's moments, every rank's shards put in place (collective); a
// fresh allocation the caller frees. Not a hot path: once per checkpoint.
static float *s_full_moments(const train_dpg_t *self, const float *mine) {
    float *full = xaligned_alloc(self->n_total * sizeof(float));
    const s_range *rs[2] = {&self->ra, &self->rc};
    const float *src = mine;
    for (int i = 0; i < 2; i++) {
        memcpy(full + rs[i]->off + rs[i]->s_off, src, rs[i]->s_n * sizeof(float));
        group_allgather_f32(self->group, full + rs[i]->off, rs[i]->counts, rs[i]->displs);
        src += rs[i]->s_n;
    }
    return full;
}

int train_dpg_save(const train_dpg_t *self, const char *path, const ckpt_extra_t *extra) {
    float *m = self->m, *v = self->v;
    if (self->zero >= 1) {
        m = s_full_moments(self, self->m);
        v = s_full_moments(self, self->v);
    }
    int rc = APEX_OK;
    if (self->rank == 0) { // a group's ranks hold the same model: rank 0 writes it
        ckpt_header_t hdr;
        ckpt_header_init(&hdr, &self->cfg.actor);
        hdr.num_params = self->n_total;
        hdr.learner_step = (uint64_t)self->step;
        hdr.optim_kind = (uint32_t)self->critic_opt.cfg.kind;
        hdr.optim_step = (uint64_t)self->critic_opt.step;
        memcpy(hdr.rng_state, self->rng.s, sizeof hdr.rng_state);
        if (extra) {
            hdr.extra = *extra;
        }
        hdr.extra.user[TRAIN_DPG_CKPT_ACTOR_STEP] = (uint64_t)self->actor_opt.step;
        const float *arrays[DPG_CKPT_ARRAYS] = {self->online, self->target, m, v};
        rc = ckpt_write_as(path, CKPT_DPG_MAGIC, &hdr, arrays, DPG_CKPT_ARRAYS);
    }
    if (self->zero >= 1) {
        xfree(m), xfree(v);
    }
    return rc;
}

int train_dpg_load(train_dpg_t *self, const char *path, ckpt_extra_t *extra_out) {
    // Staged: a file that fails a check (or the optimizer kind, known only once it is read)
    // leaves the trainer unchanged. Not a hot path.
    const size_t n = self->n_total;
    float *staged = xaligned_alloc(DPG_CKPT_ARRAYS * n * sizeof(float));
    float *arrays[DPG_CKPT_ARRAYS] = {staged, staged + n, staged + 2 * n, staged + 3 * n};
    ckpt_header_t hdr;
    int rc = ckpt_read_as(path, CKPT_DPG_MAGIC, &self->cfg.actor, n, &hdr, arrays, DPG_CKPT_ARRAYS);
    if (rc == APEX_OK && hdr.optim_kind != (uint32_t)self->critic_opt.cfg.kind) {
        log_error("%s: checkpoint optimizer is %s, configured optimizer is %s", path,
                  optim_kind_name((optim_kind)hdr.optim_kind),
                  optim_kind_name(self->critic_opt.cfg.kind));
        rc = APEX_EINVAL;
    }
    if (self->group) {
        // Every rank read the file itself: they agree to go on only if every one could (a
        // rank on a host that does not see it fails the group's load).
        double failed = rc != APEX_OK;
        group_allreduce_f64(self->group, &failed, 1);
        if (rc == APEX_OK && failed > 0) {
            log_error("%s: another rank of the learner group could not load it", path);
            rc = APEX_EIO;
        }
    }
    if (rc == APEX_OK) {
        memcpy(self->online, arrays[0], n * sizeof(float));
        memcpy(self->target, arrays[1], n * sizeof(float));
        // The moments: this rank's shards of each range (stage 0: the whole arrays).
        const s_range *rs[2] = {&self->ra, &self->rc};
        for (int a = 0; a < 2; a++) {
            float *dst = a == 0 ? self->m : self->v;
            const float *src = arrays[2 + a];
            for (int i = 0; i < 2; i++) {
                memcpy(dst, src + rs[i]->off + rs[i]->s_off, rs[i]->s_n * sizeof(float));
                dst += rs[i]->s_n;
            }
        }
        self->step = (int64_t)hdr.learner_step;
        self->critic_opt.step = (int64_t)hdr.optim_step;
        self->actor_opt.step = (int64_t)hdr.extra.user[TRAIN_DPG_CKPT_ACTOR_STEP];
        memcpy(self->rng.s, hdr.rng_state, sizeof self->rng.s);
        if (self->rank > 0) {
            // The file holds rank 0's stream: the others start their own anew, from the step.
            rng_init_stream(&self->rng, self->cfg.seed ^ (uint64_t)self->step, RNG_ROLE_LEARNER,
                            (uint64_t)self->rank);
        }
        if (extra_out) {
            *extra_out = hdr.extra;
            extra_out->user[TRAIN_DPG_CKPT_ACTOR_STEP] = 0; // the trainer's, not the caller's
        }
    }
    xfree(staged);
    return rc;
}
