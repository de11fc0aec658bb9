// fileio.c: see fileio.h.
#define LOG_MODULE "fileio"
#include "fileio.h"

#include "apex.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// ---------------------------------------------------------------------------------------
// CRC32C: byte-at-a-time table, ~1 GB/s. A 5 MB checkpoint costs ~5 ms, a 48 MB replay
// snapshot ~50 ms (in the snapshot's child process, off the server's loop).

static uint32_t s_crc_table[256];
static pthread_once_t s_crc_once = PTHREAD_ONCE_INIT;

static void s_crc_table_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) {
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        }
        s_crc_table[i] = c;
    }
}

uint32_t fileio_crc32c(uint32_t crc, const void *buf, size_t len) {
    pthread_once(&s_crc_once, s_crc_table_init);
    const unsigned char *p = buf;
    crc = ~crc;
    for (size_t i = 0; i < len; i++) {
        crc = s_crc_table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    }
    return ~crc;
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
