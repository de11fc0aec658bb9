// ckpt.c: checkpoint header, CRC32C, tmp+fsync+rename writer, validating reader.
#define LOG_MODULE "ckpt"
#include "ckpt.h"

#include "fileio.h"

#include "apex.h"
#include "log.h"
#include "xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert(sizeof(ckpt_header_t) == 240, "checkpoint header must have no padding");

// Format 1: the header of builds before conv layers (MLPs only), read and converted.
typedef struct {
    char magic[8];
    uint32_t format_version;
    uint32_t header_bytes; // 168
    int32_t obs_dim, n_actions, n_hidden, dueling;
    int32_t hidden[NN_MAX_HIDDEN];
    uint64_t num_params, learner_step;
    uint32_t optim_kind, n_arrays;
    uint64_t optim_step;
    uint64_t rng_state[4];
    ckpt_extra_t extra;
    uint64_t payload_bytes;
    uint32_t payload_crc32c;
    uint32_t header_crc32c;
} s_header_v1;
_Static_assert(sizeof(s_header_v1) == 168, "format 1 header is 168 bytes");
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "checkpoint format is little-endian");

// ----------------------------------------------------------------------------
// header

void ckpt_header_init(ckpt_header_t *hdr, const nn_config_t *cfg) {
    memset(hdr, 0, sizeof *hdr);
    memcpy(hdr->magic, CKPT_MAGIC, 8);
    hdr->format_version = CKPT_FORMAT_VERSION;
    hdr->header_bytes = sizeof *hdr;
    hdr->obs_dim = cfg->obs_dim;
    hdr->n_actions = cfg->n_actions;
    hdr->n_hidden = cfg->n_hidden;
    hdr->dueling = cfg->dueling;
    for (int l = 0; l < cfg->n_hidden && l < NN_MAX_HIDDEN; l++) {
        hdr->hidden[l] = cfg->hidden[l];
    }
    hdr->in_h = cfg->in_h;
    hdr->in_w = cfg->in_w;
    hdr->in_c = cfg->in_c;
    hdr->in_dtype = cfg->in_dtype;
    hdr->in_scale = cfg->in_scale;
    hdr->n_conv = cfg->n_conv;
    for (int l = 0; l < cfg->n_conv && l < NN_MAX_CONV; l++) {
        hdr->conv[l][0] = cfg->conv[l].filters;
        hdr->conv[l][1] = cfg->conv[l].kernel;
        hdr->conv[l][2] = cfg->conv[l].stride;
    }
    hdr->num_params = nn_num_params(cfg);
}

void ckpt_header_config(const ckpt_header_t *hdr, nn_config_t *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->obs_dim = hdr->obs_dim;
    cfg->n_actions = hdr->n_actions;
    cfg->n_hidden = hdr->n_hidden;
    cfg->dueling = hdr->dueling;
    for (int l = 0; l < NN_MAX_HIDDEN; l++) {
        cfg->hidden[l] = hdr->hidden[l];
    }
    cfg->in_h = hdr->in_h;
    cfg->in_w = hdr->in_w;
    cfg->in_c = hdr->in_c;
    cfg->in_dtype = hdr->in_dtype;
    cfg->in_scale = hdr->in_scale;
    cfg->n_conv = hdr->n_conv >= 0 && hdr->n_conv <= NN_MAX_CONV ? hdr->n_conv : 0;
    for (int l = 0; l < cfg->n_conv; l++) {
        cfg->conv[l] = (nn_conv_t){hdr->conv[l][0], hdr->conv[l][1], hdr->conv[l][2]};
    }
}

// A format 1 header as format 2 (its CRC already checked against its own bytes): an MLP on
// a vector observation, no conv layers.
static void s_header_from_v1(ckpt_header_t *h, const s_header_v1 *v) {
    memset(h, 0, sizeof *h);
    memcpy(h->magic, v->magic, 8);
    h->format_version = v->format_version;
    h->header_bytes = v->header_bytes;
    h->obs_dim = v->obs_dim, h->n_actions = v->n_actions;
    h->n_hidden = v->n_hidden, h->dueling = v->dueling;
    memcpy(h->hidden, v->hidden, sizeof h->hidden);
    h->num_params = v->num_params, h->learner_step = v->learner_step;
    h->optim_kind = v->optim_kind, h->n_arrays = v->n_arrays, h->optim_step = v->optim_step;
    memcpy(h->rng_state, v->rng_state, sizeof h->rng_state);
    h->extra = v->extra;
    h->payload_bytes = v->payload_bytes;
    h->payload_crc32c = v->payload_crc32c;
}

// The header has its own checksum so that a flipped bit in a size or counter is reported
// as corruption, not misread as a shape mismatch or silently restored as a wrong step.
static uint32_t s_header_crc(const ckpt_header_t *hdr) {
    return fileio_crc32c(0, hdr, offsetof(ckpt_header_t, header_crc32c));
}

// ----------------------------------------------------------------------------
// writing

// Atomic replace through fileio_atomic_write: the previous checkpoint survives any failure.
// n_arrays arrays of floats_per_array floats after hdr (magic already set).
static int s_write(const char *path, ckpt_header_t *hdr, const float *const arrays[], int n_arrays,
                   size_t floats_per_array) {
    APEX_ASSERT(n_arrays >= 1 && n_arrays <= CKPT_MAX_ARRAYS);
    size_t bytes = floats_per_array * sizeof(float);
    hdr->n_arrays = (uint32_t)n_arrays;
    hdr->payload_bytes = (uint64_t)bytes * n_arrays;
    uint32_t crc = 0;
    fileio_chunk_t chunks[1 + CKPT_MAX_ARRAYS];
    for (int i = 0; i < n_arrays; i++) {
        crc = fileio_crc32c(crc, arrays[i], bytes);
        chunks[1 + i] = (fileio_chunk_t){arrays[i], bytes};
    }
    hdr->payload_crc32c = crc;
    hdr->header_crc32c = s_header_crc(hdr);
    chunks[0] = (fileio_chunk_t){hdr, sizeof *hdr};
    return fileio_atomic_write(path, chunks, 1 + n_arrays);
}

int ckpt_write(const char *path, ckpt_header_t *hdr, const float *const arrays[], int n_arrays) {
    memcpy(hdr->magic, CKPT_MAGIC, 8);
    return s_write(path, hdr, arrays, n_arrays, (size_t)hdr->num_params);
}

int ckpt_write_shard(const char *path, ckpt_header_t *hdr, const float *const arrays[],
                     int n_arrays) {
    memcpy(hdr->magic, CKPT_SHARD_MAGIC, 8);
    return s_write(path, hdr, arrays, n_arrays, (size_t)hdr->extra.user[CKPT_SHARD_COUNT]);
}

int ckpt_write_as(const char *path, const char *magic, ckpt_header_t *hdr,
                  const float *const arrays[], int n_arrays) {
    memcpy(hdr->magic, magic, 8);
    return s_write(path, hdr, arrays, n_arrays, (size_t)hdr->num_params);
}

// The writer in steps (ckpt_writer_*): path.tmp holds a header of zeros until commit, when
// the payload's checksum is known; then fileio_atomic_write's fsync, rename, fsync of the
// directory.
struct ckpt_writer {
    char path[4096], tmp[4096 + 8];
    int fd;
    int rc; // the first error, APEX_OK until one
    ckpt_header_t hdr;
    uint64_t want, got; // payload bytes expected, written
    uint32_t crc;
};

static int s_writer_fail(ckpt_writer_t *w, const char *what, int e) {
    if (w->rc == APEX_OK) {
        log_error("%s: %s failed: %s (the previous %s is intact)", w->tmp, what, strerror(e),
                  w->path);
        w->rc = fileio_errno_to_apex(e);
    }
    return w->rc;
}

int ckpt_writer_open(ckpt_writer_t **out, const char *path, ckpt_header_t *hdr, int n_arrays) {
    APEX_ASSERT(n_arrays >= 1 && n_arrays <= CKPT_MAX_ARRAYS);
    ckpt_writer_t *w = xcalloc(1, sizeof *w);
    *out = w;
    w->fd = -1;
    memcpy(hdr->magic, CKPT_MAGIC, 8);
    hdr->n_arrays = (uint32_t)n_arrays;
    hdr->payload_bytes = hdr->num_params * sizeof(float) * (uint64_t)n_arrays;
    w->hdr = *hdr;
    w->want = hdr->payload_bytes;
    if ((size_t)snprintf(w->path, sizeof w->path, "%s", path) >= sizeof w->path) {
        log_error("%s: path too long", path);
        return w->rc = APEX_EINVAL;
    }
    snprintf(w->tmp, sizeof w->tmp, "%s.tmp", path);
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        return s_writer_fail(w, "create", errno);
    }
    ckpt_header_t zero;
    memset(&zero, 0, sizeof zero);
    int e = fileio_write_all(w->fd, &zero, sizeof zero);
    return e ? s_writer_fail(w, "write", e) : APEX_OK;
}

int ckpt_writer_append(ckpt_writer_t *w, const float *x, size_t n) {
    size_t bytes = n * sizeof(float);
    if (w->rc != APEX_OK) {
        return w->rc;
    }
    APEX_ASSERT(w->got + bytes <= w->want); // the caller's count
    w->crc = fileio_crc32c(w->crc, x, bytes);
    w->got += bytes;
    int e = fileio_write_all(w->fd, x, bytes);
    return e ? s_writer_fail(w, "write", e) : APEX_OK;
}

int ckpt_writer_commit(ckpt_writer_t **wp) {
    ckpt_writer_t *w = *wp;
    *wp = NULL;
    int rc = w->rc;
    if (rc == APEX_OK) {
        APEX_ASSERT(w->got == w->want);
        w->hdr.payload_crc32c = w->crc;
        w->hdr.header_crc32c = s_header_crc(&w->hdr);
        ssize_t n = pwrite(w->fd, &w->hdr, sizeof w->hdr, 0);
        if (n != (ssize_t)sizeof w->hdr) {
            rc = s_writer_fail(w, "write", n < 0 ? errno : EIO);
        } else if (fsync(w->fd) < 0) {
            rc = s_writer_fail(w, "fsync", errno);
        }
    }
    if (w->fd >= 0 && close(w->fd) < 0 && rc == APEX_OK) {
        rc = s_writer_fail(w, "close", errno);
    }
    if (rc == APEX_OK && rename(w->tmp, w->path) < 0) {
        rc = s_writer_fail(w, "rename", errno);
    }
    if (rc != APEX_OK) {
        if (w->fd >= 0) {
            unlink(w->tmp);
        }
    } else {
        int e = fileio_fsync_dir(w->path);
        if (e != 0) {
            log_error("%s: fsync of directory failed: %s", w->path, strerror(e));
            rc = APEX_EIO;
        }
    }
    xfree(w);
    return rc;
}

// ----------------------------------------------------------------------------
// reading

// What a file of magic is, for messages.
static const char *s_kind(const char *magic) {
    return memcmp(magic, CKPT_MAGIC, 8) == 0       ? "checkpoint"
           : memcmp(magic, CKPT_DPG_MAGIC, 8) == 0 ? "DPG checkpoint"
                                                   : "optimizer shard";
}

// A hint when a file is the other kind of checkpoint (a DPG trainer's where a Q-network's is
// wanted, or the reverse): the run's config names the other algorithm.
static const char *s_magic_hint(const char *want, const char *got) {
    int dpg_for_q = memcmp(want, CKPT_MAGIC, 8) == 0 && memcmp(got, CKPT_DPG_MAGIC, 8) == 0;
    int q_for_dpg = memcmp(want, CKPT_DPG_MAGIC, 8) == 0 && memcmp(got, CKPT_MAGIC, 8) == 0;
    return dpg_for_q   ? "\n---> HINT: it is a DPG trainer's checkpoint (continuous actions), "
                         "not a Q-network's"
           : q_for_dpg ? "\n---> HINT: it is a Q-network's checkpoint, not a DPG trainer's"
                       : "";
}

// Reads the header of either format into *h (format 1 converted, see ckpt.h), cheapest and
// most telling checks first: a file that is not a checkpoint at all should say so, not
// report a checksum error. Returns 0 or an apex_err after logging why.
static int s_read_header(const char *path, int fd, off_t file_size, const char *magic,
                         ckpt_header_t *h) {
    union {
        ckpt_header_t v2;
        s_header_v1 v1;
        unsigned char bytes[sizeof(ckpt_header_t)];
    } u;
    const size_t prefix = 16; // magic, format version, header size
    int e = fileio_read_all(fd, u.bytes, prefix);
    if (e == 0 && memcmp(u.v2.magic, magic, 8) != 0) {
        e = -1;
    }
    int is_ckpt = memcmp(magic, CKPT_MAGIC, 8) == 0;
    if (e < 0) {
        log_error("%s: not an apex %s (bad magic or only %lld bytes)%s", path, s_kind(magic),
                  (long long)file_size, s_magic_hint(magic, u.v2.magic));
    } else if (e > 0) {
        log_error("%s: read failed (%lld bytes)", path, (long long)file_size);
    }
    if (e != 0) {
        return e < 0 ? APEX_EPROTO : APEX_EIO;
    }
    uint32_t version = u.v2.format_version, bytes = u.v2.header_bytes;
    int v1 = version == 1 && bytes == sizeof(s_header_v1) && is_ckpt; // DPG files: format 2 on
    if (!v1 && !(version == CKPT_FORMAT_VERSION && bytes == sizeof(ckpt_header_t))) {
        log_error("%s: checkpoint format version %u (header %u bytes); this build reads versions 1 "
                  "and %u\n---> HINT: a checkpoint of a newer build: use that build, or move the "
                  "file away (or run the learner with --no-resume) to start afresh",
                  path, version, bytes, CKPT_FORMAT_VERSION);
        return APEX_EVERSION;
    }
    e = fileio_read_all(fd, u.bytes + prefix, bytes - prefix);
    if (e != 0) {
        log_error("%s: %s", path, e < 0 ? "truncated checkpoint header" : strerror(e));
        return e < 0 ? APEX_EPROTO : APEX_EIO;
    }
    uint32_t want = v1 ? u.v1.header_crc32c : u.v2.header_crc32c;
    if (fileio_crc32c(0, u.bytes, bytes - sizeof(uint32_t)) != want) {
        log_error("%s: corrupt checkpoint header (checksum mismatch)", path);
        return APEX_EPROTO;
    }
    if (v1) {
        s_header_from_v1(h, &u.v1);
    } else {
        *h = u.v2;
    }
    return APEX_OK;
}

// The checks of a read header against the configured network and the file size.
// num_params: what the header must say (nn_num_params(cfg), or a whole DPG model's count);
// floats: the length of each payload array (num_params, or a shard's count).
static int s_check_header(const char *path, const ckpt_header_t *h, const nn_config_t *cfg,
                          uint64_t num_params, int n_arrays, uint64_t floats, off_t file_size) {
    nn_config_t got;
    ckpt_header_config(h, &got);
    if (nn_config_check(&got, NULL, 0) != APEX_OK || !nn_config_equal(&got, cfg) ||
        h->num_params != num_params) {
        char a[160], b[160];
        if (nn_config_check(&got, NULL, 0) == APEX_OK) {
            nn_config_format(&got, a, sizeof a);
        } else {
            snprintf(a, sizeof a, "(invalid shape)");
        }
        nn_config_format(cfg, b, sizeof b);
        if (strcmp(a, b) == 0) { // same shape fields, another count (a DPG model's critics)
            snprintf(a + strlen(a), sizeof a - strlen(a), " of %llu parameters",
                     (unsigned long long)h->num_params);
            snprintf(b + strlen(b), sizeof b - strlen(b), " of %llu",
                     (unsigned long long)num_params);
        }
        log_error("%s: checkpoint network %s does not match the configured network %s"
                  "\n---> HINT: use the [env] and [network] of the run that wrote it",
                  path, a, b);
        return APEX_EINVAL;
    }
    if (n_arrays == 0 && h->n_arrays >= 1 && h->n_arrays <= CKPT_MAX_ARRAYS) {
        n_arrays = (int)h->n_arrays; // ckpt_read_online: any optimizer's layout will do
    }
    if (h->n_arrays != (uint32_t)n_arrays ||
        h->payload_bytes != (uint64_t)n_arrays * floats * sizeof(float)) {
        log_error("%s: checkpoint holds %u arrays, expected %d", path, h->n_arrays, n_arrays);
        return APEX_EINVAL;
    }
    if ((uint64_t)file_size != h->header_bytes + h->payload_bytes) {
        log_error("%s: truncated checkpoint (%lld bytes, header says %llu)", path,
                  (long long)file_size, (unsigned long long)(h->header_bytes + h->payload_bytes));
        return APEX_EPROTO;
    }
    return APEX_OK;
}

// Reads and checks the header of an open file (see s_read_file's arguments).
static int s_read_checked_header(const char *path, int fd, const char *magic,
                                 const nn_config_t *cfg, uint64_t num_params, int n_arrays,
                                 uint64_t shard_count, ckpt_header_t *h) {
    struct stat st;
    if (fstat(fd, &st) < 0) {
        log_error("%s: fstat failed: %s", path, strerror(errno));
        return APEX_EIO;
    }
    int rc = s_read_header(path, fd, st.st_size, magic, h);
    if (rc == APEX_OK && shard_count && h->extra.user[CKPT_SHARD_COUNT] != shard_count) {
        log_error("%s: optimizer shard of %llu floats, expected %llu", path,
                  (unsigned long long)h->extra.user[CKPT_SHARD_COUNT],
                  (unsigned long long)shard_count);
        rc = APEX_EINVAL;
    }
    if (rc == APEX_OK) {
        rc = s_check_header(path, h, cfg, num_params, n_arrays,
                            shard_count ? shard_count : h->num_params, st.st_size);
    }
    return rc;
}

// Reads header and payload of an open file; *payload is owned by the caller on success.
// magic: the file's kind (CKPT_MAGIC, CKPT_DPG_MAGIC, CKPT_SHARD_MAGIC); num_params: the
// header's count to expect; shard_count: 0 for a checkpoint, else the floats per array of an
// optimizer shard.
static int s_read_file(const char *path, int fd, const char *magic, const nn_config_t *cfg,
                       uint64_t num_params, int n_arrays, uint64_t shard_count, ckpt_header_t *h,
                       float **payload) {
    int rc = s_read_checked_header(path, fd, magic, cfg, num_params, n_arrays, shard_count, h);
    if (rc != APEX_OK) {
        return rc;
    }
    *payload = xmalloc(h->payload_bytes);
    int e = fileio_read_all(fd, *payload, h->payload_bytes);
    if (e != 0) {
        log_error("%s: read failed: %s", path, e < 0 ? "truncated" : strerror(e));
        rc = e < 0 ? APEX_EPROTO : APEX_EIO;
    } else if (fileio_crc32c(0, *payload, h->payload_bytes) != h->payload_crc32c) {
        log_error("%s: corrupt checkpoint (payload checksum mismatch)", path);
        rc = APEX_EPROTO;
    }
    if (rc != APEX_OK) {
        xfree(*payload);
        *payload = NULL;
    }
    return rc;
}

// A Q-network's checkpoint: ckpt_read_as with its magic and size.
int ckpt_read(const char *path, const nn_config_t *cfg, ckpt_header_t *hdr, float *const arrays[],
              int n_arrays) {
    return ckpt_read_as(path, CKPT_MAGIC, cfg, nn_num_params(cfg), hdr, arrays, n_arrays);
}

int ckpt_read_online(const char *path, const nn_config_t *cfg, ckpt_header_t *hdr, float *online) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        log_error("%s: cannot open checkpoint: %s", path, strerror(errno));
        return APEX_EIO;
    }
    ckpt_header_t h;
    float *payload = NULL;
    // 0 arrays: as many as stored.
    int rc = s_read_file(path, fd, CKPT_MAGIC, cfg, nn_num_params(cfg), 0, 0, &h, &payload);
    close(fd);
    if (rc != APEX_OK) {
        return rc;
    }
    memcpy(online, payload, (size_t)h.num_params * sizeof(float));
    xfree(payload);
    *hdr = h;
    return APEX_OK;
}

int ckpt_read_any(const char *path, const nn_config_t *cfg, ckpt_header_t *hdr,
                  float *const arrays[], int max_arrays) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        log_error("%s: cannot open checkpoint: %s", path, strerror(errno));
        return APEX_EIO;
    }
    ckpt_header_t h;
    float *payload = NULL;
    int rc = s_read_file(path, fd, CKPT_MAGIC, cfg, nn_num_params(cfg), 0, 0, &h, &payload);
    close(fd);
    if (rc == APEX_OK && h.n_arrays > (uint32_t)max_arrays) {
        log_error("%s: checkpoint holds %u arrays, expected at most %d", path, h.n_arrays,
                  max_arrays);
        rc = APEX_EINVAL;
    }
    if (rc != APEX_OK) {
        xfree(payload);
        return rc;
    }
    size_t n = (size_t)h.num_params;
    for (uint32_t i = 0; i < h.n_arrays; i++) {
        memcpy(arrays[i], payload + (size_t)i * n, n * sizeof(float));
    }
    xfree(payload);
    *hdr = h;
    return APEX_OK;
}

int ckpt_read_range(const char *path, const nn_config_t *cfg, ckpt_header_t *hdr, size_t lo,
                    size_t count, float *const arrays[], int max_arrays) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        log_error("%s: cannot open checkpoint: %s", path, strerror(errno));
        return APEX_EIO;
    }
    ckpt_header_t h;
    // 0 arrays: as many as stored.
    int rc = s_read_checked_header(path, fd, CKPT_MAGIC, cfg, nn_num_params(cfg), 0, 0, &h);
    if (rc == APEX_OK && h.n_arrays > (uint32_t)max_arrays) {
        log_error("%s: checkpoint holds %u arrays, expected at most %d", path, h.n_arrays,
                  max_arrays);
        rc = APEX_EINVAL;
    }
    APEX_ASSERT(rc != APEX_OK || lo + count <= h.num_params);
    // The payload in pieces: every byte through the checksum, the range of each array kept.
    enum { CHUNK = 1 << 18 }; // floats
    float *buf = rc == APEX_OK ? xmalloc(CHUNK * sizeof(float)) : NULL;
    uint32_t crc = 0;
    size_t n = rc == APEX_OK ? (size_t)h.num_params : 0,
           total = n * (rc == APEX_OK ? h.n_arrays : 0);
    for (size_t at = 0; rc == APEX_OK && at < total; at += CHUNK) {
        size_t len = APEX_MIN((size_t)CHUNK, total - at);
        int e = fileio_read_all(fd, buf, len * sizeof(float));
        if (e != 0) {
            log_error("%s: read failed: %s", path, e < 0 ? "truncated" : strerror(e));
            rc = e < 0 ? APEX_EPROTO : APEX_EIO;
            break;
        }
        crc = fileio_crc32c(crc, buf, len * sizeof(float));
        for (uint32_t i = 0; i < h.n_arrays; i++) { // array i's range in the payload
            size_t a = APEX_MAX(at, (size_t)i * n + lo);
            size_t b = APEX_MIN(at + len, (size_t)i * n + lo + count);
            if (b > a) {
                memcpy(arrays[i] + (a - (size_t)i * n - lo), buf + (a - at),
                       (b - a) * sizeof(float));
            }
        }
    }
    if (rc == APEX_OK && crc != h.payload_crc32c) {
        log_error("%s: corrupt checkpoint (payload checksum mismatch)", path);
        rc = APEX_EPROTO;
    }
    xfree(buf);
    close(fd);
    if (rc == APEX_OK) {
        *hdr = h;
    }
    return rc;
}

int ckpt_read_shard(const char *path, const nn_config_t *cfg, size_t count, ckpt_header_t *hdr,
                    float *const arrays[], int n_arrays) {
    APEX_ASSERT(count > 0 && n_arrays >= 1 && n_arrays <= CKPT_MAX_ARRAYS);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        log_error("%s: cannot open optimizer shard: %s", path, strerror(errno));
        return APEX_EIO;
    }
    ckpt_header_t h;
    float *payload = NULL;
    int rc = s_read_file(path, fd, CKPT_SHARD_MAGIC, cfg, nn_num_params(cfg), n_arrays, count, &h,
                         &payload);
    close(fd);
    if (rc != APEX_OK) {
        return rc;
    }
    for (int i = 0; i < n_arrays; i++) {
        memcpy(arrays[i], payload + (size_t)i * count, count * sizeof(float));
    }
    xfree(payload);
    *hdr = h;
    return APEX_OK;
}

// Reads into a staging buffer first: a checkpoint that fails its checksum must not have
// already overwritten the live parameters of a running learner.
int ckpt_read_as(const char *path, const char *magic, const nn_config_t *cfg, uint64_t num_params,
                 ckpt_header_t *hdr, float *const arrays[], int n_arrays) {
    APEX_ASSERT(n_arrays >= 1 && n_arrays <= CKPT_MAX_ARRAYS);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        log_error("%s: cannot open %s: %s", path, s_kind(magic), strerror(errno));
        return APEX_EIO;
    }
    ckpt_header_t h;
    float *payload = NULL;
    int rc = s_read_file(path, fd, magic, cfg, num_params, n_arrays, 0, &h, &payload);
    close(fd);
    if (rc != APEX_OK) {
        return rc;
    }
    size_t n = (size_t)h.num_params;
    for (int i = 0; i < n_arrays; i++) {
        memcpy(arrays[i], payload + (size_t)i * n, n * sizeof(float));
    }
    xfree(payload);
    *hdr = h;
    return APEX_OK;
}

int ckpt_read_policy(const char *path, const nn_config_t *cfg, ckpt_header_t *hdr, float *policy) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        log_error("%s: cannot open checkpoint: %s", path, strerror(errno));
        return APEX_EIO;
    }
    char magic[8] = {0};
    ssize_t got = pread(fd, magic, sizeof magic, 0);
    if (got != (ssize_t)sizeof magic || memcmp(magic, CKPT_DPG_MAGIC, 8) != 0) {
        close(fd); // not a DPG file: a one-network checkpoint, or refused by that reader
        return ckpt_read_online(path, cfg, hdr, policy);
    }
    struct stat st;
    ckpt_header_t h;
    float *payload = NULL;
    const uint64_t np = nn_num_params(cfg);
    int rc = fstat(fd, &st) < 0 ? APEX_EIO : APEX_OK;
    if (rc == APEX_OK) {
        // The header first, for the model's count (the critics' size is not the evaluator's
        // to know); then the whole file with that count, validated as any read is.
        rc = s_read_header(path, fd, st.st_size, CKPT_DPG_MAGIC, &h);
    } else {
        log_error("%s: fstat failed: %s", path, strerror(errno));
    }
    if (rc == APEX_OK && (h.num_params <= np || h.num_params > (uint64_t)st.st_size / 4)) {
        log_error("%s: DPG checkpoint of %llu parameters cannot hold the configured policy's %llu "
                  "and its critics"
                  "\n---> HINT: use the [env] and [network] of the run that wrote it",
                  path, (unsigned long long)h.num_params, (unsigned long long)np);
        rc = APEX_EINVAL;
    }
    if (rc == APEX_OK && lseek(fd, 0, SEEK_SET) != 0) {
        log_error("%s: lseek failed: %s", path, strerror(errno));
        rc = APEX_EIO;
    }
    if (rc == APEX_OK) {
        // 0 arrays: as many as stored (the trainer's four, or fewer).
        rc = s_read_file(path, fd, CKPT_DPG_MAGIC, cfg, h.num_params, 0, 0, &h, &payload);
    }
    close(fd);
    if (rc != APEX_OK) {
        return rc;
    }
    memcpy(policy, payload, (size_t)np * sizeof(float)); // array 0 = online = [mu | Q1 | Q2]
    xfree(payload);
    *hdr = h;
    return APEX_OK;
}
