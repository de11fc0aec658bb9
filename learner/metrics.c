// metrics.c: see metrics.h.
#include "metrics.h"

#include "apex.h"
#include "clock.h"

#include <math.h>
#include <string.h>
#include <sys/stat.h>

// The columns of metrics.csv, in order, with their TensorBoard tags (grouped by the part
// before the '/': TensorBoard draws one section per group). Every column is also a scalar
// of the event file; weights versions (incarnation << 32 | counter) would lose their low bits
// as TensorBoard's float32, so their scalar is the counter alone.
typedef enum { C_U64, C_F1, C_F2, C_F3, C_G6, C_VERSION } s_kind;
typedef struct {
    const char *name, *tag;
    s_kind kind;
} s_column;

static const s_column s_columns[] = {
    {"elapsed_s", "time/elapsed_s", C_F3},
    {"env_frames", "actors/env_frames", C_U64},
    {"episodes", "actors/episodes", C_U64},
    {"updates", "train/updates", C_U64},
    {"updates_per_s", "train/updates_per_s", C_F2},
    {"samples_per_s", "train/samples_per_s", C_F1},
    {"frames_per_s", "actors/frames_per_s", C_F1},
    {"mean_return_100", "actors/mean_return_100", C_F3},
    {"loss", "train/loss", C_G6},
    {"replay_size", "replay/size", C_U64},
    {"replay_inserted", "replay/inserted", C_U64},
    {"weights_version", "train/weights_version_counter", C_VERSION},
    {"actor_version_min", "actors/weights_version_min_counter", C_VERSION},
    {"priority_updates", "replay/priority_updates", C_U64},
    {"stale_updates", "replay/stale_updates", C_U64},
    {"bad_messages", "replay/bad_messages", C_U64},
    {"wait_frac", "time/wait_frac", C_F3},
    {"train_frac", "time/train_frac", C_F3},
    {"optim_frac", "time/optim_frac", C_F3},
    {"net_frac", "time/net_frac", C_F3},
    {"duplicate_batches", "replay/duplicate_batches", C_U64},
    {"replay_sampled", "replay/sampled", C_U64},
    {"env_faults", "actors/env_faults", C_U64},
    {"episodes_dropped", "actors/episodes_dropped", C_U64},
    {"weights_answers", "weights/answers", C_U64},
    {"weights_held", "weights/held", C_U64},
    {"weights_refused", "weights/refused", C_U64},
};
#define N_COLUMNS (sizeof s_columns / sizeof s_columns[0])

// A continuous run's (the DPG learner, learner/algo.h) after those: loss is the critics'
// loss there too, repeated as critic_loss.
static const s_column s_dpg_columns[] = {
    {"critic_loss", "dpg/critic_loss", C_G6},
    {"actor_loss", "dpg/actor_loss", C_G6},
    {"q_mean", "dpg/q_mean", C_G6},
    {"critic_grad_norm", "dpg/critic_grad_norm", C_G6},
    {"actor_grad_norm", "dpg/actor_grad_norm", C_G6},
    {"policy_updates", "dpg/policy_updates", C_U64},
    {"skipped_steps", "dpg/skipped_steps", C_U64},
};
#define N_DPG_COLUMNS (sizeof s_dpg_columns / sizeof s_dpg_columns[0])
#define N_ALL_COLUMNS (N_COLUMNS + N_DPG_COLUMNS)
_Static_assert(N_ALL_COLUMNS <= METRICS_MAX_COLUMNS, "metrics_t's tag array holds every column");

static size_t s_n_columns(const metrics_t *m) { return m->dpg ? N_ALL_COLUMNS : N_COLUMNS; }
static const s_column *s_col(size_t i) {
    return i < N_COLUMNS ? &s_columns[i] : &s_dpg_columns[i - N_COLUMNS];
}

typedef union {
    uint64_t u;
    double f;
} s_value;

static void s_header(const metrics_t *m, char *buf, size_t n) {
    size_t off = (size_t)snprintf(buf, n, "wall_time");
    for (size_t i = 0; i < s_n_columns(m) && off < n; i++) {
        off += (size_t)snprintf(buf + off, n - off, ",%s", s_col(i)->name);
    }
    if (off < n) {
        snprintf(buf + off, n - off, "\n");
    }
}

// 1 when the file at path starts with header (a resumed run appends to it).
static int s_same_header(const char *path, const char *header) {
    FILE *f = fopen(path, "r");
    if (!f) {
        return 0;
    }
    char line[1024];
    int same = fgets(line, sizeof line, f) && strcmp(line, header) == 0;
    fclose(f);
    return same;
}

int metrics_init(metrics_t *m, const char *path, int dpg) {
    memset(m, 0, sizeof *m);
    m->dpg = dpg;
    char header[1024];
    s_header(m, header, sizeof header);
    struct stat st;
    int fresh = stat(path, &st) != 0 || st.st_size == 0;
    if (!fresh && !s_same_header(path, header)) {
        // Written by a build with other columns: rows appended under its header would be
        // misread, so that file is kept as it is and a new one starts.
        char old[1100];
        snprintf(old, sizeof old, "%s.old", path);
        if (rename(path, old) == 0) {
            fresh = 1;
        }
    }
    m->csv = fopen(path, "a");
    if (!m->csv) {
        return -1;
    }
    if (fresh) {
        fputs(header, m->csv);
        fflush(m->csv);
    }
    for (size_t i = 0; i < s_n_columns(m); i++) {
        m->tags[i] = s_col(i)->tag;
    }
    m->start_wall_ms = clock_wall_ms();
    m->start_mono_ms = clock_now_ms();
    m->prev_ms = m->start_mono_ms;
    return 0;
}

void metrics_fini(metrics_t *m) {
    tbevents_destroy(&m->tb);
    if (m->csv) {
        fclose(m->csv);
        m->csv = NULL;
    }
}

void metrics_add_actor_stats(metrics_t *m, const wire_actor_stats_t *s, int64_t now_ms) {
    if (s->actor_id < METRICS_MAX_ACTORS) {
        metrics_actor_t *a = &m->actors[s->actor_id];
        a->frames = s->frames;
        a->weights_version = s->weights_version;
        a->dropped_batches = s->dropped_batches;
        // Totals since the actor started: add what is new (all of it after its restart).
        m->env_faults += s->env_faults >= a->env_faults ? s->env_faults - a->env_faults
                                                        : s->env_faults;
        m->episodes_dropped += s->episodes_dropped >= a->episodes_dropped
                                   ? s->episodes_dropped - a->episodes_dropped
                                   : s->episodes_dropped;
        a->env_faults = s->env_faults;
        a->episodes_dropped = s->episodes_dropped;
        a->last_seen_ms = now_ms;
    }
    m->frames += s->frames_delta;
    for (uint32_t i = 0; i < s->n_episodes; i++) {
        m->returns[m->next_return] = s->returns[i];
        m->next_return = (m->next_return + 1) % METRICS_RETURN_WINDOW;
        if (m->n_returns < METRICS_RETURN_WINDOW) {
            m->n_returns++;
        }
        m->episodes++;
    }
}

const char *metrics_take_message(metrics_t *m, wire_decoder_t *dec, const void *buf, size_t len,
                                 int64_t now_ms) {
    wire_msg_t msg;
    if (wire_decode(dec, buf, len, &msg) != APEX_OK) {
        return wire_decoder_last_error(dec);
    }
    if (msg.type != WIRE_MSG_ACTOR_STATS) {
        return "not an ActorStats";
    }
    metrics_add_actor_stats(m, &msg.u.actor_stats, now_ms);
    return NULL;
}

double metrics_mean_return(const metrics_t *m) {
    if (m->n_returns == 0) {
        return NAN;
    }
    double s = 0;
    for (int i = 0; i < m->n_returns; i++) {
        s += m->returns[i];
    }
    return s / m->n_returns;
}

uint64_t metrics_frames(const metrics_t *m) { return m->frames; }

void metrics_resume(metrics_t *m, uint64_t frames, uint64_t episodes, int64_t elapsed_ms) {
    m->frames = m->prev_frames = frames;
    m->episodes = episodes;
    m->elapsed_base_ms = elapsed_ms;
}

int64_t metrics_elapsed_ms(const metrics_t *m, int64_t now_ms) {
    return m->elapsed_base_ms + (now_ms - m->start_mono_ms);
}

static uint64_t s_min_actor_version(const metrics_t *m) {
    uint64_t v = UINT64_MAX;
    for (int i = 0; i < METRICS_MAX_ACTORS; i++) {
        if (m->actors[i].last_seen_ms && m->actors[i].weights_version < v) {
            v = m->actors[i].weights_version;
        }
    }
    return v == UINT64_MAX ? 0 : v;
}

// The frames a row counts: the run's, or in a deterministic run those the replay counted in
// its schedule as of the trained batch.
static uint64_t s_row_frames(const metrics_t *m) {
    return m->det ? m->replay.det_env_frames : metrics_frames(m);
}

static double s_row_mean_return(const metrics_t *m) {
    if (!m->det) {
        return metrics_mean_return(m);
    }
    return m->replay.det_return_n ? m->replay.det_return_sum / m->replay.det_return_n : NAN;
}

// The row's values, in s_columns order.
static void s_row_values(const metrics_t *m, int64_t now_ms, double dt, s_value *v) {
    const uint64_t frames = s_row_frames(m);
    const double total_ns = dt * 1e9;
    int i = 0;
    v[i++].f = (double)metrics_elapsed_ms(m, now_ms) / 1000.0;
    v[i++].u = frames;
    v[i++].u = m->det ? m->replay.det_episodes : m->episodes;
    v[i++].u = m->updates;
    v[i++].f = (double)(m->updates - m->prev_updates) / dt;
    v[i++].f = (double)(m->sampled_rows - m->prev_rows) / dt;
    v[i++].f = frames >= m->prev_frames ? (double)(frames - m->prev_frames) / dt : 0.0;
    v[i++].f = s_row_mean_return(m);
    v[i++].f = m->last_loss;
    v[i++].u = m->replay.size;
    v[i++].u = m->replay.inserted;
    v[i++].u = m->weights_version;
    v[i++].u = m->det ? m->replay.det_version_min : s_min_actor_version(m);
    v[i++].u = m->replay.updated;
    v[i++].u = m->replay.stale_updates;
    v[i++].u = m->replay.bad_messages + m->own_bad_messages;
    v[i++].f = (double)m->wait_ns / total_ns;
    v[i++].f = (double)m->train_ns / total_ns;
    v[i++].f = (double)m->optim_ns / total_ns;
    v[i++].f = (double)m->net_ns / total_ns;
    v[i++].u = m->replay.duplicate_batches;
    v[i++].u = m->replay.sampled;
    v[i++].u = m->env_faults;
    v[i++].u = m->episodes_dropped;
    v[i++].u = m->weights_answers;
    v[i++].u = m->weights_held;
    v[i++].u = m->weights_refused;
    APEX_ASSERT(i == (int)N_COLUMNS);
    if (m->dpg) {
        v[i++].f = m->last_loss;
        v[i++].f = m->actor_loss;
        v[i++].f = m->q_mean;
        v[i++].f = m->critic_grad_norm;
        v[i++].f = m->actor_grad_norm;
        v[i++].u = m->policy_updates;
        v[i++].u = m->skipped_steps;
        APEX_ASSERT(i == (int)N_ALL_COLUMNS);
    }
}

static int s_write_csv(metrics_t *m, const s_value *v) {
    char ts[32];
    clock_iso8601(ts, clock_wall_ms());
    fputs(ts, m->csv);
    for (size_t i = 0; i < s_n_columns(m); i++) {
        switch (s_col(i)->kind) {
        case C_U64:
        case C_VERSION:
            fprintf(m->csv, ",%llu", (unsigned long long)v[i].u);
            break;
        case C_F1:
            fprintf(m->csv, ",%.1f", v[i].f);
            break;
        case C_F2:
            fprintf(m->csv, ",%.2f", v[i].f);
            break;
        case C_F3:
            fprintf(m->csv, ",%.3f", v[i].f);
            break;
        case C_G6:
            fprintf(m->csv, ",%.6g", v[i].f);
            break;
        }
    }
    fputc('\n', m->csv);
    if (fflush(m->csv) != 0 || ferror(m->csv)) {
        clearerr(m->csv);
        return -1;
    }
    return 0;
}

// Every column as a scalar, stepped by env frames (continuous across restarts).
static void s_write_tb(metrics_t *m, const s_value *v) {
    double x[N_ALL_COLUMNS];
    for (size_t i = 0; i < s_n_columns(m); i++) {
        s_kind k = s_col(i)->kind;
        x[i] = k == C_U64 ? (double)v[i].u
                          : (k == C_VERSION ? (double)(v[i].u & 0xFFFFFFFFu) : v[i].f);
    }
    int rc = tbevents_scalars(m->tb, (int64_t)s_row_frames(m), clock_wall_s(), m->tags, x,
                              (int)s_n_columns(m));
    if (rc == APEX_OK) {
        rc = tbevents_flush(m->tb);
    }
    m->tb_err = rc;
}

int metrics_write_row(metrics_t *m, int64_t now_ms) {
    int rc = 0;
    double dt = (double)(now_ms - m->prev_ms) / 1000.0;
    if (dt > 0) {
        s_value v[N_ALL_COLUMNS];
        s_row_values(m, now_ms, dt, v);
        if (m->csv) {
            rc = s_write_csv(m, v);
        }
        if (m->tb) {
            s_write_tb(m, v);
        }
    }
    m->prev_ms = now_ms;
    m->prev_updates = m->updates;
    m->prev_rows = m->sampled_rows;
    m->prev_frames = s_row_frames(m);
    m->wait_ns = m->train_ns = m->optim_ns = m->net_ns = 0;
    return rc;
}

void metrics_format_status(const metrics_t *m, char *buf, size_t n) {
    snprintf(buf, n,
             "updates %llu  frames %llu  episodes %llu  mean_return_100 %.1f  loss %.4g  "
             "replay %llu  weights " WIRE_VERSION_FMT " (actors >= " WIRE_VERSION_FMT ")",
             (unsigned long long)m->updates, (unsigned long long)metrics_frames(m),
             (unsigned long long)m->episodes, metrics_mean_return(m), m->last_loss,
             (unsigned long long)m->replay.size, WIRE_VERSION_ARGS(m->weights_version),
             WIRE_VERSION_ARGS(s_min_actor_version(m)));
}
