// fileio.h: files that appear atomically and are checked when read back (STYLE S19).
//
// fileio_atomic_write is the one implementation of "write name.tmp, fsync, rename, fsync the
// directory" used by learner checkpoints and replay snapshots: until the rename the previous
// file is untouched, and any failure only removes the temp file. CRC32C (Castagnoli) checks
// what is read back. The small wrappers retry EINTR and return errno, so callers can tell a
// full disk (APEX_ENOSPC) from other I/O errors (APEX_EIO). Thread-safe; async-signal-safe
// except fileio_atomic_write's log line on failure (use it only from normal code or a child
// process after fork, which is what replay snapshots do).
#ifndef APEX_FILEIO_H
#define APEX_FILEIO_H

#include <stddef.h>
#include <stdint.h>

// CRC32C of buf, continuing from crc (start with 0). fileio_crc32c(0, "123456789", 9) is
// 0xE3069283.
uint32_t fileio_crc32c(uint32_t crc, const void *buf, size_t len);
// For tests: the same CRC through one named implementation (0 when the CPU lacks it; ask
// fileio_crc32c_has_impl first). fileio_crc32c uses the fastest available one.
enum { FILEIO_CRC_PORTABLE = 0, FILEIO_CRC_SSE42 = 1 };
uint32_t fileio_crc32c_impl(int impl, uint32_t crc, const void *buf, size_t len);
int fileio_crc32c_has_impl(int impl);

// write(2)/read(2) until done. Return 0 or errno; read_all returns -1 at end of file.
int fileio_write_all(int fd, const void *buf, size_t len);
int fileio_read_all(int fd, void *buf, size_t len);
// fsync the directory that holds path, so a rename or create in it is durable. 0 or errno.
int fileio_fsync_dir(const char *path);
// ENOSPC, EDQUOT and EFBIG (a file-size limit) -> APEX_ENOSPC; anything else -> APEX_EIO.
int fileio_errno_to_apex(int e);
// mkdir -p. Returns 0 or errno.
int fileio_mkdir_p(const char *path);

typedef struct {
    const void *data;
    size_t len;
} fileio_chunk_t;

// Writes the chunks in order to path atomically (see top). Returns APEX_OK, APEX_ENOSPC or
// APEX_EIO after logging the failing call; the previous file at path is intact on failure.
int fileio_atomic_write(const char *path, const fileio_chunk_t *chunks, int n_chunks);

#endif
