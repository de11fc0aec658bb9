// fcodec.c: see fcodec.h.
#include "fcodec.h"

#include "xalloc.h"

#include <lz4.h>
#include <stdlib.h>
#include <zstd.h>

struct fcodec {
    int kind, level;
    ZSTD_CCtx *cctx;
    ZSTD_DCtx *dctx;
    void *lz4_state; // LZ4_sizeofState() bytes
};

fcodec_t *fcodec_new(int kind, int level) {
    if (kind != FCODEC_LZ4 && kind != FCODEC_ZSTD) {
        return NULL;
    }
    fcodec_t *c = xcalloc(1, sizeof *c);
    c->kind = kind;
    if (kind == FCODEC_ZSTD) {
        c->level = level > 0 ? level : ZSTD_CLEVEL_DEFAULT;
        c->cctx = ZSTD_createCCtx();
        c->dctx = ZSTD_createDCtx();
        if (!c->cctx || !c->dctx) {
            fcodec_destroy(&c);
            return NULL;
        }
        // No frame header checksum or content size: each blob is one frame of a size both
        // sides know, and the replay checks it by decompressing.
        ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_compressionLevel, c->level);
        ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_checksumFlag, 0);
    } else {
        c->level = level > 0 ? level : 1;
        c->lz4_state = xmalloc((size_t)LZ4_sizeofState());
    }
    return c;
}

void fcodec_destroy(fcodec_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    fcodec_t *c = *self_p;
    ZSTD_freeCCtx(c->cctx);
    ZSTD_freeDCtx(c->dctx);
    free(c->lz4_state);
    free(c);
    *self_p = NULL;
}

size_t fcodec_bound(int kind, size_t n) {
    if (kind == FCODEC_ZSTD) {
        return ZSTD_compressBound(n);
    }
    if (kind == FCODEC_LZ4) {
        return (size_t)LZ4_compressBound((int)n);
    }
    return n;
}

size_t fcodec_compress(fcodec_t *c, const void *src, size_t n, void *dst, size_t cap) {
    if (c->kind == FCODEC_ZSTD) {
        size_t r = ZSTD_compress2(c->cctx, dst, cap, src, n);
        return ZSTD_isError(r) ? 0 : r;
    }
    int r = LZ4_compress_fast_extState(c->lz4_state, src, dst, (int)n, (int)cap, c->level);
    return r > 0 ? (size_t)r : 0;
}

int fcodec_decompress(fcodec_t *c, const void *src, size_t n, void *dst, size_t frame) {
    if (c->kind == FCODEC_ZSTD) {
        size_t r = ZSTD_decompressDCtx(c->dctx, dst, frame, src, n);
        return !ZSTD_isError(r) && r == frame ? 0 : -1;
    }
    int r = LZ4_decompress_safe(src, dst, (int)n, (int)frame);
    return r >= 0 && (size_t)r == frame ? 0 : -1;
}

const char *fcodec_name(int kind) {
    return kind == FCODEC_LZ4 ? "lz4" : kind == FCODEC_ZSTD ? "zstd" : "none";
}
