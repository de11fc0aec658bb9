// check_group.c: the learner group (learner/group.h) and ZeRO in the trainer (train.h).
//
// In process, without MPI: shard ranges, launch detection, a group of one never touching
// MPI, nn_backward_pieces against nn_backward (the pieces cover the parameters once), and
// stages 1 and 2 on a group of one against the single learner.
// Through MPI: `mpirun -np N build/tests/zero_ranks ...` (tests/zero_ranks.c, the ranks of a
// real group on the fixed batches of tests/zero_fixture.h), compared with one learner in
// this process on the concatenated batches:
//   equivalence: N = 2, stages 0, 1, 2, Adam and RMSProp (and the conv net for stage 2),
//                50 steps with the clip active in some: ||theta_N - theta_1|| / ||theta_1||
//                <= 1e-5 (the bound) and, stricter, the same relative to the
//                distance travelled ||theta_1 - theta_0|| <= 1e-4; the norms of every step
//                agree; every rank holds the same parameters.
//   memory:      N = 1, 2, 4 (oversubscribed) on the large net, as allocated (the xalloc
//                tallies behind train_memory_t): optimizer bytes per rank = 2 x 4 x its
//                shard (sum = full, max = ceil(full / N), plus alignment), stage 2's
//                gradient bytes below stage 1's for N > 1, and glibc's heap (mallinfo2)
//                agreeing (skipped, visibly, under ASan).
//   re-shard:    2 ranks (stage 2) save, 3 ranks (stage 1) load and go on; 2 ranks save, a
//                single learner loads; a single learner saves, 2 ranks load: each equal to
//                an uninterrupted single learner.
//   DPG:         the DPG trainer's group (ZeRO stage 0): the equivalence's bounds, both
//                networks' norms, Adam and RMSProp; a group's checkpoint saved and resumed.
// mpirun runs with the settings CI needs (root, container, 2 cores: see mpi_args below),
// and LeakSanitizer suppressions for OpenMPI's own allocations (tests/lsan-mpi.supp).
// Cost: about 8 s (ASan: about 60 s), most of it mpirun start-up (10 runs; under ASan each
// rank starts slowly, LSan's slow unwinder walking OpenMPI's allocations).
#include "check_apex.h"

#include "algo.h"
#include "apex.h"
#include "ckpt.h"
#include "group.h"
#include "nn.h"
#include "train.h"
#include "train_dpg.h"
#include "xalloc.h"
#include "zero_fixture.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

// ----------------------------------------------------------------------------
// in process

START_TEST(test_shard_range) {
    size_t sizes[] = {1, 2, 3, 7, 16, 63, 64, 65, 315923};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        for (int N = 1; N <= 7; N++) {
            size_t n = sizes[i], next = 0, lo = n, hi = 0;
            for (int r = 0; r < N; r++) {
                size_t off, cnt;
                group_shard_range(n, N, r, &off, &cnt);
                ck_assert_uint_eq(off, next); // contiguous, in rank order
                next = off + cnt;
                lo = APEX_MIN(lo, cnt), hi = APEX_MAX(hi, cnt);
            }
            ck_assert_uint_eq(next, n);
            ck_assert_uint_le(hi - lo, 1);
            ck_assert_uint_eq(hi, group_shard_max(n, N));
        }
    }
}
END_TEST

static void s_clear_launch_env(void) {
    const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "SLURM_STEP_ID", "SLURM_STEP_NUM_TASKS",
                          "SLURM_PROCID",         "PMI_SIZE",      "PMIX_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        unsetenv(vars[i]);
    }
}

// Check runs each test in its own process: the environment changes stay in it.
START_TEST(test_launch_size) {
    s_clear_launch_env();
    ck_assert_int_eq(group_launch_size(), 1);
    setenv("SLURM_PROCID", "0", 1); // a batch script, not an srun step
    setenv("SLURM_STEP_NUM_TASKS", "4", 1);
    ck_assert_int_eq(group_launch_size(), 1);
    setenv("SLURM_STEP_ID", "0", 1);
    ck_assert_int_eq(group_launch_size(), 4);
    s_clear_launch_env();
    setenv("OMPI_COMM_WORLD_SIZE", "1", 1); // mpirun -np 1: no MPI needed
    ck_assert_int_eq(group_launch_size(), 1);
    setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
    ck_assert_int_eq(group_launch_size(), 3);
    setenv("OMPI_COMM_WORLD_SIZE", "x3", 1);
    ck_assert_int_eq(group_launch_size(), 1);
    s_clear_launch_env();
    setenv("PMIX_RANK", "0", 1);
    ck_assert_int_eq(group_launch_size(), 2);
}
END_TEST

START_TEST(test_single_without_mpi) {
    s_clear_launch_env();
    group_t *g = group_new();
    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(group_size(g), 1);
    ck_assert_int_eq(group_rank(g), 0);
    ck_assert_int_eq(group_uses_mpi(g), 0);
    float x[3] = {1, 2, 3}, y[3] = {0, 0, 0};
    int counts[1] = {3}, displs[1] = {0};
    group_allreduce_f32(g, x, 3);
    group_reduce_scatter_f32(g, x, y, counts); // a copy
    group_allgather_f32(g, x, counts, displs);
    double d = 5;
    group_round(g, &d, 1);
    ck_assert(x[0] == 1 && x[2] == 3 && y[1] == 2 && d == 5);
    group_destroy(&g);
    ck_assert_ptr_null(g);
    group_destroy(&g);
}
END_TEST

typedef struct {
    float *got;
    int *seen;
    size_t capacity, n_pieces;
} s_collect_t;

static void s_collect(void *arg, const float *piece, size_t offset, size_t n) {
    s_collect_t *c = arg;
    ck_assert_uint_le(n, c->capacity);
    ck_assert_uint_gt(n, 0);
    c->n_pieces++;
    for (size_t i = 0; i < n; i++) {
        c->got[offset + i] = piece[i];
        c->seen[offset + i]++;
    }
}

// nn_backward_pieces gives nn_backward's gradient, in pieces that cover every parameter
// exactly once, for capacities from the minimum (one row per piece, a bias alone) up.
START_TEST(test_pieces_equal_backward) {
    const char *nets[] = {"mlp", "conv"};
    for (int k = 0; k < 2; k++) {
        nn_config_t net;
        ck_assert_int_eq(zf_net(&net, nets[k]), 0);
        const int B = 5;
        nn_params_t p, g;
        nn_params_init(&p, &net);
        nn_params_init(&g, &net);
        rng_t r;
        rng_init_stream(&r, 3, RNG_ROLE_NET_INIT, 0);
        nn_params_init_random(&p, &r);
        nn_state_t s;
        nn_state_init(&s, &net, B, 1);
        zf_batch_t *b = xmalloc(sizeof *b);
        zf_batch(b, &net, 1, B);
        float q[ZF_MAX_ROWS * 18], dq[ZF_MAX_ROWS * 18];
        for (int i = 0; i < B * net.n_actions; i++) {
            dq[i] = 2.0f * rng_uniform_f(&r) - 1.0f;
        }
        nn_forward(&s, &p, b->obs, B, q);
        nn_backward(&s, &p, &g, dq, B);
        size_t n = p.num_params, min = nn_piece_min(&net);
        size_t caps[] = {min, min + 1, 3 * min + 5, n / 3, n + 100};
        for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
            size_t cap = APEX_MAX(caps[c], min);
            s_collect_t col = {xcalloc(n, sizeof(float)), xcalloc(n, sizeof(int)), cap, 0};
            float *buf = xmalloc(cap * sizeof(float));
            for (size_t i = 0; i < cap; i++) {
                buf[i] = NAN; // must be overwritten, not accumulated into
            }
            nn_pieces_t pc = {buf, cap, s_collect, &col};
            nn_forward(&s, &p, b->obs, B, q);
            nn_backward_pieces(&s, &p, &pc, dq, B);
            for (size_t i = 0; i < n; i++) {
                ck_assert_int_eq(col.seen[i], 1);
            }
            ck_assert(check_close_f(col.got, g.data, n, 1e-5, 1e-7, "pieces"));
            if (cap == min) {
                ck_assert_uint_gt(col.n_pieces, (size_t)p.n_layers);
            }
            xfree(buf);
            xfree(col.got);
            xfree(col.seen);
        }
        xfree(b);
        nn_state_fini(&s);
        nn_params_fini(&g);
        nn_params_fini(&p);
    }
}
END_TEST

// A fetcher over a whole array (what stage 3's all-gathers amount to in one process): hands
// out blocks of `per` rows of a linear layer (a conv layer whole) copied into one of two
// slots, the other slot poisoned with NaN so that a pass reading a block after the next
// fetch shows, and records the calls.
typedef struct {
    const nn_params_t *src;
    int per;
    float *slot[2];
    size_t slot_n;
    int turn;
    nn_linear_t view[2];
    int calls[256][3]; // layer, block, dir
    int n_calls;
    int conv; // layers below this are conv layers: one block
} s_fetcher_t;

static const nn_linear_t *s_fetcher(void *arg, int l, int k, int dir, int *row0) {
    s_fetcher_t *f = arg;
    ck_assert_int_lt(f->n_calls, 256);
    f->calls[f->n_calls][0] = l, f->calls[f->n_calls][1] = k, f->calls[f->n_calls][2] = dir;
    f->n_calls++;
    int i = f->turn;
    f->turn ^= 1;
    for (size_t j = 0; j < f->slot_n; j++) {
        f->slot[1 - i][j] = NAN; // the previous block is released
    }
    const nn_linear_t *L = &f->src->layer[l];
    int per = l < f->conv ? L->out_dim : f->per;
    int r0 = k * per, rows = APEX_MIN(per, L->out_dim - r0);
    ck_assert_int_gt(rows, 0);
    size_t in = (size_t)L->in_dim;
    memcpy(f->slot[i], L->w + (size_t)r0 * in, (size_t)rows * in * sizeof(float));
    memcpy(f->slot[i] + (size_t)rows * in, L->b + r0, (size_t)rows * sizeof(float));
    f->view[i] = (nn_linear_t){f->slot[i], f->slot[i] + (size_t)rows * in, L->in_dim, rows};
    *row0 = r0;
    return &f->view[i];
}

// The calls a pass over p should make, from call c of f: every block of layers from..to
// (step dir) in order, with dir; returns the call after them.
static int s_expect_calls(const s_fetcher_t *f, int c, int from, int to, int dir) {
    for (int l = from; dir > 0 ? l <= to : l >= to; l += dir) {
        int per = l < f->conv ? f->src->layer[l].out_dim : f->per;
        int blocks = (f->src->layer[l].out_dim + per - 1) / per;
        for (int k = 0; k < blocks; k++, c++) {
            ck_assert_msg(c < f->n_calls && f->calls[c][0] == l && f->calls[c][1] == k &&
                              f->calls[c][2] == dir,
                          "call %d: (%d, %d, %d), want (%d, %d, %d)", c, f->calls[c][0],
                          f->calls[c][1], f->calls[c][2], l, k, dir);
        }
    }
    return c;
}

// A fetched network (nn_params_fetched) in blocks of 1, 3 and 1000 rows: nn_forward,
// nn_forward_pair and nn_backward_pieces give the plain network's values (a linear layer's
// rows in blocks, dh_prev summed over them), asking for each block once per pass in the
// pass's order with its direction, and never using a block after the next fetch.
START_TEST(test_fetched_network) {
    const char *nets[] = {"mlp", "conv"};
    const int pers[] = {1, 3, 1000};
    for (int k = 0; k < 2; k++) {
        for (int pi = 0; pi < 3; pi++) {
            nn_config_t net;
            ck_assert_int_eq(zf_net(&net, nets[k]), 0);
            const int B = 5, A = net.n_actions;
            nn_params_t p, p2, fp, fp2, g;
            nn_params_init(&p, &net);
            nn_params_init(&p2, &net);
            nn_params_init(&g, &net);
            rng_t r;
            rng_init_stream(&r, 5, RNG_ROLE_NET_INIT, 0);
            nn_params_init_random(&p, &r);
            nn_params_init_random(&p2, &r);
            size_t slot_n = 0;
            for (int l = 0; l < p.n_layers; l++) {
                slot_n = APEX_MAX(slot_n, nn_layer_floats(&p, l));
            }
            s_fetcher_t f1 = {.src = &p, .per = pers[pi], .slot_n = slot_n, .conv = net.n_conv};
            s_fetcher_t f2 = f1;
            f2.src = &p2;
            for (int i = 0; i < 2; i++) {
                f1.slot[i] = xmalloc(slot_n * sizeof(float));
                f2.slot[i] = xmalloc(slot_n * sizeof(float));
            }
            nn_params_fetched(&fp, &net, s_fetcher, &f1);
            nn_params_fetched(&fp2, &net, s_fetcher, &f2);
            ck_assert_ptr_null(fp.data);
            ck_assert_uint_eq(fp.num_params, p.num_params);
            nn_state_t s, sa, sb;
            nn_state_init(&s, &net, B, 1);
            nn_state_init(&sa, &net, B, 0);
            nn_state_init(&sb, &net, B, 0);
            zf_batch_t *b = xmalloc(sizeof *b);
            zf_batch(b, &net, 2, B);
            float q[ZF_MAX_ROWS * 18], qf[ZF_MAX_ROWS * 18], qa[ZF_MAX_ROWS * 18],
                qb[ZF_MAX_ROWS * 18], dq[ZF_MAX_ROWS * 18];
            for (int i = 0; i < B * A; i++) {
                dq[i] = 2.0f * rng_uniform_f(&r) - 1.0f;
            }
            size_t nq = (size_t)B * A;
            // the pair: online and target of the learner
            nn_forward(&s, &p2, b->obs, B, q);
            nn_forward_pair(&sa, &fp, &sb, &fp2, b->obs, B, qa, qb);
            ck_assert(check_close_f(qb, q, nq, 1e-6, 1e-7, "pair target"));
            nn_forward(&s, &p, b->obs, B, q);
            ck_assert(check_close_f(qa, q, nq, 1e-6, 1e-7, "pair online"));
            int L = p.n_layers;
            ck_assert_int_eq(s_expect_calls(&f1, 0, 0, L - 1, 1), f1.n_calls);
            // forward then pieces: the plain gradient; blocks asked for from the head down
            // to layer 1 (layer 0's W is needed only for a dh_prev nobody needs)
            nn_backward(&s, &p, &g, dq, B);
            f1.n_calls = 0;
            nn_forward(&s, &fp, b->obs, B, qf);
            ck_assert(check_close_f(qf, q, nq, 1e-6, 1e-7, "forward"));
            size_t n = p.num_params, cap = nn_piece_min(&net) + 7;
            s_collect_t col = {xcalloc(n, sizeof(float)), xcalloc(n, sizeof(int)), cap, 0};
            float *buf = xmalloc(cap * sizeof(float));
            nn_pieces_t pc = {buf, cap, s_collect, &col};
            nn_backward_pieces(&s, &fp, &pc, dq, B);
            ck_assert(check_close_f(col.got, g.data, n, 1e-5, 1e-7, "gradient"));
            int c = s_expect_calls(&f1, 0, 0, L - 1, 1);
            c = s_expect_calls(&f1, c, L - 1, 1, -1); // never layer 0: no dh_prev for it
            ck_assert_int_eq(c, f1.n_calls);
            xfree(buf);
            xfree(col.got);
            xfree(col.seen);
            xfree(b);
            for (int i = 0; i < 2; i++) {
                xfree(f1.slot[i]);
                xfree(f2.slot[i]);
            }
            nn_state_fini(&s);
            nn_state_fini(&sa);
            nn_state_fini(&sb);
            nn_params_fini(&g);
            nn_params_fini(&p2);
            nn_params_fini(&p);
        }
    }
}
END_TEST

// Steps `steps` global steps of rows rows from trainer t's current step (one learner).
static void s_steps(trainer_t *t, const nn_config_t *net, int steps, int rows) {
    zf_batch_t *b = xmalloc(sizeof *b);
    float prio[ZF_MAX_ROWS];
    for (int i = 0; i < steps; i++) {
        zf_batch(b, net, trainer_steps(t), rows);
        train_batch_t tb = zf_slice(b, net, 0, rows);
        trainer_step(t, &tb, prio, NULL);
    }
    xfree(b);
}

static double s_rel(const float *a, const float *b, size_t n) {
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)b[i] * b[i];
    }
    return sqrt(d / s);
}

// A single learner (this process) of optimizer kind after `steps` steps from its start.
static trainer_t *s_ref_optim(const nn_config_t *net, int steps, optim_kind kind) {
    train_config_t tc;
    zf_train_config(&tc, net, kind, 12, 0, 0.3f);
    trainer_t *t = trainer_new(&tc);
    s_steps(t, net, steps, 12);
    return t;
}

// A group of one with stages 1, 2 and 3 (the sharded code paths, no MPI) trains as the
// single learner does, online and target.
START_TEST(test_size1_stages) {
    s_clear_launch_env();
    group_t *g = group_new();
    nn_config_t net;
    zf_net(&net, "conv");
    train_config_t tc;
    zf_train_config(&tc, &net, OPTIM_RMSPROP, 12, 0, 0.3f);
    trainer_t *ref = trainer_new(&tc);
    s_steps(ref, &net, 20, 12);
    for (int stage = 1; stage <= 3; stage++) {
        tc.zero_stage = stage;
        trainer_t *t = trainer_new_group(&tc, g);
        s_steps(t, &net, 20, 12);
        const nn_params_t *a = trainer_online(t), *b = trainer_online(ref);
        float *x = xmalloc(2 * a->num_params * sizeof(float)), *y = x + a->num_params;
        trainer_gather_into(t, 0, x);
        ck_assert_double_le(s_rel(x, b->data, a->num_params), 1e-6);
        trainer_gather_into(t, 1, x);
        trainer_gather_into(ref, 1, y);
        ck_assert_int_eq(memcmp(y, trainer_target(ref)->data, a->num_params * sizeof(float)), 0);
        ck_assert_double_le(s_rel(x, y, a->num_params), 1e-6);
        // What the learner publishes is the online network (target differs at step 20: its
        // last sync was at 14), written into the message's bytes.
        unsigned char *msg = xmalloc(a->num_params * sizeof(float) + 1);
        algo_dqn_ops.publish(t, msg + 1); // unaligned, as in a weights message
        trainer_gather_into(t, 0, y);
        ck_assert_int_eq(memcmp(msg + 1, y, a->num_params * sizeof(float)), 0);
        ck_assert_int_ne(memcmp(msg + 1, x, a->num_params * sizeof(float)), 0);
        ck_assert_uint_eq(algo_dqn_ops.published_n(t), a->num_params);
        xfree(msg);
        if (stage == 3) {
            // A load drops the blocks held from before it. Two layers, so that both stay in
            // the slots from one step to the next (with three or more, each pass's first
            // fetches evict them): save at 20, train to 25 (the target's blocks now held are
            // of the sync at 21), load, train to 25 again: the same bits as a trainer that
            // went 20 -> 25 once.
            nn_config_t two = {.obs_dim = 8, .n_actions = 4, .n_hidden = 1, .hidden = {32}};
            train_config_t tc2;
            zf_train_config(&tc2, &two, OPTIM_RMSPROP, 12, 3, 0.3f);
            char path[1100];
            snprintf(path, sizeof path, "%s/size1.bin", check_tmpdir());
            trainer_t *v = trainer_new_group(&tc2, g), *u = trainer_new_group(&tc2, g);
            s_steps(v, &two, 20, 12);
            ck_assert_int_eq(trainer_save(v, path, NULL), APEX_OK);
            s_steps(u, &two, 25, 12);
            s_steps(v, &two, 5, 12);
            ck_assert_int_eq(trainer_load(v, path, NULL), APEX_OK);
            s_steps(v, &two, 5, 12);
            size_t n2 = trainer_num_params(v);
            float *p = xmalloc(2 * n2 * sizeof(float));
            trainer_gather_into(v, 0, p);
            trainer_gather_into(u, 0, p + n2);
            ck_assert_int_eq(memcmp(p, p + n2, n2 * sizeof(float)), 0);
            xfree(p);
            trainer_destroy(&u);
            trainer_destroy(&v);
        }
        xfree(x);
        // The allocator's count (train.h): m and v of every parameter (the one rank's shard
        // is the whole array), each rounded up to at most 63 bytes more by xaligned_alloc.
        train_memory_t m;
        trainer_memory(t, &m);
        size_t moments = 2 * a->num_params * sizeof(float);
        ck_assert_uint_ge(m.opt_bytes, moments);
        ck_assert_uint_le(m.opt_bytes, moments + 2 * (XALLOC_ALIGN - 1));
        trainer_destroy(&t);
    }
    trainer_destroy(&ref);
    group_destroy(&g);
}
END_TEST

// ----------------------------------------------------------------------------
// through mpirun

static const char *s_zero_ranks(void) {
    const char *p = getenv("APEX_ZERO_RANKS");
    return p && *p ? p : "build/tests/zero_ranks";
}

// Runs mpirun -np np zero_ranks args... with stdout to out_path (NULL: inherited). Returns
// the exit status (-1 when it did not exit normally).
static int s_mpirun(int np, const char *out_path, const char *const args[]) {
    // What CI needs (docs/architecture.md, learner group): root, a container without
    // ptrace rights (no CMA single copy), no RDMA (no UCX), shared memory only, more ranks
    // than cores, no binding (the ranks share the cores with everything else), and ranks
    // that yield while they wait.
    const char *mpi_args[] = {"mpirun",
                              "--allow-run-as-root",
                              "--oversubscribe",
                              "--bind-to",
                              "none",
                              "--mca",
                              "btl",
                              "self,vader",
                              "--mca",
                              "pml",
                              "ob1",
                              "--mca",
                              "btl_vader_single_copy_mechanism",
                              "none",
                              "--mca",
                              "mpi_yield_when_idle",
                              "1",
                              "-np"};
    const char *argv[64];
    int n = 0;
    char np_s[16];
    snprintf(np_s, sizeof np_s, "%d", np);
    for (size_t i = 0; i < sizeof mpi_args / sizeof mpi_args[0]; i++) {
        argv[n++] = mpi_args[i];
    }
    argv[n++] = np_s;
    argv[n++] = s_zero_ranks();
    for (int i = 0; args[i]; i++) {
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    fflush(stdout);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (out_path) {
            ck_assert_ptr_nonnull(freopen(out_path, "w", stdout));
        }
        // LeakSanitizer (make asan): OpenMPI keeps allocations until exit. The slow unwinder
        // sees through frames without frame pointers into libmpi (the fast one stops in
        // components OpenMPI has dlclosed, which no suppression can name).
        // Appended to what make asan set (tests/lsan.supp): the last suppressions= wins.
        char supp[3300], cwd[1024];
        const char *root = getenv("APEX_SRC_DIR"), *was = getenv("LSAN_OPTIONS");
        snprintf(supp, sizeof supp,
                 "%.2000s%ssuppressions=%s/tests/lsan-mpi.supp:print_suppressions=0:"
                 "fast_unwind_on_malloc=0",
                 was ? was : "", was && *was ? ":" : "",
                 root && *root ? root : (getcwd(cwd, sizeof cwd) ? cwd : "."));
        setenv("LSAN_OPTIONS", supp, 1);
        s_clear_launch_env();
        execvp("mpirun", (char *const *)argv);
        _exit(127);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static float *s_load_params(const char *path, size_t n) {
    float *x = xmalloc(n * sizeof(float));
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "no %s", path);
    ck_assert_uint_eq(fread(x, sizeof(float), n, f), n);
    ck_assert_int_eq(fgetc(f), EOF);
    fclose(f);
    return x;
}

static int s_read_norms(const char *path, double *norms, int max) {
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    int n = 0;
    while (n < max && fscanf(f, "%lf", &norms[n]) == 1) {
        n++;
    }
    fclose(f);
    return n;
}

// Compares the group run at prefix (ranks' parameter files) with reference parameters
// ref, starting from init: the bound and the stricter one (see top).
static void s_check_group(const char *prefix, int np, const float *ref, const float *init,
                          size_t n) {
    char path[1200];
    snprintf(path, sizeof path, "%s.r0", prefix);
    float *got = s_load_params(path, n);
    double rel = s_rel(got, ref, n);
    double d = 0, moved = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
        moved += ((double)ref[i] - init[i]) * ((double)ref[i] - init[i]);
    }
    ck_assert_msg(rel <= 1e-5, "%s: ||theta_N - theta_1|| / ||theta_1|| = %g", prefix, rel);
    ck_assert_msg(sqrt(d / moved) <= 1e-4, "%s: relative to the distance moved: %g", prefix,
                  sqrt(d / moved));
    for (int r = 1; r < np; r++) {
        snprintf(path, sizeof path, "%s.r%d", prefix, r);
        float *other = s_load_params(path, n);
        ck_assert_msg(memcmp(other, got, n * sizeof(float)) == 0, "rank %d differs", r);
        xfree(other);
    }
    xfree(got);
}

START_TEST(test_mpi_equivalence) {
    const char *dir = check_tmpdir();
    struct {
        const char *net, *optim, *stages;
    } cases[] = {
        {"mlp", "adam", "0,1,2,3"}, {"mlp", "rmsprop", "0,1,2,3"}, {"conv", "adam", "2,3"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        nn_config_t net;
        optim_kind kind;
        zf_net(&net, cases[c].net);
        optim_parse_kind(cases[c].optim, &kind);
        // The reference: one learner on the concatenated batch (12 rows) of every step.
        train_config_t tc;
        zf_train_config(&tc, &net, kind, 12, 0, 0.3f);
        trainer_t *ref = trainer_new(&tc);
        size_t n = trainer_num_params(ref);
        float *init = xmalloc(n * sizeof(float));
        memcpy(init, trainer_online(ref)->data, n * sizeof(float));
        double ref_norms[50];
        zf_batch_t *b = xmalloc(sizeof *b);
        float prio[12];
        int clipped = 0;
        for (int i = 0; i < 50; i++) {
            zf_batch(b, &net, i, 12);
            train_batch_t tb = zf_slice(b, &net, 0, 12);
            train_stats_t st;
            trainer_step(ref, &tb, prio, &st);
            ref_norms[i] = st.grad_norm;
            clipped += st.grad_norm > 0.3f;
        }
        ck_assert_msg(clipped >= 5 && clipped <= 45, "clip active in %d of 50 steps", clipped);
        char prefix[1024], a_net[32], a_opt[32], a_stage[32], a_out[1100];
        snprintf(prefix, sizeof prefix, "%s/%s_%s", dir, cases[c].net, cases[c].optim);
        snprintf(a_net, sizeof a_net, "net=%s", cases[c].net);
        snprintf(a_opt, sizeof a_opt, "optim=%s", cases[c].optim);
        snprintf(a_stage, sizeof a_stage, "stage=%s", cases[c].stages);
        snprintf(a_out, sizeof a_out, "out=%s", prefix);
        // slot_min=1: stage 3 in blocks of rows (a quarter shard), not whole layers.
        const char *args[] = {a_net,      a_opt,        a_stage, "rows=12", "steps=50",
                              "clip=0.3", "slot_min=1", a_out,   NULL};
        ck_assert_int_eq(s_mpirun(2, NULL, args), 0); // every stage of the case in one run
        for (const char *st = cases[c].stages; *st; st++) {
            if (*st == ',') {
                continue;
            }
            char run[1100], path[1200];
            snprintf(run, sizeof run, "%s_s%c", prefix, *st);
            // Stage 3: rank 0 alone holds (gathers) the whole array.
            s_check_group(run, *st == '3' ? 1 : 2, trainer_online(ref)->data, init, n);
            snprintf(path, sizeof path, "%s.norms", run);
            double norms[64];
            ck_assert_int_eq(s_read_norms(path, norms, 64), 50);
            for (int i = 0; i < 50; i++) {
                ck_assert_msg(fabs(norms[i] - ref_norms[i]) <= 1e-4 * ref_norms[i],
                              "%s step %d: norm %g, single learner %g", run, i, norms[i],
                              ref_norms[i]);
            }
        }
        xfree(b);
        xfree(init);
        trainer_destroy(&ref);
    }
}
END_TEST

// Stage 3 on 3 ranks, whose shards cut layers at other places than 2 ranks' do, on the conv
// body (a conv layer, a linear layer, the head) in blocks of rows (slot_min=1: slots of a
// quarter shard, here a row or two): the single learner's result within the bounds above,
// and the prefetch (the next layer's all-gather left running during the
// current one's compute) changes nothing: the same bits as gathering each layer when asked.
START_TEST(test_mpi_stage3) {
    const char *dir = check_tmpdir();
    nn_config_t net;
    zf_net(&net, "conv");
    trainer_t *ref = s_ref_optim(&net, 50, OPTIM_ADAM), *init = s_ref_optim(&net, 0, OPTIM_ADAM);
    size_t n = trainer_num_params(ref);
    char out[2][1100], a_out[2][2400], path[2400];
    const char *pre[2] = {"prefetch=1", "prefetch=0"};
    float *got[2];
    for (int k = 0; k < 2; k++) {
        snprintf(out[k], sizeof out[k], "%s/s3_%d", dir, k);
        snprintf(a_out[k], sizeof a_out[k], "out=%s", out[k]);
        const char *args[] = {"net=conv", "stage=3", "rows=12",    "steps=50", "clip=0.3",
                              a_out[k],   pre[k],    "slot_min=1", NULL};
        ck_assert_int_eq(s_mpirun(3, NULL, args), 0);
        snprintf(path, sizeof path, "%s_s3", out[k]);
        s_check_group(path, 1, trainer_online(ref)->data, trainer_online(init)->data, n);
        snprintf(path, sizeof path, "%s_s3.r0", out[k]);
        got[k] = s_load_params(path, n);
        snprintf(path, sizeof path, "%s_s3.r1", out[k]);
        ck_assert_msg(access(path, F_OK) != 0, "rank 1 of stage 3 wrote a whole array");
    }
    ck_assert_msg(memcmp(got[0], got[1], n * sizeof(float)) == 0,
                  "stage 3 with the layer prefetch differs from without it");
    // A manifest rank 0 cannot write (its path is a directory: the rename fails after both
    // gathers): every rank reports the failure (zero_ranks exits 1), none hangs.
    char ck[1200], a_save[2400];
    snprintf(ck, sizeof ck, "%s/isdir.bin", dir);
    ck_assert_int_eq(mkdir(ck, 0755), 0);
    snprintf(a_save, sizeof a_save, "save=%s", ck);
    const char *save_args[] = {"net=conv", "stage=3", "rows=12", "steps=2", a_save, NULL};
    ck_assert_int_eq(s_mpirun(3, NULL, save_args), 1);
    // Only rank 0's file fails, at open (its .tmp is a directory): the shard files are
    // written, rank 0 still takes part in every gather, and every rank reports the failure.
    char tmpdir[1300];
    snprintf(ck, sizeof ck, "%s/opentmp.bin", dir);
    snprintf(tmpdir, sizeof tmpdir, "%s.tmp", ck);
    ck_assert_int_eq(mkdir(tmpdir, 0755), 0);
    snprintf(a_save, sizeof a_save, "save=%s", ck);
    ck_assert_int_eq(s_mpirun(3, NULL, save_args), 1);
    snprintf(tmpdir, sizeof tmpdir, "%s.s2.opt2of3", ck);
    ck_assert_msg(access(tmpdir, F_OK) == 0, "the shard files were not written: %s", tmpdir);
    ck_assert_int_ne(access(ck, F_OK), 0);
#if !CHECK_ASAN // ASan's shadow memory does not live within a data limit
    // Ranks of 1 GiB each (RLIMIT_DATA): a 68 M parameter network (84-8192-8192-dueling(18))
    // needs ~1.36 GB per rank in stage 0 and ~0.43 GB in stage 3 on 4 ranks. Stage 0 stops on
    // every rank with exit 1 (trainer_fits' refusal, not the allocator's abort); stage 3 fits.
    char fits_out[1200];
    snprintf(fits_out, sizeof fits_out, "%s/fits.txt", dir);
    const char *big0[] = {"net=wide:8192",         "stage=0", "rows=4", "steps=1",
                          "data_limit=1073741824", NULL};
    ck_assert_int_eq(s_mpirun(4, NULL, big0), 1);
    const char *big3[] = {"net=wide:8192",         "stage=3", "rows=4", "fits=1",
                          "data_limit=1073741824", NULL};
    ck_assert_int_eq(s_mpirun(4, fits_out, big3), 0);
    FILE *ff = fopen(fits_out, "r");
    ck_assert_ptr_nonnull(ff);
    int fr, fn, fs, fok, lines = 0;
    size_t need, np;
    while (fscanf(ff, "fits %d %d %d %d %zu %zu\n", &fr, &fn, &fs, &fok, &need, &np) == 6) {
        ck_assert(fn == 4 && fs == 3 && fok == 1 && np == 67969043); // H^2 + 105 H + 19
        ck_assert_uint_lt(need, 500u << 20);
        lines++;
    }
    fclose(ff);
    ck_assert_int_eq(lines, 4);
#endif
    xfree(got[0]);
    xfree(got[1]);
    trainer_destroy(&init);
    trainer_destroy(&ref);
}
END_TEST

// The bytes each rank's trainer asked the allocator for (train_memory_t, xalloc tallies in
// trainer_new_group), against ZeRO's sizes: the optimizer's m and v of the rank's shard, the
// shards covering the array once. Each buffer may be rounded up by up to 63 bytes
// (xaligned_alloc). glibc's own count (mallinfo2, in zero_ranks) must agree with the
// gradient bytes stage 2 saves; under ASan its allocator is not glibc's (mallinfo2 sees
// nothing) and that cross-check is skipped, saying so.
START_TEST(test_mpi_memory) {
    const char *dir = check_tmpdir();
    nn_config_t net;
    zf_net(&net, "large");
    const size_t full_opt = 2 * nn_num_params(&net) * sizeof(float);
    const size_t pad = 2 * (XALLOC_ALIGN - 1); // m and v, each rounded up
    int heap_checked = 0;
    int nps[] = {1, 2, 4};
    const size_t P = nn_num_params(&net);
    for (int k = 0; k < 3; k++) {
        int N = nps[k];
        size_t opt[3][4], grad[3][4], heap[3][4], par[3][4], gat[3][4];
        char out[1100];
        snprintf(out, sizeof out, "%s/mem_%d.txt", dir, N);
        const char *args[] = {"net=large", "stage=1,2,3", "mem=1", "rows=4", NULL};
        ck_assert_int_eq(s_mpirun(N, out, args), 0); // the three stages in one run
        FILE *f = fopen(out, "r");
        ck_assert_ptr_nonnull(f);
        int rank, size, st, lines = 0;
        size_t o, g, p, h, ga, tg, wk;
        while (fscanf(f, "mem %d %d %d %zu %zu %zu %zu %zu %zu %zu\n", &rank, &size, &st, &o, &g,
                      &p, &h, &ga, &tg, &wk) == 10) {
            ck_assert(2 * tg >= p && 2 * tg <= p + XALLOC_ALIGN && wk > 0);
            ck_assert(size == N && st >= 1 && st <= 3 && rank >= 0 && rank < N);
            opt[st - 1][rank] = o, grad[st - 1][rank] = g, heap[st - 1][rank] = h;
            par[st - 1][rank] = p, gat[st - 1][rank] = ga;
            lines++;
        }
        fclose(f);
        ck_assert_int_eq(lines, 3 * N);
        // Stage 3: each rank holds its shard of online and target, two slots per network (a
        // block of rows each, about the shard / ZERO_PIECE_DIV), and no whole copy (rank 0 neither: what
        // it publishes is gathered into the weights message, checkpoints a layer at a time).
        size_t sum3 = 0;
        for (int r = 0; r < N; r++) {
            sum3 += par[2][r];
            ck_assert_msg(par[2][r] <= 2 * sizeof(float) * group_shard_max(P, N) + pad,
                          "N %d rank %d: %zu parameter bytes in stage 3", N, r, par[2][r]);
            ck_assert_uint_eq(par[1][r] >= 2 * P * sizeof(float), 1); // stage 2: whole copies
            // Four slots of whole rows within the capacity (a row of 513 floats at most past
            // it, a row short of it at least), and the slots' block tables.
            size_t largest = 512 * 513; // fc2's w and b: under ZERO_SLOT_MIN, a whole layer
            size_t cap = APEX_MAX(APEX_MAX(group_shard_max(P, N) / ZERO_PIECE_DIV, largest),
                                  nn_piece_min(&net));
            size_t lo = 4 * (cap - 513) * sizeof(float), hi = 4 * (cap + 513) * sizeof(float);
            size_t tables = 16 * (size_t)N * sizeof(int) + 24 * XALLOC_ALIGN;
            ck_assert_msg(gat[2][r] >= lo && gat[2][r] <= hi + tables,
                          "N %d rank %d: %zu bytes of gathered blocks, want %zu..%zu", N, r,
                          gat[2][r], lo, hi + tables);
            ck_assert_uint_eq(gat[1][r], 0);
        }
        ck_assert_msg(sum3 >= 2 * P * sizeof(float) && sum3 <= 2 * P * sizeof(float) + N * pad,
                      "N %d: stage 3's parameter shards sum to %zu bytes", N, sum3);
        (void)heap; // read only by the heap cross-check, which ASan builds leave out
        for (int stage = 1; stage <= 2; stage++) {
            size_t sum = 0;
            for (int r = 0; r < N; r++) {
                sum += opt[stage - 1][r];
                // A shard is full / N rounded up: the first num_params % N hold one more.
                ck_assert_msg(opt[stage - 1][r] <=
                                  2 * sizeof(float) * group_shard_max(nn_num_params(&net), N) + pad,
                              "N %d stage %d rank %d: %zu optimizer bytes allocated", N, stage, r,
                              opt[stage - 1][r]);
            }
            ck_assert_msg(sum >= full_opt && sum <= full_opt + (size_t)N * pad,
                          "N %d stage %d: %zu optimizer bytes over the ranks, want %zu (+ padding)",
                          N, stage, sum, full_opt);
        }
        for (int r = 0; r < N; r++) {
            if (N > 1) {
                ck_assert_uint_lt(grad[1][r], grad[0][r]);
#if !CHECK_ASAN
                // What glibc saw: stage 1 minus stage 2 within 2% (+ pages) of the saving.
                double saved = (double)heap[0][r] - (double)heap[1][r];
                double want = (double)grad[0][r] - (double)grad[1][r];
                ck_assert_msg(fabs(saved - want) <= 0.02 * want + 16384,
                              "N %d rank %d: glibc's heap shrank by %g bytes, the tallies %g", N, r,
                              saved, want);
                // And stage 2 minus stage 3: the parameters' saving less the slots.
                saved = (double)heap[1][r] - (double)heap[2][r];
                want = (double)par[1][r] - (double)(par[2][r] + gat[2][r]);
                ck_assert_msg(fabs(saved - want) <= 0.02 * fabs(want) + 16384,
                              "N %d rank %d: stage 3's heap is %g bytes below stage 2's, the "
                              "tallies say %g",
                              N, r, saved, want);
                heap_checked++;
#endif
            } else {
                // One rank's shard is everything: stage 2 adds its piece buffer.
                ck_assert_uint_le(grad[1][r], grad[0][r] + grad[0][r] / ZERO_PIECE_DIV + 64);
            }
        }
    }
    if (CHECK_ASAN) {
        fprintf(stderr, "check_group: test_mpi_memory: the heap cross-check (mallinfo2) "
                        "SKIPPED: under ASan glibc's counters do not see the allocations\n");
    } else {
        ck_assert_int_eq(heap_checked, 2 + 4); // every rank of N = 2 and N = 4
    }
}
END_TEST

// A single learner's (this process) parameters after `steps` steps from its start.
static trainer_t *s_ref(const nn_config_t *net, int steps) {
    return s_ref_optim(net, steps, OPTIM_ADAM);
}

// np ranks of stage `stage` load the checkpoint dir/file, train 10 more steps and write
// their parameters under dir/out: they must end where the single learner (want) ends.
static void s_load_and_check(const char *dir, const char *file, const char *out, int stage, int np,
                             const float *want, const float *theta0, size_t n) {
    char a_stage[32], a_load[1200], a_out[1200], prefix[1100], path[1300];
    snprintf(a_stage, sizeof a_stage, "stage=%d", stage);
    snprintf(a_load, sizeof a_load, "load=%s/%s", dir, file);
    snprintf(prefix, sizeof prefix, "%s/%s", dir, out);
    snprintf(a_out, sizeof a_out, "out=%s", prefix);
    const char *args[] = {a_stage, "steps=10", "rows=12", "clip=0.3", a_load, a_out, NULL};
    ck_assert_int_eq(s_mpirun(np, NULL, args), 0);
    snprintf(path, sizeof path, "%s_s%d", prefix, stage);
    s_check_group(path, stage == 3 ? 1 : np, want, theta0, n); // stage 3: rank 0's gather
}

START_TEST(test_mpi_reshard) {
    const char *dir = check_tmpdir();
    nn_config_t net;
    zf_net(&net, "mlp");
    trainer_t *ref = s_ref(&net, 20), *init = s_ref(&net, 0);
    size_t n = trainer_num_params(ref);
    const float *want = trainer_online(ref)->data, *theta0 = trainer_online(init)->data;
    char ck[1100], a_save[1200], path[1300];
    // (a) 2 ranks of stage 2 save; 3 ranks of stage 1 load and go on.
    snprintf(ck, sizeof ck, "%s/a.bin", dir);
    snprintf(a_save, sizeof a_save, "save=%s", ck);
    const char *save_args[] = {"stage=2", "steps=10", "rows=12", "clip=0.3", a_save, NULL};
    ck_assert_int_eq(s_mpirun(2, NULL, save_args), 0);
    for (int r = 0; r < 2; r++) {
        snprintf(path, sizeof path, "%s.s10.opt%dof2", ck, r);
        ck_assert_msg(access(path, R_OK) == 0, "no shard %s", path);
    }
    // apex-eval's reader takes the manifest for a checkpoint; a shard is not one.
    ckpt_header_t hdr;
    float *online = xmalloc(n * sizeof(float));
    ck_assert_int_eq(ckpt_read_online(ck, &net, &hdr, online), APEX_OK);
    ck_assert_uint_eq(hdr.n_arrays, 2);
    ck_assert_uint_eq(hdr.extra.user[CKPT_USER_OPT_SHARDS], 2);
    ck_assert_int_ne(ckpt_read_online(path, &net, &hdr, online), APEX_OK);
    s_load_and_check(dir, "a.bin", "a3", 1, 3, want, theta0, n);
    // (b) 2 ranks of stage 1 save; a single learner loads.
    snprintf(ck, sizeof ck, "%s/b.bin", dir);
    snprintf(a_save, sizeof a_save, "save=%s", ck);
    save_args[0] = "stage=1";
    ck_assert_int_eq(s_mpirun(2, NULL, save_args), 0);
    train_config_t tc;
    zf_train_config(&tc, &net, OPTIM_ADAM, 12, 0, 0.3f);
    trainer_t *single = trainer_new(&tc);
    ck_assert_int_eq(trainer_load(single, ck, NULL), APEX_OK);
    ck_assert_int_eq(trainer_steps(single), 10);
    s_steps(single, &net, 10, 12);
    ck_assert_double_le(s_rel(trainer_online(single)->data, want, n), 1e-5);
    // (c) a single learner saves (moments in the file); 2 ranks of stage 2 load.
    snprintf(ck, sizeof ck, "%s/c.bin", dir);
    trainer_t *half = s_ref(&net, 10);
    ck_assert_int_eq(trainer_save(half, ck, NULL), APEX_OK);
    s_load_and_check(dir, "c.bin", "c2", 2, 2, want, theta0, n);
    // A later single-learner checkpoint over a sharded one removes the stale shards.
    snprintf(ck, sizeof ck, "%s/a.bin", dir);
    ck_assert_int_eq(trainer_save(half, ck, NULL), APEX_OK);
    snprintf(path, sizeof path, "%s.s10.opt0of2", ck);
    ck_assert_int_ne(access(path, F_OK), 0);
    // (d) stage 3 -> 1: 2 ranks of stage 3 save (online and target gathered to rank 0 one
    // after the other, written in steps); apex-eval's reader takes the manifest; 3 ranks of
    // stage 1 load it and go on.
    snprintf(ck, sizeof ck, "%s/d.bin", dir);
    snprintf(a_save, sizeof a_save, "save=%s", ck);
    save_args[0] = "stage=3";
    ck_assert_int_eq(s_mpirun(2, NULL, save_args), 0);
    ck_assert_int_eq(ckpt_read_online(ck, &net, &hdr, online), APEX_OK);
    ck_assert_uint_eq(hdr.n_arrays, 2);
    ck_assert_uint_eq(hdr.extra.user[CKPT_USER_OPT_SHARDS], 2);
    ck_assert_uint_eq(hdr.learner_step, 10);
    ck_assert_double_le(s_rel(online, trainer_online(half)->data, n), 1e-5);
    s_load_and_check(dir, "d.bin", "d1", 1, 3, want, theta0, n);
    // (e) stage 1 -> 3: (b)'s 2-rank stage 1 set, loaded by 3 ranks of stage 3.
    s_load_and_check(dir, "b.bin", "e3", 3, 3, want, theta0, n);
    // (f) the single learner's file (moments inside, 4 arrays), read in ranges by 3 ranks of
    // stage 3.
    s_load_and_check(dir, "c.bin", "f3", 3, 3, want, theta0, n);
    xfree(online);
    trainer_destroy(&half);
    trainer_destroy(&single);
    trainer_destroy(&init);
    trainer_destroy(&ref);
}
END_TEST

// The DPG trainer's group (ZeRO stages 0, 1 and 2, issue #28): 2 ranks of 6 rows against one
// learner on the 12, 50 steps of zero_fixture.h's DPG batches (the smoothing noise through
// the batch hook, so each rank's rows get the reference's draws), Adam and RMSProp, the
// critics' norm clip active in some steps: the same bounds as test_mpi_equivalence, the
// critics' and the policy's norms of every step, identical ranks. Then the group's
// checkpoint across stages and rank counts: 2 ranks in stage 2 run 25 steps and save (the
// moments gathered, rank 0 writes), 3 ranks in stage 1 load it and run 25 more: the same end.
// And the memory, as allocated: in stages 1 and 2 each rank holds about half the moments of
// stage 0; in stage 2 about half the gradient too, plus its piece buffer.
START_TEST(test_mpi_dpg_equivalence) {
    const char *dir = check_tmpdir();
    const char *optims[] = {"adam", "rmsprop"};
    for (size_t c = 0; c < sizeof optims / sizeof optims[0]; c++) {
        optim_kind kind;
        optim_parse_kind(optims[c], &kind);
        train_dpg_config_t tc;
        zf_dpg_config(&tc, kind, 12);
        train_dpg_t *ref = train_dpg_new(&tc);
        ck_assert_ptr_nonnull(ref);
        size_t n = train_dpg_num_params(ref);
        float *init = xmalloc(n * sizeof(float));
        memcpy(init, train_dpg_online(ref), n * sizeof(float));
        double ref_norms[50][2];
        zf_dpg_batch_t *b = xmalloc(sizeof *b);
        float prio[12];
        int clipped = 0, policy_steps = 0;
        for (int i = 0; i < 50; i++) {
            zf_dpg_batch(b, i, 12);
            train_dpg_batch_t tb = zf_dpg_slice(b, 0, 12);
            train_dpg_stats_t st;
            train_dpg_step(ref, &tb, prio, &st);
            ref_norms[i][0] = st.critic_grad_norm;
            ref_norms[i][1] = st.actor_grad_norm;
            clipped += st.critic_grad_norm > tc.grad_clip;
            policy_steps += st.policy_step;
        }
        ck_assert_msg(clipped >= 5 && clipped <= 45, "clip active in %d of 50 steps", clipped);
        ck_assert_int_eq(policy_steps, 25);
        char prefix[1024], a_opt[32], a_out[1100], a_save[1100], a_load[1100];
        snprintf(prefix, sizeof prefix, "%s/dpg_%s", dir, optims[c]);
        snprintf(a_opt, sizeof a_opt, "optim=%s", optims[c]);
        snprintf(a_out, sizeof a_out, "out=%s", prefix);
        const char *args[] = {"net=dpg", a_opt, "stage=0,1,2", "rows=12", "steps=50", a_out, NULL};
        ck_assert_int_eq(s_mpirun(2, NULL, args), 0);
        char run[1100], path[1200];
        for (int stage = 0; stage <= 2; stage++) {
            snprintf(run, sizeof run, "%s_s%d", prefix, stage);
            s_check_group(run, 2, train_dpg_online(ref), init, n);
            snprintf(path, sizeof path, "%s.norms", run);
            double norms[128];
            ck_assert_int_eq(s_read_norms(path, norms, 128), 100);
            for (int i = 0; i < 50; i++) {
                for (int k = 0; k < 2; k++) {
                    ck_assert_msg(fabs(norms[2 * i + k] - ref_norms[i][k]) <=
                                      1e-4 * ref_norms[i][k],
                                  "%s step %d: %s norm %g, single learner %g", run, i,
                                  k ? "policy" : "critics", norms[2 * i + k], ref_norms[i][k]);
                }
            }
        }
        // Checkpoint and resume as a group.
        snprintf(a_save, sizeof a_save, "save=%s/dpg_%s.ckpt", dir, optims[c]);
        snprintf(a_load, sizeof a_load, "load=%s/dpg_%s.ckpt", dir, optims[c]);
        snprintf(a_out, sizeof a_out, "out=%s_resumed", prefix);
        const char *first[] = {"net=dpg", a_opt, "stage=2", "rows=12", "steps=25", a_save, NULL};
        const char *second[] = {"net=dpg",  a_opt,  "stage=1", "rows=12",
                                "steps=25", a_load, a_out,     NULL};
        ck_assert_int_eq(s_mpirun(2, NULL, first), 0);
        ck_assert_int_eq(s_mpirun(3, NULL, second), 0);
        snprintf(run, sizeof run, "%s_resumed_s1", prefix);
        s_check_group(run, 3, train_dpg_online(ref), init, n);
        xfree(b);
        xfree(init);
        train_dpg_destroy(&ref);
    }
    // Per rank, as the allocator was asked (each block rounded up to 64 bytes: at most 64
    // more per allocation). Moments: stage 0 the whole model's two, stages 1 and 2 the
    // rank's shards' (each range split in two: at most one float more than half of each).
    // Gradient: stages 0 and 1 the whole model's; stage 2 the rank's shards and a piece
    // buffer of a quarter of the larger shard (or the networks' widest piece), so under 3/4.
    // Parameters (online and target, replicated): the same in every stage.
    char out[1100], line[256];
    snprintf(out, sizeof out, "%s/dpgmem.txt", dir);
    const char *margs[] = {"net=dpg", "stage=0,1,2", "rows=12", "mem=1", NULL};
    ck_assert_int_eq(s_mpirun(2, out, margs), 0);
    FILE *f = fopen(out, "r");
    ck_assert_ptr_nonnull(f);
    size_t opt[3][2] = {{0}}, grad[3][2] = {{0}}, par[3][2] = {{0}}, total = 0;
    int seen = 0;
    while (fgets(line, sizeof line, f)) {
        int rank, size, stage;
        size_t bytes, np, gb, pb;
        if (sscanf(line, "dpgmem %d %d %d %zu %zu %zu %zu", &rank, &size, &stage, &bytes, &np, &gb,
                   &pb) == 7) {
            ck_assert(rank >= 0 && rank < 2 && stage >= 0 && stage <= 2 && size == 2);
            opt[stage][rank] = bytes;
            grad[stage][rank] = gb;
            par[stage][rank] = pb;
            total = np;
            seen++;
        }
    }
    fclose(f);
    ck_assert_int_eq(seen, 6);
    const size_t F = sizeof(float), full = total * F;
    for (int r = 0; r < 2; r++) {
        ck_assert(opt[0][r] >= 2 * full && opt[0][r] <= 2 * full + 2 * 64);
        for (int stage = 1; stage <= 2; stage++) {
            ck_assert_uint_le(opt[stage][r], 2 * (total / 2 + 2) * F + 2 * 64);
            ck_assert_uint_ge(opt[stage][r], 2 * (total / 2 - 2) * F);
        }
        for (int stage = 0; stage <= 1; stage++) {
            ck_assert(grad[stage][r] >= full && grad[stage][r] <= full + 64);
        }
        ck_assert_msg(grad[2][r] >= (total / 2 - 2) * F && grad[2][r] < full * 3 / 4,
                      "rank %d: stage 2 gradient %zu bytes of a %zu-byte model", r, grad[2][r],
                      full);
        for (int stage = 0; stage <= 2; stage++) {
            ck_assert(par[stage][r] >= 2 * full && par[stage][r] <= 2 * full + 2 * 64);
        }
    }
}
END_TEST

Suite *group_suite(void) {
    Suite *s = suite_create("group");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_shard_range);
    tcase_add_test(tc, test_launch_size);
    tcase_add_test(tc, test_single_without_mpi);
    tcase_add_test(tc, test_pieces_equal_backward);
    tcase_add_test(tc, test_fetched_network);
    tcase_add_test(tc, test_size1_stages);
    suite_add_tcase(s, tc);
    TCase *mpi = tcase_create("mpi");
    tcase_set_timeout(mpi, 240);
    tcase_add_test(mpi, test_mpi_equivalence);
    tcase_add_test(mpi, test_mpi_stage3);
    tcase_add_test(mpi, test_mpi_memory);
    tcase_add_test(mpi, test_mpi_reshard);
    tcase_add_test(mpi, test_mpi_dpg_equivalence);
    suite_add_tcase(s, mpi);
    return s;
}
