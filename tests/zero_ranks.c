// zero_ranks: one rank of a learner group on fixed batches, for tests/check_group.c, which
// runs it as `mpirun -np N build/tests/zero_ranks key=value ...`. Not a daemon: a trainer
// over learner/group.h and the batches of tests/zero_fixture.h, nothing else.
//
//   net=mlp|conv|large|wide:H|dpg  stage=S[,S...] (0-3; each stage in turn, from the same
//   start; dpg: the DPG trainer of zero_fixture.h, whose norms file holds
//   the critics' norm and the policy's, two per step)
//   optim=adam|rmsprop  rows=R (whole batch of a step, a
//   multiple of N; rank r trains rows [r R/N, (r+1) R/N))  steps=K  clip=C
//   load=PATH (trainer_load first)  save=PATH (trainer_save after the steps)
//   out=PATH: every rank writes PATH_s<stage>.r<rank> (its online parameters, raw floats; in
//   stage 3 rank 0 alone, gathered) and rank 0 PATH_s<stage>.norms (one grad norm per step)
//   prefetch=0: stage 3 gathers each layer when asked, without the overlap (default 1)
//   fits=1: only trainer_fits: print "fits rank size stage ok need_bytes num_params", exit 0
//   when the group can allocate the trainer, else 1
//   fixed=1: every step trains on step 0's batch; print=1: rank 0 prints "loss step value"
//   slot_min=K: stage 3's least slot floats (train.h zero_slot_min; 1: blocks of rows even
//   for the test networks)
//   lr=X, target=K: the learning rate and target_update instead of the fixture's (3e-3, 7)
//   data_limit=BYTES: RLIMIT_DATA of each rank after MPI_Init (a rank's memory budget)
//   time=1: rank 0 prints "time size stage ms_per_step comm_fraction" after the steps
//   mem=1: print "mem rank size stage opt_bytes grad_bytes param_bytes heap_bytes gather_bytes
//   target_bytes work_bytes" per rank (train_memory_t)
//   for a new trainer (heap_bytes: what trainer_new_group allocated, from mallinfo2; 0 under
//   ASan, whose allocator glibc's counters do not see) and stop; net=dpg: "dpgmem rank size
//   stage opt_bytes num_params grad_bytes param_bytes" (train_dpg_memory).
// Exit status 0, or 1 with a message on stderr.
#include "apex.h"
#include "clock.h"
#include "group.h"
#include "log.h"
#include "parse.h"
#include "train.h"
#include "zero_fixture.h"

#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

typedef struct {
    const char *net, *optim, *load, *save, *out, *stages;
    int stage, rows, steps, mem, prefetch, fits, fixed, print, time;
    int64_t data_limit;
    double lr; // 0: the fixture's
    int target, slot_min;
    float clip;
} s_args;

static int s_parse(int argc, char **argv, s_args *a) {
    *a = (s_args){.net = "mlp",
                  .optim = "adam",
                  .stages = "0",
                  .rows = 12,
                  .steps = 50,
                  .clip = 0.3f,
                  .prefetch = 1};
    for (int i = 1; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) {
            return -1;
        }
        *eq = '\0';
        const char *k = argv[i], *v = eq + 1;
        int *di = strcmp(k, "rows") == 0       ? &a->rows
                  : strcmp(k, "steps") == 0    ? &a->steps
                  : strcmp(k, "mem") == 0      ? &a->mem
                  : strcmp(k, "prefetch") == 0 ? &a->prefetch
                  : strcmp(k, "fits") == 0     ? &a->fits
                  : strcmp(k, "fixed") == 0    ? &a->fixed
                  : strcmp(k, "print") == 0    ? &a->print
                  : strcmp(k, "time") == 0     ? &a->time
                                               : NULL;
        if (strcmp(k, "net") == 0) {
            a->net = v;
        } else if (strcmp(k, "optim") == 0) {
            a->optim = v;
        } else if (strcmp(k, "load") == 0) {
            a->load = v;
        } else if (strcmp(k, "save") == 0) {
            a->save = v;
        } else if (strcmp(k, "out") == 0) {
            a->out = v;
        } else if (strcmp(k, "stage") == 0) {
            a->stages = v;
        } else if (di) {
            int64_t x;
            if (parse_int64(v, INT_MIN, INT_MAX, &x) != 0) {
                return -1;
            }
            *di = (int)x;
        } else if (strcmp(k, "data_limit") == 0) {
            if (parse_int64(v, 1, INT64_MAX, &a->data_limit) != 0) {
                return -1;
            }
        } else if (strcmp(k, "lr") == 0) {
            a->lr = atof(v);
        } else if (strcmp(k, "target") == 0) {
            a->target = atoi(v);
        } else if (strcmp(k, "slot_min") == 0) {
            a->slot_min = atoi(v);
        } else if (strcmp(k, "clip") == 0) {
            a->clip = (float)atof(v);
        } else {
            return -1;
        }
    }
    return 0;
}

static int s_write(const char *path, const void *data, size_t bytes) {
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(data, 1, bytes, f) == bytes;
    ok = f && fclose(f) == 0 && ok;
    return ok ? 0 : -1;
}

// out=PATH: rank 0's file of one grad norm line per step (NULL without out or on rank > 0).
static FILE *s_norms_file(const s_args *a, int rank) {
    char path[1024];
    if (!a->out || rank != 0) {
        return NULL;
    }
    snprintf(path, sizeof path, "%s_s%d.norms", a->out, a->stage);
    return fopen(path, "w");
}

// out=PATH: this rank's parameters, raw floats, at PATH_s<stage>.r<rank>.
static int s_write_params(const s_args *a, int rank, const float *data, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s_s%d.r%d", a->out, a->stage, rank);
    return s_write(path, data, n * sizeof(float));
}

static size_t s_heap(void) {
#if defined(__SANITIZE_ADDRESS__)
    return 0;
#else
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd; // in use: arena chunks + mmapped blocks
#endif
}

static int s_run_dpg(group_t *g, const s_args *a) {
    int N = group_size(g), rank = group_rank(g);
    optim_kind kind;
    if (optim_parse_kind(a->optim, &kind) != 0 || a->rows % N || a->rows > ZF_MAX_ROWS ||
        a->stage > 2) {
        fprintf(stderr, "zero_ranks: bad arguments for net=dpg\n");
        return 1;
    }
    int per = a->rows / N;
    train_dpg_config_t tc;
    zf_dpg_config(&tc, kind, per);
    tc.zero_stage = a->stage;
    train_dpg_t *t = train_dpg_new_group(&tc, g);
    if (t && a->mem) {
        train_memory_t m;
        train_dpg_memory(t, &m);
        printf("dpgmem %d %d %d %zu %zu %zu %zu\n", rank, N, a->stage, m.opt_bytes,
               train_dpg_num_params(t), m.grad_bytes, m.param_bytes);
        train_dpg_destroy(&t);
        return 0;
    }
    if (!t || (a->load && train_dpg_load(t, a->load, NULL) != APEX_OK)) {
        train_dpg_destroy(&t);
        return 1;
    }
    zf_dpg_batch_t *b = xmalloc(sizeof *b);
    float prio[ZF_MAX_ROWS];
    FILE *norms = s_norms_file(a, rank);
    for (int i = 0; i < a->steps; i++) {
        zf_dpg_batch(b, train_dpg_steps(t), a->rows);
        train_dpg_batch_t tb = zf_dpg_slice(b, rank * per, per);
        train_dpg_stats_t st;
        train_dpg_step(t, &tb, prio, &st);
        if (norms) {
            fprintf(norms, "%.9g %.9g\n", st.critic_grad_norm, st.actor_grad_norm);
        }
    }
    if (norms) {
        fclose(norms);
    }
    xfree(b);
    int rc = 0;
    if (a->save && train_dpg_save(t, a->save, NULL) != APEX_OK) {
        rc = 1;
    }
    if (a->out) {
        rc |= s_write_params(a, rank, train_dpg_online(t), train_dpg_num_params(t));
    }
    train_dpg_destroy(&t);
    return rc;
}

static int s_run(group_t *g, const s_args *a) {
    if (strcmp(a->net, "dpg") == 0) {
        return s_run_dpg(g, a);
    }
    nn_config_t net;
    optim_kind kind;
    int N = group_size(g), rank = group_rank(g);
    if (zf_net(&net, a->net) != 0 || optim_parse_kind(a->optim, &kind) != 0 || a->rows % N ||
        a->rows > ZF_MAX_ROWS) {
        fprintf(stderr, "zero_ranks: bad arguments\n");
        return 1;
    }
    int per = a->rows / N;
    train_config_t tc;
    zf_train_config(&tc, &net, kind, per, a->stage, a->clip);
    tc.zero_prefetch = a->prefetch;
    if (a->lr > 0) {
        tc.optim.lr = (float)a->lr;
    }
    if (a->target > 0) {
        tc.target_update = a->target;
    }
    tc.zero_slot_min = a->slot_min;
    if (a->fits) {
        size_t need;
        int ok = trainer_fits(&tc, g, &need) == APEX_OK;
        printf("fits %d %d %d %d %zu %zu\n", rank, N, a->stage, ok, need, nn_num_params(&net));
        return ok ? 0 : 1;
    }
    size_t heap0 = s_heap();
    trainer_t *t = trainer_new_group(&tc, g);
    size_t heap1 = s_heap();
    if (!t) {
        return 1;
    }
    if (a->mem) {
        train_memory_t m;
        trainer_memory(t, &m);
        printf("mem %d %d %d %zu %zu %zu %zu %zu %zu %zu\n", rank, N, a->stage, m.opt_bytes,
               m.grad_bytes, m.param_bytes, heap1 - heap0, m.gather_bytes, m.target_bytes,
               m.work_bytes);
        trainer_destroy(&t);
        return 0;
    }
    if (a->load && trainer_load(t, a->load, NULL) != APEX_OK) {
        trainer_destroy(&t);
        return 1;
    }
    zf_batch_t *b = xmalloc(sizeof *b);
    float prio[ZF_MAX_ROWS];
    FILE *norms = s_norms_file(a, rank);
    int64_t t0 = clock_now_ns(), c0 = group_comm_ns(g);
    for (int i = 0; i < a->steps; i++) {
        zf_batch(b, &net, a->fixed ? 0 : trainer_steps(t), a->rows);
        train_batch_t tb = zf_slice(b, &net, rank * per, per);
        train_stats_t st;
        float loss = trainer_step(t, &tb, prio, &st);
        if (norms) {
            fprintf(norms, "%.9g\n", st.grad_norm);
        }
        if (a->print && rank == 0) {
            printf("loss %d %.9g\n", i, (double)loss);
            fflush(stdout);
        }
    }
    if (a->time && rank == 0 && a->steps > 0) {
        int64_t ns = clock_now_ns() - t0;
        printf("time %d %d %.3f %.4f\n", N, a->stage, ns * 1e-6 / a->steps,
               (double)(group_comm_ns(g) - c0) / (double)ns);
    }
    if (norms) {
        fclose(norms);
    }
    xfree(b);
    int rc = 0;
    if (a->save && trainer_save(t, a->save, NULL) != APEX_OK) {
        rc = 1;
    }
    if (a->out) {
        // Stage 3: gathered to rank 0 (a collective: every rank calls it), which alone writes.
        size_t n = trainer_num_params(t);
        float *x = a->stage == 3 && rank != 0 ? NULL : xmalloc(n * sizeof(float));
        trainer_gather_into(t, 0, x);
        if (x) {
            rc |= s_write_params(a, rank, x, n);
        }
        xfree(x);
    }
    trainer_destroy(&t);
    return rc;
}

int main(int argc, char **argv) {
    log_set_role("zero_ranks");
    s_args a;
    if (s_parse(argc, argv, &a) != 0) {
        fprintf(stderr, "usage: zero_ranks key=value... (see tests/zero_ranks.c)\n");
        return 1;
    }
    group_t *g = group_new();
    if (!g) {
        return 1;
    }
    if (a.data_limit > 0) { // after MPI_Init: the limit is the trainer's to meet
        struct rlimit rl = {(rlim_t)a.data_limit, (rlim_t)a.data_limit};
        if (setrlimit(RLIMIT_DATA, &rl) != 0) {
            perror("zero_ranks: setrlimit");
            return 1;
        }
    }
    int rc = 0;
    for (const char *p = a.stages; *p && rc == 0; p++) {
        if (*p >= '0' && *p <= '3') {
            a.stage = *p - '0';
            rc = s_run(g, &a);
        }
    }
    group_destroy(&g);
    return rc;
}
