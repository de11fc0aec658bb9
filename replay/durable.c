// durable.c: see durable.h.
#define LOG_MODULE "durable"
#include "durable.h"

#include "fcodec.h"

#include "apex.h"
#include "config.h"
#include "fileio.h"
#include "log.h"
#include "parse.h"
#include "xalloc.h"

#include <dirent.h>
#include <sys/file.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SNAP_MAGIC "APEXSNAP"
#define SNAP_FORMAT_VERSION 2u // 2: frame mode's state (issue #27); 1 still loads
#define SEG_FMT "%s/wal-%08u.log"
#define MAX_RECORD_BYTES (256u << 20) // a larger length field can only be corruption
#define MAX_SEGMENTS 4096

// The file: this header, then the payload: the store's rows, its leaves, the server's blob,
// and in frame mode the store's frame sections (store.h), all under payload_crc.
typedef struct {
    char magic[8];
    uint32_t format_version;
    uint32_t header_bytes;
    uint32_t capacity;
    uint32_t obs_dim;
    uint64_t rows_bytes;
    uint64_t blob_bytes;
    uint32_t covered_segment; // log segments <= this one are contained in the snapshot
    uint32_t obs_elem_bytes;  // 4 (float32) or 1 (uint8); 0 in snapshots from before uint8: 4
    store_state_t state;
    // Version 2: frame mode (all 0 when the store keeps whole observations).
    uint32_t frame_stack, frame_capacity, max_actors, frame_window;
    uint32_t frame_codec, reserved; // fcodec_kind of the stored frames
    store_frame_state_t frames;
    uint64_t frame_bytes[STORE_FRAME_SECTIONS];
    uint32_t payload_crc;
    uint32_t header_crc; // over every byte before this field
} s_snap_header;

// Version 1's header: version 2's without the frame fields. Read and converted, never written.
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

typedef struct {
    uint32_t len;  // payload bytes
    uint32_t kind; // durable_rec_kind, or REC_BASE
    uint32_t crc;  // CRC32C of kind and payload
} s_rec_header;

// The first record of a segment in which the log started again after a failure: its payload
// (u32) is the covered segment of the snapshot forked at that moment, the only snapshot this
// segment continues (s_resume_log). Restore never hands it to the record callback.
#define REC_BASE 255u

struct durable {
    char dir[CONFIG_STR_LEN + 96];
    char snap_path[CONFIG_STR_LEN + 128];
    int mode;
    // The log: the segment appended to, its fd, its size at the last successful sync (a
    // failed write is cut back to it), and the records buffered since (by the loop).
    uint32_t seg;
    int fd;
    off_t synced_size;
    uint8_t *buf;
    size_t len, cap;
    int dirty; // records written to fd by the loop itself since the last fdatasync
    // degraded: appended records are not known to be durable (acks go out without waiting).
    // log_off: the log has lost records, so appends are dropped until a snapshot holding
    // them all is forked. Both are set by a failure; log_off is cleared at that fork, when
    // the log resumes, and degraded once that snapshot is on disk (durable_snapshot_poll).
    int degraded;
    int log_off;
    // Commits: each hand-off of the buffer gets the next id (issued); synced_id is the
    // newest one that has finished (on disk, or failed and degraded).
    uint64_t issued, synced_id;
    // The writer thread (durable_writer_start) writes and fdatasyncs wbuf while the loop
    // fills buf. The w_ fields are guarded by mu; wbuf belongs to the writer while W_POSTED.
    pthread_t writer;
    int has_writer;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int w_state, w_quit, w_fd, w_err;
    const char *w_what;
    uint8_t *wbuf;
    size_t wlen;
    off_t w_synced;
    uint64_t w_id;
    durable_notify_fn notify;
    void *notify_arg;
    // The snapshot child.
    pid_t child;
    uint32_t child_covers;
    float *leaves; // capacity floats, filled by the parent just before fork
    uint32_t leaves_cap;
    int lock_fd; // flock on <dir>/lock: one server per directory
    uint64_t snapshots, failures;
};

// ---------------------------------------------------------------------------------------
// Lifetime

// Takes the directory's lock and writes our pid into it. The lock is also held by a snapshot
// child (it inherits the descriptor, which keeps an orphaned child from writing next to a new
// server). When a server is SIGKILLed, that child gets SIGKILL too (PR_SET_PDEATHSIG) but may
// take a moment to die: if the pid in the file is gone, the holder is such a child and we wait
// for it, up to LOCK_WAIT_MS; a live holder is another server, refused at once. Start-up only.
#define LOCK_WAIT_MS 10000
static int s_lock(int fd, const char *path) {
    int waited = 0;
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        char buf[32] = {0};
        int64_t pid = 0;
        const char *end;
        if (pread(fd, buf, sizeof buf - 1, 0) <= 0 || parse_int64_prefix(buf, &pid, &end) != 0) {
            pid = 0; // no pid written (yet): the holder is unknown, wait for it as for a child
        }
        int holder_alive = pid > 0 && pid <= INT32_MAX &&
                           (kill((pid_t)pid, 0) == 0 || errno == EPERM);
        if (holder_alive || waited >= LOCK_WAIT_MS) {
            return -1;
        }
        if (waited == 0) {
            log_warn("%s: held by a snapshot child of apex-replay[%ld], which is gone; waiting "
                     "for the child to exit",
                     path, (long)pid);
        }
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
        waited += 20;
    }
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)n, 0) != n) {
        log_warn("%s: cannot record our pid: %s", path, strerror(errno)); // harmless
    }
    return 0;
}

durable_t *durable_new(const durable_config_t *cfg) {
    durable_t *d = xcalloc(1, sizeof *d);
    d->mode = cfg->mode;
    d->fd = -1;
    d->child = -1;
    d->lock_fd = -1;
    snprintf(d->dir, sizeof d->dir, "%s", cfg->dir);
    snprintf(d->snap_path, sizeof d->snap_path, "%s/snapshot.bin", cfg->dir);
    if (d->mode == DURABILITY_NONE) {
        return d;
    }
    int e = fileio_mkdir_p(d->dir);
    if (e != 0) {
        log_error("cannot create replay directory %s: %s", d->dir, strerror(e));
        free(d);
        return NULL;
    }
    // Two servers appending to one log would corrupt it: the second one refuses to start.
    char lock[CONFIG_STR_LEN + 128];
    snprintf(lock, sizeof lock, "%s/lock", d->dir);
    d->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (d->lock_fd < 0 || s_lock(d->lock_fd, lock) != 0) {
        log_error("%s: %s\n---> HINT: another apex-replay uses this run directory; stop it or "
                  "change [run] name",
                  lock, d->lock_fd < 0 ? strerror(errno) : "locked");
        if (d->lock_fd >= 0) {
            close(d->lock_fd);
        }
        free(d);
        return NULL;
    }
    d->cap = cfg->buffer_bytes ? cfg->buffer_bytes : (4u << 20);
    d->buf = xmalloc(d->cap);
    d->wbuf = xmalloc(d->cap);
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    fileio_crc32c(0, "", 0); // build the CRC table now, not in a forked child
    return d;
}

void durable_destroy(durable_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    durable_t *d = *self_p;
    durable_writer_stop(d);
    durable_snapshot_poll(d, 1);
    if (d->fd >= 0) {
        close(d->fd);
    }
    if (d->lock_fd >= 0) {
        close(d->lock_fd); // releases the flock
    }
    if (d->mode != DURABILITY_NONE) {
        pthread_mutex_destroy(&d->mu);
        pthread_cond_destroy(&d->cv);
    }
    free(d->buf);
    free(d->wbuf);
    free(d->leaves);
    free(d);
    *self_p = NULL;
}

int durable_degraded(const durable_t *self) { return self->degraded; }
uint64_t durable_snapshots_written(const durable_t *self) { return self->snapshots; }
uint64_t durable_failures(const durable_t *self) { return self->failures; }

// ---------------------------------------------------------------------------------------
// Segments

static void s_seg_path(const durable_t *d, uint32_t seg, char *out, size_t n) {
    snprintf(out, n, SEG_FMT, d->dir, seg);
}

static int s_cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

// The numbers of the existing log segments, ascending. Returns how many (at most max).
static int s_list_segments(const durable_t *d, uint32_t *out, int max) {
    DIR *dir = opendir(d->dir);
    if (!dir) {
        return 0;
    }
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dir)) && n < max) {
        unsigned seg;
        char tail[8];
        if (sscanf(e->d_name, "wal-%8u.%7s", &seg, tail) == 2 && strcmp(tail, "log") == 0) {
            out[n++] = seg;
        }
    }
    closedir(dir);
    qsort(out, (size_t)n, sizeof *out, s_cmp_u32);
    return n;
}

static int s_open_segment(durable_t *d, uint32_t seg) {
    char path[CONFIG_STR_LEN + 128];
    s_seg_path(d, seg, path, sizeof path);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        log_error("%s: cannot open the replay log: %s", path, strerror(e));
        return fileio_errno_to_apex(e);
    }
    fileio_fsync_dir(path); // the new name must survive a crash as well as its records
    if (d->fd >= 0) {
        close(d->fd);
    }
    d->fd = fd;
    d->seg = seg;
    d->synced_size = lseek(fd, 0, SEEK_END);
    return APEX_OK;
}

// ---------------------------------------------------------------------------------------
// Log appends and group commit
//
// The loop appends records (memcpy + CRC) to buf. A commit hands buf to the writer thread
// (swapping in wbuf) and returns at once; the writer writes it and fdatasyncs the segment,
// then calls notify. The loop learns the result when it next looks (s_collect): a failure
// degrades there, on the loop's thread, so that everything except the write and the
// fdatasync themselves stays single-threaded. Whatever needs the fd to itself (a full
// buffer written inline, a segment switch, a blocking sync) first waits for the writer:
// records are never reordered or dropped, the loop is just held back.

enum { W_IDLE = 0, W_POSTED, W_DONE };

static void s_degrade(durable_t *d, const char *what, int e) {
    d->failures++;
    d->len = 0;
    d->dirty = 0;
    d->synced_id = d->issued; // every commit has ended: the acks waiting on them go out
    if (d->fd >= 0) {
        // Cut a partially written record off, so the segment stays a sequence of whole
        // records (restore would truncate it anyway; this keeps the disk tidy).
        if (ftruncate(d->fd, d->synced_size) != 0) {
            log_warn("ftruncate of the replay log failed: %s", strerror(errno));
        }
    }
    if (!d->degraded) {
        log_error("replay log %s failed in %s: %s; running WITHOUT durability until a snapshot "
                  "succeeds (retried every sync)",
                  what, d->dir, strerror(e));
    }
    d->degraded = 1;
    d->log_off = 1;
}

// Bytes per observation element a snapshot header describes (0 in snapshots written before
// uint8 observations, which were all float32).
static uint32_t s_header_elem_bytes(const s_snap_header *h) {
    return h->obs_elem_bytes ? h->obs_elem_bytes : 4;
}

static void *s_writer_main(void *arg) {
    durable_t *d = arg;
    prctl(PR_SET_NAME, "apex-wal"); // named in top -H, and in bench_replay_tcp's CPU split
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (d->w_state != W_POSTED && !d->w_quit) {
            pthread_cond_wait(&d->cv, &d->mu);
        }
        if (d->w_state != W_POSTED) {
            break; // asked to quit, nothing left to write
        }
        int fd = d->w_fd;
        pthread_mutex_unlock(&d->mu);
        const char *what = "write";
        int e = fileio_write_all(fd, d->wbuf, d->wlen);
        if (e == 0 && fdatasync(fd) != 0) {
            e = errno;
            what = "fdatasync";
        }
        off_t size = e == 0 ? lseek(fd, 0, SEEK_END) : 0;
        pthread_mutex_lock(&d->mu);
        d->w_err = e;
        d->w_what = what;
        d->w_synced = size;
        d->w_state = W_DONE;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        if (d->notify) {
            d->notify(d->notify_arg);
        }
        pthread_mutex_lock(&d->mu);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

// The writer's state; with wait set, first waits until it is not busy.
static int s_writer_state(durable_t *d, int wait) {
    if (!d->has_writer) {
        return d->w_state; // never started, or joined: no other thread touches it
    }
    pthread_mutex_lock(&d->mu);
    while (wait && d->w_state == W_POSTED) {
        pthread_cond_wait(&d->cv, &d->mu);
    }
    int st = d->w_state;
    pthread_mutex_unlock(&d->mu);
    return st;
}

// Takes a finished commit's result (loop thread). Returns 0 while the writer is busy.
static int s_collect(durable_t *d, int wait) {
    int st = s_writer_state(d, wait);
    if (st == W_POSTED) {
        return 0;
    }
    if (st == W_DONE) {
        pthread_mutex_lock(&d->mu);
        d->w_state = W_IDLE;
        int e = d->w_err;
        pthread_mutex_unlock(&d->mu);
        d->synced_id = d->w_id;
        if (e != 0) {
            s_degrade(d, d->w_what, e);
        } else {
            d->synced_size = d->w_synced;
        }
    }
    return 1;
}

int durable_writer_start(durable_t *self, durable_notify_fn notify, void *arg) {
    durable_t *d = self;
    if (d->mode != DURABILITY_WAL || d->has_writer) {
        return APEX_OK;
    }
    d->notify = notify;
    d->notify_arg = arg;
    d->w_quit = 0; // left set by a durable_writer_stop before; no writer runs now
    int e = pthread_create(&d->writer, NULL, s_writer_main, d);
    if (e != 0) {
        log_error("cannot start the replay log's writer thread: %s", strerror(e));
        return APEX_EIO;
    }
    d->has_writer = 1;
    return APEX_OK;
}

void durable_writer_stop(durable_t *self) {
    durable_t *d = self;
    if (!d->has_writer) {
        return;
    }
    pthread_mutex_lock(&d->mu);
    d->w_quit = 1; // the writer finishes a posted buffer first
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    pthread_join(d->writer, NULL);
    d->has_writer = 0;
    s_collect(d, 0);
}

static int s_write_buffer(durable_t *d) {
    if (d->len == 0) {
        return APEX_OK;
    }
    int e = fileio_write_all(d->fd, d->buf, d->len);
    if (e != 0) {
        s_degrade(d, "write", e);
        return fileio_errno_to_apex(e);
    }
    d->len = 0;
    d->dirty = 1;
    return APEX_OK;
}

// Writes and fdatasyncs everything on the calling thread (the writer must be idle).
static int s_sync_inline(durable_t *d) {
    d->issued++;
    int rc = s_write_buffer(d);
    if (rc != APEX_OK) {
        return rc;
    }
    if (fdatasync(d->fd) != 0) {
        int e = errno;
        s_degrade(d, "fdatasync", e);
        return fileio_errno_to_apex(e);
    }
    d->synced_size = lseek(d->fd, 0, SEEK_END);
    d->dirty = 0;
    d->synced_id = d->issued;
    return APEX_OK;
}

int durable_append(durable_t *self, int kind, const void *payload, size_t len) {
    durable_t *d = self;
    if (d->mode != DURABILITY_WAL || d->log_off || d->fd < 0) {
        return 0;
    }
    s_rec_header h = {.len = (uint32_t)len, .kind = (uint32_t)kind};
    h.crc = fileio_crc32c(fileio_crc32c(0, &h.kind, sizeof h.kind), payload, len);
    size_t need = sizeof h + len;
    if (d->len + need > d->cap) {
        // No room: back-pressure. Once the writer is idle the buffer is written here; the
        // next commit's fdatasync covers it.
        s_collect(d, 1);
        if (d->log_off || s_write_buffer(d) != APEX_OK) {
            return 0;
        }
    }
    if (need > d->cap) { // a record larger than the buffer goes straight to the file
        int e = fileio_write_all(d->fd, &h, sizeof h);
        e = e ? e : fileio_write_all(d->fd, payload, len);
        if (e != 0) {
            s_degrade(d, "write", e);
        }
        d->dirty = 1;
        return 1;
    }
    memcpy(d->buf + d->len, &h, sizeof h);
    memcpy(d->buf + d->len + sizeof h, payload, len);
    d->len += need;
    return d->len > d->cap / 2;
}

size_t durable_buffered(const durable_t *self) { return self->len; }
size_t durable_buffer_cap(const durable_t *self) { return self->cap; }

uint64_t durable_commit_start(durable_t *self) {
    durable_t *d = self;
    if (d->mode != DURABILITY_WAL) {
        return d->synced_id;
    }
    if (!s_collect(d, 0)) {
        return 0; // busy: the caller tries again when the writer is done
    }
    if (d->degraded || d->fd < 0 || (d->len == 0 && !d->dirty)) {
        return d->synced_id; // nothing that is not already on disk (or can be)
    }
    if (!d->has_writer) {
        s_sync_inline(d); // a server without a loop (tests, --dump): no thread
        return d->issued;
    }
    uint8_t *t = d->wbuf;
    d->wbuf = d->buf;
    d->buf = t;
    pthread_mutex_lock(&d->mu);
    d->wlen = d->len;
    d->w_fd = d->fd;
    d->w_id = ++d->issued;
    d->w_state = W_POSTED;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    d->len = 0;
    d->dirty = 0; // the writer's fdatasync covers what the loop wrote itself
    return d->issued;
}

int durable_commit_done(durable_t *self, uint64_t id) {
    durable_t *d = self;
    s_collect(d, 0);
    return d->synced_id >= id;
}

int durable_sync(durable_t *self) {
    durable_t *d = self;
    if (d->mode != DURABILITY_WAL) {
        return APEX_OK;
    }
    s_collect(d, 1);
    if (d->degraded || d->fd < 0) {
        return APEX_EIO;
    }
    if (d->len == 0 && !d->dirty) {
        return APEX_OK;
    }
    return s_sync_inline(d);
}

// ---------------------------------------------------------------------------------------
// Snapshots

static uint32_t s_header_crc(const s_snap_header *h) {
    return fileio_crc32c(0, h, offsetof(s_snap_header, header_crc));
}

// Runs in the forked child: only write(2)-based calls (fileio, log) and _exit.
static _Noreturn void s_child_write(durable_t *d, const store_t *store, const void *blob,
                                    size_t blob_len) {
    s_snap_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, SNAP_MAGIC, 8);
    h.format_version = SNAP_FORMAT_VERSION;
    h.header_bytes = sizeof h;
    h.capacity = store_capacity(store);
    h.obs_dim = store_obs_dim(store);
    h.obs_elem_bytes = store_obs_elem_bytes(store);
    size_t rows_bytes;
    const void *rows = store_rows(store, &rows_bytes);
    h.rows_bytes = rows_bytes;
    h.blob_bytes = blob_len;
    h.covered_segment = d->child_covers;
    store_get_state(store, &h.state);
    const void *fsec[STORE_FRAME_SECTIONS];
    size_t fsec_bytes[STORE_FRAME_SECTIONS];
    store_frame_sections(store, fsec, fsec_bytes);
    if (store_frame_stack(store)) {
        h.frame_stack = store_frame_stack(store);
        h.frame_capacity = store_frame_capacity(store);
        h.max_actors = store_max_actors(store);
        h.frame_window = store_frame_window(store);
        h.frame_codec = store_frame_codec(store);
        store_get_frame_state(store, &h.frames);
    }
    size_t leaves_bytes = (size_t)h.capacity * sizeof(float);
    uint32_t crc = fileio_crc32c(0, rows, rows_bytes);
    crc = fileio_crc32c(crc, d->leaves, leaves_bytes);
    crc = fileio_crc32c(crc, blob, blob_len);
    fileio_chunk_t chunks[4 + STORE_FRAME_SECTIONS] = {
        {&h, sizeof h}, {rows, rows_bytes}, {d->leaves, leaves_bytes}, {blob, blob_len}};
    for (int i = 0; i < STORE_FRAME_SECTIONS; i++) {
        h.frame_bytes[i] = fsec_bytes[i];
        crc = fileio_crc32c(crc, fsec[i], fsec_bytes[i]);
        chunks[4 + i] = (fileio_chunk_t){fsec[i], fsec_bytes[i]};
    }
    h.payload_crc = crc;
    h.header_crc = s_header_crc(&h);
    int rc = fileio_atomic_write(d->snap_path, chunks, 4 + STORE_FRAME_SECTIONS);
    _exit(rc == APEX_OK ? 0 : rc == APEX_ENOSPC ? 3 : 1);
}

// The way back from a failed log. The snapshot just forked holds every record the log lost,
// so the log starts again at once, in the segment opened for that snapshot: records that
// arrive while the child writes are in that segment, not in the snapshot, and dropping
// them until the child is reaped would leave a hole after the snapshot. What is still
// buffered came before the fork: the snapshot holds it. Until the snapshot has replaced the
// previous one, though, this segment follows a hole in the log, so its first record names
// the snapshot it continues, and restore sets it aside (with the segments after it) when the
// snapshot on disk is an older one.
static void s_resume_log(durable_t *d, uint32_t covered) {
    d->len = 0;
    d->dirty = 0;
    d->log_off = 0;
    durable_append(d, REC_BASE, &covered, sizeof covered);
}

int durable_snapshot_start(durable_t *self, const store_t *store, const void *blob,
                           size_t blob_len) {
    durable_t *d = self;
    if (d->mode == DURABILITY_NONE) {
        return APEX_OK;
    }
    if (d->child > 0) {
        return APEX_EAGAIN;
    }
    if (d->mode == DURABILITY_WAL) {
        // Syncs the log (a failure degrades; the snapshot is then the way back) and, degraded
        // or not, waits for the writer: the segment switch below closes the fd it writes to.
        durable_sync(d);
    }
    // Move the log on: the snapshot will contain everything in segments <= covered.
    uint32_t covered = d->seg;
    if (d->mode == DURABILITY_WAL) {
        int rc = s_open_segment(d, covered + 1);
        if (rc != APEX_OK) {
            s_degrade(d, "open", rc == APEX_ENOSPC ? ENOSPC : EIO);
            return rc;
        }
    }
    uint32_t cap = store_capacity(store);
    if (d->leaves_cap != cap) {
        free(d->leaves);
        d->leaves = xmalloc((size_t)cap * sizeof(float));
        d->leaves_cap = cap;
    }
    store_copy_leaves(store, d->leaves);
    d->child_covers = covered;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        d->failures++;
        log_error("fork for the replay snapshot failed: %s", strerror(e));
        return APEX_EIO;
    }
    if (pid == 0) {
#ifdef __linux__
        // A snapshot finishing after its server died could replace a newer snapshot written
        // by the restarted server (whose log segments it no longer has): die with the parent.
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) {
            _exit(1);
        }
#endif
        s_child_write(d, store, blob, blob_len);
    }
    d->child = pid;
    if (d->mode == DURABILITY_WAL && d->log_off) {
        s_resume_log(d, covered);
    }
    return APEX_OK;
}

// Deletes the log segments that the finished snapshot contains.
static void s_drop_covered(durable_t *d, uint32_t covered) {
    uint32_t segs[MAX_SEGMENTS];
    int n = s_list_segments(d, segs, MAX_SEGMENTS);
    char path[CONFIG_STR_LEN + 128];
    for (int i = 0; i < n && segs[i] <= covered; i++) {
        s_seg_path(d, segs[i], path, sizeof path);
        unlink(path);
    }
    fileio_fsync_dir(d->snap_path);
}

int durable_snapshot_poll(durable_t *self, int wait) {
    durable_t *d = self;
    if (d->child <= 0) {
        return 0;
    }
    int status = 0;
    pid_t r = waitpid(d->child, &status, wait ? 0 : WNOHANG);
    if (r == 0 || (r < 0 && errno == EINTR)) {
        return 0;
    }
    d->child = -1;
    if (r > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        s_drop_covered(d, d->child_covers);
        d->snapshots++;
        // Durable again, unless the log failed after the fork: what it lost since is in no
        // snapshot, and the next one (started with log_off set) is the way back.
        if (d->degraded && !d->log_off) {
            log_info("replay snapshot written: durability restored");
        }
        d->degraded = d->log_off;
        return 1;
    }
    d->failures++;
    if (!d->degraded) {
        log_error("replay snapshot failed (%s); the previous snapshot is intact; running WITHOUT "
                  "durability until a snapshot succeeds",
                  r > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 3 ? "disk full"
                                                                         : "see above");
    }
    d->degraded = 1;
    if (d->mode == DURABILITY_WAL) {
        d->log_off = 1; // no appends until a snapshot succeeds; the next one resumes the log
    }
    return -1;
}

// ---------------------------------------------------------------------------------------
// Restore

// Reads and checks snapshot.bin into store and blob. Returns APEX_OK (also when there is
// none: *covered = 0), or an error after logging why.
#define MAX_BLOB_BYTES (1u << 30) // larger can only be corruption

// Reads a snapshot header of version 2, or 1 (converted: no frame fields), into h. APEX_OK,
// or an error with *why set.
static int s_read_header(int fd, s_snap_header *h, const char **why) {
    memset(h, 0, sizeof *h);
    if (fileio_read_all(fd, h, offsetof(s_snap_header, capacity)) != 0 ||
        memcmp(h->magic, SNAP_MAGIC, 8) != 0) {
        *why = "not an apex replay snapshot";
        return APEX_EPROTO;
    }
    size_t head = offsetof(s_snap_header, capacity);
    if (h->format_version == 1 && h->header_bytes == sizeof(s_snap_header_v1)) {
        s_snap_header_v1 v1;
        memcpy(&v1, h, head);
        if (fileio_read_all(fd, (char *)&v1 + head, sizeof v1 - head) != 0) {
            *why = "truncated";
            return APEX_EPROTO;
        }
        if (v1.header_crc != fileio_crc32c(0, &v1, offsetof(s_snap_header_v1, header_crc))) {
            *why = "corrupt header (checksum mismatch)";
            return APEX_EPROTO;
        }
        memcpy(h, &v1, offsetof(s_snap_header_v1, payload_crc));
        h->payload_crc = v1.payload_crc;
        return APEX_OK;
    }
    if (h->format_version != SNAP_FORMAT_VERSION || h->header_bytes != sizeof *h) {
        *why = "snapshot format version not supported by this build";
        return APEX_EVERSION;
    }
    if (fileio_read_all(fd, (char *)h + head, sizeof *h - head) != 0) {
        *why = "truncated";
        return APEX_EPROTO;
    }
    if (h->header_crc != s_header_crc(h)) {
        *why = "corrupt header (checksum mismatch)";
        return APEX_EPROTO;
    }
    return APEX_OK;
}

static int s_load_snapshot(durable_t *d, store_t *store, durable_blob_fn on_blob, void *arg,
                           uint32_t *covered, durable_restore_info_t *info) {
    *covered = 0;
    int fd = open(d->snap_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) {
            return APEX_OK;
        }
        log_error("%s: cannot open: %s", d->snap_path, strerror(errno));
        return APEX_EIO;
    }
    s_snap_header h;
    int rc = APEX_EPROTO;
    void *rows = NULL, *blob = NULL;
    float *leaves = NULL;
    size_t leaves_bytes = (size_t)store_capacity(store) * sizeof(float);
    const char *why = NULL;
    void *fsec[STORE_FRAME_SECTIONS];
    size_t fsec_bytes[STORE_FRAME_SECTIONS];
    store_frame_sections_mut(store, fsec, fsec_bytes);
    int hdr = s_read_header(fd, &h, &why);
    if (hdr != APEX_OK) {
        rc = hdr;
    } else if (h.capacity != store_capacity(store) || h.obs_dim != store_obs_dim(store) ||
               s_header_elem_bytes(&h) != store_obs_elem_bytes(store) ||
               h.state.action_dim != store_action_dim(store) || h.blob_bytes > MAX_BLOB_BYTES) {
        log_error("%s: written for capacity %u, obs_dim %u, %u-byte observation elements and "
                  "action_dim %u, the config says %u, %u, %u and %u"
                  "\n---> HINT: use the original [replay] capacity and [env] id, obs_dim, "
                  "obs_dtype and action_dim, or move the directory away to start empty",
                  d->snap_path, h.capacity, h.obs_dim, s_header_elem_bytes(&h), h.state.action_dim,
                  store_capacity(store), store_obs_dim(store), store_obs_elem_bytes(store),
                  store_action_dim(store));
        close(fd);
        return APEX_EINVAL;
    } else if (h.frame_stack != store_frame_stack(store) ||
               h.frame_capacity != store_frame_capacity(store) ||
               h.max_actors != store_max_actors(store) ||
               h.frame_window != store_frame_window(store) ||
               h.frame_codec != store_frame_codec(store) ||
               // The first section (the frames) may be shorter: a compressed store's arena
               // is written as far as it is used.
               h.frame_bytes[0] > fsec_bytes[0] ||
               (!h.frame_codec && h.frame_bytes[0] != fsec_bytes[0]) ||
               h.frame_bytes[1] != fsec_bytes[1] || h.frame_bytes[2] != fsec_bytes[2] ||
               h.frame_bytes[3] != fsec_bytes[3]) {
        log_error("%s: written with frame_stack %u, %u frames (%s), %u actors and a window of "
                  "%u frame numbers, the config gives %u, %u (%s), %u and %u"
                  "\n---> HINT: use the original [env] frame_stack, [replay] frame_storage, "
                  "compress and frame_capacity and [actor] num_actors, envs_per_actor, n_step and "
                  "[replay] max_batch, or move the directory away to start empty",
                  d->snap_path, h.frame_stack, h.frame_capacity, fcodec_name((int)h.frame_codec),
                  h.max_actors, h.frame_window, store_frame_stack(store),
                  store_frame_capacity(store), fcodec_name((int)store_frame_codec(store)),
                  store_max_actors(store), store_frame_window(store));
        close(fd);
        return APEX_EINVAL;
    } else {
        rows = xmalloc(h.rows_bytes ? h.rows_bytes : 1);
        leaves = xmalloc(leaves_bytes);
        blob = xmalloc(h.blob_bytes ? h.blob_bytes : 1);
        // The frame sections are read in place: a pixel replay's ring is most of the
        // machine's memory and must not be held twice. A bad file then leaves them garbage,
        // and the start-up fails below before anything uses them.
        int short_read = fileio_read_all(fd, rows, h.rows_bytes) != 0 ||
                         fileio_read_all(fd, leaves, leaves_bytes) != 0 ||
                         fileio_read_all(fd, blob, h.blob_bytes) != 0;
        uint32_t crc =
            fileio_crc32c(fileio_crc32c(fileio_crc32c(0, rows, h.rows_bytes), leaves, leaves_bytes),
                          blob, h.blob_bytes);
        for (int i = 0; i < STORE_FRAME_SECTIONS && !short_read; i++) {
            short_read = fileio_read_all(fd, fsec[i], h.frame_bytes[i]) != 0;
            crc = fileio_crc32c(crc, fsec[i], h.frame_bytes[i]);
        }
        if (short_read) {
            why = "truncated";
        } else if (crc != h.payload_crc) {
            why = "corrupt payload (checksum mismatch)";
        } else if (store_restore(store, &h.state, rows, h.rows_bytes, leaves) != APEX_OK ||
                   (h.frame_stack &&
                    store_restore_frames(store, &h.frames, h.frame_bytes[0]) != APEX_OK)) {
            why = "inconsistent contents";
        } else {
            rc = APEX_OK;
        }
    }
    close(fd);
    free(rows);
    free(leaves);
    if (rc != APEX_OK) {
        free(blob);
        log_error("%s: %s\n---> HINT: move it away to start from the log alone (or empty)",
                  d->snap_path, why);
        return rc;
    }
    on_blob(arg, blob, h.blob_bytes);
    free(blob);
    *covered = h.covered_segment;
    info->had_snapshot = 1;
    info->snapshot_size = h.state.size;
    return APEX_OK;
}

// Feeds the records of one segment to fn. Returns 0 when the whole file was good, 1 when a
// torn or corrupt tail was cut off (at the last whole record), 2 (nothing replayed) when
// the segment continues a snapshot newer than the one restored, covering more than covered.
static int s_replay_segment(durable_t *d, uint32_t seg, uint32_t covered, durable_record_fn fn,
                            void *arg, durable_restore_info_t *info) {
    char path[CONFIG_STR_LEN + 128];
    s_seg_path(d, seg, path, sizeof path);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        log_warn("%s: cannot open: %s; skipped", path, strerror(errno));
        return 1;
    }
    off_t size = lseek(fd, 0, SEEK_END), off = 0;
    lseek(fd, 0, SEEK_SET);
    uint8_t *payload = NULL;
    size_t payload_cap = 0;
    const char *why = NULL;
    while (off < size) {
        s_rec_header h;
        if (fileio_read_all(fd, &h, sizeof h) != 0) {
            why = "torn record header";
            break;
        }
        if (h.len > MAX_RECORD_BYTES || (off_t)(off + sizeof h + h.len) > size) {
            why = h.len > MAX_RECORD_BYTES ? "corrupt record length" : "torn record";
            break;
        }
        if (h.len > payload_cap) {
            payload_cap = h.len;
            payload = xrealloc(payload, payload_cap); // start-up only
        }
        if (fileio_read_all(fd, payload, h.len) != 0 ||
            h.crc != fileio_crc32c(fileio_crc32c(0, &h.kind, sizeof h.kind), payload, h.len)) {
            why = "corrupt record (checksum mismatch)";
            break;
        }
        if (h.kind == REC_BASE) {
            uint32_t base = 0;
            if (off != 0 || h.len != sizeof base) {
                why = "misplaced base record";
                break;
            }
            memcpy(&base, payload, sizeof base);
            if (base > covered) {
                free(payload);
                close(fd);
                return 2; // the snapshot it continues never replaced the one restored
            }
            off += (off_t)(sizeof h + h.len);
            continue;
        }
        fn(arg, (int)h.kind, payload, h.len);
        info->records++;
        off += (off_t)(sizeof h + h.len);
    }
    free(payload);
    int torn = why != NULL;
    if (torn) {
        log_warn("%s: %s at offset %lld: truncating %lld bytes (records after a crash during an "
                 "append were never acknowledged)",
                 path, why, (long long)off, (long long)(size - off));
        info->torn_bytes += (uint64_t)(size - off);
        if (ftruncate(fd, off) != 0 || fsync(fd) != 0) {
            log_warn("%s: truncation failed: %s", path, strerror(errno));
        }
    }
    close(fd);
    return torn;
}

static void s_set_aside(const char *path, const char *why) {
    char moved[CONFIG_STR_LEN + 160];
    snprintf(moved, sizeof moved, "%s.orphaned", path);
    if (rename(path, moved) != 0) {
        log_warn("%s %s, but cannot be set aside: %s", path, why, strerror(errno));
        return;
    }
    log_warn("%s %s: set aside as %s", path, why, moved);
}

int durable_restore(durable_t *self, store_t *store, durable_blob_fn on_blob, void *blob_arg,
                    durable_record_fn fn, void *arg, durable_restore_info_t *info) {
    durable_t *d = self;
    memset(info, 0, sizeof *info);
    if (d->mode == DURABILITY_NONE) {
        return APEX_OK;
    }
    uint32_t covered;
    int rc = s_load_snapshot(d, store, on_blob, blob_arg, &covered, info);
    if (rc != APEX_OK) {
        return rc;
    }
    uint32_t segs[MAX_SEGMENTS];
    int n = s_list_segments(d, segs, MAX_SEGMENTS);
    uint32_t last = covered;
    int torn = 0;
    for (int i = 0; i < n; i++) {
        char path[CONFIG_STR_LEN + 128];
        s_seg_path(d, segs[i], path, sizeof path);
        if (segs[i] <= covered) {
            unlink(path); // left over from a crash between a snapshot's rename and cleanup
            continue;
        }
        last = segs[i];
        if (torn) {
            // Records after a torn segment would be applied out of order: set them aside.
            s_set_aside(path, "follows a torn segment");
            continue;
        }
        torn = s_replay_segment(d, segs[i], covered, fn, arg, info);
        if (torn == 2) {
            // The log started again here after a failure, for a snapshot that never made it
            // to disk: on top of this one its records would follow a hole.
            s_set_aside(path, "continues a snapshot that was never written");
            continue;
        }
        info->segments++;
    }
    d->seg = last; // in snapshot mode the next snapshot then removes leftover segments
    // Appends go to a fresh segment: restore never appends after a truncated tail.
    return d->mode == DURABILITY_WAL ? s_open_segment(d, last + 1) : APEX_OK;
}
