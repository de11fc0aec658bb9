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

_Static_assert(sizeof(ckpt_header_t) == 168, "checkpoint header must have no padding");
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
}

// The header has its own checksum so that a flipped bit in a size or counter is reported
// as corruption, not misread as a shape mismatch or silently restored as a wrong step.
static uint32_t s_header_crc(const ckpt_header_t *hdr) {
    return fileio_crc32c(0, hdr, offsetof(ckpt_header_t, header_crc32c));
}

// ----------------------------------------------------------------------------
// writing

// Atomic replace through fileio_atomic_write: the previous checkpoint survives any failure.
int ckpt_write(const char *path, ckpt_header_t *hdr, const float *const arrays[], int n_arrays) {
    APEX_ASSERT(n_arrays >= 1 && n_arrays <= CKPT_MAX_ARRAYS);
    size_t bytes = (size_t)hdr->num_params * sizeof(float);
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

// ----------------------------------------------------------------------------
// reading

// Header checks that need no payload, cheapest and most telling first: a file that is not
// a checkpoint at all should say so, not report a checksum error. Returns 0 or an apex_err
// after logging why.
static int s_check_header(const char *path, const ckpt_header_t *h, const nn_config_t *cfg,
                          int n_arrays, off_t file_size) {
    if (memcmp(h->magic, CKPT_MAGIC, 8) != 0) {
        log_error("%s: not an apex checkpoint (bad magic)", path);
        return APEX_EPROTO;
    }
    if (h->format_version != CKPT_FORMAT_VERSION || h->header_bytes != sizeof *h) {
        log_error("%s: checkpoint format version %u, this build reads %u", path, h->format_version,
                  CKPT_FORMAT_VERSION);
        return APEX_EVERSION;
    }
    if (h->header_crc32c != s_header_crc(h)) {
        log_error("%s: corrupt checkpoint header (checksum mismatch)", path);
        return APEX_EPROTO;
    }
    nn_config_t got;
    ckpt_header_config(h, &got);
    if (!nn_config_equal(&got, cfg) || h->num_params != nn_num_params(cfg)) {
        char a[128], b[128];
        nn_config_format(&got, a, sizeof a);
        nn_config_format(cfg, b, sizeof b);
        log_error("%s: checkpoint network %s does not match the configured network %s", path, a, b);
        return APEX_EINVAL;
    }
    if (n_arrays == 0 && h->n_arrays >= 1 && h->n_arrays <= CKPT_MAX_ARRAYS) {
        n_arrays = (int)h->n_arrays; // ckpt_read_online: any optimizer's layout will do
    }
    if (h->n_arrays != (uint32_t)n_arrays ||
        h->payload_bytes != (uint64_t)n_arrays * h->num_params * sizeof(float)) {
        log_error("%s: checkpoint holds %u arrays, expected %d", path, h->n_arrays, n_arrays);
        return APEX_EINVAL;
    }
    if ((uint64_t)file_size != sizeof *h + h->payload_bytes) {
        log_error("%s: truncated checkpoint (%lld bytes, header says %llu)", path,
                  (long long)file_size, (unsigned long long)(sizeof *h + h->payload_bytes));
        return APEX_EPROTO;
    }
    return APEX_OK;
}

// Reads header and payload of an open file; *payload is owned by the caller on success.
static int s_read_file(const char *path, int fd, const nn_config_t *cfg, int n_arrays,
                       ckpt_header_t *h, float **payload) {
    struct stat st;
    if (fstat(fd, &st) < 0) {
        log_error("%s: fstat failed: %s", path, strerror(errno));
        return APEX_EIO;
    }
    int e = fileio_read_all(fd, h, sizeof *h);
    if (e != 0) {
        if (e < 0) {
            log_error("%s: not an apex checkpoint (only %lld bytes)", path, (long long)st.st_size);
            return APEX_EPROTO;
        }
        log_error("%s: read failed: %s", path, strerror(e));
        return APEX_EIO;
    }
    int rc = s_check_header(path, h, cfg, n_arrays, st.st_size);
    if (rc != APEX_OK) {
        return rc;
    }
    *payload = xmalloc(h->payload_bytes);
    e = fileio_read_all(fd, *payload, h->payload_bytes);
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

// Reads into a staging buffer first: a checkpoint that fails its checksum must not have
// already overwritten the live parameters of a running learner.
int ckpt_read(const char *path, const nn_config_t *cfg, ckpt_header_t *hdr, float *const arrays[],
              int n_arrays) {
    APEX_ASSERT(n_arrays >= 1 && n_arrays <= CKPT_MAX_ARRAYS);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        log_error("%s: cannot open checkpoint: %s", path, strerror(errno));
        return APEX_EIO;
    }
    ckpt_header_t h;
    float *payload = NULL;
    int rc = s_read_file(path, fd, cfg, n_arrays, &h, &payload);
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

int ckpt_read_online(const char *path, const nn_config_t *cfg, ckpt_header_t *hdr, float *online) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        log_error("%s: cannot open checkpoint: %s", path, strerror(errno));
        return APEX_EIO;
    }
    ckpt_header_t h;
    float *payload = NULL;
    int rc = s_read_file(path, fd, cfg, 0, &h, &payload); // 0: as many arrays as stored
    close(fd);
    if (rc != APEX_OK) {
        return rc;
    }
    memcpy(online, payload, (size_t)h.num_params * sizeof(float));
    xfree(payload);
    *hdr = h;
    return APEX_OK;
}
