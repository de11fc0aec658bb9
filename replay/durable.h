// durable.h: what of the replay server survives a crash ([replay] durability).
//
//   none      nothing is written; a restarted server starts empty.
//   snapshot  every snapshot_interval_s the whole state (transitions, priorities,
//             generations, counters, per-actor sequence marks) is written atomically to
//             <dir>/snapshot.bin; a crash loses what arrived since the last snapshot.
//   wal       snapshots, plus a write-ahead log: every insert and priority update is appended
//             to <dir>/wal-<segment>.log; a writer thread writes and fdatasyncs the
//             buffered records in groups (group commit, see durable_commit_start) while the
//             server keeps appending; the server acknowledges an insert only after its
//             record is on disk, so nothing acknowledged is ever lost.
//
// Snapshots are written by a forked child (Redis BGSAVE): fork gives the child a
// copy-on-write image of the state at that instant, so the server's loop never stops for the
// write. At the fork the log moves on to a new segment; when the child has renamed the new
// snapshot into place, the segments it covers are deleted. Restore = snapshot, then the
// later segments in order. Each log record carries its length and a CRC32C; a torn or
// corrupt tail (a crash mid-append) is detected, truncated at the last whole record, and
// reported, never fatal.
//
// A write or fsync that fails (full disk) is reported once, the server keeps serving in
// memory "without durability" (durable_degraded), stops appending to the log (it would have
// a hole), and retries a snapshot every sync tick; the first snapshot started after the
// failure that succeeds restores durability. A snapshot started while the log is stopped
// restarts the log at once in a new segment, which begins with a marker record naming that
// snapshot: records arriving while it is written are logged, and if the machine crashes
// before the snapshot is on disk, restore sets that segment aside (.orphaned) rather than
// replay it on top of an older snapshot. Not thread-safe: the replay server's thread owns it (the writer thread is
// internal: it only writes and fdatasyncs buffers handed to it).
#ifndef APEX_DURABLE_H
#define APEX_DURABLE_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

typedef enum { DURABLE_REC_INSERT = 1, DURABLE_REC_UPDATE = 2 } durable_rec_kind;

typedef struct durable durable_t;

typedef struct {
    const char *dir;     // created if missing
    int mode;            // config_durability (DURABILITY_NONE/SNAPSHOT/WAL)
    size_t buffer_bytes; // log records buffered between two syncs before a forced write
} durable_config_t;

// What durable_restore found, for the start-up log line.
typedef struct {
    int had_snapshot;
    uint64_t snapshot_size; // transitions in the snapshot
    uint32_t segments;      // log segments replayed
    uint64_t records;       // log records replayed
    uint64_t torn_bytes;    // bytes cut from a torn or corrupt tail
} durable_restore_info_t;

// Called for each log record during restore, in order (a record the server cannot apply is
// counted and skipped by the server itself).
typedef void (*durable_record_fn)(void *arg, int kind, const void *payload, size_t len);
// Called once with the server's blob from the snapshot, before any log record is replayed
// (the records build on the state the blob describes).
typedef void (*durable_blob_fn)(void *arg, const void *blob, size_t len);

// Creates the directory and opens nothing yet. NULL (after log_error) if the directory cannot
// be created. mode NONE gives an object whose every call is a no-op.
durable_t *durable_new(const durable_config_t *cfg);
// Waits for a running snapshot child, then frees.
void durable_destroy(durable_t **self_p);

// Loads snapshot.bin (if any) into store and hands its blob to on_blob(blob_arg, ...), then
// feeds every later log record to on_record(record_arg, ...). Afterwards opens a fresh log segment for appends. Returns
// APEX_OK, or an apex_err after logging why (unreadable or corrupt snapshot, or one written
// for another capacity/obs_dim: a start-up error, because silently starting empty would
// lose the data).
int durable_restore(durable_t *self, store_t *store, durable_blob_fn on_blob, void *blob_arg,
                    durable_record_fn on_record, void *record_arg, durable_restore_info_t *info);

// Appends one record (its header, CRC and a copy of payload) to the log buffer (wal mode;
// otherwise, or when degraded, a no-op). Returns 1 when the buffer is over half full and a
// commit should start, else 0. When the buffer is full it waits for the writer thread and
// writes the buffer itself (back-pressure: records are never dropped or reordered).
int durable_append(durable_t *self, int kind, const void *payload, size_t len);
size_t durable_buffered(const durable_t *self); // bytes appended since the last commit
size_t durable_buffer_cap(const durable_t *self);

// Group commit without blocking: hands the buffered records to the writer thread, which
// writes them and fdatasyncs the segment. Returns the id of the commit that covers every
// record appended so far (possibly one that has already finished, when there was nothing
// new), or 0 when the writer is still busy with the previous commit (try again after its
// notify). Without a writer thread the commit runs inline.
uint64_t durable_commit_start(durable_t *self);
// 1 when commit id has ended: its records are on disk, or the log failed and the server is
// degraded (durable_degraded tells which). Takes a finished commit's result without waiting.
int durable_commit_done(durable_t *self, uint64_t id);
// Blocking: waits for the writer, then writes and fdatasyncs whatever is left. APEX_OK
// means every record appended so far is on disk (every commit id issued has ended). On
// failure returns APEX_ENOSPC/APEX_EIO and enters the degraded state (see top).
int durable_sync(durable_t *self);

// Starts the writer thread (wal mode; otherwise a no-op). notify(arg) is called on the
// writer's thread after each commit ends; it must be thread-safe (the server sends a message
// on an inproc socket). Returns APEX_OK or APEX_EIO (logged).
typedef void (*durable_notify_fn)(void *arg);
int durable_writer_start(durable_t *self, durable_notify_fn notify, void *arg);
// Lets the writer finish a posted commit, then joins it. Idempotent.
void durable_writer_stop(durable_t *self);

// Starts a snapshot of store + blob in a child process (snapshot and wal modes), after
// syncing the log. Returns APEX_OK, APEX_EAGAIN when one is already running, or an error.
int durable_snapshot_start(durable_t *self, const store_t *store, const void *blob,
                           size_t blob_len);
// Reaps a finished snapshot child: returns 1 when one finished successfully since the last
// call (covered log segments deleted; degraded cleared unless the log failed again after
// that snapshot started), -1 when one failed, 0
// otherwise. With wait set, blocks until the running child (if any) ends.
int durable_snapshot_poll(durable_t *self, int wait);

int durable_degraded(const durable_t *self);
uint64_t durable_snapshots_written(const durable_t *self);
uint64_t durable_failures(const durable_t *self);

#endif
