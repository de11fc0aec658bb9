// tbevents.h: TensorBoard event files, written without TensorFlow.
//
// A writer owns one file <dir>/events.out.tfevents.<10-digit unix time>.<hostname> (the
// name tensorboardX uses; TensorBoard only requires "tfevents" in it). If that name exists
// already (two writers opened in the same second), ".001", ".002", ... up to ".999" is
// appended: the name keeps "tfevents" and sorts after the older file, which matters because
// TensorBoard's Python loader reads a directory's files in name order and never goes back.
// The file is a sequence of TFRecords (u64 length LE, masked CRC-32C of those 8 bytes, the
// data, masked CRC-32C of the data; CRC-32C from fileio.h) holding tensorboard.Event
// messages (proto/tensorboard.proto): first Event{wall_time, file_version "brain.Event:2"},
// then one Event{wall_time, step, summary} per tbevents_scalars call.
// What it does not do: images, histograms, text, plugin metadata; reading (the independent
// reader is tests/tb_read.py); rotating files.
//
// Buffering and durability: tbevents_scalars only encodes into a buffer made at creation
// (TBEVENTS_BUF_BYTES; it grows only for a single record larger than that, at most
// TBEVENTS_RECORD_MAX). tbevents_flush writes the buffer with write(2), so a flushed record
// survives the process (a crash, SIGKILL) but not necessarily the machine: there is no
// fsync. Metrics are advisory and a stall of the caller's loop on every metrics row would
// cost more than the last few rows an OS crash can take; each record carries its own CRCs,
// so a torn tail is detected by a reader and never mistaken for data.
//
// Errors (runtime class, STYLE S6.4): a failed write (disk full: APEX_ENOSPC, including a
// file-size limit; anything else: APEX_EIO) is returned, never logged here (the caller
// reports it, rate-limited). The file is first cut back to its last complete record, so
// the records written before stay readable and later ones continue cleanly. The unwritten
// records stay buffered and the next flush retries them; when a new record no longer fits
// next to them, they are dropped, counted (tbevents_dropped) and the new one is kept.
// Thread-safety: none; one writer belongs to one thread. Two writers in one directory each
// get their own file.
#ifndef APEX_TBEVENTS_H
#define APEX_TBEVENTS_H

#include <stddef.h>
#include <stdint.h>

#define TBEVENTS_FILE_VERSION "brain.Event:2"
#define TBEVENTS_BUF_BYTES (64 * 1024)    // pending records: 100+ rows of 20 scalars
#define TBEVENTS_RECORD_MAX (1024 * 1024) // one framed record, at most
#define TBEVENTS_MAX_TAGS 1024            // scalars in one tbevents_scalars call
#define TBEVENTS_RECORD_OVERHEAD 16       // framing bytes around each Event

typedef struct tbevents tbevents_t;

// Creates dir (mkdir -p), opens a new event file in it (see top) and writes and flushes the
// first record with wall_time = now. Returns NULL after logging why (cannot create the
// directory or the file, or cannot write the first record: the empty file is removed).
// Caller destroys with tbevents_destroy.
tbevents_t *tbevents_new(const char *dir);
// The same with a given wall time (seconds since the epoch), used for the first record and
// the file name: tests use it for fixed bytes and for two files in one second.
tbevents_t *tbevents_new_at(const char *dir, double wall_time);
// Flushes (see top), closes and frees; records it still cannot write are lost and logged
// once. Accepts NULL or *self_p == NULL; sets *self_p = NULL.
void tbevents_destroy(tbevents_t **self_p);

// Appends one Event{wall_time, step, summary{n x value{tags[i], simple_value (float)
// values[i]}}} to the buffer (nothing is written to the file). Tags are UTF-8 (a protobuf
// string; "train/loss": TensorBoard groups charts by the part before '/'); values are stored
// as float32, as TensorBoard's simple_value is; NaN and infinities as they are. 0 <= n <=
// TBEVENTS_MAX_TAGS and non-NULL tags are the caller's duty (asserted). Returns APEX_OK;
// APEX_EINVAL (nothing buffered) if the record would exceed TBEVENTS_RECORD_MAX; or the
// error of the flush it had to try when the buffer was full (the new record is buffered
// anyway, the older ones are dropped and counted). No allocation unless n or the record size
// is the largest so far.
int tbevents_scalars(tbevents_t *self, int64_t step, double wall_time, const char *const *tags,
                     const double *values, int n);
// Writes every buffered record. Returns APEX_OK, APEX_ENOSPC or APEX_EIO (see top: the file
// then ends at its last complete record and the records stay buffered for the next flush).
int tbevents_flush(tbevents_t *self);

// The file's path (valid until destroy).
const char *tbevents_path(const tbevents_t *self);
// Records dropped after failed writes, since creation.
uint64_t tbevents_dropped(const tbevents_t *self);
// Records buffered and not yet written.
int tbevents_pending(const tbevents_t *self);

// TFRecord's masked CRC-32C of buf: mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8.
uint32_t tbevents_masked_crc(const void *buf, size_t len);

#endif
