// persist.c: the replay server's durability glue: restore at start-up, group commit of the
// write-ahead log, periodic snapshots, the final snapshot at shutdown, and dumps.
// The mechanics of files live in durable.c; this file decides when and what.
#define LOG_MODULE "replay"
#include "server_int.h"

#include "apex.h"
#include "clock.h"
#include "fileio.h"
#include "net.h"
#include "xalloc.h"

#include <stdio.h>
#include <string.h>

// ---------------------------------------------------------------------------------------
// The snapshot blob: the server's own state next to the store's.

static size_t s_blob_fill(replay_server_t *s) {
    uint64_t counters[BLOB_COUNTERS] = {s->sampled_rows, s->updated, s->duplicate_batches,
                                        s->limiter_waits};
    memcpy(s->blob, counters, sizeof counters);
    dedupe_save(&s->dedupe, s->blob + sizeof counters);
    return sizeof counters + dedupe_bytes(&s->dedupe);
}

static void s_blob_load(void *arg, const void *blob, size_t len) {
    replay_server_t *s = arg;
    const uint8_t *b = blob;
    uint64_t counters[BLOB_COUNTERS];
    if (len < sizeof counters ||
        dedupe_load(&s->dedupe, b + sizeof counters, len - sizeof counters) != APEX_OK) {
        log_warn("snapshot holds no usable sequence marks (another [actor] num_actors?): "
                 "batches re-sent after the crash may be stored twice");
        return;
    }
    memcpy(counters, b, sizeof counters);
    s->sampled_rows = counters[0];
    s->updated = counters[1];
    s->duplicate_batches = counters[2];
    s->limiter_waits = counters[3];
}

// ---------------------------------------------------------------------------------------
// Restore

static void s_replay_record(void *arg, int kind, const void *payload, size_t len) {
    replay_server_t *s = arg;
    wire_msg_t m;
    int rc = wire_decode(s->dec, payload, len, &m);
    if (rc == APEX_OK && kind == DURABLE_REC_INSERT && m.type == WIRE_MSG_TRANSITION_BATCH &&
        m.u.batch.actor_id < s->dedupe.n_actors) {
        server_apply_batch(s, &m.u.batch, NULL, 0);
    } else if (rc == APEX_OK && kind == DURABLE_REC_UPDATE && m.type == WIRE_MSG_PRIORITY_UPDATE) {
        server_apply_update(s, &m.u.priority_update, NULL, 0);
    } else {
        // Only possible if the config changed between runs (e.g. another [env] id).
        log_warn("log record of kind %d not applicable (%s); skipped", kind,
                 rc == APEX_OK ? "unexpected message" : wire_decoder_last_error(s->dec));
    }
}

int persist_restore(replay_server_t *s) {
    const apex_config_t *c = &s->cfg;
    char dir[CONFIG_STR_LEN + 96];
    snprintf(dir, sizeof dir, "%s/%s/replay", c->run.out_dir, c->run.name);
    durable_config_t dc = {.dir = dir, .mode = c->replay.durability};
    s->durable = durable_new(&dc);
    if (!s->durable) {
        return -1;
    }
    if (c->replay.durability == DURABILITY_NONE) {
        return 0;
    }
    durable_restore_info_t info;
    int64_t t0 = clock_now_ms();
    int rc = durable_restore(s->durable, s->store, s_blob_load, s_replay_record, s, &info);
    if (rc != APEX_OK) {
        return -1;
    }
    if (c->replay.reset_limiter_on_restore) {
        // The sample count from before the crash would hold the learner back until the
        // actors made up for it (Reverb issue #118); start the ratio afresh instead.
        s->sampled_rows = 0;
    }
    log_info("restored from %s in %lld ms: %s%llu transitions in the snapshot, %llu log records "
             "from %u segments%s; now %llu transitions",
             dir, (long long)(clock_now_ms() - t0), info.had_snapshot ? "" : "no snapshot, ",
             (unsigned long long)info.snapshot_size, (unsigned long long)info.records,
             info.segments, info.torn_bytes ? " (a torn tail was truncated)" : "",
             (unsigned long long)store_size(s->store));
    return 0;
}

// ---------------------------------------------------------------------------------------
// Timers

static void s_snapshot(replay_server_t *s) {
    s->last_snapshot_try_ms = clock_now_ms();
    // Everything logged so far on disk (or degraded): the acks waiting for it can go out.
    // (Done here, not only inside durable_snapshot_start, which returns early while a
    // snapshot child still runs.)
    durable_sync(s->durable);
    server_flush_acks(s);
    int rc = durable_snapshot_start(s->durable, s->store, s->blob, s_blob_fill(s));
    if (rc != APEX_OK && rc != APEX_EAGAIN) {
        log_warn("replay snapshot not started: %s", apex_strerror(rc));
    }
}

// ---------------------------------------------------------------------------------------
// Group commit (wal). The loop appends records; a commit hands them to durable's writer
// thread, and the acks queued so far move to acks_flight until that commit has ended. A
// commit starts, if the writer is idle, on the wal_sync_ms timer, when the log buffer passes
// half full, and as soon as the previous commit has ended if WAL_BACK_TO_BACK_BYTES wait.
// So with a trickle of inserts an ack waits at most about wal_sync_ms + one fdatasync, and
// under load the writer never idles while records wait. (Starting the next commit only once
// acks had waited wal_sync_ms left the writer idle while actors, their windows full, waited
// for acks: paired bench_replay_tcp runs gave 1.8 vs 1.9, 1.9 vs 3.2 and 3.2 vs 3.4 M
// transitions/s for that rule vs back to back. Back to back for any amount, though, made a
// moderate load pay one fdatasync per few batches: at 400 k transitions/s the server spent
// ~1.3 ms of CPU per 1000 inserts, against ~0.42-0.56 ms with the threshold and ~0.75 ms
// with no log at all, whose acks go out per burst instead of per commit; the unpaced
// maximum did not move, 2.06-2.91 vs 1.90-2.48 M/s in alternated runs.)
#define WAL_BACK_TO_BACK_BYTES (256u << 10)

// Called on the writer's thread after each commit: wakes the loop. The tx socket was
// created by the loop thread before the writer started (pthread_create is the memory
// barrier libzmq asks for when a socket moves between threads) and only the writer uses it
// until it has been joined. A full pipe already holds a wake-up, so EAGAIN is fine.
static void s_notify(void *arg) {
    replay_server_t *s = arg;
    zmq_send(s->commit_tx, "", 0, ZMQ_DONTWAIT);
}

// Sends the acks of the commit in flight once it has ended.
static void s_send_ended(replay_server_t *s) {
    if (s->n_flight > 0 && durable_commit_done(s->durable, s->flight_id)) {
        server_send_acks(s, s->acks_flight, s->n_flight);
        s->n_flight = 0;
    }
}

void persist_commit(replay_server_t *s) {
    s_send_ended(s);
    if (s->n_flight > 0) {
        return; // the writer is busy with them; its notify brings us back
    }
    uint64_t id = durable_commit_start(s->durable);
    if (id == 0 || s->n_acks == 0) {
        return; // busy (retried after its notify), or no acks wait on this commit
    }
    if (durable_commit_done(s->durable, id)) {
        server_send_acks(s, s->acks, s->n_acks); // nothing new to write, or degraded
    } else {
        s_ack *t = s->acks_flight;
        s->acks_flight = s->acks;
        s->acks = t;
        s->n_flight = s->n_acks;
        s->flight_id = id;
    }
    s->n_acks = 0;
}

static int s_reader_commit(loop_t *loop, void *sock, void *arg) {
    (void)loop;
    replay_server_t *s = arg;
    char b[1];
    while (zmq_recv(sock, b, sizeof b, ZMQ_DONTWAIT) >= 0) {
    }
    s_send_ended(s);
    // Continuous group commit under load: the next commit starts as soon as this one has
    // ended if a commit's worth waits, so commits run back to back, each as large as what
    // arrived during the previous fdatasync (the disk sets the pace, not wal_sync_ms);
    // less waits for the timer.
    int due = durable_buffered(s->durable) >= WAL_BACK_TO_BACK_BYTES;
    if (due) {
        persist_commit(s);
    }
    return 0;
}

int persist_start(replay_server_t *s) {
    if (s->cfg.replay.durability != DURABILITY_WAL) {
        return 0;
    }
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://apex-replay-commit-%p", (void *)s);
    s->commit_rx = net_socket(s->ctx, ZMQ_PAIR, NULL);
    s->commit_tx = net_socket(s->ctx, ZMQ_PAIR, NULL);
    if (!s->commit_rx || !s->commit_tx || net_bind(s->commit_rx, ep, NULL, 0) != 0 ||
        net_connect(s->commit_tx, ep) != 0) {
        return -1;
    }
    loop_add_reader(s->loop, s->commit_rx, s_reader_commit, s);
    return durable_writer_start(s->durable, s_notify, s) == APEX_OK ? 0 : -1;
}

void persist_stop(replay_server_t *s) {
    if (s->durable) {
        durable_writer_stop(s->durable);
    }
    net_close(&s->commit_tx);
    net_close(&s->commit_rx);
}

int persist_timer_sync(loop_t *loop, void *arg) {
    (void)loop;
    replay_server_t *s = arg;
    persist_commit(s);
    if (durable_degraded(s->durable) &&
        clock_now_ms() - s->last_snapshot_try_ms >= SNAPSHOT_RETRY_MS) {
        s_snapshot(s); // the way back to durability: a snapshot holding everything
    }
    return 0;
}

int persist_timer_snapshot(loop_t *loop, void *arg) {
    (void)loop;
    s_snapshot(arg);
    return 0;
}

int persist_timer_poll(loop_t *loop, void *arg) {
    (void)loop;
    replay_server_t *s = arg;
    if (durable_snapshot_poll(s->durable, 0) < 0 &&
        s->cfg.replay.durability == DURABILITY_SNAPSHOT) {
        s->last_snapshot_try_ms = clock_now_ms();
    }
    if (durable_degraded(s->durable) && s->cfg.replay.durability == DURABILITY_SNAPSHOT &&
        clock_now_ms() - s->last_snapshot_try_ms >= SNAPSHOT_RETRY_MS) {
        s_snapshot(s);
    }
    return 0;
}

void persist_shutdown(replay_server_t *s) {
    if (s->cfg.replay.durability == DURABILITY_NONE) {
        return;
    }
    durable_sync(s->durable);
    server_flush_acks(s);
    durable_snapshot_poll(s->durable, 1); // a snapshot already running
    int64_t t0 = clock_now_ms();
    s_snapshot(s);
    int ok = durable_snapshot_poll(s->durable, 1) > 0;
    log_info("final snapshot %s in %lld ms", ok ? "written" : "FAILED",
             (long long)(clock_now_ms() - t0));
}

// ---------------------------------------------------------------------------------------
// Dump: the restored contents as CSV (apex-replay --dump), for operators and tests.

int replay_server_dump(const replay_server_t *s, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) {
        log_error("cannot write %s", path);
        return -1;
    }
    uint32_t O = store_obs_dim(s->store);
    fprintf(f, "slot,generation,priority_alpha,action,reward,discount");
    for (uint32_t j = 0; j < O; j++) {
        fprintf(f, ",obs%u", j);
    }
    for (uint32_t j = 0; j < O; j++) {
        fprintf(f, ",next_obs%u", j);
    }
    fputc('\n', f);
    // Both observations of a row, as bytes of the run's dtype; printed as numbers.
    int u8 = store_obs_elem_bytes(s->store) == 1;
    size_t ob = (size_t)O * store_obs_elem_bytes(s->store);
    unsigned char *obs = xmalloc(2 * ob), *next = obs + ob;
    float r, d;
    int32_t a;
    for (uint32_t slot = 0; slot < store_size(s->store); slot++) {
        store_read_slot(s->store, slot, obs, &a, &r, &d, next);
        fprintf(f, "%u,%u,%.9g,%d,%.9g,%.9g", slot, store_slot_generation(s->store, slot),
                store_slot_priority(s->store, slot), a, (double)r, (double)d);
        for (uint32_t j = 0; j < 2 * O; j++) {
            if (u8) {
                fprintf(f, ",%u", (unsigned)obs[j]);
            } else {
                float v;
                memcpy(&v, obs + (size_t)j * 4, 4);
                fprintf(f, ",%.9g", (double)v);
            }
        }
        fputc('\n', f);
    }
    free(obs);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        log_error("writing %s failed", path);
        return -1;
    }
    return 0;
}
