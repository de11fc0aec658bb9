// check_durable.c: replay/durable.c driven directly, with a small store in a temp directory:
// the write-ahead log's records replayed in order with their kinds and payloads (and the
// bytes on disk against this file's own encoding of the framing), a snapshot plus the later
// segments, torn tails cut at every byte of the last record, a corrupt byte anywhere in a
// record in the middle of a log, segments after a torn one set aside, covered segments
// deleted, every way a snapshot can be refused (with the store left empty), write failures
// under RLIMIT_FSIZE that degrade the log until a snapshot succeeds, the way back from the
// degraded state (restore must give the server's store again: nothing lost between a
// snapshot's fork and its reaping, nothing replayed twice, and a crash before the recovery
// snapshot lands gives the log as it was at the failure), group commit on the writer thread
// (also restarted), back-pressure of a full buffer, and the none/snapshot modes.
//
// The on-disk layouts are mirrored here from durable.c, where they are private: a log
// record is {u32 len, u32 kind, u32 crc32c(kind, payload)} then the payload; a snapshot is
// s_snap_header (mirrored below, and checked against every file the code writes: size
// field, header CRC, payload CRC and total size), the store's rows, its leaves, the blob.
// No test sleeps: child processes are reaped with durable_snapshot_poll(wait = 1), and
// commits are waited for through the writer's notify with a deadline.
#include "check_apex.h"

#include "apex.h"
#include "clock.h"
#include "config.h"
#include "durable.h"
#include "fileio.h"
#include "store.h"
#include "xalloc.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CAP 8      // store capacity (transitions)
#define OBS 3      // obs_dim
#define REC_HDR 12 // bytes of a log record's header
#define MAX_RECS 64
#define PAYLOAD_MAX 320

// ---------------------------------------------------------------------------------------
// Files

static void s_seg_path(char *out, size_t n, const char *dir, unsigned seg) {
    snprintf(out, n, "%s/wal-%08u.log", dir, seg);
}

static long long s_file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static int s_exists(const char *path) { return access(path, F_OK) == 0; }

// Reads a whole file; caller frees. *len gets its size.
static uint8_t *s_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = xmalloc((size_t)n + 1);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void s_spit(const char *path, const uint8_t *buf, size_t len) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

static int s_same_file(const char *path, const uint8_t *want, size_t want_len) {
    size_t len;
    uint8_t *got = s_slurp(path, &len);
    int same = len == want_len && memcmp(got, want, len) == 0;
    xfree(got);
    return same;
}

// Removes every entry of dir (not dir itself): a fresh start between two cases of a loop.
static void s_clear_dir(const char *dir) {
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    char path[700];
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            ck_assert_int_eq(unlink(path), 0);
        }
    }
    closedir(d);
}

// A file-size limit (RLIMIT_FSIZE) makes write(2) fail with EFBIG part way, as a full disk
// does with ENOSPC, and unlike permission bits it stops root too. Each test runs in its own
// forked process (CK_FORK), so the limit dies with it. It applies to every file of the
// process, Check's own message file too (every ck_assert appends to it), so nothing is
// asserted while it is on: the results are kept and checked after it is lifted.
static int s_limit_file_size(rlim_t bytes) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {bytes, RLIM_INFINITY};
    return setrlimit(RLIMIT_FSIZE, &rl);
}

// ---------------------------------------------------------------------------------------
// Log records: record i has a kind and a payload computed from i, so any replayed record
// can be checked against the one it claims to be. Record 0 has an empty payload.

static int s_kind(int i) { return i % 3 == 2 ? DURABLE_REC_UPDATE : DURABLE_REC_INSERT; }

static size_t s_payload(int i, uint8_t *out) {
    size_t len = (size_t)((i * 7) % 23) + (i % 5 == 4 ? 30 : 0);
    for (size_t j = 0; j < len; j++) {
        out[j] = (uint8_t)(i * 31 + (int)j * 7 + 1);
    }
    return len;
}

static size_t s_rec_bytes(int i) {
    uint8_t p[PAYLOAD_MAX];
    return REC_HDR + s_payload(i, p);
}

// Offset of record i in a segment that starts with record first.
static size_t s_rec_offset(int first, int i) {
    size_t off = 0;
    for (int j = first; j < i; j++) {
        off += s_rec_bytes(j);
    }
    return off;
}

// This file's own encoding of record i (the framing durable.h describes). Returns bytes.
static size_t s_encode(int i, uint8_t *out) {
    uint8_t p[PAYLOAD_MAX];
    size_t len = s_payload(i, p);
    uint32_t h[3] = {(uint32_t)len, (uint32_t)s_kind(i), 0};
    h[2] = fileio_crc32c(fileio_crc32c(0, &h[1], 4), p, len);
    memcpy(out, h, sizeof h);
    memcpy(out + sizeof h, p, len);
    return sizeof h + len;
}

// Appends records first .. first+n-1. Returns how many appends asked for a commit.
static int s_append_range(durable_t *d, int first, int n) {
    int asked = 0;
    for (int i = first; i < first + n; i++) {
        uint8_t p[PAYLOAD_MAX];
        size_t len = s_payload(i, p);
        asked += durable_append(d, s_kind(i), p, len);
    }
    return asked;
}

// ---------------------------------------------------------------------------------------
// Stores: row r holds values computed from r (obs = r + k/4, next_obs = obs + 100, action
// r % 5, reward r, discount 1/(1 + r % 3), raw priority 1 + r % 4).

static store_t *s_store(uint32_t capacity, uint32_t obs_dim, uint32_t elem_bytes) {
    store_config_t cfg = {
        .capacity = capacity, .obs_dim = obs_dim, .obs_elem_bytes = elem_bytes, .alpha = 0.6};
    store_t *s = store_new(&cfg);
    ck_assert_ptr_nonnull(s);
    return s;
}

static void s_add_row(store_t *s, uint64_t r) {
    float obs[OBS], next_obs[OBS], rew = (float)r, disc = 1.0f / (float)(1 + r % 3);
    float prio = (float)(1 + r % 4);
    int32_t act = (int32_t)(r % 5);
    for (int k = 0; k < OBS; k++) {
        obs[k] = (float)r + 0.25f * (float)k;
        next_obs[k] = obs[k] + 100.0f;
    }
    store_add(s, 1, obs, &act, &rew, &disc, next_obs, &prio);
}

// 1 when a and b hold the same state: counters, and every slot's row, p^alpha and generation.
static int s_same_store(const store_t *a, const store_t *b) {
    store_state_t sa, sb;
    store_get_state(a, &sa);
    store_get_state(b, &sb);
    if (sa.next != sb.next || sa.size != sb.size || sa.inserted != sb.inserted ||
        sa.stale != sb.stale || sa.max_prio != sb.max_prio) {
        return 0;
    }
    for (uint32_t i = 0; i < store_capacity(a); i++) {
        float oa[OBS], ob[OBS], na[OBS], nb[OBS], ra = 0, rb = 0, da = 0, db = 0;
        int32_t aa = 0, ab = 0;
        int ka = store_read_slot(a, i, oa, &aa, &ra, &da, na);
        int kb = store_read_slot(b, i, ob, &ab, &rb, &db, nb);
        if (ka != kb || store_slot_generation(a, i) != store_slot_generation(b, i) ||
            store_slot_priority(a, i) != store_slot_priority(b, i)) {
            return 0;
        }
        if (ka == 0 && (memcmp(oa, ob, sizeof oa) != 0 || memcmp(na, nb, sizeof na) != 0 ||
                        aa != ab || ra != rb || da != db)) {
            return 0;
        }
    }
    return 1;
}

// 1 when s was never touched (what a refused restore must leave).
static int s_store_empty(const store_t *s) {
    return store_size(s) == 0 && store_inserted(s) == 0 && store_next_slot(s) == 0 &&
           store_total_priority(s) == 0.0 && store_slot_generation(s, 0) == 0;
}

// ---------------------------------------------------------------------------------------
// What a restore hands back: the blob and every record, in order. With apply set, each
// INSERT record carrying an 8-byte row number is added to that store, as the server does.

typedef struct {
    int n;
    int kinds[MAX_RECS];
    size_t lens[MAX_RECS];
    uint8_t payloads[MAX_RECS][PAYLOAD_MAX];
    int blob_calls;
    int records_before_blob;
    size_t blob_len;
    uint8_t blob[64];
    store_t *apply;
} s_replayed;

static void s_on_blob(void *arg, const void *blob, size_t len) {
    s_replayed *r = arg;
    r->blob_calls++;
    r->records_before_blob += r->n;
    r->blob_len = len;
    if (len > 0 && len <= sizeof r->blob) {
        memcpy(r->blob, blob, len);
    }
}

static void s_on_record(void *arg, int kind, const void *payload, size_t len) {
    s_replayed *r = arg;
    ck_assert_int_lt(r->n, MAX_RECS);
    ck_assert_uint_le(len, PAYLOAD_MAX);
    r->kinds[r->n] = kind;
    r->lens[r->n] = len;
    if (len > 0) {
        memcpy(r->payloads[r->n], payload, len);
    }
    r->n++;
    if (r->apply && kind == DURABLE_REC_INSERT && len == sizeof(uint64_t)) {
        uint64_t row;
        memcpy(&row, payload, sizeof row);
        s_add_row(r->apply, row);
    }
}

static int s_restore(durable_t *d, store_t *s, s_replayed *r, durable_restore_info_t *info) {
    store_t *apply = r->apply;
    memset(r, 0, sizeof *r);
    r->apply = apply;
    return durable_restore(d, s, s_on_blob, r, s_on_record, r, info);
}

// Records at .. at+n-1 of r are records first .. first+n-1.
static void s_check_records(const s_replayed *r, int at, int first, int n) {
    for (int j = 0; j < n; j++) {
        uint8_t p[PAYLOAD_MAX];
        size_t len = s_payload(first + j, p);
        ck_assert_int_eq(r->kinds[at + j], s_kind(first + j));
        ck_assert_uint_eq(r->lens[at + j], len);
        ck_assert_int_eq(memcmp(r->payloads[at + j], p, len), 0);
    }
}

static const char s_blob[] = "server blob: counters, credit, sequence marks";
#define BLOB_LEN (sizeof s_blob - 1)

static durable_t *s_open(const char *dir, int mode, size_t buffer_bytes) {
    durable_config_t cfg = {.dir = dir, .mode = mode, .buffer_bytes = buffer_bytes};
    durable_t *d = durable_new(&cfg);
    ck_assert_ptr_nonnull(d);
    return d;
}

// The server's part in the degraded-mode tests: row r into the store, its record into the log.
static int s_insert(durable_t *d, store_t *s, uint64_t r) {
    s_add_row(s, r);
    return durable_append(d, DURABLE_REC_INSERT, &r, sizeof r);
}

// A fresh store restored from dir must equal want; returns how many records were replayed.
static int s_restore_equals(const char *dir, int mode, const store_t *want,
                            durable_restore_info_t *info) {
    durable_t *d = s_open(dir, mode, 0);
    store_t *s = s_store(CAP, OBS, 4);
    s_replayed r = {.apply = s};
    ck_assert_int_eq(s_restore(d, s, &r, info), APEX_OK);
    ck_assert_msg(s_same_store(s, want), "restored store differs: %llu rows, want %llu",
                  (unsigned long long)store_size(s), (unsigned long long)store_size(want));
    if (info->had_snapshot) {
        ck_assert_int_eq(r.blob_calls, 1);
        ck_assert_int_eq(r.records_before_blob, 0);
        ck_assert_uint_eq(r.blob_len, BLOB_LEN);
        ck_assert_int_eq(memcmp(r.blob, s_blob, BLOB_LEN), 0);
    }
    durable_destroy(&d);
    store_destroy(&s);
    return r.n;
}

// ---------------------------------------------------------------------------------------
// Round trips

START_TEST(test_records_replay_in_order_with_kinds_and_payloads) {
    enum { N = 12 };
    const char *dir = check_tmpdir();
    durable_t *d = s_open(dir, DURABILITY_WAL, 0);
    store_t *s = s_store(CAP, OBS, 4);
    s_replayed r = {0};
    durable_restore_info_t info;
    ck_assert_int_eq(s_restore(d, s, &r, &info), APEX_OK);
    ck_assert_int_eq(r.n, 0);
    ck_assert_int_eq(r.blob_calls, 0); // no snapshot, no blob
    ck_assert_int_eq(info.had_snapshot, 0);
    ck_assert_uint_eq(info.segments, 0);
    ck_assert_uint_eq(info.records + info.torn_bytes + info.snapshot_size, 0);
    char seg1[600];
    s_seg_path(seg1, sizeof seg1, dir, 1);
    ck_assert_int_eq(s_file_size(seg1), 0); // restore opened a fresh segment for appends
    ck_assert_int_eq(s_append_range(d, 0, N), 0);
    ck_assert_uint_eq(durable_buffered(d), s_rec_offset(0, N));
    ck_assert_int_eq(s_file_size(seg1), 0); // only buffered until a sync
    ck_assert_int_eq(durable_sync(d), APEX_OK);
    ck_assert_uint_eq(durable_buffered(d), 0);
    ck_assert_int_eq(durable_sync(d), APEX_OK); // nothing new: still fine
    durable_destroy(&d);
    ck_assert_ptr_null(d);

    // The bytes on disk are exactly this file's own encoding of the records.
    uint8_t want[MAX_RECS * (REC_HDR + PAYLOAD_MAX)];
    size_t want_len = 0;
    for (int i = 0; i < N; i++) {
        want_len += s_encode(i, want + want_len);
    }
    ck_assert(s_same_file(seg1, want, want_len));

    d = s_open(dir, DURABILITY_WAL, 0);
    ck_assert_int_eq(s_restore(d, s, &r, &info), APEX_OK);
    ck_assert_int_eq(r.n, N);
    s_check_records(&r, 0, 0, N);
    ck_assert_uint_eq(info.records, N);
    ck_assert_uint_eq(info.segments, 1);
    ck_assert_uint_eq(info.torn_bytes, 0);
    ck_assert_int_eq(info.had_snapshot, 0);
    ck_assert_uint_eq(store_size(s), 0); // records go to the callback, never to the store
    ck_assert(s_same_file(seg1, want, want_len));
    // The next appends go to segment 2, after segment 1 in the next restore.
    s_append_range(d, N, 3);
    ck_assert_int_eq(durable_sync(d), APEX_OK);
    durable_destroy(&d);
    d = s_open(dir, DURABILITY_WAL, 0);
    ck_assert_int_eq(s_restore(d, s, &r, &info), APEX_OK);
    ck_assert_int_eq(r.n, N + 3);
    s_check_records(&r, 0, 0, N + 3);
    ck_assert_uint_eq(info.segments, 2);
    durable_destroy(&d);
    store_destroy(&s);
    check_rmtree(dir);
}
END_TEST

START_TEST(test_snapshot_then_later_segments_restore_both) {
    const char *dir = check_tmpdir();
    durable_t *d = s_open(dir, DURABILITY_WAL, 0);
    store_t *s = s_store(CAP, OBS, 4);
    s_replayed r = {0};
    durable_restore_info_t info;
    ck_assert_int_eq(s_restore(d, s, &r, &info), APEX_OK);
    // 11 rows into 8 slots (wrapped), one priority update applied and one stale.
    for (uint64_t row = 0; row < 11; row++) {
        s_add_row(s, row);
    }
    uint64_t keys[2] = {5u | (uint64_t)store_slot_generation(s, 5) << 32, 1u | (uint64_t)9 << 32};
    float prio[2] = {7.5f, 2.0f};
    ck_assert_uint_eq(store_update(s, 2, keys, prio), 1);
    s_append_range(d, 0, 3);
    ck_assert_int_eq(durable_sync(d), APEX_OK);
    ck_assert_int_eq(durable_snapshot_start(d, s, s_blob, BLOB_LEN), APEX_OK);
    ck_assert_int_eq(durable_snapshot_poll(d, 1), 1);
    ck_assert_int_eq(durable_snapshot_poll(d, 0), 0); // reaped once
    ck_assert_uint_eq(durable_snapshots_written(d), 1);
    char seg1[600], seg2[600], snap[600];
    s_seg_path(seg1, sizeof seg1, dir, 1);
    s_seg_path(seg2, sizeof seg2, dir, 2);
    snprintf(snap, sizeof snap, "%s/snapshot.bin", dir);
    ck_assert(s_exists(snap));
    ck_assert(!s_exists(seg1)); // covered by the snapshot: deleted
    ck_assert(s_exists(seg2));
    s_append_range(d, 3, 4);
    ck_assert_int_eq(durable_sync(d), APEX_OK);
    durable_destroy(&d);

    d = s_open(dir, DURABILITY_WAL, 0);
    store_t *s2 = s_store(CAP, OBS, 4);
    ck_assert_int_eq(s_restore(d, s2, &r, &info), APEX_OK);
    ck_assert(s_same_store(s, s2));
    ck_assert_uint_eq(store_stale_updates(s2), 1);
    ck_assert_int_eq(r.blob_calls, 1);
    ck_assert_int_eq(r.records_before_blob, 0); // the blob comes before any record
    ck_assert_uint_eq(r.blob_len, BLOB_LEN);
    ck_assert_int_eq(memcmp(r.blob, s_blob, BLOB_LEN), 0);
    ck_assert_int_eq(r.n, 4); // only the records after the snapshot
    s_check_records(&r, 0, 3, 4);
    ck_assert_int_eq(info.had_snapshot, 1);
    ck_assert_uint_eq(info.snapshot_size, CAP);
    ck_assert_uint_eq(info.segments, 1);
    ck_assert_uint_eq(info.records, 4);
    ck_assert_uint_eq(info.torn_bytes, 0);
    durable_destroy(&d);
    store_destroy(&s);
    store_destroy(&s2);
    check_rmtree(dir);
}
END_TEST

START_TEST(test_snapshot_mode_keeps_no_log) {
    const char *dir = check_tmpdir();
    durable_t *d = s_open(dir, DURABILITY_SNAPSHOT, 0);
    store_t *s = s_store(CAP, OBS, 4);
    s_replayed r = {0};
    durable_restore_info_t info;
    ck_assert_int_eq(s_restore(d, s, &r, &info), APEX_OK);
    s_add_row(s, 1);
    s_add_row(s, 2);
    ck_assert_int_eq(s_append_range(d, 0, 5), 0);
    ck_assert_uint_eq(durable_buffered(d), 0);
    ck_assert_int_eq(durable_sync(d), APEX_OK);
    ck_assert_int_eq(durable_writer_start(d, NULL, NULL), APEX_OK); // no-op
    char seg1[600];
    s_seg_path(seg1, sizeof seg1, dir, 1);
    ck_assert(!s_exists(seg1));
    ck_assert_int_eq(durable_snapshot_start(d, s, s_blob, BLOB_LEN), APEX_OK);
    ck_assert_int_eq(durable_snapshot_start(d, s, s_blob, BLOB_LEN), APEX_EAGAIN);
    ck_assert_int_eq(durable_snapshot_poll(d, 1), 1);
    durable_destroy(&d);
    ck_assert(!s_exists(seg1));
    durable_restore_info_t info2;
    ck_assert_int_eq(s_restore_equals(dir, DURABILITY_SNAPSHOT, s, &info2), 0);
    ck_assert_int_eq(info2.had_snapshot, 1);
    ck_assert_uint_eq(info2.snapshot_size, 2);
    store_destroy(&s);
    check_rmtree(dir);
}
END_TEST

START_TEST(test_mode_none_touches_nothing) {
    const char *base = check_tmpdir();
    char dir[600];
    snprintf(dir, sizeof dir, "%s/not/created", base);
    durable_t *d = s_open(dir, DURABILITY_NONE, 0);
    ck_assert(!s_exists(dir));
    store_t *s = s_store(CAP, OBS, 4);
    s_replayed r = {0};
    durable_restore_info_t info;
    ck_assert_int_eq(s_restore(d, s, &r, &info), APEX_OK);
    ck_assert_int_eq(r.n + r.blob_calls, 0);
    ck_assert_int_eq(s_append_range(d, 0, 3), 0);
    ck_assert_int_eq(durable_sync(d), APEX_OK);
    ck_assert_int_eq(durable_writer_start(d, NULL, NULL), APEX_OK);
    durable_writer_stop(d);
    ck_assert_int_eq(durable_snapshot_start(d, s, s_blob, BLOB_LEN), APEX_OK);
    ck_assert_int_eq(durable_snapshot_poll(d, 1), 0);
    ck_assert_int_eq(durable_degraded(d), 0);
    durable_destroy(&d);
    ck_assert(!s_exists(dir));
    store_destroy(&s);
    check_rmtree(base);
}
END_TEST

START_TEST(test_second_instance_on_a_directory_is_refused) {
    const char *dir = check_tmpdir();
    durable_t *a = s_open(dir, DURABILITY_WAL, 0);
    durable_config_t cfg = {.dir = dir, .mode = DURABILITY_SNAPSHOT};
    ck_assert_ptr_null(durable_new(&cfg)); // the lock is held by a
    durable_destroy(&a);
    durable_t *b = durable_new(&cfg); // released by destroy
    ck_assert_ptr_nonnull(b);
    durable_destroy(&b);
    durable_destroy(&b); // NULL is fine
    durable_destroy(NULL);
    check_rmtree(dir);
}
END_TEST

// ---------------------------------------------------------------------------------------
// Torn and corrupt logs

START_TEST(test_torn_tail_at_every_byte_of_the_last_record_is_cut_there) {
    enum { N = 5 }; // the last record (4) has a 35-byte payload: 47 bytes in all
    const char *dir = check_tmpdir();
    durable_t *d = s_open(dir, DURABILITY_WAL, 0);
    store_t *s = s_store(CAP, OBS, 4);
    s_replayed r = {0};
    durable_restore_info_t info;
    ck_assert_int_eq(s_restore(d, s, &r, &info), APEX_OK);
    s_append_range(d, 0, N);
    ck_assert_int_eq(durable_sync(d), APEX_OK);
    durable_destroy(&d);
    char seg1[600], seg2[600];
    s_seg_path(seg1, sizeof seg1, dir, 1);
    s_seg_path(seg2, sizeof seg2, dir, 2);
    size_t size;
    uint8_t *whole = s_slurp(seg1, &size);
    size_t last = s_rec_bytes(N - 1), kept = size - last;
    ck_assert_uint_eq(size, s_rec_offset(0, N));
    ck_assert_uint_eq(last, 47);

    // Cut k bytes off the end: 1 .. 35 leave a torn payload, 36 .. 46 a torn header.
    for (size_t k = 1; k < last; k++) {
        s_clear_dir(dir);
        s_spit(seg1, whole, size - k);
        d = s_open(dir, DURABILITY_WAL, 0);
        ck_assert_int_eq(s_restore(d, s, &r, &info), APEX_OK);
        ck_assert_msg(r.n == N - 1, "cut %zu: %d records", k, r.n);
        s_check_records(&r, 0, 0, N - 1);
        ck_assert_uint_eq(info.records, N - 1);
        ck_assert_uint_eq(info.segments, 1);
        ck_assert_msg(info.torn_bytes == last - k, "cut %zu: %llu torn bytes", k,
                      (unsigned long long)info.torn_bytes);
        ck_assert_int_eq(s_file_size(seg1), (long long)kept);
        ck_assert_int_eq(s_file_size(seg2), 0); // appends go to a fresh segment
        durable_destroy(&d);
        // Restoring again finds a whole log.
        d = s_open(dir, DURABILITY_WAL, 0);
        ck_assert_int_eq(s_restore(d, s, &r, &info), APEX_OK);
        ck_assert_int_eq(r.n, N - 1);
        s_check_records(&r, 0, 0, N - 1);
        ck_assert_uint_eq(info.torn_bytes, 0);
        ck_assert_uint_eq(info.segments, 2);
        durable_destroy(&d);
    }
    ck_assert_uint_eq(store_size(s), 0);
    xfree(whole);
    store_destroy(&s);
    check_rmtree(dir);
}
END_TEST

START_TEST(test_torn_or_impossible_record_header_is_cut) {
    const char *dir = check_tmpdir();
    char seg1[600];
    s_seg_path(seg1, sizeof seg1, dir, 1);
    store_t *s = s_store(CAP, OBS, 4);
    s_replayed r = {0};
    durable_restore_info_t info;
    uint8_t buf[4 * (REC_HDR + PAYLOAD_MAX)];
    size_t r0 = s_encode(0, buf), r1 = s_encode(1, buf + r0);
    size_t r2 = s_encode(2, buf + r0 + r1);
    struct {
        const char *what;
        size_t len;         // bytes of buf written as the segment
        int records;        // whole records before the damage
        uint32_t len_field; // when nonzero, record 1's length field is set to it
    } cases[] = {
        {"7 bytes of a first header", 7, 0, 0},
        {"record 0 and 11 bytes of the next header", r0 + 11, 1, 0},
        {"record 0 and a whole header without its payload", r0 + REC_HDR, 1, 0},
        {"a length field past the end of the file", r0 + r1 + r2, 1, 4096},
        {"a length field over the record limit", r0 + r1 + r2, 1, 0xFFFFFFF0u},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        s_clear_dir(dir);
        uint8_t file[sizeof buf];
        memcpy(file, buf, sizeof file);
        if (cases[c].len_field) {
            memcpy(file + r0, &cases[c].len_field, 4);
        }
        s_spit(seg1, file, cases[c].len);
        durable_t *d = s_open(dir, DURABILITY_WAL, 0);
        ck_assert_int_eq(s_restore(d, s, &r, &info), APEX_OK);
        ck_assert_msg(r.n == cases[c].records, "%s: %d records", cases[c].what, r.n);
        s_check_records(&r, 0, 0, r.n);
        size_t keep = cases[c].records ? r0 : 0;
        ck_assert_msg(info.torn_bytes == cases[c].len - keep, "%s: %llu torn bytes", cases[c].what,
                      (unsigned long long)info.torn_bytes);
        ck_assert_int_eq(s_file_size(seg1), (long long)keep);
        durable_destroy(&d);
    }
    store_destroy(&s);
    check_rmtree(dir);
}
END_TEST

// Writes segments 1 .. n_segs of a fresh dir, one per server run: segment k holds records
// first[k-1] .. first[k]-1.
static void s_write_segments(const char *dir, const int *first, int n_segs) {
    store_t *s = s_store(CAP, OBS, 4);
    s_replayed r = {0};
    durable_restore_info_t info;
    for (int k = 0; k < n_segs; k++) {
        durable_t *d = s_open(dir, DURABILITY_WAL, 0);
        ck_assert_int_eq(s_restore(d, s, &r, &info), APEX_OK);
        ck_assert_int_eq(r.n, first[k]);
        s_append_range(d, first[k], first[k + 1] - first[k]);
        ck_assert_int_eq(durable_sync(d), APEX_OK);
        durable_destroy(&d);
    }
    store_destroy(&s);
}

START_TEST(test_segments_after_a_torn_one_are_orphaned) {
    const char *dir = check_tmpdir();
    const int first[] = {0, 3, 5, 7}; // segments 1, 2, 3
    s_write_segments(dir, first, 3);
    char seg[5][600], orphan[3][620];
    for (unsigned k = 1; k <= 4; k++) {
        s_seg_path(seg[k], sizeof seg[k], dir, k);
    }
    snprintf(orphan[1], sizeof orphan[1], "%s.orphaned", seg[2]);
    snprintf(orphan[2], sizeof orphan[2], "%s.orphaned", seg[3]);
    size_t len1, len2, len3;
    uint8_t *b1 = s_slurp(seg[1], &len1), *b2 = s_slurp(seg[2], &len2);
    uint8_t *b3 = s_slurp(seg[3], &len3);
    ck_assert_int_eq(truncate(seg[1], (off_t)len1 - 1), 0); // record 2 torn

    durable_t *d = s_open(dir, DURABILITY_WAL, 0);
    store_t *s = s_store(CAP, OBS, 4);
    s_replayed r = {0};
    durable_restore_info_t info;
    ck_assert_int_eq(s_restore(d, s, &r, &info), APEX_OK);
    ck_assert_int_eq(r.n, 2);
    s_check_records(&r, 0, 0, 2);
    ck_assert_uint_eq(info.segments, 1);
    ck_assert_uint_eq(info.records, 2);
    ck_assert_uint_eq(info.torn_bytes, s_rec_bytes(2) - 1);
    ck_assert_int_eq(s_file_size(seg[1]), (long long)s_rec_offset(0, 2));
    ck_assert(!s_exists(seg[2]) && !s_exists(seg[3]));
    ck_assert(s_same_file(orphan[1], b2, len2)); // set aside untouched
    ck_assert(s_same_file(orphan[2], b3, len3));
    ck_assert_int_eq(s_file_size(seg[4]), 0); // appends go after every segment seen
    s_append_range(d, 20, 2);
    ck_assert_int_eq(durable_sync(d), APEX_OK);
    durable_destroy(&d);

    // The next restore: segment 1 as cut, then 4; the orphans are left alone.
    d = s_open(dir, DURABILITY_WAL, 0);
    ck_assert_int_eq(s_restore(d, s, &r, &info), APEX_OK);
    ck_assert_int_eq(r.n, 4);
    s_check_records(&r, 0, 0, 2);
    s_check_records(&r, 2, 20, 2);
    ck_assert_uint_eq(info.segments, 2);
    ck_assert_uint_eq(info.torn_bytes, 0);
    ck_assert(s_same_file(orphan[1], b2, len2));
    ck_assert(s_same_file(orphan[2], b3, len3));
    durable_destroy(&d);
    xfree(b1);
    xfree(b2);
    xfree(b3);
    store_destroy(&s);
    check_rmtree(dir);
}
END_TEST

START_TEST(test_corrupt_byte_in_the_middle_of_a_log_cuts_there_and_orphans_the_rest) {
    // Segment 1 holds records 0 .. 5, segment 2 records 6, 7. Every byte of record 2 (the
    // third of six) is flipped in turn: its length, kind, CRC or payload. Each one stops the
    // replay after records 0 and 1, cuts segment 1 there and sets segment 2 aside.
    const char *dir = check_tmpdir();
    const int first[] = {0, 6, 8};
    s_write_segments(dir, first, 2);
    char seg1[600], seg2[600], orphan2[620];
    s_seg_path(seg1, sizeof seg1, dir, 1);
    s_seg_path(seg2, sizeof seg2, dir, 2);
    snprintf(orphan2, sizeof orphan2, "%s.orphaned", seg2);
    size_t len1, len2;
    uint8_t *b1 = s_slurp(seg1, &len1), *b2 = s_slurp(seg2, &len2);
    size_t at = s_rec_offset(0, 2), rec = s_rec_bytes(2);
    ck_assert_uint_eq(len1, s_rec_offset(0, 6));
    store_t *s = s_store(CAP, OBS, 4);
    s_replayed r = {0};
    durable_restore_info_t info;
    for (size_t b = at; b < at + rec; b++) {
        s_clear_dir(dir);
        b1[b] ^= 0x01;
        s_spit(seg1, b1, len1);
        b1[b] ^= 0x01;
        s_spit(seg2, b2, len2);
        durable_t *d = s_open(dir, DURABILITY_WAL, 0);
        ck_assert_int_eq(s_restore(d, s, &r, &info), APEX_OK);
        ck_assert_msg(r.n == 2, "byte %zu of record 2 flipped: %d records", b - at, r.n);
        s_check_records(&r, 0, 0, 2);
        ck_assert_uint_eq(info.records, 2);
        ck_assert_uint_eq(info.segments, 1);
        ck_assert_uint_eq(info.torn_bytes, len1 - at);
        ck_assert_int_eq(s_file_size(seg1), (long long)at);
        ck_assert(!s_exists(seg2));
        ck_assert(s_same_file(orphan2, b2, len2));
        durable_destroy(&d);
    }
    xfree(b1);
    xfree(b2);
    store_destroy(&s);
    check_rmtree(dir);
}
END_TEST

START_TEST(test_segments_covered_by_the_snapshot_are_deleted_on_restore) {
    // A crash between a snapshot's rename and the deletion of the segments it covers leaves
    // them behind: restore must not replay them on top of the snapshot that contains them.
    const char *dir = check_tmpdir();
    durable_t *d = s_open(dir, DURABILITY_WAL, 0);
    store_t *s = s_store(CAP, OBS, 4);
    s_replayed r = {0};
    durable_restore_info_t info;
    ck_assert_int_eq(s_restore(d, s, &r, &info), APEX_OK);
    s_add_row(s, 0);
    s_append_range(d, 0, 3);
    ck_assert_int_eq(durable_sync(d), APEX_OK);
    char seg0[600], seg1[600], seg2[600];
    s_seg_path(seg0, sizeof seg0, dir, 0);
    s_seg_path(seg1, sizeof seg1, dir, 1);
    s_seg_path(seg2, sizeof seg2, dir, 2);
    size_t len1;
    uint8_t *b1 = s_slurp(seg1, &len1);
    ck_assert_int_eq(durable_snapshot_start(d, s, s_blob, BLOB_LEN), APEX_OK);
    ck_assert_int_eq(durable_snapshot_poll(d, 1), 1);
    ck_assert(!s_exists(seg1));
    s_append_range(d, 3, 2);
    ck_assert_int_eq(durable_sync(d), APEX_OK);
    durable_destroy(&d);
    s_spit(seg1, b1, len1); // as if the crash came before the deletion
    s_spit(seg0, b1, len1);

    d = s_open(dir, DURABILITY_WAL, 0);
    store_t *s2 = s_store(CAP, OBS, 4);
    ck_assert_int_eq(s_restore(d, s2, &r, &info), APEX_OK);
    ck_assert(s_same_store(s, s2));
    ck_assert_int_eq(r.n, 2);
    s_check_records(&r, 0, 3, 2);
    ck_assert_uint_eq(info.segments, 1);
    ck_assert(!s_exists(seg0) && !s_exists(seg1));
    ck_assert(s_exists(seg2));
    durable_destroy(&d);
    xfree(b1);
    store_destroy(&s);
    store_destroy(&s2);
    check_rmtree(dir);
}
END_TEST

// ---------------------------------------------------------------------------------------
// Snapshot refusals

// durable.c's private snapshot header, mirrored; s_check_layout proves the mirror right
// against each file the code writes.
typedef struct {
    char magic[8];
    uint32_t format_version;
    uint32_t header_bytes;
    uint32_t capacity;
    uint32_t obs_dim;
    uint64_t rows_bytes;
    uint64_t blob_bytes;
    uint32_t covered_segment;
    uint32_t obs_elem_bytes;
    store_state_t state;
    uint32_t frame_stack, frame_capacity, max_actors, frame_window;
    uint32_t frame_codec, reserved;
    store_frame_state_t frames;
    uint64_t frame_bytes[STORE_FRAME_SECTIONS];
    uint32_t payload_crc;
    uint32_t header_crc;
} s_snap_header;

// Version 1's header (before frame mode): still loaded.
typedef struct {
    char magic[8];
    uint32_t format_version;
    uint32_t header_bytes;
    uint32_t capacity;
    uint32_t obs_dim;
    uint64_t rows_bytes;
    uint64_t blob_bytes;
    uint32_t covered_segment;
    uint32_t obs_elem_bytes;
    store_state_t state;
    uint32_t payload_crc;
    uint32_t header_crc;
} s_snap_header_v1;

static uint32_t s_header_crc(const uint8_t *file) {
    return fileio_crc32c(0, file, offsetof(s_snap_header, header_crc));
}

static void s_check_layout(const uint8_t *file, size_t len) {
    s_snap_header h;
    ck_assert_uint_ge(len, sizeof h);
    memcpy(&h, file, sizeof h);
    ck_assert_int_eq(memcmp(h.magic, "APEXSNAP", 8), 0);
    ck_assert_uint_eq(h.format_version, 2);
    ck_assert_uint_eq(h.header_bytes, sizeof h);
    ck_assert_uint_eq(h.frame_stack, 0);
    ck_assert_uint_eq(h.frame_bytes[0] + h.frame_bytes[1] + h.frame_bytes[2] + h.frame_bytes[3], 0);
    ck_assert_uint_eq(h.capacity, CAP);
    ck_assert_uint_eq(h.obs_dim, OBS);
    ck_assert_uint_eq(h.obs_elem_bytes, 4);
    ck_assert_uint_eq(h.blob_bytes, BLOB_LEN);
    ck_assert_uint_eq(len, sizeof h + h.rows_bytes + CAP * sizeof(float) + h.blob_bytes);
    ck_assert_uint_eq(h.header_crc, s_header_crc(file));
    ck_assert_uint_eq(h.payload_crc, fileio_crc32c(0, file + sizeof h, len - sizeof h));
    ck_assert_int_eq(memcmp(file + len - BLOB_LEN, s_blob, BLOB_LEN), 0); // the blob is last
}

// Sets a header field of the file (memcpy: the buffer has no alignment) and, with recrc
// set, recomputes the header CRC so that only the edited field is wrong.
static void s_set_field(uint8_t *file, size_t offset, uint64_t value, size_t bytes, int recrc) {
    if (bytes == 4) {
        uint32_t v = (uint32_t)value;
        memcpy(file + offset, &v, 4);
    } else {
        memcpy(file + offset, &value, 8);
    }
    if (recrc) {
        uint32_t c = s_header_crc(file);
        memcpy(file + offsetof(s_snap_header, header_crc), &c, 4);
    }
}
#define SET_FIELD(file, field, value, recrc)                                                       \
    s_set_field(file, offsetof(s_snap_header, field), value, sizeof(((s_snap_header *)0)->field),  \
                recrc)

// Writes dir/snapshot.bin (rows 0 .. 10 and the blob, covering segment 1) and segment 2
// with records 2, 3 after it. *want gets a store equal to the snapshot's.
static void s_write_snapshot(const char *dir, store_t **want) {
    durable_t *d = s_open(dir, DURABILITY_WAL, 0);
    store_t *s = s_store(CAP, OBS, 4);
    s_replayed r = {0};
    durable_restore_info_t info;
    ck_assert_int_eq(s_restore(d, s, &r, &info), APEX_OK);
    for (uint64_t row = 0; row < 11; row++) {
        s_add_row(s, row);
    }
    s_append_range(d, 0, 2);
    ck_assert_int_eq(durable_snapshot_start(d, s, s_blob, BLOB_LEN), APEX_OK);
    ck_assert_int_eq(durable_snapshot_poll(d, 1), 1);
    s_append_range(d, 2, 2);
    ck_assert_int_eq(durable_sync(d), APEX_OK);
    durable_destroy(&d);
    *want = s;
}

typedef void (*s_mutate_fn)(uint8_t *file, size_t *len);

// Writes a good snapshot, lets mutate damage it, and restores into a store of the given
// shape: expects want_rc and, on a refusal, an untouched store, no blob, no record, and the
// files as they were (the log is not replayed, no segment is opened, nothing is deleted).
// ... into a store of the given action layout (0: discrete, as the snapshot's).
static void s_expect_restore_ad(s_mutate_fn mutate, uint32_t cap, uint32_t obs_dim,
                                uint32_t elem_bytes, uint32_t action_dim, int want_rc) {
    const char *dir = check_tmpdir();
    store_t *want;
    s_write_snapshot(dir, &want);
    char snap[600], seg2[600], seg3[600];
    snprintf(snap, sizeof snap, "%s/snapshot.bin", dir);
    s_seg_path(seg2, sizeof seg2, dir, 2);
    s_seg_path(seg3, sizeof seg3, dir, 3);
    size_t len, len2;
    uint8_t *file = s_slurp(snap, &len), *log2 = s_slurp(seg2, &len2);
    s_check_layout(file, len);
    if (mutate) {
        mutate(file, &len);
        s_spit(snap, file, len);
    }
    durable_t *d = s_open(dir, DURABILITY_WAL, 0);
    store_config_t cfg = {.capacity = cap,
                          .obs_dim = obs_dim,
                          .obs_elem_bytes = elem_bytes,
                          .action_dim = action_dim,
                          .alpha = 0.6};
    store_t *s = store_new(&cfg);
    ck_assert_ptr_nonnull(s);
    s_replayed r = {0};
    durable_restore_info_t info;
    int rc = durable_restore(d, s, s_on_blob, &r, s_on_record, &r, &info);
    ck_assert_msg(rc == want_rc, "restore returned %d (%s), want %d (%s)", rc, apex_strerror(rc),
                  want_rc, apex_strerror(want_rc));
    if (want_rc == APEX_OK) {
        ck_assert(s_same_store(s, want));
        ck_assert_int_eq(r.blob_calls, 1);
        ck_assert_int_eq(r.n, 2);
        s_check_records(&r, 0, 2, 2);
    } else {
        ck_assert(s_store_empty(s));
        ck_assert_int_eq(r.blob_calls, 0);
        ck_assert_int_eq(r.n, 0);
        ck_assert_int_eq(info.had_snapshot, 0);
        ck_assert(s_same_file(snap, file, len));
        ck_assert(s_same_file(seg2, log2, len2));
        ck_assert(!s_exists(seg3));
    }
    durable_destroy(&d);
    xfree(file);
    xfree(log2);
    store_destroy(&s);
    store_destroy(&want);
    check_rmtree(dir);
}

static void s_expect_restore(s_mutate_fn mutate, uint32_t cap, uint32_t obs_dim,
                             uint32_t elem_bytes, int want_rc) {
    s_expect_restore_ad(mutate, cap, obs_dim, elem_bytes, 0, want_rc);
}

static void s_bad_magic(uint8_t *f, size_t *len) {
    (void)len;
    memcpy(f, "APEXSNAQ", 8);
}
static void s_version_3(uint8_t *f, size_t *len) {
    (void)len;
    SET_FIELD(f, format_version, 3, 1);
}
// Rewrites the file as version 1 wrote it (no frame fields; the payload is the same).
static void s_as_version_1(uint8_t *f, size_t *len) {
    s_snap_header h;
    memcpy(&h, f, sizeof h);
    s_snap_header_v1 v1;
    memcpy(&v1, &h, offsetof(s_snap_header_v1, payload_crc));
    v1.format_version = 1;
    v1.header_bytes = sizeof v1;
    v1.payload_crc = h.payload_crc;
    v1.header_crc = fileio_crc32c(0, &v1, offsetof(s_snap_header_v1, header_crc));
    memmove(f + sizeof v1, f + sizeof h, *len - sizeof h);
    memcpy(f, &v1, sizeof v1);
    *len -= sizeof h - sizeof v1;
}
static void s_version_0_bad_crc(uint8_t *f, size_t *len) {
    (void)len;
    SET_FIELD(f, format_version, 0, 0);
}
static void s_header_bytes(uint8_t *f, size_t *len) {
    (void)len;
    SET_FIELD(f, header_bytes, sizeof(s_snap_header) + 8, 1);
}
static void s_flip_covered(uint8_t *f, size_t *len) {
    (void)len;
    f[offsetof(s_snap_header, covered_segment)] ^= 0x02;
}
static void s_flip_header_crc(uint8_t *f, size_t *len) {
    (void)len;
    f[offsetof(s_snap_header, header_crc) + 3] ^= 0x80;
}
static void s_flip_payload_crc(uint8_t *f, size_t *len) {
    (void)len;
    f[offsetof(s_snap_header, payload_crc)] ^= 0x01;
    uint32_t c = s_header_crc(f);
    memcpy(f + offsetof(s_snap_header, header_crc), &c, 4);
}
static void s_flip_last_byte(uint8_t *f, size_t *len) { f[*len - 1] ^= 0x01; }
static void s_flip_row_byte(uint8_t *f, size_t *len) {
    (void)len;
    f[sizeof(s_snap_header) + 5] ^= 0x40;
}
static void s_flip_leaf_byte(uint8_t *f, size_t *len) {
    s_snap_header h;
    memcpy(&h, f, sizeof h);
    (void)len;
    f[sizeof h + h.rows_bytes + 2] ^= 0x08;
}
static void s_cut_last_byte(uint8_t *f, size_t *len) {
    (void)f;
    *len -= 1;
}
static void s_cut_in_header(uint8_t *f, size_t *len) {
    (void)f;
    *len = 40;
}
static void s_cut_after_header(uint8_t *f, size_t *len) {
    (void)f;
    *len = sizeof(s_snap_header) + 3;
}
static void s_empty(uint8_t *f, size_t *len) {
    (void)f;
    *len = 0;
}
static void s_size_over_capacity(uint8_t *f, size_t *len) {
    (void)len;
    SET_FIELD(f, state.size, CAP + 1, 1);
}
static void s_elem_bytes_1(uint8_t *f, size_t *len) {
    (void)len;
    SET_FIELD(f, obs_elem_bytes, 1, 1);
}
static void s_elem_bytes_0(uint8_t *f, size_t *len) {
    (void)len;
    SET_FIELD(f, obs_elem_bytes, 0, 1); // as written before uint8 observations
}

START_TEST(test_snapshot_wrong_magic_is_eproto) {
    s_expect_restore(s_bad_magic, CAP, OBS, 4, APEX_EPROTO);
}
END_TEST
START_TEST(test_snapshot_other_format_version_is_eversion) {
    s_expect_restore(s_version_3, CAP, OBS, 4, APEX_EVERSION);
    s_expect_restore(s_version_0_bad_crc, CAP, OBS, 4, APEX_EVERSION);
    s_expect_restore(s_header_bytes, CAP, OBS, 4, APEX_EVERSION);
}
END_TEST
// Snapshots written before frame mode (format 1) load as they always did.
START_TEST(test_snapshot_format_1_still_loads) {
    s_expect_restore(s_as_version_1, CAP, OBS, 4, APEX_OK);
}
END_TEST
START_TEST(test_snapshot_other_capacity_is_einval) {
    s_expect_restore(NULL, CAP * 2, OBS, 4, APEX_EINVAL);
    s_expect_restore(NULL, CAP - 1, OBS, 4, APEX_EINVAL);
}
END_TEST
START_TEST(test_snapshot_other_obs_dim_is_einval) {
    s_expect_restore(NULL, CAP, OBS + 1, 4, APEX_EINVAL);
}
END_TEST
// A discrete run's snapshot into a store of continuous actions (issue #28): refused by the
// header's action_dim before any row is read.
START_TEST(test_snapshot_other_action_dim_is_einval) {
    s_expect_restore_ad(NULL, CAP, OBS, 4, 1, APEX_EINVAL);
    s_expect_restore_ad(NULL, CAP, OBS, 4, 3, APEX_EINVAL);
}
END_TEST
START_TEST(test_snapshot_other_element_size_is_einval) {
    s_expect_restore(NULL, CAP, OBS, 1, APEX_EINVAL); // a uint8 store
    s_expect_restore(s_elem_bytes_1, CAP, OBS, 4, APEX_EINVAL);
}
END_TEST
START_TEST(test_snapshot_without_element_size_is_float32) {
    s_expect_restore(s_elem_bytes_0, CAP, OBS, 4, APEX_OK);
    s_expect_restore(s_elem_bytes_0, CAP, OBS, 1, APEX_EINVAL);
}
END_TEST
START_TEST(test_snapshot_corrupt_header_is_eproto) {
    s_expect_restore(s_flip_covered, CAP, OBS, 4, APEX_EPROTO);
    s_expect_restore(s_flip_header_crc, CAP, OBS, 4, APEX_EPROTO);
}
END_TEST
START_TEST(test_snapshot_corrupt_payload_is_eproto) {
    s_expect_restore(s_flip_last_byte, CAP, OBS, 4, APEX_EPROTO); // in the blob
    s_expect_restore(s_flip_row_byte, CAP, OBS, 4, APEX_EPROTO);
    s_expect_restore(s_flip_leaf_byte, CAP, OBS, 4, APEX_EPROTO);
    s_expect_restore(s_flip_payload_crc, CAP, OBS, 4, APEX_EPROTO);
}
END_TEST
START_TEST(test_snapshot_truncated_is_eproto) {
    s_expect_restore(s_cut_last_byte, CAP, OBS, 4, APEX_EPROTO);
    s_expect_restore(s_cut_after_header, CAP, OBS, 4, APEX_EPROTO);
    s_expect_restore(s_cut_in_header, CAP, OBS, 4, APEX_EPROTO);
    s_expect_restore(s_empty, CAP, OBS, 4, APEX_EPROTO);
}
END_TEST
START_TEST(test_snapshot_inconsistent_state_is_eproto) {
    s_expect_restore(s_size_over_capacity, CAP, OBS, 4, APEX_EPROTO);
}
END_TEST

START_TEST(test_unreadable_snapshot_is_eio) {
    const char *dir = check_tmpdir();
    char snap[600];
    snprintf(snap, sizeof snap, "%s/snapshot.bin", dir);
    ck_assert_int_eq(symlink("snapshot.bin", snap), 0); // open fails with ELOOP, even as root
    durable_t *d = s_open(dir, DURABILITY_WAL, 0);
    store_t *s = s_store(CAP, OBS, 4);
    s_replayed r = {0};
    durable_restore_info_t info;
    ck_assert_int_eq(s_restore(d, s, &r, &info), APEX_EIO);
    ck_assert(s_store_empty(s));
    ck_assert_int_eq(r.blob_calls + r.n, 0);
    durable_destroy(&d);
    store_destroy(&s);
    check_rmtree(dir);
}
END_TEST

// ---------------------------------------------------------------------------------------
// Write failures and the degraded state

START_TEST(test_failed_sync_degrades_until_a_snapshot_succeeds) {
    const char *dir = check_tmpdir();
    char seg1[600], snap[600], snap_tmp[620];
    s_seg_path(seg1, sizeof seg1, dir, 1);
    snprintf(snap, sizeof snap, "%s/snapshot.bin", dir);
    snprintf(snap_tmp, sizeof snap_tmp, "%s.tmp", snap);
    durable_t *d = s_open(dir, DURABILITY_WAL, 0);
    store_t *mem = s_store(CAP, OBS, 4); // the server's store
    s_replayed r = {0};
    durable_restore_info_t info;
    ck_assert_int_eq(s_restore(d, mem, &r, &info), APEX_OK);
    for (uint64_t row = 0; row < 3; row++) {
        s_insert(d, mem, row);
    }
    ck_assert_int_eq(durable_sync(d), APEX_OK);
    long long size0 = s_file_size(seg1);
    ck_assert_int_eq(size0, 3 * (REC_HDR + 8));

    // Room for half a record: the sync writes part of rows 3, 4 and fails.
    int lim = s_limit_file_size((rlim_t)size0 + 10);
    s_insert(d, mem, 3);
    s_insert(d, mem, 4);
    int sync1 = durable_sync(d);
    int degraded1 = durable_degraded(d);
    long long size1 = s_file_size(seg1);
    int asked5 = s_insert(d, mem, 5); // degraded: the record is not kept
    size_t buffered5 = durable_buffered(d);
    int sync2 = durable_sync(d);
    uint64_t id = durable_commit_start(d);
    int done = durable_commit_done(d, id);
    // A snapshot fails as well under the limit; the server stays degraded.
    int start1 = durable_snapshot_start(d, mem, s_blob, BLOB_LEN);
    int poll1 = durable_snapshot_poll(d, 1);
    int degraded2 = durable_degraded(d);
    int unlim = s_limit_file_size(RLIM_INFINITY);

    ck_assert_int_eq(lim, 0);
    ck_assert_int_eq(unlim, 0);
    ck_assert_int_eq(sync1, APEX_ENOSPC); // EFBIG counts as a full disk
    ck_assert_int_eq(degraded1, 1);
    ck_assert_int_eq(size1, size0); // the partial record was cut off again
    ck_assert_int_eq(asked5, 0);
    ck_assert_uint_eq(buffered5, 0);
    ck_assert_int_eq(sync2, APEX_EIO);
    ck_assert_int_eq(done, 1); // a commit while degraded has ended at once
    ck_assert_int_eq(start1, APEX_OK);
    ck_assert_int_eq(poll1, -1);
    ck_assert_int_eq(degraded2, 1);
    ck_assert(!s_exists(snap) && !s_exists(snap_tmp));
    ck_assert_uint_ge(durable_failures(d), 2);

    // Disk space back: the next snapshot holds everything and ends the degraded state.
    ck_assert_int_eq(durable_snapshot_start(d, mem, s_blob, BLOB_LEN), APEX_OK);
    ck_assert_int_eq(durable_snapshot_poll(d, 1), 1);
    ck_assert_int_eq(durable_degraded(d), 0);
    ck_assert_uint_eq(durable_snapshots_written(d), 1);
    ck_assert(!s_exists(seg1));
    size_t buffered6 = durable_buffered(d);
    s_insert(d, mem, 6); // appends are kept again
    ck_assert_uint_eq(durable_buffered(d), buffered6 + REC_HDR + 8);
    ck_assert_int_eq(durable_sync(d), APEX_OK);
    durable_destroy(&d);

    ck_assert_int_eq(s_restore_equals(dir, DURABILITY_WAL, mem, &info),
                     1); // rows 0 .. 5 in the snapshot, 6
    ck_assert_int_eq(info.had_snapshot, 1);
    ck_assert_uint_eq(info.snapshot_size, 6);
    store_destroy(&mem);
    check_rmtree(dir);
}
END_TEST

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int count;
} s_notify_t;

static void s_on_notify(void *arg) {
    s_notify_t *nt = arg;
    pthread_mutex_lock(&nt->mu);
    nt->count++;
    pthread_cond_broadcast(&nt->cv);
    pthread_mutex_unlock(&nt->mu);
}

// Waits until commit id has ended: polls durable_commit_done after each notify (or every
// 100 ms, should a wake-up be missed), for at most timeout_ms. Asserts nothing (it runs
// under the file-size limit too). Returns 1 when it ended.
static int s_wait_done(durable_t *d, uint64_t id, s_notify_t *nt, int64_t timeout_ms) {
    int64_t deadline = clock_now_ms() + timeout_ms;
    while (!durable_commit_done(d, id)) {
        if (clock_now_ms() > deadline) {
            return 0;
        }
        pthread_mutex_lock(&nt->mu);
        int seen = nt->count;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        while (nt->count == seen && pthread_cond_timedwait(&nt->cv, &nt->mu, &ts) == 0) {
        }
        pthread_mutex_unlock(&nt->mu);
    }
    return 1;
}

#define COMMIT_TIMEOUT_MS 20000 // generous: CI machines are loaded 2-core VMs

START_TEST(test_failed_commit_on_the_writer_thread_degrades) {
    const char *dir = check_tmpdir();
    char seg1[600];
    s_seg_path(seg1, sizeof seg1, dir, 1);
    s_notify_t nt = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    durable_t *d = s_open(dir, DURABILITY_WAL, 0);
    store_t *mem = s_store(CAP, OBS, 4);
    s_replayed r = {0};
    durable_restore_info_t info;
    ck_assert_int_eq(s_restore(d, mem, &r, &info), APEX_OK);
    ck_assert_int_eq(durable_writer_start(d, s_on_notify, &nt), APEX_OK);
    s_insert(d, mem, 0);
    s_insert(d, mem, 1);
    uint64_t id1 = durable_commit_start(d);
    ck_assert_uint_gt(id1, 0);
    ck_assert(s_wait_done(d, id1, &nt, COMMIT_TIMEOUT_MS));
    ck_assert_int_eq(durable_degraded(d), 0);
    long long size0 = s_file_size(seg1);
    ck_assert_int_eq(size0, 2 * (REC_HDR + 8));

    int lim = s_limit_file_size((rlim_t)size0 + 5);
    s_insert(d, mem, 2);
    uint64_t id2 = durable_commit_start(d);
    int done2 = id2 > 0 ? s_wait_done(d, id2, &nt, COMMIT_TIMEOUT_MS) : 0;
    int degraded = durable_degraded(d);
    long long size1 = s_file_size(seg1);
    int unlim = s_limit_file_size(RLIM_INFINITY);

    ck_assert_int_eq(lim, 0);
    ck_assert_int_eq(unlim, 0);
    ck_assert_uint_gt(id2, id1);
    ck_assert_int_eq(done2, 1); // ended: by failing
    ck_assert_int_eq(degraded, 1);
    ck_assert_int_eq(size1, size0);
    ck_assert_int_eq(durable_sync(d), APEX_EIO);

    ck_assert_int_eq(durable_snapshot_start(d, mem, s_blob, BLOB_LEN), APEX_OK);
    ck_assert_int_eq(durable_snapshot_poll(d, 1), 1);
    ck_assert_int_eq(durable_degraded(d), 0);
    s_insert(d, mem, 3);
    uint64_t id3 = durable_commit_start(d);
    ck_assert_uint_gt(id3, id2);
    ck_assert(s_wait_done(d, id3, &nt, COMMIT_TIMEOUT_MS));
    durable_writer_stop(d);
    durable_destroy(&d);
    ck_assert_int_eq(s_restore_equals(dir, DURABILITY_WAL, mem, &info), 1);
    store_destroy(&mem);
    check_rmtree(dir);
}
END_TEST

// The way back from the degraded state must leave a log that, read after the snapshot on
// disk, gives the server's state again: no record lost between a snapshot's fork and its
// reaping, none replayed twice.

START_TEST(test_records_between_a_recovery_snapshot_and_its_poll_are_kept) {
    const char *dir = check_tmpdir();
    char seg1[600];
    s_seg_path(seg1, sizeof seg1, dir, 1);
    durable_t *d = s_open(dir, DURABILITY_WAL, 0);
    store_t *mem = s_store(CAP, OBS, 4);
    s_replayed r = {0};
    durable_restore_info_t info;
    ck_assert_int_eq(s_restore(d, mem, &r, &info), APEX_OK);
    for (uint64_t row = 0; row < 3; row++) {
        s_insert(d, mem, row);
    }
    ck_assert_int_eq(durable_sync(d), APEX_OK);
    int lim = s_limit_file_size((rlim_t)s_file_size(seg1) + 10);
    s_insert(d, mem, 3);
    int sync1 = durable_sync(d);
    int unlim = s_limit_file_size(RLIM_INFINITY);
    ck_assert_int_eq(lim + unlim, 0);
    ck_assert_int_eq(sync1, APEX_ENOSPC);
    ck_assert_int_eq(durable_degraded(d), 1);

    // The recovery snapshot holds rows 0 .. 3; rows 4 and 5 arrive while its child writes.
    ck_assert_int_eq(durable_snapshot_start(d, mem, s_blob, BLOB_LEN), APEX_OK);
    s_insert(d, mem, 4);
    s_insert(d, mem, 5);
    ck_assert_int_eq(durable_snapshot_poll(d, 1), 1);
    ck_assert_int_eq(durable_degraded(d), 0);
    s_insert(d, mem, 6);
    ck_assert_int_eq(durable_sync(d), APEX_OK);
    durable_destroy(&d);
    ck_assert_int_eq(s_restore_equals(dir, DURABILITY_WAL, mem, &info), 3); // rows 4, 5, 6
    ck_assert_uint_eq(info.snapshot_size, 4);
    store_destroy(&mem);
    check_rmtree(dir);
}
END_TEST

START_TEST(test_a_log_failure_during_a_snapshot_keeps_the_server_degraded) {
    const char *dir = check_tmpdir();
    char seg2[600];
    s_seg_path(seg2, sizeof seg2, dir, 2);
    durable_t *d = s_open(dir, DURABILITY_WAL, 0);
    store_t *mem = s_store(CAP, OBS, 4);
    s_replayed r = {0};
    durable_restore_info_t info;
    ck_assert_int_eq(s_restore(d, mem, &r, &info), APEX_OK);
    for (uint64_t row = 0; row < 3; row++) {
        s_insert(d, mem, row);
    }
    // The snapshot (rows 0 .. 2) is written while the log, now in segment 2, fails.
    ck_assert_int_eq(durable_snapshot_start(d, mem, s_blob, BLOB_LEN), APEX_OK);
    s_insert(d, mem, 3);
    ck_assert_int_eq(durable_sync(d), APEX_OK);
    int lim = s_limit_file_size((rlim_t)s_file_size(seg2) + 10);
    s_insert(d, mem, 4);
    int sync1 = durable_sync(d);
    int unlim = s_limit_file_size(RLIM_INFINITY);
    ck_assert_int_eq(lim + unlim, 0);
    ck_assert_int_eq(sync1, APEX_ENOSPC);
    s_insert(d, mem, 5); // not in the log, not in that snapshot
    ck_assert_int_eq(durable_snapshot_poll(d, 1), 1);
    // That snapshot holds neither 4 nor 5: the server is still without durability.
    ck_assert_int_eq(durable_degraded(d), 1);
    ck_assert_int_eq(durable_snapshot_start(d, mem, s_blob, BLOB_LEN), APEX_OK);
    ck_assert_int_eq(durable_snapshot_poll(d, 1), 1);
    ck_assert_int_eq(durable_degraded(d), 0);
    s_insert(d, mem, 6);
    ck_assert_int_eq(durable_sync(d), APEX_OK);
    durable_destroy(&d);
    ck_assert_int_eq(s_restore_equals(dir, DURABILITY_WAL, mem, &info), 1);
    ck_assert_uint_eq(info.snapshot_size, 6);
    store_destroy(&mem);
    check_rmtree(dir);
}
END_TEST

START_TEST(test_records_buffered_when_a_snapshot_fails_are_not_replayed_twice) {
    const char *dir = check_tmpdir();
    durable_t *d = s_open(dir, DURABILITY_WAL, 0);
    store_t *mem = s_store(CAP, OBS, 4);
    s_replayed r = {0};
    durable_restore_info_t info;
    ck_assert_int_eq(s_restore(d, mem, &r, &info), APEX_OK);
    s_insert(d, mem, 0);
    s_insert(d, mem, 1);
    ck_assert_int_eq(durable_sync(d), APEX_OK);
    // The child inherits a limit smaller than a snapshot and fails; the parent lifts it at
    // once (nothing of the log waits to be written, so the limit stops only the child).
    int lim = s_limit_file_size(64);
    int start1 = durable_snapshot_start(d, mem, s_blob, BLOB_LEN);
    int unlim = s_limit_file_size(RLIM_INFINITY);
    ck_assert_int_eq(lim + unlim, 0);
    ck_assert_int_eq(start1, APEX_OK);
    s_insert(d, mem, 2); // buffered for segment 2
    s_insert(d, mem, 3);
    ck_assert_int_eq(durable_snapshot_poll(d, 1), -1);
    ck_assert_int_eq(durable_degraded(d), 1);
    // The next snapshot holds rows 0 .. 3: rows 2 and 3 must not follow it in the log.
    ck_assert_int_eq(durable_snapshot_start(d, mem, s_blob, BLOB_LEN), APEX_OK);
    ck_assert_int_eq(durable_snapshot_poll(d, 1), 1);
    ck_assert_int_eq(durable_degraded(d), 0);
    s_insert(d, mem, 4);
    ck_assert_int_eq(durable_sync(d), APEX_OK);
    durable_destroy(&d);
    ck_assert_int_eq(s_restore_equals(dir, DURABILITY_WAL, mem, &info), 1);
    ck_assert_uint_eq(info.snapshot_size, 4);
    store_destroy(&mem);
    check_rmtree(dir);
}
END_TEST

START_TEST(test_a_crash_before_a_recovery_snapshot_lands_restores_the_log_before_the_failure) {
    // Whatever the log does while a recovery snapshot is written, a crash before that
    // snapshot is on disk must restore the state the log held when it failed (rows 0 .. 2),
    // never the records that came after the hole on top of it. The 100-byte buffer makes
    // appends reach the file without a sync.
    const char *dir = check_tmpdir();
    char seg1[600];
    s_seg_path(seg1, sizeof seg1, dir, 1);
    durable_t *d = s_open(dir, DURABILITY_WAL, 100);
    store_t *mem = s_store(CAP, OBS, 4), *before = s_store(CAP, OBS, 4);
    s_replayed r = {0};
    durable_restore_info_t info;
    ck_assert_int_eq(s_restore(d, mem, &r, &info), APEX_OK);
    for (uint64_t row = 0; row < 3; row++) {
        s_insert(d, mem, row);
        s_add_row(before, row);
    }
    ck_assert_int_eq(durable_sync(d), APEX_OK);
    int lim = s_limit_file_size((rlim_t)s_file_size(seg1) + 10);
    s_insert(d, mem, 3);
    int sync1 = durable_sync(d);
    int start = durable_snapshot_start(d, mem, s_blob, BLOB_LEN); // its child hits the limit
    int unlim = s_limit_file_size(RLIM_INFINITY);
    ck_assert_int_eq(lim + unlim, 0);
    ck_assert_int_eq(sync1, APEX_ENOSPC);
    ck_assert_int_eq(start, APEX_OK);
    for (uint64_t row = 4; row < 10; row++) {
        s_insert(d, mem, row);
    }
    ck_assert_int_eq(durable_snapshot_poll(d, 1), -1);
    ck_assert_int_eq(durable_degraded(d), 1);
    durable_destroy(&d); // the crash: no new snapshot, no sync
    char seg2[600], orphan2[620];
    s_seg_path(seg2, sizeof seg2, dir, 2);
    snprintf(orphan2, sizeof orphan2, "%s.orphaned", seg2);
    ck_assert_int_gt(s_file_size(seg2), 0); // the log resumed here, for the failed snapshot
    ck_assert_int_eq(s_restore_equals(dir, DURABILITY_WAL, before, &info), 3);
    ck_assert_int_eq(info.had_snapshot, 0);
    ck_assert_uint_eq(info.segments, 1);
    ck_assert(!s_exists(seg2) && s_exists(orphan2)); // set aside, not replayed
    store_destroy(&mem);
    store_destroy(&before);
    check_rmtree(dir);
}
END_TEST

// ---------------------------------------------------------------------------------------
// Group commit and back-pressure

START_TEST(test_commit_on_the_writer_thread_ends_and_an_empty_commit_is_done) {
    const char *dir = check_tmpdir();
    s_notify_t nt = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    durable_t *d = s_open(dir, DURABILITY_WAL, 0);
    store_t *s = s_store(CAP, OBS, 4);
    s_replayed r = {0};
    durable_restore_info_t info;
    ck_assert_int_eq(s_restore(d, s, &r, &info), APEX_OK);
    uint64_t id0 = durable_commit_start(d); // nothing appended yet: already done
    ck_assert(durable_commit_done(d, id0));
    ck_assert_int_eq(durable_degraded(d), 0);
    ck_assert_int_eq(durable_writer_start(d, s_on_notify, &nt), APEX_OK);
    ck_assert_int_eq(durable_writer_start(d, s_on_notify, &nt), APEX_OK); // already running
    s_append_range(d, 0, 4);
    uint64_t id1 = durable_commit_start(d);
    ck_assert_uint_gt(id1, id0);
    ck_assert_uint_eq(durable_buffered(d), 0); // handed to the writer
    ck_assert(s_wait_done(d, id1, &nt, COMMIT_TIMEOUT_MS));
    pthread_mutex_lock(&nt.mu);
    ck_assert_int_ge(nt.count, 1);
    pthread_mutex_unlock(&nt.mu);
    // Nothing new: the id of a commit that has already ended.
    uint64_t id2 = durable_commit_start(d);
    ck_assert_uint_eq(id2, id1);
    ck_assert(durable_commit_done(d, id2));
    s_append_range(d, 4, 3);
    uint64_t id3 = durable_commit_start(d); // the writer is idle: id1 has been collected
    ck_assert_uint_eq(id3, id2 + 1);
    ck_assert(s_wait_done(d, id3, &nt, COMMIT_TIMEOUT_MS));
    durable_writer_stop(d);
    durable_writer_stop(d); // idempotent
    // Without the thread a commit runs inline: ended when it returns.
    s_append_range(d, 7, 2);
    uint64_t id4 = durable_commit_start(d);
    ck_assert_uint_eq(id4, id3 + 1);
    ck_assert(durable_commit_done(d, id4));
    ck_assert_int_eq(durable_sync(d), APEX_OK);
    durable_destroy(&d);
    d = s_open(dir, DURABILITY_WAL, 0);
    ck_assert_int_eq(s_restore(d, s, &r, &info), APEX_OK);
    ck_assert_int_eq(r.n, 9);
    s_check_records(&r, 0, 0, 9);
    durable_destroy(&d);
    store_destroy(&s);
    check_rmtree(dir);
}
END_TEST

START_TEST(test_writer_restarted_after_stop_commits) {
    const char *dir = check_tmpdir();
    s_notify_t nt = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    durable_t *d = s_open(dir, DURABILITY_WAL, 0);
    store_t *s = s_store(CAP, OBS, 4);
    s_replayed r = {0};
    durable_restore_info_t info;
    ck_assert_int_eq(s_restore(d, s, &r, &info), APEX_OK);
    ck_assert_int_eq(durable_writer_start(d, s_on_notify, &nt), APEX_OK);
    durable_writer_stop(d);
    ck_assert_int_eq(durable_writer_start(d, s_on_notify, &nt), APEX_OK);
    // Two commits, so that one served in passing by a writer on its way out does not hide
    // a writer that quits.
    for (int c = 0; c < 2; c++) {
        s_append_range(d, 3 * c, 3);
        uint64_t id = durable_commit_start(d);
        ck_assert_uint_gt(id, 0);
        ck_assert_msg(s_wait_done(d, id, &nt, COMMIT_TIMEOUT_MS), "commit %llu never ended",
                      (unsigned long long)id);
    }
    durable_writer_stop(d);
    durable_destroy(&d);
    d = s_open(dir, DURABILITY_WAL, 0);
    ck_assert_int_eq(s_restore(d, s, &r, &info), APEX_OK);
    ck_assert_int_eq(r.n, 6);
    s_check_records(&r, 0, 0, 6);
    durable_destroy(&d);
    store_destroy(&s);
    check_rmtree(dir);
}
END_TEST

START_TEST(test_full_buffer_is_written_in_order_and_large_records_bypass_it) {
    // A 100-byte buffer; records 0 .. 7 take 12, 19, 26, 33, 47, 24, 31 and 15 bytes.
    const char *dir = check_tmpdir();
    char seg1[600];
    s_seg_path(seg1, sizeof seg1, dir, 1);
    durable_t *d = s_open(dir, DURABILITY_WAL, 100);
    ck_assert_uint_eq(durable_buffer_cap(d), 100);
    store_t *s = s_store(CAP, OBS, 4);
    s_replayed r = {0};
    durable_restore_info_t info;
    ck_assert_int_eq(s_restore(d, s, &r, &info), APEX_OK);
    const size_t sizes[8] = {12, 19, 26, 33, 47, 24, 31, 15};
    uint8_t p[PAYLOAD_MAX];
    int asked[8];
    size_t buffered[8];
    long long on_disk[8];
    for (int i = 0; i < 8; i++) {
        ck_assert_uint_eq(s_rec_bytes(i), sizes[i]);
        asked[i] = durable_append(d, s_kind(i), p, s_payload(i, p));
        buffered[i] = durable_buffered(d);
        on_disk[i] = s_file_size(seg1);
    }
    // Buffered 12, 31, 57 (over half: commit, 1), 90 (1); record 4 does not fit: the 90 bytes
    // are written and 47 buffered (0); 71 (1); record 6 does not fit: 71 more written, 31
    // buffered (0); 46 (0).
    const int want_asked[8] = {0, 0, 1, 1, 0, 1, 0, 0};
    const size_t want_buf[8] = {12, 31, 57, 90, 47, 71, 31, 46};
    const long long want_disk[8] = {0, 0, 0, 0, 90, 90, 161, 161};
    for (int i = 0; i < 8; i++) {
        ck_assert_msg(asked[i] == want_asked[i] && buffered[i] == want_buf[i] &&
                          on_disk[i] == want_disk[i],
                      "append %d: asked %d, buffered %zu, on disk %lld", i, asked[i], buffered[i],
                      on_disk[i]);
    }
    // A record larger than the whole buffer goes straight to the file, after the buffer.
    uint8_t big[300];
    memset(big, 0xAB, sizeof big);
    ck_assert_int_eq(durable_append(d, DURABLE_REC_UPDATE, big, sizeof big), 1);
    ck_assert_uint_eq(durable_buffered(d), 0);
    ck_assert_int_eq(s_file_size(seg1), 161 + 46 + REC_HDR + sizeof big);
    s_append_range(d, 8, 2);
    ck_assert_int_eq(durable_sync(d), APEX_OK);
    durable_destroy(&d);

    d = s_open(dir, DURABILITY_WAL, 100);
    ck_assert_int_eq(s_restore(d, s, &r, &info), APEX_OK);
    ck_assert_int_eq(r.n, 11);
    s_check_records(&r, 0, 0, 8);
    ck_assert_int_eq(r.kinds[8], DURABLE_REC_UPDATE);
    ck_assert_uint_eq(r.lens[8], sizeof big);
    ck_assert_int_eq(memcmp(r.payloads[8], big, sizeof big), 0);
    s_check_records(&r, 9, 8, 2);
    durable_destroy(&d);
    store_destroy(&s);
    check_rmtree(dir);
}
END_TEST

START_TEST(test_full_buffer_waits_for_the_writer_and_keeps_the_order) {
    // The same small buffer with the writer thread running and commits started whenever an
    // append asks for one, as the server does: however the writer and the appends
    // interleave, every record is in the log once, in order.
    enum { N = 40 };
    const char *dir = check_tmpdir();
    s_notify_t nt = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    durable_t *d = s_open(dir, DURABILITY_WAL, 100);
    store_t *s = s_store(CAP, OBS, 4);
    s_replayed r = {0};
    durable_restore_info_t info;
    ck_assert_int_eq(s_restore(d, s, &r, &info), APEX_OK);
    ck_assert_int_eq(durable_writer_start(d, s_on_notify, &nt), APEX_OK);
    uint64_t last = 0;
    for (int i = 0; i < N; i++) {
        uint8_t p[PAYLOAD_MAX];
        if (durable_append(d, s_kind(i), p, s_payload(i, p))) {
            uint64_t id = durable_commit_start(d); // 0 while the writer is busy
            last = id > last ? id : last;
        }
    }
    ck_assert_uint_gt(last, 0);
    ck_assert_int_eq(durable_sync(d), APEX_OK); // waits for the writer, writes the rest
    ck_assert(durable_commit_done(d, last));
    durable_writer_stop(d);
    durable_destroy(&d);
    d = s_open(dir, DURABILITY_WAL, 0);
    ck_assert_int_eq(s_restore(d, s, &r, &info), APEX_OK);
    ck_assert_int_eq(r.n, N);
    s_check_records(&r, 0, 0, N);
    ck_assert_uint_eq(info.torn_bytes, 0);
    durable_destroy(&d);
    store_destroy(&s);
    check_rmtree(dir);
}
END_TEST

Suite *durable_suite(void) {
    Suite *s = suite_create("durable");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_records_replay_in_order_with_kinds_and_payloads);
    tcase_add_test(tc, test_snapshot_then_later_segments_restore_both);
    tcase_add_test(tc, test_snapshot_mode_keeps_no_log);
    tcase_add_test(tc, test_mode_none_touches_nothing);
    tcase_add_test(tc, test_second_instance_on_a_directory_is_refused);
    tcase_add_test(tc, test_torn_tail_at_every_byte_of_the_last_record_is_cut_there);
    tcase_add_test(tc, test_torn_or_impossible_record_header_is_cut);
    tcase_add_test(tc, test_segments_after_a_torn_one_are_orphaned);
    tcase_add_test(tc, test_corrupt_byte_in_the_middle_of_a_log_cuts_there_and_orphans_the_rest);
    tcase_add_test(tc, test_segments_covered_by_the_snapshot_are_deleted_on_restore);
    tcase_add_test(tc, test_snapshot_wrong_magic_is_eproto);
    tcase_add_test(tc, test_snapshot_other_format_version_is_eversion);
    tcase_add_test(tc, test_snapshot_format_1_still_loads);
    tcase_add_test(tc, test_snapshot_other_capacity_is_einval);
    tcase_add_test(tc, test_snapshot_other_obs_dim_is_einval);
    tcase_add_test(tc, test_snapshot_other_action_dim_is_einval);
    tcase_add_test(tc, test_snapshot_other_element_size_is_einval);
    tcase_add_test(tc, test_snapshot_without_element_size_is_float32);
    tcase_add_test(tc, test_snapshot_corrupt_header_is_eproto);
    tcase_add_test(tc, test_snapshot_corrupt_payload_is_eproto);
    tcase_add_test(tc, test_snapshot_truncated_is_eproto);
    tcase_add_test(tc, test_snapshot_inconsistent_state_is_eproto);
    tcase_add_test(tc, test_unreadable_snapshot_is_eio);
    tcase_add_test(tc, test_failed_sync_degrades_until_a_snapshot_succeeds);
    tcase_add_test(tc, test_failed_commit_on_the_writer_thread_degrades);
    tcase_add_test(tc, test_records_between_a_recovery_snapshot_and_its_poll_are_kept);
    tcase_add_test(tc, test_a_log_failure_during_a_snapshot_keeps_the_server_degraded);
    tcase_add_test(tc, test_records_buffered_when_a_snapshot_fails_are_not_replayed_twice);
    tcase_add_test(
        tc, test_a_crash_before_a_recovery_snapshot_lands_restores_the_log_before_the_failure);
    tcase_add_test(tc, test_commit_on_the_writer_thread_ends_and_an_empty_commit_is_done);
    tcase_add_test(tc, test_writer_restarted_after_stop_commits);
    tcase_add_test(tc, test_full_buffer_is_written_in_order_and_large_records_bypass_it);
    tcase_add_test(tc, test_full_buffer_waits_for_the_writer_and_keeps_the_order);
    suite_add_tcase(s, tc);
    return s;
}
