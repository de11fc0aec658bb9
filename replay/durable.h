// durable.h: what of the replay server survives a crash ([replay] durability).
//
//   none      nothing is written; a restarted server starts empty.
//   snapshot  every snapshot_interval_s the whole state (transitions, priorities,
//             generations, counters, per-actor sequence marks) is written atomically to
//             <dir>/snapshot.bin; a crash loses what arrived since the last snapshot.
//   wal       snapshots, plus a write-ahead log: every insert and priority update is appended
//             to <dir>/wal-<segment>.log and fsynced at most every wal_sync_ms (group
//             commit); the server acknowledges an insert only after its record is on disk,
//             so nothing acknowledged is ever lost.
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
// a hole), and retries a snapshot every sync tick; the first snapshot that succeeds restores
// durability. Not thread-safe: the replay server's thread owns it.
#ifndef APEX_DURABLE_H
#define APEX_DURABLE_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

typedef enum { DURABLE_REC_INSERT = 1, DURABLE_REC_UPDATE = 2 } durable_rec_kind;

typedef struct durable durable_t;

typedef struct {
    const char *dir;       // created if missing
    int mode;              // config_durability (DURABILITY_NONE/SNAPSHOT/WAL)
    size_t buffer_bytes;   // log records buffered between two syncs before a forced write
} durable_config_t;

// What durable_restore found, for the start-up log line.
typedef struct {
    int had_snapshot;
    uint64_t snapshot_size;     // transitions in the snapshot
    uint32_t segments;          // log segments replayed
    uint64_t records;           // log records replayed
    uint64_t torn_bytes;        // bytes cut from a torn or corrupt tail
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

// Loads snapshot.bin (if any) into store and hands its blob to on_blob, then feeds every
// later log record to on_record. Afterwards opens a fresh log segment for appends. Returns
// APEX_OK, or an apex_err after logging why (unreadable or corrupt snapshot, or one written
// for another capacity/obs_dim: a start-up error, because silently starting empty would
// lose the data).
int durable_restore(durable_t *self, store_t *store, durable_blob_fn on_blob,
                    durable_record_fn on_record, void *arg, durable_restore_info_t *info);

// Appends one record to the log buffer (wal mode; otherwise, or when degraded, a no-op).
// Returns 1 when the buffer is full and durable_sync should run now, else 0.
int durable_append(durable_t *self, int kind, const void *payload, size_t len);
// Writes the buffered records and fdatasyncs the segment. APEX_OK means every record
// appended so far is on disk. On failure returns APEX_ENOSPC/APEX_EIO and enters the
// degraded state (see top).
int durable_sync(durable_t *self);

// Starts a snapshot of store + blob in a child process (snapshot and wal modes), after
// syncing the log. Returns APEX_OK, APEX_EAGAIN when one is already running, or an error.
int durable_snapshot_start(durable_t *self, const store_t *store, const void *blob,
                           size_t blob_len);
// Reaps a finished snapshot child: returns 1 when one finished successfully since the last
// call (covered log segments deleted, degraded state cleared), -1 when one failed, 0
// otherwise. With wait set, blocks until the running child (if any) ends.
int durable_snapshot_poll(durable_t *self, int wait);

int durable_degraded(const durable_t *self);
uint64_t durable_snapshots_written(const durable_t *self);
uint64_t durable_failures(const durable_t *self);

#endif
