// metrics.c: see metrics.h.
#include "metrics.h"

#include "clock.h"

#include <math.h>
#include <string.h>
#include <sys/stat.h>

static const char s_header[] =
    "wall_time,elapsed_s,env_frames,episodes,updates,updates_per_s,samples_per_s,"
    "frames_per_s,mean_return_100,loss,replay_size,replay_inserted,weights_version,"
    "actor_version_min,priority_updates,stale_updates,bad_messages,wait_frac,train_frac,optim_frac,"
    "net_frac,"
    "duplicate_batches\n";

int metrics_init(metrics_t *m, const char *path) {
    memset(m, 0, sizeof *m);
    struct stat st;
    int fresh = stat(path, &st) != 0 || st.st_size == 0;
    m->csv = fopen(path, "a");
    if (!m->csv) {
        return -1;
    }
    if (fresh) {
        fputs(s_header, m->csv);
        fflush(m->csv);
    }
    m->start_wall_ms = clock_wall_ms();
    m->start_mono_ms = clock_now_ms();
    m->prev_ms = m->start_mono_ms;
    return 0;
}

void metrics_fini(metrics_t *m) {
    if (m->csv) {
        fclose(m->csv);
        m->csv = NULL;
    }
}

void metrics_add_actor_stats(metrics_t *m, const wire_actor_stats_t *s, int64_t now_ms) {
    if (s->actor_id < METRICS_MAX_ACTORS) {
        metrics_actor_t *a = &m->actors[s->actor_id];
        if (s->frames < a->frames) {
            a->frames_before += a->frames; // a restarted actor counts from 0 again
        }
        a->frames = s->frames;
        a->weights_version = s->weights_version;
        a->dropped_batches = s->dropped_batches;
        a->last_seen_ms = now_ms;
    }
    for (uint32_t i = 0; i < s->n_episodes; i++) {
        m->returns[m->next_return] = s->returns[i];
        m->next_return = (m->next_return + 1) % METRICS_RETURN_WINDOW;
        if (m->n_returns < METRICS_RETURN_WINDOW) {
            m->n_returns++;
        }
        m->episodes++;
    }
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

uint64_t metrics_frames(const metrics_t *m) {
    uint64_t f = 0;
    for (int i = 0; i < METRICS_MAX_ACTORS; i++) {
        f += m->actors[i].frames_before + m->actors[i].frames;
    }
    return f;
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

int metrics_write_row(metrics_t *m, int64_t now_ms) {
    int rc = 0;
    double dt = (double)(now_ms - m->prev_ms) / 1000.0;
    uint64_t frames = metrics_frames(m);
    if (m->csv && dt > 0) {
        double total_ns = dt * 1e9;
        char ts[32];
        clock_iso8601(ts, clock_wall_ms());
        fprintf(
            m->csv,
            "%s,%.3f,%llu,%llu,%llu,%.2f,%.1f,%.1f,%.3f,%.6g,%llu,%llu,%llu,%llu,%llu,%llu,%llu,"
            "%.3f,%.3f,%.3f,%.3f,%llu\n",
            ts, (double)(now_ms - m->start_mono_ms) / 1000.0, (unsigned long long)frames,
            (unsigned long long)m->episodes, (unsigned long long)m->updates,
            (double)(m->updates - m->prev_updates) / dt,
            (double)(m->sampled_rows - m->prev_rows) / dt, (double)(frames - m->prev_frames) / dt,
            metrics_mean_return(m), m->last_loss, (unsigned long long)m->replay.size,
            (unsigned long long)m->replay.inserted, (unsigned long long)m->weights_version,
            (unsigned long long)s_min_actor_version(m), (unsigned long long)m->replay.updated,
            (unsigned long long)m->replay.stale_updates,
            (unsigned long long)(m->replay.bad_messages + m->own_bad_messages),
            m->wait_ns / total_ns, m->train_ns / total_ns, m->optim_ns / total_ns,
            m->net_ns / total_ns, (unsigned long long)m->replay.duplicate_batches);
        if (fflush(m->csv) != 0 || ferror(m->csv)) {
            clearerr(m->csv);
            rc = -1;
        }
    }
    m->prev_ms = now_ms;
    m->prev_updates = m->updates;
    m->prev_rows = m->sampled_rows;
    m->prev_frames = frames;
    m->wait_ns = m->train_ns = m->optim_ns = m->net_ns = 0;
    return rc;
}

void metrics_format_status(const metrics_t *m, char *buf, size_t n) {
    snprintf(buf, n,
             "updates %llu  frames %llu  episodes %llu  mean_return_100 %.1f  loss %.4g  "
             "replay %llu  weights v%llu (actors >= v%llu)",
             (unsigned long long)m->updates, (unsigned long long)metrics_frames(m),
             (unsigned long long)m->episodes, metrics_mean_return(m), m->last_loss,
             (unsigned long long)m->replay.size, (unsigned long long)m->weights_version,
             (unsigned long long)s_min_actor_version(m));
}
