// train.c: the learner's update step (see train.h). B = batch, O = obs_dim, A = n_actions.
#define LOG_MODULE "train"
#include "train.h"

#include "apex.h"
#include "bf16.h"
#include "clock.h"
#include "config.h"
#include "group.h"
#include "log.h"
#include "loss.h"
#include "xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

// Everything an update touches is allocated here, once, sized for cfg.batch_size (STYLE
// S8). Three nn states rather than one: online(s') and target(s') run before online(s),
// and backward needs online(s)'s activations intact, so each pass keeps its own.
// Stage 3: one network's parameters brought to this rank in blocks of rows (see train.h).
// Two slots, each one block (rows of w, then the same rows of b): the block a pass works on
// and the one it will ask for next, in flight (non-blocking all-gathers) while the current
// one computes.
typedef struct {
    struct trainer *tr;
    const float *shard; // this rank's shard of the network's flat array
    float *slot[2];
    int layer[2], block[2];           // what a slot holds or is receiving; layer -1: nothing
    int handle[2][2];                 // its all-gathers (w rows, b rows) while in flight, else -2
    int *counts[2][2], *displs[2][2]; // their blocks by rank, n_ranks each
    int cur;                          // the slot fetch returned last
    int row0[2];
    nn_linear_t view[2];
} s_gather_t;

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
    // Learner group (NULL: a single learner). Shards of the flat parameter array, rank by
    // rank (group_shard_range); this rank's is [shard_off, shard_off + shard_n).
    group_t *group;
    int zero; // -1: no group; else the ZeRO stage
    int n_ranks, rank;
    size_t shard_off, shard_n;
    int *counts, *displs; // (n_ranks) every rank's shard, for the collectives
    int *piece_counts;    // (n_ranks) stages 2, 3: one piece's share of each rank
    int *piece_displs;    // (n_ranks) and where it starts in the piece (s_range_blocks)
    float *gshard;        // stage 2: this rank's averaged gradient (shard_n floats)
    nn_pieces_t pieces;   // stage 2: the piece buffer and its reduce-scatter
    // Stage 3: online and target are fetched networks (nn_params_fetched) over these shards.
    float *online_shard, *target_shard; // shard_n floats each
    s_gather_t gather[2];               // online, target
    size_t slot_n;                      // floats of a slot: the largest block
    train_memory_t mem;
    uint64_t skipped;       // steps whose gradient was not finite (s_step_ok)
    log_limiter_t skip_log; // one line per SKIP_LOG_INTERVAL_MS about them
};

#define SKIP_LOG_INTERVAL_MS 5000

void train_config_default(train_config_t *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->batch_size = 512;
    optim_config_default(&cfg->optim, OPTIM_ADAM);
    cfg->grad_clip = 40.0f;
    cfg->huber_delta = 1.0f;
    cfg->target_update = 2500;
    cfg->priority_eps = 1e-6f;
    cfg->zero_prefetch = 1;
}

void train_config_from_run(train_config_t *t, const apex_config_t *c) {
    train_config_default(t);
    nn_config_from_run(&t->net, c);
    t->batch_size = (int)c->learner.batch_size;
    optim_config_default(&t->optim,
                         c->learner.optimizer == CONFIG_OPTIM_RMSPROP ? OPTIM_RMSPROP : OPTIM_ADAM);
    t->optim.lr = (float)c->learner.lr;
    t->lr_end = (float)c->learner.lr_end;
    t->lr_steps = c->learner.lr_steps;
    t->optim.adam_beta1 = (float)c->learner.adam_beta1;
    t->optim.adam_beta2 = (float)c->learner.adam_beta2;
    t->optim.adam_eps = (float)c->learner.adam_eps;
    t->optim.rms_decay = (float)c->learner.rms_decay;
    t->optim.rms_eps = (float)c->learner.rms_eps;
    t->grad_clip = (float)c->learner.grad_clip;
    t->huber_delta = (float)c->learner.huber_delta;
    t->target_update = c->learner.target_update;
    t->priority_eps = (float)c->learner.priority_eps;
    t->seed = (uint64_t)c->run.seed;
    t->zero_stage = (int)c->learner.zero_stage;
    t->precision = c->learner.precision; // train_precision's values are config_precision's
}

int train_precision_check(int precision, const cpu_features_t *f, blas_gemm_fn *gemm, char *msg,
                          size_t n) {
    *gemm = NULL;
    if (precision == TRAIN_FP32) {
        snprintf(msg, n, "[learner] precision = fp32: the learner's products in fp32");
        return 0;
    }
    if (precision != TRAIN_BF16) {
        snprintf(msg, n,
                 "[learner] precision = %d is neither fp32 (0) nor bf16 (1); set "
                 "[learner] precision = fp32 or bf16",
                 precision);
        return -1;
    }
    if (bf16_gemm_supported(f)) {
        *gemm = bf16_gemm_ld;
        snprintf(msg, n,
                 "[learner] precision = bf16: the learner's products on bfloat16-rounded "
                 "inputs with fp32 sums; weights, gradients and optimizer state fp32");
        return 0;
    }
    // Start-up error (STYLE S6.3): named, with the remedy, never the kernel's assert.
    const struct {
        int have;
        const char *name;
    } need[] = {{f->avx512f, "AVX512F"},
                {f->avx512bw, "AVX512BW"},
                {f->avx512vl, "AVX512VL"},
                {f->avx512_bf16, "AVX512_BF16"}};
    char missing[64] = "", cpu[256];
    for (size_t i = 0; i < APEX_ARRAY_LEN(need); i++) {
        if (!need[i].have) {
            size_t o = strlen(missing);
            snprintf(missing + o, sizeof missing - o, "%s%s", o ? ", " : "", need[i].name);
        }
    }
    cpu_describe(f, cpu, sizeof cpu);
    snprintf(msg, n,
             "[learner] precision = bf16 needs a CPU with AVX512_BF16, and this one (%s) "
             "lacks %s; set [learner] precision = fp32 (the default), or run the learner on a "
             "CPU with AVX512_BF16 (Intel Cooper Lake, Sapphire Rapids or later; AMD Zen 4 or "
             "later)",
             cpu, missing);
    return -1;
}

int train_precision_here(int precision, blas_gemm_fn *gemm) {
    cpu_features_t cpu;
    cpu_detect(&cpu);
    char msg[512];
    if (train_precision_check(precision, &cpu, gemm, msg, sizeof msg) != 0) {
        log_error("%s", msg);
        return -1;
    }
    return 0;
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
        !(cfg->huber_delta > 0.0f) || cfg->lr_steps < 0 ||
        (cfg->lr_steps > 0 && !(cfg->lr_end > 0.0f)) ||
        (cfg->optim.kind != OPTIM_ADAM && cfg->optim.kind != OPTIM_RMSPROP)) {
        log_error("trainer config: need batch_size >= 1, target_update >= 1, lr > 0, "
                  "huber_delta > 0, lr_steps >= 0 (and lr_end > 0 with lr_steps > 0), "
                  "optimizer adam|rmsprop");
        return APEX_EINVAL;
    }
    return APEX_OK;
}

// Rank r's part of the flat range [lo, lo + len): counts[r] floats at displs[r] of the
// range; returns this rank's part's offset in its shard (0 when it has none).
static size_t s_range_blocks(const trainer_t *t, size_t lo, size_t len, int *counts, int *displs) {
    for (int r = 0; r < t->n_ranks; r++) {
        size_t so = (size_t)t->displs[r], se = so + (size_t)t->counts[r];
        size_t a = APEX_MAX(lo, so), b = APEX_MIN(lo + len, se);
        counts[r] = b > a ? (int)(b - a) : 0;
        displs[r] = b > a ? (int)(a - lo) : 0;
    }
    size_t a = APEX_MAX(lo, t->shard_off);
    return counts[t->rank] > 0 ? a - t->shard_off : 0;
}

// Stage 2's piece callback: the piece [offset, offset + n) is reduce-scattered over the
// ranks whose shards it overlaps (shards are in rank order, so the piece is already laid
// out rank by rank); this rank's share lands at its place in gshard. Every element of a
// shard is written by exactly one piece per step.
static void s_piece_done(void *arg, const float *piece, size_t offset, size_t n) {
    trainer_t *self = arg;
    size_t mine = s_range_blocks(self, offset, n, self->piece_counts, self->piece_displs);
    group_reduce_scatter_f32(self->group, piece, self->gshard + mine, self->piece_counts);
}

// ----------------------------------------------------------------------------
// can the trainer be allocated?

// The ZeRO stage a trainer runs: a group's (of any size when a stage above 0 is asked for, so
// that a group of one runs the sharded code paths), else -1: a single learner.
static int s_zero_of(const train_config_t *cfg, const group_t *group) {
    return group && (group_size(group) > 1 || cfg->zero_stage > 0) ? cfg->zero_stage : -1;
}

// Stage 2 and 3's piece buffer: the largest shard / ZERO_PIECE_DIV, at least nn_piece_min.
static size_t s_piece_cap(const nn_config_t *net, size_t n, int n_ranks) {
    return APEX_MAX(group_shard_max(n, n_ranks) / ZERO_PIECE_DIV, nn_piece_min(net));
}

// Stage 3's blocks: a conv layer whole; a linear layer in blocks of rows_per_block rows
// (w and b rows together within cap floats, at least one row). A slot holds the largest.
static int s_rows_per_block(const nn_params_t *lay, int l, size_t cap) {
    const nn_linear_t *L = &lay->layer[l];
    size_t row = (size_t)L->in_dim + 1;
    return (int)APEX_MIN((size_t)L->out_dim, APEX_MAX(cap / row, (size_t)1));
}

static size_t s_slot_floats(const nn_config_t *net, size_t n, int n_ranks, size_t slot_min) {
    nn_params_t lay;
    nn_params_view(&lay, net, NULL);
    // At least ZERO_SLOT_MIN floats, or the largest layer when that is smaller: a small
    // network's layers come whole (blocks of a few rows are slow GEMMs, and its slots cost
    // little), a large one's in blocks of about a quarter of the shard.
    size_t largest = 0;
    for (int l = 0; l < lay.n_layers; l++) {
        largest = APEX_MAX(largest, nn_layer_floats(&lay, l));
    }
    slot_min = slot_min ? slot_min : (size_t)ZERO_SLOT_MIN;
    size_t cap = APEX_MAX(s_piece_cap(net, n, n_ranks), APEX_MIN(largest, slot_min));
    size_t slot = 0;
    for (int l = 0; l < lay.n_layers; l++) {
        size_t rows = l < net->n_conv ? (size_t)lay.layer[l].out_dim
                                      : (size_t)s_rows_per_block(&lay, l, cap);
        slot = APEX_MAX(slot, rows * ((size_t)lay.layer[l].in_dim + 1));
    }
    return slot;
}

// trainer_fits with this rank's own verdict on the rest of the trainer folded into the
// group's (local_ok 0: a precision this CPU cannot run, already logged), so that no rank
// leaves before the collective the others are in.
static int s_fits(const train_config_t *cfg, group_t *group, size_t *need_out, int local_ok);

int trainer_fits(const train_config_t *cfg, group_t *group, size_t *need_out) {
    return s_fits(cfg, group, need_out, 1);
}

static int s_fits(const train_config_t *cfg, group_t *group, size_t *need_out, int local_ok) {
    const nn_config_t *net = &cfg->net;
    int zero = s_zero_of(cfg, group);
    int N = zero >= 0 ? group_size(group) : 1, rank = zero >= 0 ? group_rank(group) : 0;
    size_t n = nn_num_params(net), off, shard;
    if (n > INT32_MAX) { // the same verdict on every rank (the config's): no collective
        log_error("a network of %zu parameters: a learner holds at most 2^31 - 1 (MPI's counts "
                  "and the weights message's are 32-bit); make [network] smaller",
                  n);
        return APEX_EINVAL;
    }
    group_shard_range(n, N, rank, &off, &shard);
    if (zero < 1) {
        shard = n;
    }
    size_t f = sizeof(float), blocks[16];
    int k = 0;
    blocks[k++] = shard * f; // m
    blocks[k++] = shard * f; // v
    for (int i = 0; i < 3; i++) {
        blocks[k++] = nn_state_bytes(net, cfg->batch_size);
    }
    if (zero == 3) {
        size_t slot = s_slot_floats(net, n, N, (size_t)cfg->zero_slot_min) * f;
        blocks[k++] = shard * f, blocks[k++] = shard * f; // online, target shards
        blocks[k++] = slot, blocks[k++] = slot, blocks[k++] = slot, blocks[k++] = slot;
    } else {
        blocks[k++] = n * f, blocks[k++] = n * f; // online, target
    }
    if (zero >= 2) {
        blocks[k++] = shard * f; // the gradient shard
        blocks[k++] = s_piece_cap(net, n, N) * f;
    } else {
        blocks[k++] = n * f; // the whole gradient
    }
    if (rank == 0 && cfg->rank0_extra_bytes > 0) {
        blocks[k++] = (size_t)cfg->rank0_extra_bytes;
    }
    // Tried together with plain malloc, the pages never touched, then freed: what the
    // process's limits (RLIMIT_DATA, RLIMIT_AS, overcommit) let it have.
    void *got[16];
    size_t need = 0;
    int ok = 1;
    for (int i = 0; i < k; i++) {
        need += blocks[i];
        got[i] = ok ? malloc(blocks[i] ? blocks[i] : 1) : NULL;
        ok = ok && got[i] != NULL;
    }
    int fits = ok;
    ok = ok && local_ok;
    for (int i = 0; i < k; i++) {
        free(got[i]);
    }
    if (need_out) {
        *need_out = need;
    }
    if (!fits) {
        struct rlimit rl;
        char lim[64] = "unlimited";
        if (getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
            snprintf(lim, sizeof lim, "%llu bytes", (unsigned long long)rl.rlim_cur);
        }
        log_error("rank %d of %d cannot allocate the %zu bytes its trainer needs (ZeRO stage "
                  "%d, %zu parameters; data limit %s): add ranks, raise [learner] zero_stage, "
                  "or make [network] smaller",
                  rank, N, need, zero < 0 ? 0 : zero, n, lim);
    }
    if (zero >= 0 && N > 1) {
        double x[1] = {ok ? 0.0 : 1.0}; // a collective: every rank learns of any failure
        group_allreduce_f64(group, x, 1);
        if (ok && x[0] > 0.0) {
            log_error("rank %d: %.0f other rank(s) cannot build their trainer (memory, or a "
                      "precision their CPU cannot run); the group stops",
                      rank, x[0]);
        }
        ok = x[0] == 0.0;
    }
    return ok ? APEX_OK : !fits ? APEX_ENOSPC : APEX_EINVAL;
}

// ----------------------------------------------------------------------------
// stage 3: layers gathered on demand

// Block k of layer l: its first row and row count.
static void s_block_rows(const trainer_t *t, int l, int k, int *r0, int *rows) {
    const nn_linear_t *L = &t->online.layer[l];
    int per = l < t->cfg.net.n_conv ? L->out_dim : s_rows_per_block(&t->online, l, t->slot_n);
    APEX_ASSERT(k >= 0 && (size_t)k * per < (size_t)L->out_dim);
    *r0 = k * per;
    *rows = APEX_MIN(per, L->out_dim - *r0);
}

// Starts bringing block k of layer l into slot i: rows r0.. of w, then of b, each range this
// rank's part copied from its shard and the others' by a non-blocking all-gather (complete
// at once without MPI).
static void s_gather_start(s_gather_t *g, int i, int l, int k) {
    trainer_t *t = g->tr;
    const nn_linear_t *L = &t->online.layer[l]; // the layout (online and target share it)
    int r0, rows;
    s_block_rows(t, l, k, &r0, &rows);
    size_t in = (size_t)L->in_dim, w0 = t->online.off[l];
    size_t lo[2] = {w0 + (size_t)r0 * in, w0 + (size_t)L->out_dim * in + (size_t)r0};
    size_t len[2] = {(size_t)rows * in, (size_t)rows};
    float *dst[2] = {g->slot[i], g->slot[i] + (size_t)rows * in};
    for (int j = 0; j < 2; j++) {
        size_t mine = s_range_blocks(t, lo[j], len[j], g->counts[i][j], g->displs[i][j]);
        int c = g->counts[i][j][t->rank];
        if (c > 0) {
            memcpy(dst[j] + g->displs[i][j][t->rank], g->shard + mine, (size_t)c * sizeof(float));
        }
        g->handle[i][j] = t->group ? group_iallgather_f32(t->group, dst[j], g->counts[i][j],
                                                          g->displs[i][j])
                                   : -1;
    }
    g->layer[i] = l, g->block[i] = k, g->row0[i] = r0;
    g->view[i] = (nn_linear_t){dst[0], dst[1], L->in_dim, rows};
}

static void s_gather_wait(s_gather_t *g, int i) {
    for (int j = 0; j < 2; j++) {
        if (g->handle[i][j] != -2) {
            if (g->tr->group) {
                group_wait(g->tr->group, g->handle[i][j]);
            }
            g->handle[i][j] = -2;
        }
    }
}

// The parameters changed (an optimizer step, a target sync): nothing held is current.
static void s_gather_invalidate(s_gather_t *g) {
    for (int i = 0; i < 2; i++) {
        s_gather_wait(g, i);
        g->layer[i] = -1;
    }
}

static int s_held(const s_gather_t *g, int l, int k) {
    return g->layer[0] == l && g->block[0] == k ? 0 : g->layer[1] == l && g->block[1] == k ? 1 : -1;
}

// nn_fetch_fn: block k of layer l, from a slot when it holds it (brought ahead, or still
// there from an earlier pass since the last step), else gathered now; then what the pass
// asks for next (the next block, or block 0 of layer l + dir, never layer 0 going down) set
// off into the other slot.
static const nn_linear_t *s_fetch(void *arg, int l, int k, int dir, int *row0) {
    s_gather_t *g = arg;
    trainer_t *t = g->tr;
    int i = s_held(g, l, k);
    if (i < 0) {
        i = 1 - g->cur; // the slot the pass is not reading
        s_gather_wait(g, i);
        s_gather_start(g, i, l, k);
    }
    s_gather_wait(g, i);
    g->cur = i;
    int r0, rows, nl = l, nk = k + 1;
    s_block_rows(t, l, k, &r0, &rows);
    if (r0 + rows == t->online.layer[l].out_dim) {
        nl = l + dir, nk = 0;
    }
    // Backward never asks for layer 0 (nn.h): no gather for nothing.
    if (nl >= (dir < 0 ? 1 : 0) && nl < t->online.n_layers && s_held(g, nl, nk) < 0) {
        int j = 1 - i;
        s_gather_wait(g, j);
        s_gather_start(g, j, nl, nk);
        if (!t->cfg.zero_prefetch) {
            s_gather_wait(g, j); // measured against: the same gathers, no overlap
        }
    }
    *row0 = g->row0[i];
    return &g->view[i];
}

// Stage 3's networks: the shards, the fetched views, two slots per network.
static void s_alloc_stage3(trainer_t *self) {
    const nn_config_t *net = &self->cfg.net;
    nn_params_view(&self->online, net, NULL); // the layout; the views come below
    self->slot_n = s_slot_floats(net, self->online.num_params, self->n_ranks,
                                 (size_t)self->cfg.zero_slot_min);
    xalloc_tally_t params, target, gather;
    xalloc_tally_begin(&params);
    size_t sn = APEX_MAX(self->shard_n, (size_t)1);
    self->online_shard = xaligned_alloc(sn * sizeof(float));
    xalloc_tally_begin(&target);
    self->target_shard = xaligned_alloc(sn * sizeof(float));
    xalloc_tally_end(&target);
    xalloc_tally_end(&params);
    self->mem.target_bytes = target.bytes;
    xalloc_tally_begin(&gather);
    float *shards[2] = {self->online_shard, self->target_shard};
    nn_params_t *nets[2] = {&self->online, &self->target};
    for (int k = 0; k < 2; k++) {
        s_gather_t *g = &self->gather[k];
        *g = (s_gather_t){.tr = self, .shard = shards[k], .layer = {-1, -1}};
        for (int i = 0; i < 2; i++) {
            g->slot[i] = xaligned_alloc(self->slot_n * sizeof(float));
            for (int j = 0; j < 2; j++) {
                g->handle[i][j] = -2;
                g->counts[i][j] = xmalloc((size_t)self->n_ranks * sizeof(int));
                g->displs[i][j] = xmalloc((size_t)self->n_ranks * sizeof(int));
            }
        }
        nn_params_fetched(nets[k], net, s_fetch, g);
    }
    xalloc_tally_end(&gather);
    self->mem.param_bytes = params.bytes;
    self->mem.gather_bytes = gather.bytes;
}

// Stage 3's initial parameters: the single learner's draws, every rank drawing all of them
// in order and keeping its shard's.
static void s_init_stage3(trainer_t *self, rng_t *init) {
    for (int l = 0; l < self->online.n_layers; l++) {
        nn_layer_init_random_part(&self->online, l, init, self->online_shard, self->shard_off,
                                  self->shard_off + self->shard_n);
    }
    memcpy(self->target_shard, self->online_shard, self->shard_n * sizeof(float));
}

// This rank's shard of the online parameters, which its optimizer steps.
static float *s_owned(trainer_t *self) {
    return self->zero == 3 ? self->online_shard : self->online.data + self->shard_off;
}

// The group's shards and buffers (see train.h); the classic buffers otherwise.
static void s_alloc_training(trainer_t *self, group_t *group) {
    const nn_config_t *net = &self->cfg.net;
    size_t n = nn_num_params(net);
    self->zero = s_zero_of(&self->cfg, group);
    self->group = self->zero >= 0 ? group : NULL;
    self->n_ranks = self->group ? group_size(group) : 1;
    self->rank = self->group ? group_rank(group) : 0;
    APEX_ASSERT(n <= INT32_MAX);
    self->counts = xmalloc((size_t)self->n_ranks * sizeof(int));
    self->displs = xmalloc((size_t)self->n_ranks * sizeof(int));
    self->piece_counts = xmalloc((size_t)self->n_ranks * sizeof(int));
    self->piece_displs = xmalloc((size_t)self->n_ranks * sizeof(int));
    for (int r = 0; r < self->n_ranks; r++) {
        size_t off, cnt;
        group_shard_range(n, self->n_ranks, r, &off, &cnt);
        self->displs[r] = (int)off;
        self->counts[r] = (int)cnt;
    }
    if (self->zero >= 1) {
        group_shard_range(n, self->n_ranks, self->rank, &self->shard_off, &self->shard_n);
    } else {
        self->shard_off = 0, self->shard_n = n; // every rank steps the whole array
    }
    // train_memory_t is what the allocator was asked for (xalloc tallies), not a formula:
    // the memory test checks it against ZeRO's sizes, which a formula here would restate.
    if (self->zero == 3) {
        s_alloc_stage3(self);
    } else {
        xalloc_tally_t params, target;
        xalloc_tally_begin(&params);
        nn_params_init(&self->online, net);
        xalloc_tally_begin(&target);
        nn_params_init(&self->target, net);
        xalloc_tally_end(&target);
        xalloc_tally_end(&params);
        self->mem.param_bytes = params.bytes;
        self->mem.target_bytes = target.bytes;
    }
    xalloc_tally_t opt, grad;
    xalloc_tally_begin(&opt);
    optim_init(&self->optim, &self->cfg.optim, self->shard_n);
    xalloc_tally_end(&opt);
    xalloc_tally_begin(&grad);
    if (self->zero >= 2) {
        // No full-size gradient: the piece buffer plus this rank's shard of the gradient.
        size_t cap = s_piece_cap(net, n, self->n_ranks);
        self->gshard = xaligned_alloc(APEX_MAX(self->shard_n, (size_t)1) * sizeof(float));
        memset(self->gshard, 0, self->shard_n * sizeof(float));
        self->pieces = (nn_pieces_t){xaligned_alloc(cap * sizeof(float)), cap, s_piece_done, self};
    } else {
        nn_params_init(&self->grads, net);
    }
    xalloc_tally_end(&grad);
    self->mem.grad_bytes = grad.bytes;
    self->mem.opt_bytes = opt.bytes;
}

trainer_t *trainer_new(const train_config_t *cfg) { return trainer_new_group(cfg, NULL); }

trainer_t *trainer_new_group(const train_config_t *cfg, group_t *group) {
    if (s_config_check(cfg) != APEX_OK) {
        return NULL;
    }
    if (cfg->zero_stage < 0 || cfg->zero_stage > 3) {
        log_error("trainer config: zero_stage must be 0, 1, 2 or 3");
        return NULL;
    }
    blas_gemm_fn gemm;
    int precision_ok = train_precision_here(cfg->precision, &gemm) == 0; // logged if not
    if (s_fits(cfg, group, NULL, precision_ok) != APEX_OK) {
        return NULL; // logged, and every rank of the group returns here
    }
    trainer_t *self = xcalloc(1, sizeof *self);
    self->cfg = *cfg;
    const nn_config_t *net = &cfg->net;
    s_alloc_training(self, group);
    xalloc_tally_t work;
    xalloc_tally_begin(&work);
    nn_state_init(&self->st_obs, net, cfg->batch_size, 1);
    nn_state_init(&self->st_next_online, net, cfg->batch_size, 0);
    nn_state_init(&self->st_next_target, net, cfg->batch_size, 0);
    nn_state_set_gemm(&self->st_obs, gemm);
    nn_state_set_gemm(&self->st_next_online, gemm);
    nn_state_set_gemm(&self->st_next_target, gemm);
    size_t ba = (size_t)cfg->batch_size * net->n_actions * sizeof(float);
    self->q = xaligned_alloc(ba);
    self->q_next_online = xaligned_alloc(ba);
    self->q_next_target = xaligned_alloc(ba);
    self->dq = xaligned_alloc(ba);
    self->y = xaligned_alloc((size_t)cfg->batch_size * sizeof(float));
    self->td = xaligned_alloc((size_t)cfg->batch_size * sizeof(float));
    xalloc_tally_end(&work);
    self->mem.work_bytes = work.bytes;
    // Network init draws from its own stream, so the learner RNG's sequence (checkpointed)
    // does not depend on the network's size.
    rng_t init;
    rng_init_stream(&init, cfg->seed, RNG_ROLE_NET_INIT, 0);
    if (self->zero == 3) {
        s_init_stage3(self, &init);
    } else {
        nn_params_init_random(&self->online, &init);
        nn_params_copy(&self->target, &self->online);
    }
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
    xfree(self->gshard);
    xfree(self->pieces.buf);
    xfree(self->counts);
    xfree(self->displs);
    xfree(self->piece_counts);
    xfree(self->piece_displs);
    for (int k = 0; k < 2 && self->zero == 3; k++) {
        s_gather_t *g = &self->gather[k];
        s_gather_invalidate(g);
        for (int i = 0; i < 2; i++) {
            xfree(g->slot[i]);
            for (int j = 0; j < 2; j++) {
                xfree(g->counts[i][j]);
                xfree(g->displs[i][j]);
            }
        }
    }
    xfree(self->online_shard);
    xfree(self->target_shard);
    nn_params_fini(&self->target);
    nn_params_fini(&self->online);
    xfree(self);
    *self_p = NULL;
}

// Whether to step with a gradient of this global norm. One that is not finite (inf or NaN)
// is not stepped: Adam's moments would keep the NaN for good, every parameter after it would
// be NaN, and so would every version the learner publishes, which every peer refuses (the
// run goes on with weights that never change). Finite inputs are enough to get there: one
// transition with observations near FLT_MAX, which the wire takes (issue #26), overflows the
// forward pass. The norm is the global one in every stage, so the ranks of a group skip
// alike. The step still counts (trainer_steps): the batch was used, its priorities go back.
static int s_step_ok(trainer_t *self, double norm) {
    if (isfinite(norm)) {
        return 1;
    }
    self->skipped++;
    log_every(&self->skip_log, SKIP_LOG_INTERVAL_MS, LOG_WARN,
              "gradient norm %g at update %lld (a batch that overflows the network?): step "
              "skipped, the parameters kept; %llu skipped so far",
              norm, (long long)self->step + 1, (unsigned long long)self->skipped);
    return 0;
}

// A single learner, and stage 0: the whole (all-reduced) gradient, clipped and stepped by
// every rank alike.
static float s_full_update(trainer_t *self) {
    if (self->group) {
        group_allreduce_f32(self->group, self->grads.data, self->grads.num_params);
    }
    float norm = optim_clip_grad_norm(self->grads.data, self->grads.num_params,
                                      self->cfg.grad_clip);
    if (s_step_ok(self, norm)) {
        optim_step(&self->optim, self->online.data, self->grads.data);
    }
    return norm;
}

// Stages 1 and 2: this rank's averaged gradient shard (stage 1 reduce-scatters it here,
// stage 2 already has it from the pieces), the global norm from the shards' sums of squares,
// the single-learner clip, the shard's step, and the all-gather of the parameters.
static float s_sharded_update(trainer_t *self) {
    float *g = self->gshard;
    if (self->zero == 1) {
        // In place: the input is the whole gradient, this rank's shard lands at its start.
        group_reduce_scatter_f32(self->group, NULL, self->grads.data, self->counts);
        g = self->grads.data;
    }
    double ss = optim_sum_squares(g, self->shard_n);
    group_allreduce_f64(self->group, &ss, 1);
    double norm = sqrt(ss);
    if (s_step_ok(self, norm)) {
        optim_clip_scale(g, self->shard_n, norm, self->cfg.grad_clip);
        optim_step(&self->optim, s_owned(self), g);
    }
    if (self->zero == 3) {
        s_gather_invalidate(&self->gather[0]); // the next pass gathers the new values
    } else {
        // Collective: every rank calls it, stepped or not.
        group_allgather_f32(self->group, self->online.data, self->counts, self->displs);
    }
    return (float)norm;
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
    nn_double_dqn_targets(self->y, self->q_next_online, self->q_next_target, batch->rewards,
                          batch->discounts, B, A);
    float loss = loss_huber_td(self->dq, self->td, self->q, self->y, batch->actions,
                               batch->is_weights, self->cfg.huber_delta, B, A);
    loss_priorities(priorities_out, self->td, self->cfg.priority_eps, B);
    int64_t t1 = clock_now_ns(), c0 = self->group ? group_comm_ns(self->group) : 0;
    if (self->n_ranks > 1) {
        // Each rank's loss is a mean over its B; 1/N makes the sum over ranks the mean over
        // the N x B of the group (gradients are linear in dq).
        float inv = 1.0f / (float)self->n_ranks;
        for (size_t i = 0; i < (size_t)B * A; i++) {
            self->dq[i] *= inv;
        }
    }
    // (3) backward; nn_backward accumulates, so start from zero.
    if (self->zero >= 2) {
        nn_backward_pieces(&self->st_obs, &self->online, &self->pieces, self->dq, B);
    } else {
        nn_params_zero(&self->grads);
        nn_backward(&self->st_obs, &self->online, &self->grads, self->dq, B);
    }
    int64_t t2 = clock_now_ns();
    // (4) clip + optimizer, (5) target sync. The schedule is a function of the step count
    // alone, so every rank of a group and a learner resumed from a checkpoint agree on it.
    self->optim.cfg.lr = trainer_lr(self);
    float norm = self->zero >= 1 ? s_sharded_update(self) : s_full_update(self);
    self->step++;
    // Hard target update (DQN): every target_update steps, counted after this step, so
    // the first sync happens after exactly target_update updates.
    if (self->step % self->cfg.target_update == 0) {
        if (self->zero == 3) {
            memcpy(self->target_shard, self->online_shard, self->shard_n * sizeof(float));
            s_gather_invalidate(&self->gather[1]);
        } else {
            nn_params_copy(&self->target, &self->online);
        }
    }
    int64_t t3 = clock_now_ns();
    if (stats) {
        double qsum = 0.0;
        for (int i = 0; i < B; i++) {
            qsum += self->y[i] - self->td[i]; // = Q(s_i, a_i)
        }
        int64_t comm = self->group ? group_comm_ns(self->group) - c0 : 0;
        *stats = (train_stats_t){loss, norm, (float)(qsum / B), t1 - t0, t2 - t1, t3 - t2, comm};
    }
    return loss;
}

void trainer_gather_into(trainer_t *self, int which, void *dst) {
    APEX_ASSERT(which == 0 || which == 1);
    size_t n = self->online.num_params;
    if (self->zero != 3) {
        if (dst) {
            memcpy(dst, which ? self->target.data : self->online.data, n * sizeof(float));
        }
        return;
    }
    // Every rank's shard straight into rank 0's dst: no rank holds a second whole copy.
    group_gather_f32(self->group, which ? self->target_shard : self->online_shard, dst,
                     self->counts, self->displs);
}

// Stage 3's checkpoint arrays: online then target, gathered to rank 0 a slot's worth of the
// flat array at a time and appended to w (rank 0's writer; NULL elsewhere). Every rank takes
// part in every gather, whatever rank 0's file does.
static void s_gather_to_writer(trainer_t *self, ckpt_writer_t *w) {
    s_gather_t *g = &self->gather[0];
    s_gather_invalidate(g); // slot 0 and its block tables are borrowed
    size_t n = self->online.num_params;
    for (int k = 0; k < 2; k++) {
        const float *shard = k ? self->target_shard : self->online_shard;
        for (size_t lo = 0; lo < n; lo += self->slot_n) {
            size_t len = APEX_MIN(self->slot_n, n - lo);
            size_t mine = s_range_blocks(self, lo, len, g->counts[0][0], g->displs[0][0]);
            group_gather_f32(self->group, shard + mine, g->slot[0], g->counts[0][0],
                             g->displs[0][0]);
            if (w) {
                ckpt_writer_append(w, g->slot[0], len);
            }
        }
    }
}

const nn_params_t *trainer_online(const trainer_t *self) { return &self->online; }
const nn_params_t *trainer_target(const trainer_t *self) { return &self->target; }
size_t trainer_num_params(const trainer_t *self) { return self->online.num_params; }

float trainer_lr(const trainer_t *self) {
    const train_config_t *c = &self->cfg;
    if (c->lr_steps <= 0) {
        return c->optim.lr;
    }
    double f = (double)(self->step + 1) / (double)c->lr_steps;
    return (float)(c->optim.lr + (c->lr_end - c->optim.lr) * (f < 1.0 ? f : 1.0));
}

int64_t trainer_steps(const trainer_t *self) { return self->step; }
uint64_t trainer_skipped_steps(const trainer_t *self) { return self->skipped; }
const optim_t *trainer_optim(const trainer_t *self) { return &self->optim; }
const train_config_t *trainer_config(const trainer_t *self) { return &self->cfg; }
void trainer_memory(const trainer_t *self, train_memory_t *out) { *out = self->mem; }
rng_t *trainer_rng(trainer_t *self) { return &self->rng; }

// ----------------------------------------------------------------------------
// checkpoints: payload = online, target, optimizer m, optimizer v (nn_params_t layout); in
// a group with sharded moments (stages 1, 2), online and target, the moments in shard files.

enum { TRAINER_CKPT_ARRAYS = 4 };

// "<path>.s<step>.opt<r>of<N>": the step in the name, so that writing a new set never
// touches the files of the committed one.
static void s_shard_path(char *buf, size_t n, const char *path, uint64_t step, int r, int N) {
    snprintf(buf, n, "%s.s%" PRIu64 ".opt%dof%d", path, step, r, N);
}

// Deletes shard files of path other than the set (keep_step, keep_ranks) (keep_ranks 0:
// all of them): left by an older checkpoint or by a set that was never committed. Best
// effort: a file that stays costs disk space, not correctness (path names its own set).
static void s_remove_stale_shards(const char *path, uint64_t keep_step, int keep_ranks) {
    char dir[4096];
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    DIR *d = opendir(dir);
    if (!d) {
        return;
    }
    size_t blen = strlen(base);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        uint64_t step;
        int r, N, end = 0;
        if (strncmp(e->d_name, base, blen) != 0 ||
            sscanf(e->d_name + blen, ".s%" SCNu64 ".opt%dof%d%n", &step, &r, &N, &end) != 3 ||
            e->d_name[blen + (size_t)end] != '\0' || (step == keep_step && N == keep_ranks)) {
            continue;
        }
        char full[4096 + 256];
        snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        if (unlink(full) != 0) {
            log_warn("cannot remove stale optimizer shard %s: %s", full, strerror(errno));
        }
    }
    closedir(d);
}

// The same code on every rank: rank 0's (one_rank) or the first failure of any (else).
static int s_agree(const trainer_t *self, int rc, int one_rank) {
    if (!self->group || self->n_ranks == 1) {
        return rc;
    }
    double x[2] = {one_rank && self->rank != 0 ? 0.0 : (double)(rc != APEX_OK),
                   one_rank && self->rank != 0 ? 0.0 : (double)rc};
    group_allreduce_f64(self->group, x, 2);
    if (x[0] == 0.0) {
        return APEX_OK;
    }
    // Several failures sum their codes: report this rank's own, or a generic I/O error.
    return rc != APEX_OK ? rc : (one_rank ? (int)x[1] : APEX_EIO);
}

static void s_header(const trainer_t *self, ckpt_header_t *hdr, const ckpt_extra_t *extra) {
    ckpt_header_init(hdr, &self->cfg.net);
    hdr->learner_step = (uint64_t)self->step;
    hdr->optim_kind = (uint32_t)self->optim.cfg.kind;
    hdr->optim_step = (uint64_t)self->optim.step;
    memcpy(hdr->rng_state, self->rng.s, sizeof hdr->rng_state);
    if (extra) {
        hdr->extra = *extra;
    }
}

// Everything that trainer_step reads and that is not derived from the config goes into the
// file: params, target, both moments, both step counters (optimizer's t drives Adam's bias
// correction) and the RNG, which is what makes a resumed run bit-identical.
int trainer_save(trainer_t *self, const char *path, const ckpt_extra_t *extra) {
    ckpt_header_t hdr;
    s_header(self, &hdr, extra);
    if (self->zero < 1) {
        // Replicated moments: rank 0 writes what a single learner writes.
        int rc = APEX_OK;
        if (self->rank == 0) {
            hdr.extra.user[CKPT_USER_OPT_SHARDS] = 0;
            const float *arrays[TRAINER_CKPT_ARRAYS] = {self->online.data, self->target.data,
                                                        self->optim.m, self->optim.v};
            rc = ckpt_write(path, &hdr, arrays, TRAINER_CKPT_ARRAYS);
            if (rc == APEX_OK) {
                s_remove_stale_shards(path, 0, 0);
            }
        }
        return s_agree(self, rc, 1);
    }
    // (1) every rank's shard, (2) all written: (3) rank 0 commits the set by writing path.
    char spath[4096 + 64];
    s_shard_path(spath, sizeof spath, path, hdr.learner_step, self->rank, self->n_ranks);
    ckpt_header_t sh = hdr;
    memset(&sh.extra, 0, sizeof sh.extra);
    sh.extra.user[CKPT_SHARD_OFFSET] = self->shard_off;
    sh.extra.user[CKPT_SHARD_COUNT] = self->shard_n;
    sh.extra.user[CKPT_SHARD_RANK] = (uint64_t)self->rank;
    sh.extra.user[CKPT_SHARD_RANKS] = (uint64_t)self->n_ranks;
    const float *moments[2] = {self->optim.m, self->optim.v};
    int rc = s_agree(self, ckpt_write_shard(spath, &sh, moments, 2), 0);
    if (rc != APEX_OK) {
        return rc; // the committed set is untouched; the partial new one is deleted next time
    }
    hdr.extra.user[CKPT_USER_OPT_SHARDS] = (uint64_t)self->n_ranks;
    if (self->zero == 3) {
        // Online, then target, gathered to rank 0 a slot at a time and written as they come:
        // every rank takes part in every gather whatever rank 0's file does.
        ckpt_writer_t *w = NULL;
        if (self->rank == 0) {
            ckpt_writer_open(&w, path, &hdr, 2); // an error comes back from commit
        }
        s_gather_to_writer(self, w);
        if (w) {
            rc = ckpt_writer_commit(&w);
        }
    } else if (self->rank == 0) {
        const float *arrays[2] = {self->online.data, self->target.data};
        rc = ckpt_write(path, &hdr, arrays, 2);
    }
    if (self->rank == 0 && rc == APEX_OK) {
        s_remove_stale_shards(path, hdr.learner_step, self->n_ranks);
    }
    return s_agree(self, rc, 1);
}

// Fills m, v (full-size scratch) at [off, off + n) from the shard files of a sharded
// checkpoint whose header is hdr: only the old shards overlapping that range are read.
static int s_read_shards(const trainer_t *self, const char *path, const ckpt_header_t *hdr,
                         float *m, float *v, size_t off, size_t n) {
    size_t total = self->online.num_params;
    int M = (int)hdr->extra.user[CKPT_USER_OPT_SHARDS];
    float *tmp = NULL; // one old shard's m and v at a time
    int rc = APEX_OK;
    for (int k = 0; k < M && rc == APEX_OK; k++) {
        size_t ko, kn;
        group_shard_range(total, M, k, &ko, &kn);
        if (kn == 0 || ko >= off + n || ko + kn <= off) {
            continue;
        }
        char spath[4096 + 64];
        s_shard_path(spath, sizeof spath, path, hdr->learner_step, k, M);
        ckpt_header_t sh;
        tmp = xrealloc(tmp, 2 * kn * sizeof(float));
        float *dst[2] = {tmp, tmp + kn};
        rc = ckpt_read_shard(spath, &self->cfg.net, kn, &sh, dst, 2);
        if (rc == APEX_OK &&
            (sh.learner_step != hdr->learner_step || sh.optim_step != hdr->optim_step ||
             sh.optim_kind != hdr->optim_kind || sh.extra.user[CKPT_SHARD_OFFSET] != ko ||
             sh.extra.user[CKPT_SHARD_RANK] != (uint64_t)k ||
             sh.extra.user[CKPT_SHARD_RANKS] != (uint64_t)M)) {
            log_error("%s: optimizer shard does not belong to %s (step %llu, shard %d of %d)",
                      spath, path, (unsigned long long)hdr->learner_step, k, M);
            rc = APEX_EINVAL;
        }
        if (rc == APEX_OK) { // the overlap of [ko, ko + kn) with [off, off + n)
            size_t a = APEX_MAX(ko, off), b = APEX_MIN(ko + kn, off + n);
            memcpy(m + (a - off), tmp + (a - ko), (b - a) * sizeof(float));
            memcpy(v + (a - off), tmp + kn + (a - ko), (b - a) * sizeof(float));
        }
    }
    xfree(tmp);
    return rc;
}

int trainer_load(trainer_t *self, const char *path, ckpt_extra_t *extra_out) {
    // Stage into scratch: the optimizer kind can only be checked once the file is read, a
    // mismatch (or another rank's failure) must leave the trainer unchanged. Not a hot path.
    // Stage 3 stages only its shard of each array (ckpt_read_range): it may not fit one whole.
    ckpt_header_t hdr;
    size_t n = self->online.num_params;
    size_t len = self->zero == 3 ? APEX_MAX(self->shard_n, (size_t)1) : n;
    float *staged = xaligned_alloc(TRAINER_CKPT_ARRAYS * len * sizeof(float));
    float *arrays[TRAINER_CKPT_ARRAYS] = {staged, staged + len, staged + 2 * len, staged + 3 * len};
    int rc = self->zero == 3
                 ? ckpt_read_range(path, &self->cfg.net, &hdr, self->shard_off, self->shard_n,
                                   arrays, TRAINER_CKPT_ARRAYS)
                 : ckpt_read_any(path, &self->cfg.net, &hdr, arrays, TRAINER_CKPT_ARRAYS);
    // Where this rank's shard of each array starts in the scratch.
    size_t at = self->zero == 3 ? 0 : self->shard_off;
    if (rc == APEX_OK && hdr.optim_kind != (uint32_t)self->optim.cfg.kind) {
        log_error("%s: checkpoint optimizer is %s, configured optimizer is %s", path,
                  optim_kind_name((optim_kind)hdr.optim_kind),
                  optim_kind_name(self->optim.cfg.kind));
        rc = APEX_EINVAL;
    }
    uint64_t shards = rc == APEX_OK ? hdr.extra.user[CKPT_USER_OPT_SHARDS] : 0;
    if (rc == APEX_OK && hdr.n_arrays == 2 && shards >= 1 && shards <= GROUP_MAX_RANKS) {
        rc = s_read_shards(self, path, &hdr, arrays[2] + at, arrays[3] + at, self->shard_off,
                           self->shard_n);
    } else if (rc == APEX_OK && !(hdr.n_arrays == TRAINER_CKPT_ARRAYS && shards == 0)) {
        log_error("%s: checkpoint holds %u arrays and names %llu optimizer shards; expected 4 "
                  "arrays, or 2 and shard files",
                  path, hdr.n_arrays, (unsigned long long)shards);
        rc = APEX_EINVAL;
    }
    rc = s_agree(self, rc, 0);
    if (rc == APEX_OK && self->zero == 3) {
        memcpy(self->online_shard, arrays[0], self->shard_n * sizeof(float));
        memcpy(self->target_shard, arrays[1], self->shard_n * sizeof(float));
        s_gather_invalidate(&self->gather[0]);
        s_gather_invalidate(&self->gather[1]);
    } else if (rc == APEX_OK) {
        memcpy(self->online.data, arrays[0], n * sizeof(float));
        memcpy(self->target.data, arrays[1], n * sizeof(float));
    }
    if (rc == APEX_OK) {
        memcpy(self->optim.m, arrays[2] + at, self->shard_n * sizeof(float));
        memcpy(self->optim.v, arrays[3] + at, self->shard_n * sizeof(float));
        self->optim.step = (int64_t)hdr.optim_step;
        self->step = (int64_t)hdr.learner_step;
        memcpy(self->rng.s, hdr.rng_state, sizeof self->rng.s);
        if (extra_out) {
            *extra_out = hdr.extra;
            extra_out->user[CKPT_USER_OPT_SHARDS] = 0; // the trainer's, not the caller's
        }
    }
    xfree(staged);
    return rc;
}
