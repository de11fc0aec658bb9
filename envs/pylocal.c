// pylocal.c: see pylocal.h.
#define _GNU_SOURCE // memfd_create, SOCK_CLOEXEC
#define LOG_MODULE "pyenv"
#include "pylocal.h"

#include "apex.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

static size_t s_align8(size_t x) { return (x + 7) & ~(size_t)7; }

size_t pylocal_reply_bytes(int N, size_t row) {
    size_t n = (size_t)N;
    size_t frames = 2 * s_align8(n * row) + s_align8(n * 8) + s_align8(n) +
                    s_align8(n * (8 + PYWIRE_ERR_TEXT_MAX));
    size_t hello = s_align8(PYWIRE_TEXT_MAX) + 2 * PYWIRE_MAX_ACTION_DIM * sizeof(float);
    return PYLOCAL_HEAD_BYTES + APEX_MAX(frames, hello);
}

size_t pylocal_request_bytes(int N, int action_dim) {
    size_t step = (size_t)N * sizeof(float) * (size_t)(action_dim > 0 ? action_dim : 1);
    size_t frame = APEX_MAX(s_align8((size_t)N * 8), s_align8(step));
    return PYLOCAL_HEAD_BYTES + APEX_MAX(frame, s_align8(PYWIRE_TEXT_MAX));
}

static uint8_t *s_req(const pylocal_t *l, int region) {
    return l->mem + (size_t)region * l->req_bytes;
}

static uint8_t *s_rep(const pylocal_t *l, int region) {
    return l->mem + (size_t)l->regions * l->req_bytes + (size_t)region * l->rep_bytes;
}

static void s_close(int *fd) {
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

int pylocal_init(pylocal_t *l, int regions, size_t req_bytes, size_t rep_bytes) {
    memset(l, 0, sizeof *l);
    l->shm_fd = -1;
    l->to_child[0] = l->to_child[1] = l->from_child[0] = l->from_child[1] = -1;
    l->regions = regions;
    l->req_bytes = s_align8(req_bytes);
    l->rep_bytes = s_align8(rep_bytes);
    size_t total = (size_t)regions * (l->req_bytes + l->rep_bytes);
    l->shm_fd = memfd_create("apex-pyenv", MFD_CLOEXEC);
    if (l->shm_fd < 0 || ftruncate(l->shm_fd, (off_t)total) != 0) {
        log_error("python env bridge: shared memory of %zu bytes: %s", total, strerror(errno));
        return -1;
    }
    void *m = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, l->shm_fd, 0);
    if (m == MAP_FAILED) {
        log_error("python env bridge: mmap of %zu bytes: %s", total, strerror(errno));
        return -1;
    }
    l->mem = m;
    return 0;
}

void pylocal_fini(pylocal_t *l) {
    if (l->mem) {
        munmap(l->mem, (size_t)l->regions * (l->req_bytes + l->rep_bytes));
        l->mem = NULL;
    }
    if (l->regions) { // zeroed: no fds were ever opened (0 is stdin, not ours)
        s_close(&l->shm_fd);
        s_close(&l->to_child[0]);
        s_close(&l->from_child[1]);
        pylocal_close_pipes(l);
    }
}

int pylocal_open_pipes(pylocal_t *l, int fds[3]) {
    s_close(&l->to_child[0]);
    s_close(&l->from_child[1]);
    pylocal_close_pipes(l);
    // One AF_UNIX stream pair per direction, used like a pipe ([0] read, [1] write): unlike
    // a pipe's, a write to a dead reader is EPIPE (MSG_NOSIGNAL), never a SIGPIPE that would
    // kill a process that does not ignore it. Ours non-blocking (the actor never waits on a
    // worker but in poll), the child's blocking (its loop is one blocking read per request).
    // All close-on-exec here; the child's copies lose the flag in child_start_fds' dup2.
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, l->to_child) != 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, l->from_child) != 0 ||
        fcntl(l->to_child[1], F_SETFL, O_NONBLOCK) != 0 ||
        fcntl(l->from_child[0], F_SETFL, O_NONBLOCK) != 0) {
        log_error("python env bridge: socketpair: %s", strerror(errno));
        return -1;
    }
    l->rx_len = 0;
    fds[0] = l->shm_fd;
    fds[1] = l->to_child[0];
    fds[2] = l->from_child[1];
    return 0;
}

void pylocal_spawned(pylocal_t *l) {
    s_close(&l->to_child[0]);
    s_close(&l->from_child[1]);
}

void pylocal_close_pipes(pylocal_t *l) {
    s_close(&l->to_child[1]);
    s_close(&l->from_child[0]);
    l->rx_len = 0;
}

int pylocal_is_open(const pylocal_t *l) { return l->from_child[0] >= 0; }
int pylocal_read_fd(const pylocal_t *l) { return l->from_child[0]; }

int pylocal_send(pylocal_t *l, int region, const pywire_header_t *h, const void *payload,
                 size_t len, char *err, size_t errlen) {
    APEX_ASSERT(region >= 0 && region < l->regions);
    if (l->to_child[1] < 0) {
        snprintf(err, errlen, "its pipe is closed");
        return -1;
    }
    if (PYLOCAL_HEAD_BYTES + len > l->req_bytes) {
        snprintf(err, errlen, "a payload of %zu bytes does not fit its region", len);
        return -1;
    }
    uint8_t *r = s_req(l, region);
    uint32_t lens[PYLOCAL_FRAMES] = {(uint32_t)len, 0, 0, 0, 0};
    memcpy(r + PYLOCAL_HEAD_BYTES, payload, len);
    memcpy(r, lens, sizeof lens);
    ssize_t n = send(l->to_child[1], h, sizeof *h, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n != (ssize_t)sizeof *h) {
        // EAGAIN: the socket's buffer of unread headers is full, the worker does not read;
        // EPIPE: it is gone. A header is one small write, sent whole or not at all.
        snprintf(err, errlen, "cannot write to its pipe: %s", n < 0 ? strerror(errno) : "short");
        return -1;
    }
    return 0;
}

int pylocal_recv_header(pylocal_t *l, uint8_t hdr[PYWIRE_HEADER_BYTES], char *err, size_t errlen) {
    if (l->from_child[0] < 0) {
        return 0;
    }
    ssize_t n = read(l->from_child[0], l->rx + l->rx_len, sizeof l->rx - l->rx_len);
    if (n == 0) {
        snprintf(err, errlen,
                 "its pipe was closed: the process ended (its error, if any, is "
                 "above on stderr)");
        return -1;
    }
    if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) {
            return 0;
        }
        snprintf(err, errlen, "reading its pipe: %s", strerror(errno));
        return -1;
    }
    l->rx_len += (size_t)n;
    if (l->rx_len < sizeof l->rx) {
        return 0;
    }
    memcpy(hdr, l->rx, sizeof l->rx);
    l->rx_len = 0;
    return 1;
}

int pylocal_take_frames(const pylocal_t *l, int region, uint8_t *scratch,
                        pywire_frame_t f[PYLOCAL_FRAMES], char *err, size_t errlen) {
    APEX_ASSERT(region >= 0 && region < l->regions);
    // One copy of the whole used part, then everything is read from the copy: the lengths
    // are taken from it too, so they cannot change between the bound check and the use.
    const uint8_t *r = s_rep(l, region);
    memcpy(scratch, r, PYLOCAL_HEAD_BYTES);
    uint32_t lens[PYLOCAL_FRAMES];
    memcpy(lens, scratch, sizeof lens);
    size_t off = PYLOCAL_HEAD_BYTES;
    size_t offs[PYLOCAL_FRAMES];
    for (int i = 0; i < PYLOCAL_FRAMES; i++) {
        if (lens[i] > l->rep_bytes || off + lens[i] > l->rep_bytes) {
            snprintf(err, errlen, "frame %d of %u bytes overflows its %zu-byte region", i + 1,
                     lens[i], l->rep_bytes);
            return -1;
        }
        offs[i] = off;
        off = s_align8(off + lens[i]);
    }
    size_t used = APEX_MIN(off, l->rep_bytes);
    memcpy(scratch + PYLOCAL_HEAD_BYTES, r + PYLOCAL_HEAD_BYTES, used - PYLOCAL_HEAD_BYTES);
    for (int i = 0; i < PYLOCAL_FRAMES; i++) {
        f[i] = (pywire_frame_t){scratch + offs[i], lens[i]};
    }
    return 0;
}
