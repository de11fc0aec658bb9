// persist.c: see persist.h.
#define LOG_MODULE "replay"
#include "persist.h"

#include "apex.h"
#include "clock.h"
#include "log.h"
#include "net.h"
#include "xalloc.h"

#include <stdio.h>
#include <string.h>
#include <zmq.h>

#define SNAPSHOT_POLL_MS 100
#define SNAPSHOT_RETRY_MS 1000 // while degraded, how often a snapshot is tried

// Group commit (wal): a commit starts, if the writer is idle, on the wal_sync_ms timer, when
// the log buffer passes half full, and as soon as the previous commit has ended if this much
// waits ("continuous" group commit: under load commits run back to back, each as large as
// what arrived during the previous fdatasync). The threshold keeps a moderate load from
// paying one fdatasync per few batches (docs/performance.md has the measurements).
#define WAL_BACK_TO_BACK_BYTES (256u << 10)

struct persist {
    apex_config_t cfg;
    persist_state_t st;
    durable_t *durable;
    void *ctx;
    void *commit_rx, *commit_tx; // inproc PAIR: the log's writer thread wakes the loop
    uint8_t *blob;               // the snapshot blob, sized at persist_new
    size_t blob_cap;
    int64_t last_snapshot_try_ms;
    uint64_t acks_without_durability;
    char dir[CONFIG_STR_LEN + 96]; // <out_dir>/<name>/replay, or replay<k> for shard k
};

// ---------------------------------------------------------------------------------------
// The snapshot blob: the server's state next to the store's.
//   v2: "APEXBLB2", 4 u64 counters, the limiter's credit (double), the dedupe table.
//   v1 (before the limiter's credit was saved): 4 u64 counters, the dedupe table.
#define BLOB_MAGIC "APEXBLB2"
#define BLOB_COUNTERS 4

static size_t s_blob_bytes(const persist_state_t *st) {
    return 8 + BLOB_COUNTERS * sizeof(uint64_t) + sizeof(double) + dedupe_bytes(st->dedupe);
}

static size_t s_blob_fill(persist_t *p) {
    const persist_counters_t *c = p->st.counters;
    uint64_t counters[BLOB_COUNTERS] = {c->sampled_rows, c->updated, c->duplicate_batches,
                                        c->limiter_waits};
    uint8_t *b = p->blob;
    memcpy(b, BLOB_MAGIC, 8);
    memcpy(b + 8, counters, sizeof counters);
    memcpy(b + 8 + sizeof counters, &p->st.limiter->credit, sizeof(double));
    dedupe_save(p->st.dedupe, b + 8 + sizeof counters + sizeof(double));
    return s_blob_bytes(&p->st);
}

static void s_blob_load(void *arg, const void *blob, size_t len) {
    persist_t *p = arg;
    const uint8_t *b = blob;
    uint64_t counters[BLOB_COUNTERS];
    int v2 = len >= 8 && memcmp(b, BLOB_MAGIC, 8) == 0;
    size_t head = v2 ? 8 + sizeof counters + sizeof(double) : sizeof counters;
    if (len < head || dedupe_load(p->st.dedupe, b + head, len - head) != APEX_OK) {
        log_warn("snapshot holds no usable sequence marks (another [actor] num_actors?): "
                 "batches re-sent after the crash may be stored twice");
        return;
    }
    memcpy(counters, b + (v2 ? 8 : 0), sizeof counters);
    persist_counters_t *c = p->st.counters;
    *c = (persist_counters_t){counters[0], counters[1], counters[2], counters[3]};
    double credit;
    if (v2) {
        memcpy(&credit, b + 8 + sizeof counters, sizeof credit);
    } else {
        // A snapshot of an older build: the credit its counters imply (limiter.h clamps it).
        credit = p->cfg.replay.samples_per_insert * (double)store_inserted(p->st.store) -
                 (double)c->sampled_rows;
    }
    limiter_restore(p->st.limiter, credit);
}

// ---------------------------------------------------------------------------------------
// Lifecycle and restore

persist_t *persist_new(const apex_config_t *cfg, void *ctx, const persist_state_t *state) {
    persist_t *p = xcalloc(1, sizeof *p);
    p->cfg = *cfg;
    p->st = *state;
    p->ctx = ctx;
    // Each shard of a sharded replay has its own directory (its own snapshot, log and lock):
    // replay<k>, beside the unsharded server's replay (a sharded run's shard 0 holds other
    // data than an unsharded run's server, so it must not restore from that).
    if (cfg->replay.shards > 1) {
        snprintf(p->dir, sizeof p->dir, "%s/%s/replay%d", cfg->run.out_dir, cfg->run.name,
                 cfg->replay.shard);
    } else {
        snprintf(p->dir, sizeof p->dir, "%s/%s/replay", cfg->run.out_dir, cfg->run.name);
    }
    durable_config_t dc = {.dir = p->dir, .mode = cfg->replay.durability};
    p->durable = durable_new(&dc);
    if (!p->durable) {
        free(p);
        return NULL;
    }
    p->blob_cap = s_blob_bytes(state);
    p->blob = xmalloc(p->blob_cap);
    return p;
}

void persist_destroy(persist_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    persist_t *p = *self_p;
    durable_writer_stop(p->durable); // before the pipe closes: the writer holds its end
    net_close(&p->commit_tx);
    net_close(&p->commit_rx);
    durable_destroy(&p->durable);
    free(p->blob);
    free(p);
    *self_p = NULL;
}

int persist_restore(persist_t *p, persist_record_fn fn, void *arg) {
    if (p->cfg.replay.durability == DURABILITY_NONE) {
        return 0;
    }
    durable_restore_info_t info;
    int64_t t0 = clock_now_ms();
    // The blob goes to this module (s_blob_load), the records to the server.
    if (durable_restore(p->durable, p->st.store, s_blob_load, p, fn, arg, &info) != APEX_OK) {
        return -1;
    }
    log_info("restored from %s in %lld ms: %s%llu transitions in the snapshot, %llu "
             "log records from %u segments%s; now %llu transitions, limiter credit %.0f",
             p->dir, (long long)(clock_now_ms() - t0), info.had_snapshot ? "" : "no snapshot, ",
             (unsigned long long)info.snapshot_size, (unsigned long long)info.records,
             info.segments, info.torn_bytes ? " (a torn tail was truncated)" : "",
             (unsigned long long)store_size(p->st.store), p->st.limiter->credit);
    return 0;
}

// ---------------------------------------------------------------------------------------
// Snapshots

static void s_snapshot(persist_t *p) {
    p->last_snapshot_try_ms = clock_now_ms();
    // Everything logged so far on disk (or degraded): the acks waiting for it can go out.
    // (Done here, not only inside durable_snapshot_start, which returns early while a
    // snapshot child still runs.)
    durable_sync(p->durable);
    acks_flush(p->st.acks);
    int rc = durable_snapshot_start(p->durable, p->st.store, p->blob, s_blob_fill(p));
    if (rc != APEX_OK && rc != APEX_EAGAIN) {
        log_warn("replay snapshot not started: %s", apex_strerror(rc));
    }
}

static int s_timer_snapshot(loop_t *loop, void *arg) {
    (void)loop;
    s_snapshot(arg);
    return 0;
}

static int s_timer_poll(loop_t *loop, void *arg) {
    (void)loop;
    persist_t *p = arg;
    int snap_mode = p->cfg.replay.durability == DURABILITY_SNAPSHOT;
    if (durable_snapshot_poll(p->durable, 0) < 0 && snap_mode) {
        p->last_snapshot_try_ms = clock_now_ms();
    }
    if (durable_degraded(p->durable) && snap_mode &&
        clock_now_ms() - p->last_snapshot_try_ms >= SNAPSHOT_RETRY_MS) {
        s_snapshot(p);
    }
    return 0;
}

// ---------------------------------------------------------------------------------------
// Group commit (wal). persist_log appends records; a commit hands them to durable's writer
// thread, and the acks queued so far take off with it (acks.h) until that commit has ended.

// Sends the acks of a commit that was answered without reaching the disk.
static void s_count_undurable(persist_t *p, int n) {
    if (durable_degraded(p->durable)) {
        p->acks_without_durability += (uint64_t)n;
    }
}

// Sends the acks of the commit in flight once it has ended.
static void s_send_ended(persist_t *p) {
    acks_t *a = p->st.acks;
    if (acks_in_flight(a) > 0 && durable_commit_done(p->durable, acks_flight_id(a))) {
        s_count_undurable(p, acks_send_flight(a));
    }
}

static void s_commit(persist_t *p) {
    acks_t *a = p->st.acks;
    s_send_ended(p);
    if (acks_in_flight(a) > 0) {
        return; // the writer is busy with them; its notify brings us back
    }
    uint64_t id = durable_commit_start(p->durable);
    if (id == 0 || acks_waiting(a) == 0) {
        return; // busy (retried after its notify), or no acks wait on this commit
    }
    if (durable_commit_done(p->durable, id)) {
        s_count_undurable(p, acks_send_waiting(a)); // nothing new to write, or degraded
    } else {
        acks_take_off(a, id);
    }
}

// Called on the writer's thread after each commit: wakes the loop. The tx socket was
// created by the loop thread before the writer started (pthread_create is the memory
// barrier libzmq asks for when a socket moves between threads) and only the writer uses it
// until it has been joined. A full pipe already holds a wake-up, so EAGAIN is fine.
static void s_notify(void *arg) {
    persist_t *p = arg;
    zmq_send(p->commit_tx, "", 0, ZMQ_DONTWAIT);
}

static int s_reader_commit(loop_t *loop, void *sock, void *arg) {
    (void)loop;
    persist_t *p = arg;
    char b[1];
    while (zmq_recv(sock, b, sizeof b, ZMQ_DONTWAIT) >= 0) {
    }
    s_send_ended(p);
    if (durable_buffered(p->durable) >= WAL_BACK_TO_BACK_BYTES) {
        s_commit(p); // continuous group commit under load; less waits for the timer
    }
    return 0;
}

static int s_timer_sync(loop_t *loop, void *arg) {
    (void)loop;
    persist_t *p = arg;
    s_commit(p);
    if (durable_degraded(p->durable) &&
        clock_now_ms() - p->last_snapshot_try_ms >= SNAPSHOT_RETRY_MS) {
        s_snapshot(p); // the way back to durability: a snapshot holding everything
    }
    return 0;
}

int persist_attach(persist_t *p, loop_t *loop) {
    const config_replay_t *r = &p->cfg.replay;
    if (r->durability == DURABILITY_NONE) {
        return 0;
    }
    loop_add_timer(loop, SNAPSHOT_POLL_MS, s_timer_poll, p);
    loop_add_timer(loop, (int64_t)(r->snapshot_interval_s * 1000), s_timer_snapshot, p);
    if (r->durability != DURABILITY_WAL) {
        return 0;
    }
    loop_add_timer(loop, r->wal_sync_ms, s_timer_sync, p);
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://apex-replay-commit-%p", (void *)p);
    p->commit_rx = net_socket(p->ctx, ZMQ_PAIR, NULL);
    p->commit_tx = net_socket(p->ctx, ZMQ_PAIR, NULL);
    if (!p->commit_rx || !p->commit_tx || net_bind(p->commit_rx, ep, NULL, 0) != 0 ||
        net_connect(p->commit_tx, ep) != 0) {
        return -1;
    }
    loop_add_reader(loop, p->commit_rx, s_reader_commit, p);
    return durable_writer_start(p->durable, s_notify, p) == APEX_OK ? 0 : -1;
}

void persist_log(persist_t *p, int kind, const void *raw, size_t len) {
    if (durable_append(p->durable, kind, raw, len)) {
        s_commit(p); // the log buffer is half full: hand it to the writer if idle
    }
}

void persist_ack(persist_t *p, const uint8_t *id, size_t id_len, uint32_t actor, uint64_t seq) {
    acks_t *a = p->st.acks;
    if (p->cfg.replay.durability != DURABILITY_WAL || durable_degraded(p->durable)) {
        acks_ready(a, id, id_len, actor, seq);
        return;
    }
    if (acks_wait(a, id, id_len, actor, seq)) {
        durable_sync(p->durable); // back-pressure: waits for the writer, syncs the rest
        acks_flush(a);
    }
}

void persist_shutdown(persist_t *p) {
    if (p->cfg.replay.durability == DURABILITY_NONE) {
        acks_flush(p->st.acks);
        return;
    }
    durable_sync(p->durable);
    acks_flush(p->st.acks);
    durable_snapshot_poll(p->durable, 1); // a snapshot already running
    int64_t t0 = clock_now_ms();
    s_snapshot(p);
    int ok = durable_snapshot_poll(p->durable, 1) > 0;
    log_info("final snapshot %s in %lld ms", ok ? "written" : "FAILED",
             (long long)(clock_now_ms() - t0));
}

int persist_degraded(const persist_t *p) { return durable_degraded(p->durable); }
uint64_t persist_acks_without_durability(const persist_t *p) { return p->acks_without_durability; }
