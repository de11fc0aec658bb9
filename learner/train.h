// train.h: one Ape-X learner update on a sampled batch, and resumable trainer state.
//
// trainer_step does, for a batch of B transitions (s, a, R, disc, s', w):
//   1. three forward passes: online(s') for the argmax, target(s') for its value, online(s);
//   2. double-DQN n-step targets and the IS-weighted Huber loss (loss.h), new priorities
//      |delta| + priority_eps;
//   3. backward through online(s) into zeroed gradients;
//   4. global grad-norm clip (grad_clip, default 40), then Adam or centered RMSProp; a
//      gradient whose norm is not finite (a batch that overflows the network: finite values
//      near FLT_MAX are valid on the wire) is not stepped, so the parameters stay finite;
//   5. step++, and every target_update steps target = online (one memcpy).
// Timings of (1+2), (3) and (4+5) come back in train_stats_t, in ns of CLOCK_MONOTONIC.
//
// trainer_t is opaque (STYLE S2): it owns the online and target params, gradients, the
// optimizer's moments (all in the nn_params_t layout), three nn_state_t sized for
// batch_size, per-batch scratch, the step counter and the learner's RNG. Nothing is
// allocated after trainer_new, except a payload buffer inside trainer_load.
// What it does not do: sampling, networking, publishing; the learner daemon does those,
// reading the online weights through trainer_online().
// Not thread-safe: one thread drives a trainer; trainer_online() may be read by another
// thread only while no trainer_step runs.
//
// A learner group (trainer_new_group, group.h; ZeRO, Rajbhandari et al. 2020): every rank
// runs trainer_step on its own batch at the same time, and the step becomes
//   backward of the rank's loss scaled by 1/N (so sums over ranks are averages) ->
//   stage 0: all-reduce of the whole gradient, then clip and step as a single learner, the
//            optimizer state replicated;
//   stage 1: reduce-scatter of the whole gradient: rank r receives the averaged gradient of
//            its shard (group_shard_range of the flat parameter array);
//   stage 2: the same reduce-scatter piece by piece while backward produces the gradient
//            (nn_backward_pieces), so no full-size gradient exists: a piece buffer
//            (shard / ZERO_PIECE_DIV floats, at least nn_piece_min) plus the shard;
//   stages 1, 2: global norm = sqrt(all-reduce of the shards' sums of squares), the
//            single-learner clip applied to the shard, the optimizer stepping the shard
//            with its shard of the moments, then all-gather of the parameters.
//   stage 3: the parameters are sharded too (Rajbhandari et al.'s P_os+g+p): each rank keeps
//            its shard of online and of target and nothing whole. A pass asks for the
//            parameters in blocks of rows just before it uses them (nn_params_fetched): each
//            block is all-gathered into one of two slots per network (about shard /
//            ZERO_PIECE_DIV floats each, at least ZERO_SLOT_MIN or the largest layer), and the next block's all-gather is started (non-
//            blocking) so that it travels while the current one computes; backward gathers
//            W again for dh_prev, its gradient pieces reduce-scattered as in stage 2; the
//            optimizer steps the shard and nothing is all-gathered after the step. Per
//            rank: 8/N bytes of parameters per parameter plus the slots. The trainer holds
//            no whole copy on any rank: what the learner publishes is gathered straight
//            into rank 0's weights message (trainer_gather_into; that message, 4 bytes per
//            parameter, is rank 0's one whole copy, as in every stage), checkpoints a slot
//            at a time.
// The effective batch is N x batch and the result equals one learner's on the concatenated
// batches up to the order of float additions. Every rank syncs its target on the same step.
// Communication per step: 2 x 4 bytes x num_params x (N-1)/N per rank (a ring all-reduce's
// volume; stages 1 and 2 move the same as stage 0), plus a few doubles. Stage 3 gathers each
// layer once per pass that needs it, not once per step: about 3 all-gathers of the online
// network (online(s'), online(s), backward less the two layers still held) and one of the
// target, ~2.5x stage 2's volume, which is ZeRO's 1.5x with a target network and double DQN's
// extra pass.
#ifndef APEX_TRAIN_H
#define APEX_TRAIN_H

#include "ckpt.h"
#include "nn.h"
#include "optim.h"
#include "rng.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    nn_config_t net;
    int batch_size;        // largest B passed to trainer_step; states are sized for it
    optim_config_t optim;  // kind, lr, Adam betas/eps, RMSProp decay/eps
    float lr_end;          // with lr_steps > 0: update t uses lr + (lr_end - lr) min(1, t/lr_steps)
    int64_t lr_steps;      // 0: optim.lr throughout
    float grad_clip;       // global L2 norm bound; <= 0 disables
    float huber_delta;     // Huber loss threshold (> 0), [learner] huber_delta
    int64_t target_update; // steps between target syncs (>= 1)
    float priority_eps;    // added to |delta| in the new priorities
    uint64_t seed;         // [run] seed: network init and the learner RNG derive from it
    int zero_stage;        // 0-3: a learner group's sharding (above); unused without one
    int zero_prefetch;     // stage 3: 1 (default) brings the next layer during the current
                           // one's compute; 0 gathers each when asked (to measure the overlap)
    int64_t zero_slot_min; // stage 3: a slot's least floats (0: ZERO_SLOT_MIN); tests set 1
                           // so that small networks come in blocks of rows too
    int64_t rank0_extra_bytes; // what rank 0 holds besides the trainer, for trainer_fits: the
                               // learner's weights message, twice (the previous one lives
                               // until its queued answers are sent)
    int precision;             // train_precision of every pass's products (below); 0 = fp32
} train_config_t;

// [learner] precision (values as config_precision's): the learner's GEMMs, every forward and
// backward pass of the online and target networks, in fp32, or with their inputs rounded to
// bfloat16 and their sums in fp32 (model/bf16.h; what PyTorch's CPU autocast does). Either
// way the parameters, gradients, optimizer moments, losses and activations are fp32, so
// checkpoints and published weights are the same kind of file. The actors and the evaluator
// build their own fp32 networks.
typedef enum { TRAIN_FP32 = 0, TRAIN_BF16 = 1 } train_precision;

// Whether a learner can run precision on a CPU with features f, as a pure function (tests
// hand it any feature set; the trainers pass cpu_detect's). Returns 0 with *gemm the GEMM for
// nn_state_set_gemm (NULL for fp32, bf16_gemm_ld for bf16) and what runs written to msg (for
// the start-up log), or -1 with msg the refusal: the key, the value, the CPU features missing
// and the remedy (bf16 without AVX512_BF16 or the AVX-512 it builds on, or a precision that is
// not a train_precision). msg: at least 256 bytes to be whole.
int train_precision_check(int precision, const cpu_features_t *f, blas_gemm_fn *gemm, char *msg,
                          size_t n);
// train_precision_check on this CPU (cpu_detect), for the trainers' constructors: 0 with
// *gemm, or -1 after logging the refusal.
int train_precision_here(int precision, blas_gemm_fn *gemm);

// A trainer's own allocations, in bytes (what the memory test and bench/run_zero.sh read):
// measured, as what its constructor asked the x* allocators for while building each part
// (xalloc tallies; 64-byte rounding included), not computed from the sizes.
typedef struct {
    size_t param_bytes;  // online + target (stage 3: this rank's shard of each)
    size_t target_bytes; // of which the target's
    size_t grad_bytes;   // full gradient, or (stages 2, 3) this rank's shard and the piece buffer
    size_t opt_bytes;    // optimizer moments (m and v) of this rank's shard
    size_t gather_bytes; // stage 3: the blocks gathered for a pass (two slots per network,
                         // each the largest block) and their block tables
    size_t work_bytes;   // the passes' activations and scratch (three nn states) and the
                         // per-batch buffers, for batch_size
} train_memory_t;

#define ZERO_PIECE_DIV 4 // stage 2's piece buffer: the shard / this
// Stage 3's slots: shard / ZERO_PIECE_DIV floats each, but at least this many (or the
// largest layer, when smaller)
#define ZERO_SLOT_MIN (1u << 20)

// One batch as flat arrays, borrowed for the duration of trainer_step.
typedef struct {
    const void *obs;           // (B x O) row-major, of the network's input dtype
    const int32_t *actions;    // (B), in [0, A); NULL for continuous actions
    const float *cont_actions; // (B x action_dim) continuous actions (NULL when discrete)
    const float *rewards;      // (B) n-step discounted return
    const float *discounts;    // (B) gamma^n, or 0 when the episode ended (no bootstrap)
    const void *next_obs;      // (B x O) the state n steps later
    const float *is_weights;   // (B) importance weights, max-normalised by the replay
    int size;                  // B, 1..batch_size
} train_batch_t;

typedef struct {
    float loss;          // IS-weighted mean Huber loss (before the update)
    float grad_norm;     // global gradient norm before clipping
    float q_mean;        // mean Q(s, a) over the batch
    int64_t forward_ns;  // forward passes + targets + loss
    int64_t backward_ns; // gradient zeroing + backward
    int64_t optim_ns;    // clip + optimizer step + target sync
    int64_t comm_ns;     // of the above, time inside the group's collectives
} train_stats_t;

typedef struct trainer trainer_t;

// Defaults: batch 512, Adam (optim_config_default), grad_clip 40, huber_delta 1, target_update 2500,
// priority_eps 1e-6, seed 0. cfg->net is zeroed: the caller sets the network.
void train_config_default(train_config_t *cfg);

// Whether this process can allocate the trainer cfg describes (on group's rank, as
// trainer_new_group would build it): its large blocks (parameters or their shards,
// gradients, moments, slots, activations, and on rank 0 cfg->rank0_extra_bytes) tried
// together with malloc, untouched and freed, under whatever limits the process runs with
// (RLIMIT_DATA, overcommit). In a group it is a collective (every rank calls it) and every
// rank gets the same answer. APEX_OK, or APEX_ENOSPC (no room) after a rank that cannot
// logged the bytes it needed and its data limit (the others log that the group stops), or
// APEX_EINVAL for more than 2^31 - 1 parameters. *need_out (may be NULL): those bytes.
// trainer_new_group calls it first, so a group too large for its ranks stops on every rank
// with that message instead of one rank aborting in the allocator.
struct group;
int trainer_fits(const train_config_t *cfg, struct group *group, size_t *need_out);

// Builds a trainer with randomly initialised online params (nn_params_init_random from
// the (seed, NET_INIT) stream) and target = online. Returns NULL after logging why when
// cfg is invalid or its precision is one this CPU cannot run (train_precision_here).
// Caller destroys with trainer_destroy.
trainer_t *trainer_new(const train_config_t *cfg);
struct apex_config_s;
// The trainer a run's config describes ([network], [learner], [run] seed; the network's
// input from [env]).
void train_config_from_run(train_config_t *cfg, const struct apex_config_s *run);
struct group;
// The same for one rank of a learner group (borrowed; it must outlive the trainer). Every
// rank draws the same initial network from the seed. group NULL or of size 1 with stage 0:
// exactly trainer_new. Collective: every rank calls it.
trainer_t *trainer_new_group(const train_config_t *cfg, struct group *group);
// Frees everything; accepts NULL or *self_p == NULL and sets *self_p = NULL.
void trainer_destroy(trainer_t **self_p);

// One full update (see top). Writes priorities_out (B) and, if stats is not NULL, *stats.
// Returns the loss. Batch values must be finite and actions in range (wire.c validates).
float trainer_step(trainer_t *self, const train_batch_t *batch, float *priorities_out,
                   train_stats_t *stats);

// Borrowed views, valid until trainer_destroy; trainer_load overwrites their data in place.
// In stage 3 both are fetched networks (nn_params_fetched): the layout, no data; their
// values only through trainer_gather_into, which is also what the learner publishes.
const nn_params_t *trainer_online(const trainer_t *self);
// The whole online (which 0) or target (1) parameter array (what the learner publishes),
// num_params floats written to dst, which may be unaligned (the weights message's bytes).
// Stages 0-2 and a single learner: a copy of the trainer's own array, on any rank (dst NULL:
// nothing). Stage 3: collective (every rank calls it at the same point), the shards gathered
// straight into rank 0's dst (MPI_Gatherv); dst is not read on the other ranks (NULL).
void trainer_gather_into(trainer_t *self, int which, void *dst);
const nn_params_t *trainer_target(const trainer_t *self);
size_t trainer_num_params(const trainer_t *self);
int64_t trainer_steps(const trainer_t *self); // updates done (restored by load)
float trainer_lr(const trainer_t *self);      // learning rate of the next update
const optim_t *trainer_optim(const trainer_t *self);
const train_config_t *trainer_config(const trainer_t *self);
void trainer_memory(const trainer_t *self, train_memory_t *out);
rng_t *trainer_rng(trainer_t *self); // the learner's stream; checkpointed
// Updates not stepped since trainer_new because their gradient norm was not finite (step 4).
uint64_t trainer_skipped_steps(const trainer_t *self);

// Checkpoint: online, target, optimizer m and v, step counters, RNG, extra (may be NULL).
// Returns 0 or an apex_err from ckpt_write; the previous file at path survives a failure.
// In a group (collective: every rank calls it at the same step) stages 1 and 2 write each
// rank's moments to "<path>.s<step>.opt<r>of<N>", then, when every rank succeeded, rank 0
// writes path with online and target and extra.user[CKPT_USER_OPT_SHARDS] = N: path is the
// manifest, and its atomic rename commits the set. Stage 0 and a single learner write the
// moments into path itself (4 arrays). After a commit, rank 0 deletes shard files of other
// sets. Every rank returns the same code.
// Stage 3 gathers online then target to rank 0 a slot's worth of the flat array at a time
// (across layers), each appended to the file through ckpt_writer: the same files as stages
// 1 and 2, and no whole array in any rank's memory.
int trainer_save(trainer_t *self, const char *path, const ckpt_extra_t *extra);
// Restores everything trainer_save wrote, so training continues exactly. Validates the
// file against this trainer's network and optimizer kind; on error (apex_err from
// ckpt_read, or APEX_EINVAL for an optimizer mismatch) the trainer is unchanged.
// extra_out may be NULL. Either kind of checkpoint loads onto any group size and stage
// (re-sharded: each rank reads its range from whichever shard files hold it) and onto a
// single learner. Collective in a group; every rank returns the same code. Stage 3 reads
// only its shard of each array (ckpt_read_range, the whole file still checksummed), so a
// network no rank could hold whole resumes.
int trainer_load(trainer_t *self, const char *path, ckpt_extra_t *extra_out);

#endif
