// tbevents.c: see tbevents.h. The only includer of the generated tensorboard.pb-c.h (S18).
#define LOG_MODULE "tbevents"
#include "tbevents.h"

#include "apex.h"
#include "clock.h"
#include "fileio.h"
#include "log.h"
#include "xalloc.h"

#include "tensorboard.pb-c.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TBEVENTS_PATH_MAX 4096
#define TBEVENTS_SUFFIX_MAX 999 // ".001" .. ".999" after the plain name

struct tbevents {
    int fd;
    char path[TBEVENTS_PATH_MAX];
    // Framed records not yet in the file: buf[0, len), n_pending of them.
    uint8_t *buf;
    size_t len, cap;
    int n_pending;
    // The file holds good_bytes of complete records. A failed write may leave a partial
    // record after them: every write starts at good_bytes (overwriting it), and tail_dirty
    // says a cut back to good_bytes is still owed.
    off_t good_bytes;
    int tail_dirty;
    uint64_t dropped;
    // protobuf-c messages for one summary, reused by every call: n_values of them are
    // initialised, value_ptrs[i] = &values[i] (protobuf-c wants an array of pointers).
    Tensorboard__Summary__Value *values;
    Tensorboard__Summary__Value **value_ptrs;
    int n_values;
};

// ---------------------------------------------------------------------------------------
// TFRecord framing

uint32_t tbevents_masked_crc(const void *buf, size_t len) {
    uint32_t c = fileio_crc32c(0, buf, len);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u; // wraps modulo 2^32 (unsigned)
}

static void s_store_u32le(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

// Packs ev as one framed record at self->buf + self->len (the room is there: checked by
// the caller with the same size) and counts it as pending.
static void s_frame(tbevents_t *self, const Tensorboard__Event *ev, size_t data_len) {
    uint8_t *p = self->buf + self->len;
    uint64_t n = data_len;
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(n >> (8 * i));
    }
    s_store_u32le(p + 8, tbevents_masked_crc(p, 8));
    size_t packed = tensorboard__event__pack(ev, p + 12);
    APEX_ASSERT(packed == data_len);
    s_store_u32le(p + 12 + data_len, tbevents_masked_crc(p + 12, data_len));
    self->len += data_len + TBEVENTS_RECORD_OVERHEAD;
    self->n_pending++;
}

// ---------------------------------------------------------------------------------------
// writing

// Writes the pending records at good_bytes. On failure cuts the file back to good_bytes
// (shrinking needs no space, so this works on a full disk too) and keeps the records.
static int s_write_pending(tbevents_t *self) {
    if (self->len == 0) {
        return APEX_OK;
    }
    int e = 0;
    if (lseek(self->fd, self->good_bytes, SEEK_SET) < 0) {
        e = errno;
    } else {
        e = fileio_write_all(self->fd, self->buf, self->len);
    }
    if (e != 0) {
        self->tail_dirty = ftruncate(self->fd, self->good_bytes) != 0;
        return fileio_errno_to_apex(e);
    }
    self->good_bytes += (off_t)self->len;
    self->len = 0;
    self->n_pending = 0;
    if (self->tail_dirty) { // an earlier partial record may still lie beyond the new end
        self->tail_dirty = ftruncate(self->fd, self->good_bytes) != 0;
    }
    return APEX_OK;
}

// Makes room for one record of rec bytes: flushes a full buffer first, drops what that
// flush could not write, and grows the buffer for a record larger than it. Returns the
// flush's error (the room is made anyway).
static int s_make_room(tbevents_t *self, size_t rec) {
    int rc = APEX_OK;
    if (self->len + rec > self->cap) {
        rc = s_write_pending(self);
        if (rc != APEX_OK) {
            self->dropped += (uint64_t)self->n_pending;
            self->len = 0;
            self->n_pending = 0;
        }
    }
    if (rec > self->cap) { // rare: only a record larger than any before (bounded by caller)
        size_t cap = self->cap;
        while (cap < rec) {
            cap *= 2;
        }
        self->buf = xrealloc(self->buf, cap);
        self->cap = cap;
    }
    return rc;
}

// Grows the reusable Value messages to n (at most TBEVENTS_MAX_TAGS, so bounded).
static void s_reserve_values(tbevents_t *self, int n) {
    if (n <= self->n_values) {
        return;
    }
    self->values = xrealloc(self->values, (size_t)n * sizeof *self->values);
    self->value_ptrs = xrealloc(self->value_ptrs, (size_t)n * sizeof *self->value_ptrs);
    for (int i = 0; i < n; i++) {
        if (i >= self->n_values) {
            tensorboard__summary__value__init(&self->values[i]);
        }
        self->value_ptrs[i] = &self->values[i]; // values may have moved
    }
    self->n_values = n;
}

int tbevents_scalars(tbevents_t *self, int64_t step, double wall_time, const char *const *tags,
                     const double *values, int n) {
    APEX_ASSERT(self && n >= 0 && n <= TBEVENTS_MAX_TAGS && (n == 0 || (tags && values)));
    s_reserve_values(self, n);
    for (int i = 0; i < n; i++) {
        APEX_ASSERT(tags[i] != NULL);
        Tensorboard__Summary__Value *v = &self->values[i];
        v->tag = (char *)tags[i]; // protobuf-c's fields are not const; pack only reads them
        v->value_case = TENSORBOARD__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
        // Out-of-range magnitudes become +-inf: IEEE 754 conversion (C11 Annex F, which
        // glibc targets), the same as TensorBoard's own float32 field.
        v->simple_value = (float)values[i];
    }
    Tensorboard__Summary summary = TENSORBOARD__SUMMARY__INIT;
    summary.n_value = (size_t)n;
    summary.value = self->value_ptrs;
    Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
    ev.wall_time = wall_time;
    ev.step = step;
    ev.what_case = TENSORBOARD__EVENT__WHAT_SUMMARY;
    ev.summary = &summary;
    size_t data_len = tensorboard__event__get_packed_size(&ev);
    if (data_len > TBEVENTS_RECORD_MAX - TBEVENTS_RECORD_OVERHEAD) {
        return APEX_EINVAL;
    }
    int rc = s_make_room(self, data_len + TBEVENTS_RECORD_OVERHEAD);
    s_frame(self, &ev, data_len);
    return rc;
}

int tbevents_flush(tbevents_t *self) {
    APEX_ASSERT(self);
    return s_write_pending(self);
}

// ---------------------------------------------------------------------------------------
// lifecycle

// "events.out.tfevents.<time>.<host>" with '/' (impossible in a hostname, but it would make
// a path) replaced.
static void s_base_name(char *out, size_t n, double wall_time) {
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') {
        snprintf(host, sizeof host, "localhost");
    }
    host[sizeof host - 1] = '\0';
    for (char *p = host; *p; p++) {
        if (*p == '/') {
            *p = '_';
        }
    }
    long long t = wall_time > 0 ? (long long)floor(wall_time) : 0;
    snprintf(out, n, "events.out.tfevents.%010lld.%s", t, host);
}

// Creates the file with O_EXCL under the plain name or, if taken, the first free suffix.
// Returns the fd and fills self->path, or -1 after logging.
static int s_open_new(tbevents_t *self, const char *dir, double wall_time) {
    char base[512];
    s_base_name(base, sizeof base, wall_time);
    for (int k = 0; k <= TBEVENTS_SUFFIX_MAX; k++) {
        char suffix[8] = "";
        if (k > 0) {
            snprintf(suffix, sizeof suffix, ".%03d", k);
        }
        int len = snprintf(self->path, sizeof self->path, "%s/%s%s", dir, base, suffix);
        if (len < 0 || (size_t)len >= sizeof self->path) {
            log_error("%s: path too long for an event file", dir);
            return -1;
        }
        int fd = open(self->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd >= 0) {
            return fd;
        }
        if (errno != EEXIST) {
            log_error("%s: cannot create: %s", self->path, strerror(errno));
            return -1;
        }
    }
    log_error("%s/%s: %d files of that name exist already", dir, base, TBEVENTS_SUFFIX_MAX + 1);
    return -1;
}

tbevents_t *tbevents_new_at(const char *dir, double wall_time) {
    int e = fileio_mkdir_p(dir);
    if (e != 0) {
        log_error("cannot create directory %s for event files: %s", dir, strerror(e));
        return NULL;
    }
    tbevents_t *self = xcalloc(1, sizeof *self);
    self->fd = s_open_new(self, dir, wall_time);
    if (self->fd < 0) {
        free(self);
        return NULL;
    }
    self->cap = TBEVENTS_BUF_BYTES;
    self->buf = xmalloc(self->cap);
    Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
    ev.wall_time = wall_time;
    ev.what_case = TENSORBOARD__EVENT__WHAT_FILE_VERSION;
    ev.file_version = (char *)TBEVENTS_FILE_VERSION; // read only by pack
    s_frame(self, &ev, tensorboard__event__get_packed_size(&ev));
    int rc = s_write_pending(self);
    if (rc != APEX_OK) {
        log_error("%s: cannot write the first record: %s", self->path, apex_strerror(rc));
        unlink(self->path);
        self->len = 0; // nothing left for destroy to retry
        self->n_pending = 0;
        tbevents_destroy(&self);
        return NULL;
    }
    return self;
}

tbevents_t *tbevents_new(const char *dir) { return tbevents_new_at(dir, clock_wall_s()); }

void tbevents_destroy(tbevents_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    tbevents_t *self = *self_p;
    int n = self->n_pending;
    int rc = s_write_pending(self);
    if (rc != APEX_OK) {
        log_warn("%s: %d records lost at close: %s", self->path, n, apex_strerror(rc));
    }
    if (close(self->fd) != 0) {
        log_warn("%s: close failed: %s", self->path, strerror(errno));
    }
    free(self->buf);
    free(self->values);
    free(self->value_ptrs);
    free(self);
    *self_p = NULL;
}

// ---------------------------------------------------------------------------------------
// queries

const char *tbevents_path(const tbevents_t *self) { return self->path; }
uint64_t tbevents_dropped(const tbevents_t *self) { return self->dropped; }
int tbevents_pending(const tbevents_t *self) { return self->n_pending; }
