// fcodec.h: frame compression ([replay] compress, issue #27 part 3): one frame in, one
// compressed blob out, and back, with LZ4 (Debian's liblz4) or zstd (libzstd).
//
// Frames are compressed each on its own: a stored frame must be readable alone (a stack is
// rebuilt from K frames anywhere in the replay's ring), and an actor sends each frame once.
// An fcodec_t owns the library contexts (zstd's CCtx and DCtx, LZ4's state), made once, so
// that compressing and decompressing allocate nothing. Decompression is checked: a blob that
// does not decompress to exactly the frame's size is refused, never trusted.
// Not thread-safe: one fcodec_t per thread.
#ifndef APEX_FCODEC_H
#define APEX_FCODEC_H

#include <stddef.h>
#include <stdint.h>

// The values of config.h's config_compress and of the wire's FrameCodec.
typedef enum { FCODEC_NONE = 0, FCODEC_LZ4 = 1, FCODEC_ZSTD = 2 } fcodec_kind;

typedef struct fcodec fcodec_t;

// A codec of kind (LZ4 or ZSTD) at level: zstd's compression level (1..19), or LZ4's
// acceleration (1 = LZ4's default; higher is faster and compresses less). level 0 means the
// library's default (zstd 3, LZ4 1). NULL for FCODEC_NONE or an unknown kind.
fcodec_t *fcodec_new(int kind, int level);
void fcodec_destroy(fcodec_t **self_p);

// The largest blob a frame of n bytes can compress to (the size to reserve per frame).
size_t fcodec_bound(int kind, size_t n);

// Compresses src[0..n) into dst (room for fcodec_bound bytes). Returns the blob's size (> 0),
// or 0 on a library error (which does not happen for a dst of bound size).
size_t fcodec_compress(fcodec_t *c, const void *src, size_t n, void *dst, size_t cap);
// Decompresses the blob src[0..n) into dst, which must come out exactly `frame` bytes.
// Returns 0, or -1 (dst's contents then undefined) for a corrupt blob or another size.
int fcodec_decompress(fcodec_t *c, const void *src, size_t n, void *dst, size_t frame);

// "none", "lz4", "zstd" (for logs).
const char *fcodec_name(int kind);

#endif
