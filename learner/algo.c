// algo.c: see algo.h. The dispatch, and the DQN kind: train.h's trainer as it always ran.
#define LOG_MODULE "learner"
#include "algo.h"
#include "bf16.h"
#include "blas.h"
#include "cpu.h"
#include "group.h"
#include "log.h"

#include <stdio.h>
#include <string.h>

static void s_dqn_destroy(void *impl) {
    trainer_t *t = impl;
    trainer_destroy(&t);
}

static float s_dqn_step(void *impl, const train_batch_t *b, float *prio, metrics_t *mt) {
    train_stats_t st;
    float loss = trainer_step(impl, b, prio, &st);
    mt->train_ns += st.forward_ns + st.backward_ns;
    mt->optim_ns += st.optim_ns;
    return loss;
}

static int64_t s_dqn_steps(const void *impl) { return trainer_steps(impl); }
static size_t s_dqn_published_n(const void *impl) { return trainer_num_params(impl); }
static void s_dqn_publish(void *impl, void *dst) { trainer_gather_into(impl, 0, dst); }
static int s_dqn_save(void *impl, const char *path, const ckpt_extra_t *x) {
    return trainer_save(impl, path, x);
}
static int s_dqn_load(void *impl, const char *path, ckpt_extra_t *x) {
    return trainer_load(impl, path, x);
}
static void s_dqn_memory(const void *impl, train_memory_t *out) { trainer_memory(impl, out); }

static void s_dqn_describe(const void *impl, const apex_config_t *cfg, char *buf, size_t n) {
    char lr[80];
    if (cfg->learner.lr_steps > 0) {
        snprintf(lr, sizeof lr, "lr %g -> %g over %lld updates (now %g)", cfg->learner.lr,
                 cfg->learner.lr_end, (long long)cfg->learner.lr_steps, (double)trainer_lr(impl));
    } else {
        snprintf(lr, sizeof lr, "lr %g", cfg->learner.lr);
    }
    snprintf(buf, n, "%zu parameters, batch %lld, prefetch %lld x %lld batches per request, %s, %s",
             trainer_num_params(impl), (long long)cfg->learner.batch_size,
             (long long)cfg->learner.prefetch, (long long)cfg->learner.batches_per_request,
             cfg->learner.optimizer == CONFIG_OPTIM_RMSPROP ? "rmsprop" : "adam", lr);
}

const algo_ops_t algo_dqn_ops = {.name = "dqn",
                                 .destroy = s_dqn_destroy,
                                 .step = s_dqn_step,
                                 .steps = s_dqn_steps,
                                 .published_n = s_dqn_published_n,
                                 .publish = s_dqn_publish,
                                 .save = s_dqn_save,
                                 .load = s_dqn_load,
                                 .memory = s_dqn_memory,
                                 .describe = s_dqn_describe};

int algo_init(algo_t *a, const apex_config_t *cfg, struct group *group) {
    memset(a, 0, sizeof *a);
    if (cfg->env.action_dim > 0) {
        train_dpg_config_t dc;
        dpg_config_from_run(&dc, cfg);
        a->impl = train_dpg_new_group(&dc, group);
        a->ops = &algo_dpg_ops;
    } else {
        train_config_t tc;
        train_config_from_run(&tc, cfg);
        // Rank 0 also holds the weights message it serves, and the previous one until its
        // queued answers are sent: part of what its memory must fit (trainer_fits).
        tc.rank0_extra_bytes = (int64_t)(2 * sizeof(float) * nn_run_weights_params(cfg));
        a->impl = trainer_new_group(&tc, group);
        a->ops = &algo_dqn_ops;
    }
    if (!a->impl) {
        memset(a, 0, sizeof *a);
        return -1; // logged; a precision this CPU cannot run among the reasons
    }
    // What the products run on, once at start-up: the trainer has taken the same decision.
    cpu_features_t cpu;
    cpu_detect(&cpu);
    blas_gemm_fn gemm;
    char msg[512];
    train_precision_check(cfg->learner.precision, &cpu, &gemm, msg, sizeof msg);
    log_info("%s; kernel: %s %s", msg, gemm ? "apex's bf16 GEMM on" : "OpenBLAS",
             gemm ? bf16_kernel_name(bf16_gemm_kernel()) : blas_core());
    if (gemm && bf16_kernel_slow(&cpu, bf16_gemm_kernel())) {
        log_warn("[learner] precision = bf16: this CPU has AMX but Linux did not grant this "
                 "process its tile state (arch_prctl, Linux 5.16 and later), so bf16 runs on "
                 "AVX512_BF16, which on Intel CPUs is slower than fp32; set [learner] "
                 "precision = fp32, or run a newer kernel");
    }
    return 0;
}

void algo_fini(algo_t *a) {
    if (a->impl) {
        a->ops->destroy(a->impl);
    }
    memset(a, 0, sizeof *a);
}

struct trainer *algo_trainer(const algo_t *a) {
    return a->ops == &algo_dqn_ops ? a->impl : NULL;
}
train_dpg_t *algo_dpg(const algo_t *a) { return a->ops == &algo_dpg_ops ? a->impl : NULL; }
