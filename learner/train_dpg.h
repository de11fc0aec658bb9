// train_dpg.h: one Ape-X DPG learner update (continuous actions, issue #28) on a sampled
// batch, with TD3's options, and resumable trainer state.
//
// The model: a deterministic policy mu(s) and one or two critics Q_k(s, a) (nn.h's MLPs: the
// policy's head bounded, mid + half tanh(z), each critic reading [s, a] with a scalar head),
// their target copies mu' and Q'_k, and an optimizer per network kind. train_dpg_step does,
// for a batch of B n-step transitions (s, a, R, disc, s', w) (Horgan et al. 2018, Ape-X DPG;
// Fujimoto et al. 2018, TD3; Lillicrap et al. 2016, DDPG):
//   1. target actions a' = mu'(s'), with target smoothing (TD3, target_noise > 0):
//        a' = clamp(mu'(s') + clamp(sigma z, -c, c) half, low, high),  z ~ N(0, 1)
//      per action dimension, half = (high - low) / 2 (CleanRL's policy_noise x action_scale);
//   2. y = R + disc min_k Q'_k(s', a')  (the minimum over the twins; one critic: Q'_1), with
//      disc = gamma^n, or 0 at a terminal: then y = R exactly (as nn_double_dqn_targets);
//   3. each critic's IS-weighted loss on d_k = y - Q_k(s, a): the squared error (1/B) sum w
//      d^2 (TD3, DDPG, the torch peer: huber_delta 0, the default) or Huber (huber_delta > 0,
//      loss.h); the critics' loss is their sum; new priorities |d_1| + priority_eps, from
//      critic 1 as the torch peer's (Q1 is also the one the policy ascends);
//   4. backward through each critic into zeroed gradients; each critic's gradient clipped to
//      grad_clip (global L2 norm per network), Adam (or RMSProp) on the critics;
//   5. every policy_delay-th step (step % policy_delay == 0, counting from 0 as the peer: the
//      first update moves the policy): the policy loss -mean_i Q_1(s_i, mu(s_i)) through the
//      critic just updated (dQ_1/da from nn_backward_input), backward through mu; the
//      gradient optionally clipped elementwise to [-actor_grad_value_clip, +...] (Ape-X DPG:
//      1), then to grad_clip in norm; the policy's optimizer step;
//   6. target networks, all of them at once: tau > 0: Polyak theta' = (1 - tau) theta' + tau
//      theta at each policy update (step 5's schedule: TD3, the peer; every step with delay
//      1); tau = 0: theta' = theta every target_update steps (Ape-X DPG: 100), counted after
//      the step as train.c's;
//   7. step++.
// A batch whose critic gradient norm is not finite (finite inputs near FLT_MAX overflow the
// network, issue #26) steps nothing: no critic, no policy update, the parameters and moments
// kept; one whose policy gradient norm is not finite skips the policy step. Either counts in
// train_dpg_skipped_steps; targets follow their schedule regardless (the online networks are
// finite). The step still counts and its priorities go back.
//
// Parameters: ONE flat array of train_dpg_num_params floats, the model in PyTorch's order,
//   [ mu | Q_1 | Q_2 (twin only) ]
// each network in nn.h's layout (fc1.w, fc1.b, ..., head.w, head.b; weights out x in), Q_k's
// first layer over (obs_dim + A) inputs: the observation, then the action. The weights
// message publishes the prefix [ mu | Q_1 ] (train_dpg_published_params floats): the actors
// act with mu (nn_forward on cfg.actor) and compute initial priorities with Q_1. Target params, gradients and both
// optimizers' moments use the same layout (the policy's optimizer over the mu range, the
// critics' over the rest), so a target update is one loop and a checkpoint four arrays.
//
// train_dpg_t is opaque (STYLE S2): it owns the parameters, targets, gradients, moments, two
// nn_state_t sized for batch_size (one policy, one critic: the passes run one after the
// other), per-batch scratch, the step counter and the learner's RNG (the smoothing noise).
// Nothing is allocated after train_dpg_new, except staging inside train_dpg_load.
// What it does not do: ZeRO stage 2 (a group runs stage 0 or 1: train_dpg_new_group),
// sampling, networking, lr schedules, exploration noise (the actors').
// Not thread-safe: one thread drives a trainer; the parameters may be read by another thread
// only while no train_dpg_step runs.
#ifndef APEX_TRAIN_DPG_H
#define APEX_TRAIN_DPG_H

#include "ckpt.h"
#include "nn.h"
#include "optim.h"
#include "rng.h"
#include "train.h" // train_memory_t, ZERO_PIECE_DIV

#include <stddef.h>
#include <stdint.h>

typedef struct {
    // The policy mu: an MLP (n_conv 0) on the observation (obs_dim, in_dtype, in_scale as the
    // replay stores it), hidden sizes, n_actions = A, the action dimension, out_bounded = 1
    // with out_low/out_high the action bounds, dueling 0, action_inputs 0. The critics have
    // the same input and hidden sizes (nn_critic_config).
    nn_config_t actor;
    int twin;                    // 1: TD3's twin critics and the minimum target; 0: one (DDPG)
    int batch_size;              // largest B passed to train_dpg_step; states are sized for it
    optim_config_t actor_optim;  // the policy's optimizer (kind, lr, betas, eps)
    optim_config_t critic_optim; // the critics' (the same kind as the policy's)
    float grad_clip;             // global L2 norm bound per network (mu, each Q_k); <= 0 off
    float actor_grad_value_clip; // > 0: the policy gradient clipped to [-c, c] first; 0 off
    float huber_delta;           // 0: the squared error (TD3, DDPG); > 0: Huber threshold
    int policy_delay;            // critic steps per policy step (TD3 2, DDPG 1), >= 1
    float target_noise;          // sigma of the target smoothing, in half-ranges; 0 off
    float target_noise_clip;     // c, in half-ranges (TD3 0.5)
    float tau;                   // (0, 1]: Polyak targets at each policy step; 0: hard copies
    int64_t target_update;       // with tau == 0: steps between copies (>= 1)
    float priority_eps;          // added to |d_1| in the new priorities
    uint64_t seed;               // [run] seed: the networks' init and the learner RNG
    int zero_stage;              // a learner group's ZeRO stage, 0, 1 or 2 (train_dpg_new_group)
    int precision;               // train_precision (train.h) of every pass, policy and critics
} train_dpg_config_t;

// One batch as flat arrays, borrowed for the duration of train_dpg_step.
typedef struct {
    const void *obs;         // (B x O) of the policy's input dtype
    const float *actions;    // (B x A) the actions taken, row-major
    const float *rewards;    // (B) n-step discounted return
    const float *discounts;  // (B) gamma^n, or 0 when the episode ended (no bootstrap)
    const void *next_obs;    // (B x O) the state n steps later
    const float *is_weights; // (B) importance weights, max-normalised by the replay
    int size;                // B, 1..batch_size
    // Test hook: (B x A) the standard normal draws z of step 1 (row-major, sample by sample),
    // instead of the trainer's RNG, which then draws nothing. NULL in production, where the
    // trainer draws z = (float)rng_normal(rng) in that same order.
    const float *target_noise;
} train_dpg_batch_t;

typedef struct {
    float critic_loss;      // the critics' summed IS-weighted loss (before the update)
    float actor_loss;       // -mean Q_1(s, mu(s)) before this step's policy update; 0 if none
    int policy_step;        // 1 when this step updated the policy (step 5 ran and stepped)
    float critic_grad_norm; // sqrt of the sum over critics of their squared norms, unclipped
    float actor_grad_norm;  // the policy gradient's norm after the value clip; 0 if none
    float q_mean;           // mean Q_1(s, a) over the batch
    int64_t forward_ns;     // steps 1-3: target actions, targets, critic forwards and losses
    int64_t backward_ns;    // the critics' backward
    int64_t actor_ns;       // step 5: the policy's passes, clips and optimizer step
    int64_t optim_ns;       // the critics' clips and optimizer step, the target update
} train_dpg_stats_t;

typedef struct train_dpg train_dpg_t;

// In the checkpoint header's extra.user: the policy optimizer's step (the slot a Q-network
// checkpoint uses for its optimizer shards, which a DPG trainer does not have); the critics'
// is the header's optim_step.
#define TRAIN_DPG_CKPT_ACTOR_STEP CKPT_USER_OPT_SHARDS

// TD3's defaults (Fujimoto's TD3 at HEAD, CleanRL, the torch peer): twin critics, batch 256,
// Adam lr 3e-4 for both networks, no gradient clip, squared error, policy_delay 2,
// target_noise 0.2, clip 0.5, tau 0.005, priority_eps 1e-6, seed 0. cfg->actor is zeroed:
// the caller sets the policy network and its bounds. DDPG: twin 0, policy_delay 1,
// target_noise 0; Ape-X DPG: tau 0 with target_update 100, actor_grad_value_clip 1.
void train_dpg_config_default(train_dpg_config_t *cfg);

// Builds a trainer with PyTorch-style random init of every network (from the (seed,
// NET_INIT) stream: mu, then Q_1, Q_2) and targets = online. Returns NULL after logging why
// when cfg is invalid or its precision is one this CPU cannot run (train_precision_here).
// Caller destroys with train_dpg_destroy.
train_dpg_t *train_dpg_new(const train_dpg_config_t *cfg);
// The same for one rank of a learner group (group.h; borrowed, it must outlive the trainer;
// NULL or of size 1: a single learner), in cfg->zero_stage:
//   0: plain data parallelism. Every rank draws the same initial networks from the seed,
//      trains on its own batch, and steps both networks on the group's mean gradients (an
//      all-reduce after the critics' backward and one after the policy's, before any clip);
//   1: ZeRO stage 1 (optimizer state partitioned). The policy's range and the critics' are
//      each split over the ranks (group_shard_range); a rank keeps Adam's (or RMSProp's)
//      moments for its two shards only, reduce-scatters each gradient instead of
//      all-reducing it, clips with the global norms (per critic: the shards' sums of squares
//      all-reduced), steps its shards and all-gathers the parameters;
//   2: ZeRO stage 2 (gradients partitioned too). No full-size gradient: each backward
//      (each critic's, the policy's) hands its gradient piece by piece (nn_backward_pieces,
//      a buffer of a quarter of the larger shard) to a reduce-scatter into this rank's
//      shard of the range; the rest as stage 1.
// In every stage the ranks stay identical and N ranks of B rows step as one learner on the N B
// rows (tests/check_group.c). Each rank smooths its targets with its own stream
// (RNG_ROLE_LEARNER, rank). Checkpoints are one file in every stage, the same as a single
// learner's: train_dpg_save is collective (stages 1 and 2 gather the moments first) and rank 0
// writes; train_dpg_load reads the file on every rank, each keeping its shards, and the group
// agrees on the outcome (collective). So a checkpoint restores across stages and rank counts.
struct group;
train_dpg_t *train_dpg_new_group(const train_dpg_config_t *cfg, struct group *group);
// Frees everything; accepts NULL or *self_p == NULL and sets *self_p = NULL.
void train_dpg_destroy(train_dpg_t **self_p);

// One full update (see top). Writes priorities_out (B) and, if stats is not NULL, *stats.
// Returns the critics' loss. Batch values must be finite and actions within the bounds
// (wire.c validates what it decodes).
float train_dpg_step(train_dpg_t *self, const train_dpg_batch_t *batch, float *priorities_out,
                     train_dpg_stats_t *stats);

// Borrowed views, valid until train_dpg_destroy; train_dpg_load overwrites them in place.
// The whole model (train_dpg_num_params floats, the layout above): online, target, and the
// last step's gradients (the critics' of that step, the policy's of the last policy update;
// after the clips).
size_t train_dpg_num_params(const train_dpg_t *self);
// Floats of each optimizer moment this rank holds: train_dpg_num_params, or in ZeRO stages 1
// and 2 its two shards.
size_t train_dpg_moment_floats(const train_dpg_t *self);
// What the constructor asked the allocator for (xalloc tallies), by part: online and target;
// the gradient (the whole model's, or in stage 2 this rank's shards and the piece buffer);
// the optimizers' moments.
void train_dpg_memory(const train_dpg_t *self, train_memory_t *out);
const float *train_dpg_online(const train_dpg_t *self);
const float *train_dpg_target(const train_dpg_t *self);
// NULL in ZeRO stage 2 (no full-size gradient).
const float *train_dpg_grads(const train_dpg_t *self);
// Each network as an nn_params_t view (k = 0, or 1 with twin).
const nn_params_t *train_dpg_policy(const train_dpg_t *self);
// The weights message: the first this many floats of train_dpg_online, [ mu | Q_1 ]
// (= nn_run_weights_params of the run).
size_t train_dpg_published_params(const train_dpg_t *self);
const nn_params_t *train_dpg_critic(const train_dpg_t *self, int k);
const nn_params_t *train_dpg_target_policy(const train_dpg_t *self);
const nn_params_t *train_dpg_target_critic(const train_dpg_t *self, int k);
int train_dpg_n_critics(const train_dpg_t *self);
int64_t train_dpg_steps(const train_dpg_t *self); // updates done (restored by load)
// Updates whose critic or policy step was skipped for a non-finite gradient norm.
uint64_t train_dpg_skipped_steps(const train_dpg_t *self);
const optim_t *train_dpg_actor_optim(const train_dpg_t *self);
const optim_t *train_dpg_critic_optim(const train_dpg_t *self);
const train_dpg_config_t *train_dpg_config(const train_dpg_t *self);
rng_t *train_dpg_rng(train_dpg_t *self); // the learner's stream; checkpointed

// Replaces the online parameters (train_dpg_num_params floats, the layout above) and the
// targets (target NULL: = online); the optimizers and the step are unchanged. For tests that
// start from given weights (PyTorch's), and for starting a run from another's parameters.
void train_dpg_set_params(train_dpg_t *self, const float *online, const float *target);

// Checkpoint (model/ckpt.h, magic CKPT_DPG_MAGIC): header shape = the policy, num_params =
// the whole model; arrays online, target, optimizer m, optimizer v (the layout above); the
// step, the critics' optimizer step (optim_step), the policy's (extra.user[
// TRAIN_DPG_CKPT_ACTOR_STEP]), the RNG, and extra's other fields (may be NULL). Returns 0 or
// an apex_err from ckpt_write_as; the previous file at path survives a failure.
int train_dpg_save(const train_dpg_t *self, const char *path, const ckpt_extra_t *extra);
// Restores everything train_dpg_save wrote, so training continues exactly. Validates the file
// against this trainer's policy shape, whole-model size (so a twin model does not load into
// one critic, nor a Q-network's checkpoint at all) and optimizer kind; on error (apex_err from
// ckpt_read_as, or APEX_EINVAL for the optimizer) the trainer is unchanged. extra_out (may be
// NULL) gets extra back, its TRAIN_DPG_CKPT_ACTOR_STEP slot zeroed.
int train_dpg_load(train_dpg_t *self, const char *path, ckpt_extra_t *extra_out);

#endif
