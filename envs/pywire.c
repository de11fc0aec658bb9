// pywire.c: see pywire.h.
#include "pywire.h"

#include "apex.h"

#include <float.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the bridge's arrays are little-endian");
_Static_assert(sizeof(pywire_header_t) == PYWIRE_HEADER_BYTES, "the header is 72 bytes");
_Static_assert(offsetof(pywire_header_t, seq) == 16 && offsetof(pywire_header_t, first) == 32 &&
                   offsetof(pywire_header_t, dtype) == 40 &&
                   offsetof(pywire_header_t, shape) == 44 &&
                   offsetof(pywire_header_t, n_error) == 64 &&
                   offsetof(pywire_header_t, layout) == 68,
               "the header's layout is the documented one");

// ---------------------------------------------------------------------------------------
// Header

void pywire_header_init(pywire_header_t *h, pywire_type type, const pywire_spaces_t *sp,
                        uint32_t worker, uint64_t nonce, uint32_t n_envs, uint64_t seq,
                        uint32_t first) {
    memset(h, 0, sizeof *h);
    memcpy(h->magic, PYWIRE_MAGIC, 4);
    h->version = PYWIRE_VERSION;
    h->type = (uint16_t)type;
    h->worker = worker;
    h->n_envs = n_envs;
    h->seq = seq;
    h->nonce = nonce;
    h->first = first;
    h->n_actions = sp->n_actions;
    h->dtype = sp->dtype;
    h->ndim = sp->ndim;
    h->action_dim = sp->action_dim;
    memcpy(h->shape, sp->shape, sizeof h->shape);
    h->layout = sp->layout;
}

int pywire_parse_header(const void *frame, size_t len, pywire_header_t *h, char *err,
                        size_t errlen) {
    if (len != sizeof *h) {
        return apex_errf(err, errlen, APEX_EPROTO,
                         "a message whose header is %zu bytes (expected %zu)", len, sizeof *h);
    }
    memcpy(h, frame, sizeof *h); // frames need not be aligned
    if (memcmp(h->magic, PYWIRE_MAGIC, 4) != 0) {
        return apex_errf(err, errlen, APEX_EPROTO, "a message without the magic \"%s\"",
                         PYWIRE_MAGIC);
    }
    if (h->version != PYWIRE_VERSION) {
        return apex_errf(err, errlen, APEX_EVERSION,
                         "a message of version %u (this bridge speaks %u: python/apex_env.py and "
                         "apex must be of one version)",
                         h->version, PYWIRE_VERSION);
    }
    return APEX_OK;
}

int pywire_spaces_equal(const pywire_header_t *h, const pywire_spaces_t *sp) {
    return h->n_actions == sp->n_actions && h->action_dim == sp->action_dim &&
           h->dtype == sp->dtype && h->ndim == sp->ndim && h->layout == sp->layout &&
           memcmp(h->shape, sp->shape, sizeof sp->shape) == 0;
}

uint64_t pywire_hello_elements(const pywire_header_t *h) {
    if (h->ndim > PYWIRE_MAX_NDIM) {
        return 0;
    }
    uint64_t elems = 1;
    for (int i = 0; i < PYWIRE_MAX_NDIM; i++) {
        if (i >= h->ndim) {
            if (h->shape[i] != 0) {
                return 0;
            }
            continue;
        }
        if (h->shape[i] == 0 || h->shape[i] > (1u << 30)) {
            return 0;
        }
        elems *= h->shape[i]; // at most 2^31 * 2^30 before the check below: no overflow
        if (elems > (1ull << 31)) {
            return 0;
        }
    }
    return elems;
}

int pywire_obs_fits(const pywire_header_t *h, uint32_t dim, uint32_t h_px, uint32_t w_px,
                    uint32_t c, uint32_t layout) {
    if (pywire_hello_elements(h) == 0) {
        return 0;
    }
    const uint32_t *s = h->shape;
    if (h_px == 0) { // a vector of dim
        return h->ndim == 1 && s[0] == dim;
    }
    if (h->ndim == 2) { // grayscale without a channel axis: (H, W) is H x W x 1 either way
        return c == 1 && s[0] == h_px && s[1] == w_px;
    }
    if (h->ndim != 3) {
        return 0;
    }
    if (layout == PYWIRE_LAYOUT_CHW) {
        return s[0] == c && s[1] == h_px && s[2] == w_px;
    }
    return s[0] == h_px && s[1] == w_px && s[2] == c;
}

int pywire_hello_bounds(const pywire_header_t *h, const pywire_frame_t *bounds, float *low,
                        float *high, char *err, size_t errlen) {
    size_t D = h->action_dim;
    if (D == 0 || D > PYWIRE_MAX_ACTION_DIM) {
        return apex_errf(err, errlen, APEX_EINVAL,
                         "worker %u: a HELLO with action_dim %zu (continuous actions have 1..%d)",
                         h->worker, D, PYWIRE_MAX_ACTION_DIM);
    }
    if (bounds->len != 2 * D * sizeof(float)) {
        return apex_errf(err, errlen, APEX_EINVAL,
                         "worker %u: a HELLO's bounds frame of %zu bytes (action_dim %zu: %zu)",
                         h->worker, bounds->len, D, 2 * D * sizeof(float));
    }
    memcpy(low, bounds->data, D * sizeof(float)); // frames need not be aligned
    memcpy(high, bounds->data + D * sizeof(float), D * sizeof(float));
    return APEX_OK;
}

// ---------------------------------------------------------------------------------------
// Replies

// Unsigned throughout: a first of 2^31 or more must not become a negative group index.
int pywire_result_group(const pywire_header_t *h, uint32_t n, uint32_t groups) {
    if (n == 0 || h->n_envs != n || h->first % n != 0 || h->first / n >= groups) {
        return -1;
    }
    return (int)(h->first / n); // < groups, which the caller passed as a positive int
}

// Finite test on float32 bit patterns read with memcpy (frames need not be aligned): the
// exponent is all ones for Inf and NaN.
static int s_all_finite_f32(const uint8_t *src, size_t n) {
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, src + 4 * i, 4);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
    }
    return bad == 0;
}

// Flags: known bits only; without ERROR, RESET exactly when the episode ended; with ERROR,
// neither TERMINATED nor TRUNCATED; a RESET_DONE has only ERROR. Counts into *resets and
// *errors. Returns the first bad env or -1.
static long s_check_flags(const uint8_t *fl, size_t n, int is_reset, uint32_t *resets,
                          uint32_t *errors) {
    *resets = *errors = 0;
    for (size_t k = 0; k < n; k++) {
        uint8_t f = fl[k];
        int ended = (f & (PYWIRE_TERMINATED | PYWIRE_TRUNCATED)) != 0;
        int reset = (f & PYWIRE_RESET_FLAG) != 0;
        int ok = (f & ~15) == 0 && (f & PYWIRE_ERROR ? !ended : reset == ended) &&
                 (!is_reset || (f & ~PYWIRE_ERROR) == 0);
        if (!ok) {
            return (long)k;
        }
        *resets += (uint32_t)reset;
        *errors += (f & PYWIRE_ERROR) != 0;
    }
    return -1;
}

// Error records: u32 env, u32 len, text; one per ERROR env, in env order, nothing after.
static int s_check_errors(const pywire_header_t *h, const uint8_t *fl, const pywire_frame_t *ef,
                          char *err, size_t errlen) {
    const uint8_t *e = ef->data, *end = ef->data + ef->len;
    for (size_t k = 0; k < h->n_envs; k++) {
        if (!(fl[k] & PYWIRE_ERROR)) {
            continue;
        }
        uint32_t env, len;
        if (end - e < 8) {
            return apex_errf(err, errlen, APEX_EINVAL, "worker %u: error records end early",
                             h->worker);
        }
        memcpy(&env, e, 4);
        memcpy(&len, e + 4, 4);
        if (env != h->first + k || len > PYWIRE_ERR_TEXT_MAX || (size_t)(end - e - 8) < len) {
            return apex_errf(err, errlen, APEX_EINVAL,
                             "worker %u: a bad error record (env %u, %u bytes) for env %zu",
                             h->worker, env, len, h->first + k);
        }
        e += 8 + len;
    }
    if (e != end) {
        return apex_errf(err, errlen, APEX_EINVAL, "worker %u: %td bytes after the error records",
                         h->worker, end - e);
    }
    return APEX_OK;
}

int pywire_check_reply(const pywire_header_t *h, const pywire_frame_t f[5],
                       const pywire_spaces_t *sp, int is_reset, char *err, size_t errlen) {
    size_t n = h->n_envs, row = sp->row_bytes, obs_len, reset_len;
    if (!pywire_spaces_equal(h, sp)) {
        return apex_errf(err, errlen, APEX_EINVAL,
                         "worker %u: the reply's dtype/shape/n_actions/action_dim differ from the "
                         "HELLO's",
                         h->worker);
    }
    // A product that wraps could equal a short frame's length and pass as n rows.
    if (__builtin_mul_overflow(n, row, &obs_len) ||
        __builtin_mul_overflow((size_t)h->n_reset, row, &reset_len)) {
        return apex_errf(err, errlen, APEX_EINVAL, "worker %u: %zu envs and %u resets of %zu bytes",
                         h->worker, n, h->n_reset, row);
    }
    if (f[0].len != obs_len || f[1].len != n * 8 || f[2].len != n || f[3].len != reset_len ||
        (is_reset && h->n_reset != 0)) {
        return apex_errf(err, errlen, APEX_EINVAL,
                         "worker %u: frame sizes %zu/%zu/%zu/%zu do not fit %zu envs and %u resets",
                         h->worker, f[0].len, f[1].len, f[2].len, f[3].len, n, h->n_reset);
    }
    uint32_t resets, errors;
    long bad = s_check_flags(f[2].data, n, is_reset, &resets, &errors);
    if (bad >= 0) {
        return apex_errf(err, errlen, APEX_EINVAL, "worker %u: env %zu has the flags 0x%02x",
                         h->worker, h->first + (size_t)bad, f[2].data[bad]);
    }
    if (resets != h->n_reset || errors != h->n_error) {
        return apex_errf(err, errlen, APEX_EINVAL,
                         "worker %u: %u resets and %u errors flagged, the header says %u and %u",
                         h->worker, resets, errors, h->n_reset, h->n_error);
    }
    for (size_t k = 0; k < n; k++) {
        double r;
        memcpy(&r, f[1].data + 8 * k, 8);
        if (!(r >= -FLT_MAX && r <= FLT_MAX)) { // false for NaN too
            return apex_errf(err, errlen, APEX_EINVAL,
                             "worker %u: env %zu's reward %g is not a finite float32", h->worker,
                             h->first + k, r);
        }
    }
    if (sp->dtype == PYWIRE_DT_FLOAT32 && (!s_all_finite_f32(f[0].data, f[0].len / 4) ||
                                           !s_all_finite_f32(f[3].data, f[3].len / 4))) {
        return apex_errf(err, errlen, APEX_EINVAL, "worker %u: a non-finite float32 observation",
                         h->worker);
    }
    return s_check_errors(h, f[2].data, &f[4], err, errlen);
}

void pywire_copy_text(char *dst, size_t cap, const void *src, size_t len) {
    if (cap == 0) {
        return;
    }
    const uint8_t *s = src;
    size_t n = len < cap - 1 ? len : cap - 1;
    for (size_t i = 0; i < n; i++) {
        dst[i] = s[i] >= 32 && s[i] < 127 ? (char)s[i] : '?';
    }
    dst[n] = '\0';
}

void pywire_take_error(const uint8_t **rec, char *text, size_t cap) {
    uint32_t len;
    memcpy(&len, *rec + 4, 4);
    pywire_copy_text(text, cap, *rec + 8, len);
    *rec += 8 + len;
}

// ---------------------------------------------------------------------------------------
// Names

const char *pywire_dtype_name(int code) {
    return code == PYWIRE_DT_FLOAT32 ? "float32"
           : code == PYWIRE_DT_UINT8 ? "uint8"
                                     : "unsupported-dtype";
}

void pywire_shape_str(char *out, size_t cap, int ndim, const uint32_t *shape) {
    if (ndim < 0 || ndim > PYWIRE_MAX_NDIM) {
        snprintf(out, cap, "(invalid)");
        return;
    }
    size_t k = (size_t)snprintf(out, cap, "(");
    for (int i = 0; i < ndim && k < cap; i++) {
        k += (size_t)snprintf(out + k, cap - k, i ? ", %u" : "%u", shape[i]);
    }
    if (k < cap) {
        snprintf(out + k, cap - k, ndim == 1 ? ",)" : ")");
    }
}
