// fileio.c: see fileio.h.
#define LOG_MODULE "fileio"
#include "fileio.h"

#include "apex.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// ---------------------------------------------------------------------------------------
// CRC32C (Castagnoli, reflected polynomial 0x82F63B78). The write-ahead log checksums every
// record on the replay server's loop (~250 MB/s at full insert load), so speed matters:
//  - x86-64 with SSE4.2: the crc32 instruction, 8 bytes at a time (~8 GB/s at 3 GHz: its
//    latency is 3 cycles, so one dependent chain; interleaving three chains would triple
//    that but needs a CRC combine step, not worth it at our rates);
//  - elsewhere: slicing-by-8 tables (~2-3 GB/s).
// Both give the same bits as the classic byte-at-a-time table (check_ckpt.c compares them).
// The choice is made once (pthread_once), before any fork: durable_new computes a CRC early
// so that a snapshot's child never runs the initialisation.

static uint32_t s_crc_tables[8][256];
static uint32_t (*s_crc_impl)(uint32_t crc, const unsigned char *p, size_t len);
static pthread_once_t s_crc_once = PTHREAD_ONCE_INIT;

static uint32_t s_load_u32le(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

// crc is the internal (inverted) register on entry and exit.
static uint32_t s_crc_slice8(uint32_t crc, const unsigned char *p, size_t len) {
    const uint32_t(*t)[256] = (const uint32_t(*)[256])s_crc_tables;
    for (; len > 0 && ((uintptr_t)p & 7) != 0; len--) {
        crc = t[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    }
    for (; len >= 8; len -= 8, p += 8) {
        uint32_t lo = s_load_u32le(p) ^ crc, hi = s_load_u32le(p + 4);
        crc = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
              t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
    }
    for (; len > 0; len--) {
        crc = t[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    }
    return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CRC_HAVE_SSE42 1
__attribute__((target("sse4.2"))) static uint32_t s_crc_sse42(uint32_t crc, const unsigned char *p,
                                                              size_t len) {
    for (; len > 0 && ((uintptr_t)p & 7) != 0; len--) {
        crc = __builtin_ia32_crc32qi(crc, *p++);
    }
    uint64_t c = crc;
    for (; len >= 8; len -= 8, p += 8) {
        uint64_t v;
        memcpy(&v, p, sizeof v); // aligned by now; memcpy keeps strict aliasing happy
        c = __builtin_ia32_crc32di(c, v);
    }
    crc = (uint32_t)c;
    for (; len > 0; len--) {
        crc = __builtin_ia32_crc32qi(crc, *p++);
    }
    return crc;
}
#endif

static void s_crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) {
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        }
        s_crc_tables[0][i] = c;
    }
    for (int k = 1; k < 8; k++) {
        for (int i = 0; i < 256; i++) {
            uint32_t c = s_crc_tables[k - 1][i];
            s_crc_tables[k][i] = s_crc_tables[0][c & 0xff] ^ (c >> 8);
        }
    }
    s_crc_impl = s_crc_slice8;
#ifdef CRC_HAVE_SSE42
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) {
        s_crc_impl = s_crc_sse42;
    }
#endif
}

uint32_t fileio_crc32c(uint32_t crc, const void *buf, size_t len) {
    pthread_once(&s_crc_once, s_crc_init);
    return ~s_crc_impl(~crc, buf, len);
}

uint32_t fileio_crc32c_impl(int impl, uint32_t crc, const void *buf, size_t len) {
    pthread_once(&s_crc_once, s_crc_init);
    switch (impl) {
    case FILEIO_CRC_PORTABLE:
        return ~s_crc_slice8(~crc, buf, len);
#ifdef CRC_HAVE_SSE42
    case FILEIO_CRC_SSE42:
        return s_crc_impl == s_crc_sse42 ? ~s_crc_sse42(~crc, buf, len) : 0;
#endif
    default:
        return 0;
    }
}

int fileio_crc32c_has_impl(int impl) {
    pthread_once(&s_crc_once, s_crc_init);
#ifdef CRC_HAVE_SSE42
    if (impl == FILEIO_CRC_SSE42) {
        return s_crc_impl == s_crc_sse42;
    }
#endif
    return impl == FILEIO_CRC_PORTABLE;
}

// ---------------------------------------------------------------------------------------

int fileio_errno_to_apex(int e) {
    return (e == ENOSPC || e == EDQUOT || e == EFBIG) ? APEX_ENOSPC : APEX_EIO;
}

int fileio_write_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int fileio_read_all(int fd, void *buf, size_t len) {
    char *p = buf;
    while (len > 0) {
        ssize_t n = read(fd, p, len);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return errno;
        }
        if (n == 0) {
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int fileio_fsync_dir(const char *path) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    int fd = open(dirname(buf), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        return errno;
    }
    int e = fsync(fd) < 0 ? errno : 0;
    close(fd);
    return e;
}

int fileio_mkdir_p(const char *path) {
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s", path) >= sizeof tmp) {
        return ENAMETOOLONG;
    }
    for (char *p = tmp + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0755) != 0 && errno != EEXIST) {
                return errno;
            }
            *p = '/';
        }
    }
    return mkdir(tmp, 0755) != 0 && errno != EEXIST ? errno : 0;
}

// The classic atomic replace: a sibling temp file (same directory, so rename cannot cross
// filesystems), fsync its data, rename over the target (atomic in POSIX), then fsync the
// directory so the new name survives a crash.
int fileio_atomic_write(const char *path, const fileio_chunk_t *chunks, int n_chunks) {
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp) {
        log_error("%s: path too long", path);
        return APEX_EINVAL;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        log_error("%s: cannot create: %s", tmp, strerror(e));
        return fileio_errno_to_apex(e);
    }
    const char *what = "write";
    int e = 0;
    for (int i = 0; i < n_chunks && e == 0; i++) {
        e = fileio_write_all(fd, chunks[i].data, chunks[i].len);
    }
    if (e == 0 && fsync(fd) < 0) {
        e = errno;
        what = "fsync";
    }
    if (close(fd) < 0 && e == 0) {
        e = errno;
        what = "close";
    }
    if (e == 0 && rename(tmp, path) < 0) {
        e = errno;
        what = "rename";
    }
    if (e != 0) {
        log_error("%s: %s failed: %s (the previous %s is intact)", tmp, what, strerror(e), path);
        unlink(tmp);
        return fileio_errno_to_apex(e);
    }
    // The new file is in place; a failed directory fsync only weakens durability.
    if ((e = fileio_fsync_dir(path)) != 0) {
        log_error("%s: fsync of directory failed: %s", path, strerror(e));
        return APEX_EIO;
    }
    return APEX_OK;
}
