// fuzz_pywire.c: libFuzzer harness for the Python env bridge's wire (envs/pywire.c) and the
// local transport's frame table (pylocal_take_frames, envs/pylocal.c): everything the actor
// takes from a worker process, which may be a remote peer (spawn = false, ZeroMQ).
//
// Input: one message from a worker as the local transport carries it, which holds the same
// header and frames as a ZeroMQ one: a 72-byte header (what the pipe carries), then the
// bytes of a reply region (what the shared memory holds): 5 x u32 frame lengths, padding to
// 64 bytes, then the frames at 8-aligned offsets (pylocal.h). Inputs shorter than a header
// test the header parser alone. fuzz/gen_pywire_corpus.c writes the seeds.
//
// Each input is judged under every profile in s_pw_profiles (the spaces agreed at a HELLO
// and the bridge's layout of groups), as a RESULT and as a RESET_DONE, so one input reaches
// both the accepting and the rejecting side of every check. Checked beyond "no crash, no
// leak, no sanitizer report":
//   - pywire_parse_header accepts exactly the 72-byte inputs with the magic and version 1;
//   - pylocal_take_frames refuses a table that does not fit the region, and otherwise hands
//     out frames inside the caller's scratch buffer, never in the shared memory;
//   - pywire_result_group returns -1 or a group g < G with first = g * n, n_envs = n;
//   - pywire_hello_elements is the product of a valid shape's dims, or 0 exactly when the
//     shape is invalid (a restatement of pywire.h's rule);
//   - pywire_obs_fits accepts exactly a valid shape that is the run's frame written out
//     (vector (dim,); (H, W, C), or (C, H, W) for layout CHW; (H, W) for C = 1), for frames
//     built from the input's own dims and a few fixed ones;
//   - pywire_hello_bounds accepts exactly an action_dim of 1..64 with a second frame of
//     2 x action_dim float32s, and then copies them bit for bit;
//   - pywire_check_reply accepts exactly what s_pw_reference (pywire.h's rules restated
//     independently: sizes, flags, counts, finite float32 values, error records) accepts,
//     fails with a reason, and on success everything pyenv.c then does with the reply is
//     done here on exact-size copies of the frames, so ASan sees any read past them: every
//     row, reward and flag read, reset rows taken in order, every error record taken with
//     pywire_take_error (its env, its length, printable text), ending at the frame's end;
//   - pywire_shape_str and pywire_copy_text write terminated, printable text within cap.
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "apex.h"
#include "fuzz.h"
#include "pylocal.h"
#include "pywire.h"

// ---------------------------------------------------------------------------------------
// Profiles: the spaces of a run and its bridge's layout (N envs per worker in G groups of n).

typedef struct {
    pywire_spaces_t sp;
    uint32_t n, G;
} s_pw_profile_t;

static const s_pw_profile_t s_pw_profiles[] = {
    // CartPole-like: float32 (4,), 2 actions, 2 groups of 2.
    {{.n_actions = 2, .dtype = PYWIRE_DT_FLOAT32, .ndim = 1, .shape = {4}, .row_bytes = 16}, 2, 2},
    // MinAtar-like frames: uint8 (10, 10, 4), 6 actions, 1 group of 1.
    {{.n_actions = 6, .dtype = PYWIRE_DT_UINT8, .ndim = 3, .shape = {10, 10, 4}, .row_bytes = 400},
     1,
     1},
    // A scalar float32 observation, 3 actions, 4 groups of 1.
    {{.n_actions = 3, .dtype = PYWIRE_DT_FLOAT32, .ndim = 0, .row_bytes = 4}, 1, 4},
    // uint8 (2,), 2 actions, 1 group of 3.
    {{.n_actions = 2, .dtype = PYWIRE_DT_UINT8, .ndim = 1, .shape = {2}, .row_bytes = 2}, 3, 1},
    // Pendulum-like: float32 (3,), continuous actions of 2 floats, 2 groups of 1.
    {{.action_dim = 2, .dtype = PYWIRE_DT_FLOAT32, .ndim = 1, .shape = {3}, .row_bytes = 12}, 1, 2},
    // obs_layout = chw: uint8 (4, 6, 6) sent channels last (header layout 1), 4 actions.
    {{.n_actions = 4,
      .dtype = PYWIRE_DT_UINT8,
      .ndim = 3,
      .shape = {4, 6, 6},
      .layout = PYWIRE_LAYOUT_CHW,
      .row_bytes = 144},
     2,
     1},
};
#define PW_N_PROFILES (sizeof s_pw_profiles / sizeof s_pw_profiles[0])

// The reply region: large enough for every seed and for libFuzzer's -max_len.
#define PW_REGION_BYTES 4096

static pylocal_t s_pw_local;
static uint8_t *s_pw_scratch;

static void s_pw_setup(void) {
    if (s_pw_scratch) {
        return;
    }
    // One request and one reply region in a real memfd, as the actor maps it.
    FUZZ_CHECK(pylocal_init(&s_pw_local, 1, 64, PW_REGION_BYTES) == 0);
    s_pw_scratch = malloc(s_pw_local.rep_bytes);
    FUZZ_CHECK(s_pw_scratch != NULL);
}

// ---------------------------------------------------------------------------------------
// pywire.h's rules, restated without pywire.c's code

static int s_pw_finite_f32(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float v;
        memcpy(&v, p + 4 * i, 4);
        if (!isfinite(v)) {
            return 0;
        }
    }
    return 1;
}

static int s_pw_spaces_match(const pywire_header_t *h, const pywire_spaces_t *sp) {
    if (h->n_actions != sp->n_actions || h->action_dim != sp->action_dim || h->dtype != sp->dtype ||
        h->ndim != sp->ndim || h->layout != sp->layout) {
        return 0;
    }
    for (int i = 0; i < PYWIRE_MAX_NDIM; i++) {
        if (h->shape[i] != sp->shape[i]) {
            return 0;
        }
    }
    return 1;
}

// 1 when a reply with header h and frames f satisfies every rule of pywire.h for sp.
static int s_pw_reference(const pywire_header_t *h, const pywire_frame_t *f,
                          const pywire_spaces_t *sp, int is_reset) {
    const uint64_t n = h->n_envs, row = sp->row_bytes;
    if (!s_pw_spaces_match(h, sp)) {
        return 0;
    }
    // Sizes, in 128-bit arithmetic so that nothing wraps.
    if ((unsigned __int128)f[0].len != (unsigned __int128)n * row || f[1].len != 8 * n ||
        f[2].len != n || (unsigned __int128)f[3].len != (unsigned __int128)h->n_reset * row) {
        return 0;
    }
    if (is_reset && h->n_reset != 0) {
        return 0;
    }
    uint64_t resets = 0, errors = 0;
    for (uint64_t k = 0; k < n; k++) {
        uint8_t fl = f[2].data[k];
        int term = fl & PYWIRE_TERMINATED, trunc = fl & PYWIRE_TRUNCATED;
        int reset = (fl & PYWIRE_RESET_FLAG) != 0, error = (fl & PYWIRE_ERROR) != 0;
        if (fl > 15 || (is_reset && fl != 0 && fl != PYWIRE_ERROR)) {
            return 0;
        }
        if (error && (term || trunc)) {
            return 0;
        }
        if (!error && reset != ((term || trunc) != 0)) {
            return 0;
        }
        resets += (uint64_t)reset;
        errors += (uint64_t)error;
    }
    if (resets != h->n_reset || errors != h->n_error) {
        return 0;
    }
    for (uint64_t k = 0; k < n; k++) {
        double r;
        memcpy(&r, f[1].data + 8 * k, 8);
        if (!isfinite(r) || fabs(r) > (double)FLT_MAX) {
            return 0;
        }
    }
    if (sp->dtype == PYWIRE_DT_FLOAT32 &&
        (!s_pw_finite_f32(f[0].data, f[0].len / 4) || !s_pw_finite_f32(f[3].data, f[3].len / 4))) {
        return 0;
    }
    // One record per ERROR env, in env order: u32 env (= first + k), u32 len <= 256, text.
    size_t off = 0;
    for (uint64_t k = 0; k < n; k++) {
        if (!(f[2].data[k] & PYWIRE_ERROR)) {
            continue;
        }
        uint32_t env, len;
        if (f[4].len - off < 8) {
            return 0;
        }
        memcpy(&env, f[4].data + off, 4);
        memcpy(&len, f[4].data + off + 4, 4);
        if ((uint64_t)env != (uint64_t)h->first + k || len > PYWIRE_ERR_TEXT_MAX ||
            f[4].len - off - 8 < len) {
            return 0;
        }
        off += 8 + (size_t)len;
    }
    return off == f[4].len;
}

// ---------------------------------------------------------------------------------------
// What pyenv.c does with an accepted reply, on exact-size copies of its frames.

static int s_pw_printable(const char *s, size_t cap) {
    const char *end = memchr(s, '\0', cap);
    if (!end) {
        return 0;
    }
    for (const char *c = s; c < end; c++) {
        if (*c < 32 || *c > 126) {
            return 0;
        }
    }
    return 1;
}

static void s_pw_use_reply(const pywire_header_t *h, const pywire_frame_t *f,
                           const pywire_spaces_t *sp) {
    const size_t n = h->n_envs, row = sp->row_bytes;
    FUZZ_CHECK(f[0].len == n * row && f[1].len == 8 * n && f[2].len == n);
    uint8_t *copy[5];
    pywire_frame_t c[5];
    for (int i = 0; i < 5; i++) {
        copy[i] = malloc(f[i].len ? f[i].len : 1);
        FUZZ_CHECK(copy[i] != NULL);
        memcpy(copy[i], f[i].data, f[i].len);
        c[i] = (pywire_frame_t){copy[i], f[i].len};
    }
    const uint8_t *reset = c[3].data, *rec = c[4].data;
    unsigned sum = 0;
    for (size_t k = 0; k < n; k++) {
        double r;
        memcpy(&r, c[1].data + 8 * k, 8);
        FUZZ_CHECK(isfinite((float)r)); // what the bridge stores
        uint8_t fl = c[2].data[k];
        for (size_t b = 0; b < row; b++) {
            sum += c[0].data[k * row + b];
        }
        if (fl & PYWIRE_RESET_FLAG) {
            for (size_t b = 0; b < row; b++) {
                sum += reset[b];
            }
            reset += row;
        }
        if (fl & PYWIRE_ERROR) {
            uint32_t env, len;
            memcpy(&env, rec, 4);
            memcpy(&len, rec + 4, 4);
            FUZZ_CHECK(env == h->first + k && len <= PYWIRE_ERR_TEXT_MAX);
            const uint8_t *before = rec;
            char text[PYWIRE_ERR_TEXT_MAX + 1];
            pywire_take_error(&rec, text, sizeof text);
            FUZZ_CHECK(rec == before + 8 + len);
            FUZZ_CHECK(s_pw_printable(text, sizeof text) && strlen(text) == len);
        }
    }
    FUZZ_CHECK(reset == c[3].data + c[3].len);
    FUZZ_CHECK(rec == c[4].data + c[4].len);
    (void)sum;
    for (int i = 0; i < 5; i++) {
        free(copy[i]);
    }
}

// ---------------------------------------------------------------------------------------
// HELLO

// pywire.h's rule for a HELLO's shape: rank <= 4, dims 1 .. 2^30 within it and 0 beyond,
// at most 2^31 elements.
static uint64_t s_pw_elements(const pywire_header_t *h) {
    if (h->ndim > PYWIRE_MAX_NDIM) {
        return 0;
    }
    unsigned __int128 e = 1;
    for (int i = 0; i < PYWIRE_MAX_NDIM; i++) {
        if (i >= h->ndim ? h->shape[i] != 0 : h->shape[i] == 0 || h->shape[i] > (1u << 30)) {
            return 0;
        }
        e *= i < h->ndim ? h->shape[i] : 1;
    }
    return e > (1ull << 31) ? 0 : (uint64_t)e;
}

// pywire.h's rule for a shape that is the run's frame, restated: the frame's shape written
// out as the HELLO would carry it (4 dims, zeros beyond the rank) and compared whole.
static int s_pw_fits(const pywire_header_t *h, uint32_t dim, uint32_t H, uint32_t W, uint32_t C,
                     uint32_t layout) {
    if (s_pw_elements(h) == 0) {
        return 0;
    }
    uint32_t want[3][PYWIRE_MAX_NDIM] = {{0}};
    uint8_t rank[3] = {0, 0, 0};
    int n = 0;
    if (H == 0) {
        want[n][0] = dim, rank[n++] = 1;
    } else {
        uint32_t hwc[3] = {H, W, C}, chw[3] = {C, H, W};
        memcpy(want[n], layout == PYWIRE_LAYOUT_CHW ? chw : hwc, sizeof hwc), rank[n++] = 3;
        if (C == 1) {
            want[n][0] = H, want[n][1] = W, rank[n++] = 2;
        }
    }
    for (int i = 0; i < n; i++) {
        if (h->ndim == rank[i] && memcmp(h->shape, want[i], sizeof want[i]) == 0) {
            return 1;
        }
    }
    return 0;
}

static void s_pw_hello(const pywire_header_t *h, const pywire_frame_t *text,
                       const pywire_frame_t *bounds) {
    FUZZ_CHECK(pywire_hello_elements(h) == s_pw_elements(h));
    // Frames from the input's own dims (so that fits are reached), and fixed ones.
    const uint32_t *d = h->shape;
    const uint32_t frames[][4] = {{d[0], 0, 0, 0},    {0, d[0], d[1], d[2]}, {0, d[1], d[2], d[0]},
                                  {0, d[0], d[1], 1}, {4, 0, 0, 0},          {0, 84, 84, 4},
                                  {0, 10, 10, 4}};
    for (size_t i = 0; i < sizeof frames / sizeof frames[0]; i++) {
        for (uint32_t layout = 0; layout < 2; layout++) {
            const uint32_t *f = frames[i];
            FUZZ_CHECK(pywire_obs_fits(h, f[0], f[1], f[2], f[3], layout) ==
                       s_pw_fits(h, f[0], f[1], f[2], f[3], layout));
        }
    }
    float low[PYWIRE_MAX_ACTION_DIM], high[PYWIRE_MAX_ACTION_DIM];
    char err[256] = "";
    size_t D = h->action_dim;
    int ok = D >= 1 && D <= PYWIRE_MAX_ACTION_DIM && bounds->len == 8 * D;
    int rc = pywire_hello_bounds(h, bounds, low, high, err, sizeof err);
    FUZZ_CHECK((rc == APEX_OK) == ok && (ok || err[0] != '\0'));
    if (ok) {
        FUZZ_CHECK(memcmp(low, bounds->data, 4 * D) == 0);
        FUZZ_CHECK(memcmp(high, bounds->data + 4 * D, 4 * D) == 0);
    }
    char s[64];
    for (size_t cap = 1; cap <= sizeof s; cap *= 4) {
        memset(s, 'z', sizeof s);
        pywire_shape_str(s, cap, h->ndim, h->shape);
        FUZZ_CHECK(memchr(s, '\0', cap) != NULL);
    }
    char desc[PYWIRE_TEXT_MAX + 1];
    pywire_copy_text(desc, sizeof desc, text->data, text->len);
    FUZZ_CHECK(s_pw_printable(desc, sizeof desc));
    FUZZ_CHECK(strlen(desc) == (text->len < PYWIRE_TEXT_MAX ? text->len : PYWIRE_TEXT_MAX));
}

// ---------------------------------------------------------------------------------------

int fuzz_pywire_one(const uint8_t *data, size_t size) {
    s_pw_setup();
    pywire_header_t h;
    char err[2048];
    err[0] = '\0';
    size_t hlen = size < PYWIRE_HEADER_BYTES ? size : PYWIRE_HEADER_BYTES;
    int rc = pywire_parse_header(data, hlen, &h, err, sizeof err);
    int want = hlen == PYWIRE_HEADER_BYTES && memcmp(data, PYWIRE_MAGIC, 4) == 0;
    uint16_t version = 0;
    if (hlen >= 6) {
        memcpy(&version, data + 4, 2);
    }
    FUZZ_CHECK((rc == APEX_OK) == (want && version == PYWIRE_VERSION));
    if (rc != APEX_OK) {
        FUZZ_CHECK(err[0] != '\0');
        FUZZ_CHECK(rc == (want ? APEX_EVERSION : APEX_EPROTO));
        return 0;
    }
    // The rest is the reply region: copied into the shared memory (zeros after it), taken
    // as the actor takes it, then scribbled over as a worker could at any time.
    uint8_t *region = s_pw_local.mem + s_pw_local.req_bytes;
    size_t rest = size - PYWIRE_HEADER_BYTES;
    rest = rest < s_pw_local.rep_bytes ? rest : s_pw_local.rep_bytes;
    memset(region, 0, s_pw_local.rep_bytes);
    memcpy(region, data + PYWIRE_HEADER_BYTES, rest);
    pywire_frame_t f[PYLOCAL_FRAMES];
    if (pylocal_take_frames(&s_pw_local, 0, s_pw_scratch, f, err, sizeof err) != 0) {
        uint32_t lens[PYLOCAL_FRAMES];
        memcpy(lens, region, sizeof lens);
        uint64_t end = PYLOCAL_HEAD_BYTES;
        int fits = 1;
        for (int i = 0; i < PYLOCAL_FRAMES; i++) {
            fits &= end + lens[i] <= s_pw_local.rep_bytes;
            end = (end + lens[i] + 7) & ~7ull;
        }
        FUZZ_CHECK(!fits && err[0] != '\0');
        return 0;
    }
    for (int i = 0; i < PYLOCAL_FRAMES; i++) {
        FUZZ_CHECK(f[i].data >= s_pw_scratch &&
                   f[i].data + f[i].len <= s_pw_scratch + s_pw_local.rep_bytes);
    }
    memset(region, 0xff, s_pw_local.rep_bytes); // what was taken must not change
    s_pw_hello(&h, &f[0], &f[1]);
    for (size_t p = 0; p < PW_N_PROFILES; p++) {
        const s_pw_profile_t *pr = &s_pw_profiles[p];
        int g = pywire_result_group(&h, pr->n, pr->G);
        FUZZ_CHECK(g == -1 || (g >= 0 && (uint32_t)g < pr->G && h.first == (uint32_t)g * pr->n &&
                               h.n_envs == pr->n));
        for (int is_reset = 0; is_reset < 2; is_reset++) {
            err[0] = '\0';
            rc = pywire_check_reply(&h, f, &pr->sp, is_reset, err, sizeof err);
            FUZZ_CHECK(rc == APEX_OK || rc == APEX_EINVAL);
            FUZZ_CHECK((rc == APEX_OK) == s_pw_reference(&h, f, &pr->sp, is_reset));
            if (rc != APEX_OK) {
                FUZZ_CHECK(err[0] != '\0' && memchr(err, '\0', sizeof err) != NULL);
                continue;
            }
            s_pw_use_reply(&h, f, &pr->sp);
        }
    }
    return 0;
}

#ifndef FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_pywire_one(data, size); }
#endif
