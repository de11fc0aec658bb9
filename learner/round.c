// round.c: see round.h.
#define LOG_MODULE "learner"
#include "round.h"

#include "clock.h"
#include "log.h"

#include <string.h>

void round_init(round_t *r, group_t *group, int64_t now_ms) {
    memset(r, 0, sizeof *r);
    r->group = group;
    r->rank = group ? group_rank(group) : 0;
    r->n_ranks = group ? group_size(group) : 1;
    r->last_ms = now_ms;
}

int round_due(const round_t *r, int have_batch, int64_t now_ms) {
    return have_batch || now_ms - r->last_ms >= ROUND_IDLE_MS;
}

// mt's interval timers move into this rank's totals (rank 0's metrics row uses the sums).
static void s_take_timers(round_t *r, metrics_t *mt) {
    r->own[ROUND_WAIT_NS] += (double)mt->wait_ns, r->own[ROUND_TRAIN_NS] += (double)mt->train_ns;
    r->own[ROUND_OPTIM_NS] += (double)mt->optim_ns, r->own[ROUND_NET_NS] += (double)mt->net_ns;
    mt->wait_ns = mt->train_ns = mt->optim_ns = mt->net_ns = 0;
}

round_decision round_join(round_t *r, metrics_t *mt, int ready, int stop, uint64_t bad,
                          int *checkpoint, int64_t now_ms) {
    s_take_timers(r, mt);
    r->own[ROUND_ROWS] = (double)mt->sampled_rows;
    r->own[ROUND_COMM_NS] = (double)group_comm_ns(r->group);
    r->own[ROUND_BAD] = (double)bad;
    r->own[ROUND_LOSS] = mt->last_loss;
    double x[ROUND_N];
    memcpy(x, r->own, sizeof x);
    x[ROUND_READY] = ready, x[ROUND_STOP] = stop, x[ROUND_CKPT] = r->rank == 0 && r->ckpt_due;
    int64_t t0 = clock_now_ns();
    group_round(r->group, x, ROUND_N);
    r->own[ROUND_WAIT_NS] += (double)(clock_now_ns() - t0); // waiting for the other ranks
    r->last_ms = now_ms;
    if (r->rank == 0) {
        memcpy(r->sum, x, sizeof x);
        mt->last_loss = x[ROUND_LOSS] / r->n_ranks; // the group's mean loss of the last step
    }
    *checkpoint = x[ROUND_CKPT] > 0;
    if (*checkpoint) {
        r->ckpt_due = 0;
    }
    if (x[ROUND_STOP] > 0) {
        r->stopped = 1;
        return ROUND_DECIDED_STOP;
    }
    return x[ROUND_READY] == r->n_ranks ? ROUND_DECIDED_TRAIN : ROUND_DECIDED_WAIT;
}

void round_metrics(round_t *r, metrics_t *mt) {
    s_take_timers(r, mt);
    double *d = r->sum, *p = r->sum_prev, N = r->n_ranks;
    mt->sampled_rows = (uint64_t)d[ROUND_ROWS];
    mt->own_bad_messages = (uint64_t)d[ROUND_BAD];
    mt->wait_ns = (int64_t)((d[ROUND_WAIT_NS] - p[ROUND_WAIT_NS]) / N);
    mt->train_ns = (int64_t)((d[ROUND_TRAIN_NS] - p[ROUND_TRAIN_NS]) / N);
    mt->optim_ns = (int64_t)((d[ROUND_OPTIM_NS] - p[ROUND_OPTIM_NS]) / N);
    mt->net_ns = (int64_t)((d[ROUND_NET_NS] - p[ROUND_NET_NS]) / N);
    memcpy(p, d, sizeof r->sum);
}

void round_report(const round_t *r) {
    double step_ns = r->own[ROUND_TRAIN_NS] + r->own[ROUND_OPTIM_NS];
    double comm_ns = (double)group_comm_ns(r->group);
    log_info("rank %d: collectives %.1f%% of the training steps' time (%.0f of %.0f ms)", r->rank,
             step_ns > 0 ? 100.0 * comm_ns / step_ns : 0.0, comm_ns / 1e6, step_ns / 1e6);
}
