// check_pywire.c: the Python bridge's wire (envs/pywire.h), which validates an untrusted
// peer: a worker process, possibly on another host over ZeroMQ. Every header field at and
// past its bounds, truncated and oversized frames, wrong kinds and shapes, every flag
// byte, NaN/inf rewards and observations, error records, sizes whose products overflow, and
// the local transport's copy-before-check (a reply changed in the shared memory after it was
// taken is not what is checked).
//
// Headers are written here byte by byte at the offsets pywire.h documents (s_encode), not
// through pywire_header_t, so a change of the struct's layout shows as a failure.
#include "check_apex.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "apex.h"
#include "pylocal.h"
#include "pywire.h"

// ---------------------------------------------------------------------------------------
// Headers as bytes

typedef struct {
    char magic[4];
    uint16_t version, type;
    uint32_t worker, n_envs;
    uint64_t seq, nonce;
    uint32_t first, n_actions;
    uint8_t dtype, ndim;
    uint16_t action_dim;
    uint32_t shape[4], n_reset, n_error, layout;
} s_fields;

static void s_put(uint8_t *b, size_t off, const void *v, size_t n) { memcpy(b + off, v, n); }

// The documented layout (pywire.h): little-endian, reserved bytes zero.
static void s_encode(const s_fields *f, uint8_t b[PYWIRE_HEADER_BYTES]) {
    memset(b, 0, PYWIRE_HEADER_BYTES);
    s_put(b, 0, f->magic, 4);
    s_put(b, 4, &f->version, 2);
    s_put(b, 6, &f->type, 2);
    s_put(b, 8, &f->worker, 4);
    s_put(b, 12, &f->n_envs, 4);
    s_put(b, 16, &f->seq, 8);
    s_put(b, 24, &f->nonce, 8);
    s_put(b, 32, &f->first, 4);
    s_put(b, 36, &f->n_actions, 4);
    b[40] = f->dtype;
    b[41] = f->ndim;
    s_put(b, 42, &f->action_dim, 2);
    s_put(b, 44, f->shape, 16);
    s_put(b, 60, &f->n_reset, 4);
    s_put(b, 64, &f->n_error, 4);
    s_put(b, 68, &f->layout, 4);
}

// A RESULT of worker 1 for float32 observations of shape (4,) and 3 actions.
static s_fields s_fields_default(void) {
    return (s_fields){.magic = "APXE",
                      .version = PYWIRE_VERSION,
                      .type = PYWIRE_RESULT,
                      .worker = 1,
                      .n_envs = 3,
                      .seq = 77,
                      .nonce = 0x1234567890abcdefull,
                      .first = 6,
                      .n_actions = 3,
                      .dtype = PYWIRE_DT_FLOAT32,
                      .ndim = 1,
                      .shape = {4, 0, 0, 0}};
}

static int s_parse(const s_fields *f, pywire_header_t *h) {
    uint8_t b[PYWIRE_HEADER_BYTES];
    s_encode(f, b);
    char err[256] = "";
    int rc = pywire_parse_header(b, sizeof b, h, err, sizeof err);
    ck_assert_msg(rc == APEX_OK || err[0], "a failure without a reason");
    return rc;
}

START_TEST(test_header_layout) {
    s_fields f = s_fields_default();
    f.n_envs = 0x01020304u;
    f.shape[1] = 0xa1a2a3a4u, f.shape[3] = 7;
    f.n_reset = 0xdeadbeefu, f.n_error = 0xfeedfaceu;
    f.dtype = 0xfe, f.ndim = 0xfd, f.action_dim = 0xabcd, f.layout = 0x0badcafeu;
    pywire_header_t h;
    ck_assert_int_eq(s_parse(&f, &h), APEX_OK);
    ck_assert(h.action_dim == f.action_dim);
    ck_assert(h.version == f.version && h.type == f.type && h.worker == f.worker);
    ck_assert(h.n_envs == f.n_envs && h.seq == f.seq && h.nonce == f.nonce);
    ck_assert(h.first == f.first && h.n_actions == f.n_actions && h.dtype == f.dtype);
    ck_assert(h.ndim == f.ndim && memcmp(h.shape, f.shape, 16) == 0);
    ck_assert(h.n_reset == f.n_reset && h.n_error == f.n_error && h.layout == f.layout);
    // What the actor sends is the documented layout too.
    pywire_spaces_t sp = {
        .n_actions = 3, .dtype = PYWIRE_DT_UINT8, .ndim = 3, .shape = {10, 10, 4}};
    pywire_header_init(&h, PYWIRE_STEP, &sp, 2, 99, 5, 1234, 10);
    s_fields g = {.magic = "APXE",
                  .version = 1,
                  .type = PYWIRE_STEP,
                  .worker = 2,
                  .n_envs = 5,
                  .seq = 1234,
                  .nonce = 99,
                  .first = 10,
                  .n_actions = 3,
                  .dtype = PYWIRE_DT_UINT8,
                  .ndim = 3,
                  .shape = {10, 10, 4}};
    uint8_t want[PYWIRE_HEADER_BYTES];
    s_encode(&g, want);
    ck_assert(memcmp(&h, want, PYWIRE_HEADER_BYTES) == 0);
    // Continuous actions: n_actions 0, action_dim at offset 42 (the reserved 0 of before).
    pywire_spaces_t cs = {.action_dim = 6, .dtype = PYWIRE_DT_FLOAT32, .ndim = 1, .shape = {17}};
    pywire_header_init(&h, PYWIRE_STEP, &cs, 2, 99, 5, 1234, 10);
    g.n_actions = 0, g.action_dim = 6, g.dtype = PYWIRE_DT_FLOAT32, g.ndim = 1;
    memcpy(g.shape, (uint32_t[4]){17, 0, 0, 0}, sizeof g.shape);
    s_encode(&g, want);
    ck_assert(memcmp(&h, want, PYWIRE_HEADER_BYTES) == 0);
    // obs_layout = chw: layout 1 at offset 68 (the reserved 0 of before); as is, 0 there,
    // so the messages of every other run are what they were.
    pywire_spaces_t ls = {.n_actions = 3,
                          .dtype = PYWIRE_DT_UINT8,
                          .ndim = 3,
                          .shape = {4, 84, 84},
                          .layout = PYWIRE_LAYOUT_CHW};
    pywire_header_init(&h, PYWIRE_STEP, &ls, 2, 99, 5, 1234, 10);
    g.n_actions = 3, g.action_dim = 0, g.dtype = PYWIRE_DT_UINT8, g.ndim = 3;
    memcpy(g.shape, (uint32_t[4]){4, 84, 84, 0}, sizeof g.shape);
    g.layout = 1;
    s_encode(&g, want);
    ck_assert(memcmp(&h, want, PYWIRE_HEADER_BYTES) == 0);
    ck_assert_uint_eq(want[68], 1);
}
END_TEST

// A continuous HELLO's bounds frame: exactly 2 x action_dim float32s (low, then high), read
// from any alignment and copied bit for bit (NaN and inf too: the actor compares them with
// the run's bounds and refuses what differs); any other size, and an action_dim of 0 or
// beyond 64, refused with a reason.
START_TEST(test_hello_bounds) {
    pywire_header_t h;
    pywire_spaces_t cs = {.action_dim = 3, .dtype = PYWIRE_DT_FLOAT32, .ndim = 1, .shape = {4}};
    pywire_header_init(&h, PYWIRE_HELLO, &cs, 1, 0, 2, 0, 0);
    float vals[6] = {-2.0f, -1.0f, NAN, 2.0f, INFINITY, 0.5f};
    uint8_t buf[1 + sizeof vals + 8];
    memcpy(buf + 1, vals, sizeof vals); // unaligned
    float low[PYWIRE_MAX_ACTION_DIM], high[PYWIRE_MAX_ACTION_DIM];
    char err[256] = "";
    pywire_frame_t fr = {buf + 1, sizeof vals};
    ck_assert_int_eq(pywire_hello_bounds(&h, &fr, low, high, err, sizeof err), APEX_OK);
    ck_assert(memcmp(low, vals, 12) == 0 && memcmp(high, vals + 3, 12) == 0);
    const size_t bad_len[] = {0, 4, 12, 23, 25, 48};
    for (size_t k = 0; k < sizeof bad_len / sizeof bad_len[0]; k++) {
        err[0] = '\0';
        fr.len = bad_len[k];
        ck_assert_int_eq(pywire_hello_bounds(&h, &fr, low, high, err, sizeof err), APEX_EINVAL);
        ck_assert_msg(strstr(err, "bounds frame") != NULL, "%zu bytes: %s", bad_len[k], err);
    }
    static uint8_t big[2 * 65 * 4];
    const uint16_t bad_dim[] = {0, 65, 0xffff};
    for (size_t k = 0; k < sizeof bad_dim / sizeof bad_dim[0]; k++) {
        h.action_dim = bad_dim[k];
        fr = (pywire_frame_t){big, 8u * bad_dim[k] < sizeof big ? 8u * bad_dim[k] : sizeof big};
        err[0] = '\0';
        ck_assert_int_eq(pywire_hello_bounds(&h, &fr, low, high, err, sizeof err), APEX_EINVAL);
        ck_assert_msg(strstr(err, "action_dim") != NULL, "%u: %s", bad_dim[k], err);
    }
    h.action_dim = 64; // the largest: its whole frame
    fr = (pywire_frame_t){big, 2 * 64 * 4};
    ck_assert_int_eq(pywire_hello_bounds(&h, &fr, low, high, err, sizeof err), APEX_OK);
}
END_TEST

START_TEST(test_header_bounds) {
    uint8_t b[2 * PYWIRE_HEADER_BYTES] = {0};
    s_fields f = s_fields_default();
    s_encode(&f, b);
    pywire_header_t h;
    char err[256];
    const size_t lens[] = {
        0, 1, 4, PYWIRE_HEADER_BYTES - 1, PYWIRE_HEADER_BYTES + 1, 2 * PYWIRE_HEADER_BYTES};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        err[0] = '\0';
        ck_assert_int_eq(pywire_parse_header(b, lens[i], &h, err, sizeof err), APEX_EPROTO);
        ck_assert_msg(strstr(err, "header") != NULL, "%zu bytes: '%s'", lens[i], err);
    }
    ck_assert_int_eq(pywire_parse_header(b, PYWIRE_HEADER_BYTES, &h, err, sizeof err), APEX_OK);
    for (int i = 0; i < 4; i++) { // any byte of the magic
        s_fields g = f;
        g.magic[i] ^= 0x20;
        ck_assert_int_eq(s_parse(&g, &h), APEX_EPROTO);
    }
    const uint16_t versions[] = {0, 2, 0x100, 0xffff};
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) {
        s_fields g = f;
        g.version = versions[i];
        ck_assert_int_eq(s_parse(&g, &h), APEX_EVERSION);
    }
    // The other fields are not the header parser's business: any value parses (the
    // handlers and pywire_check_reply judge them), however extreme.
    s_fields g = f;
    g.type = 0xffff, g.worker = UINT32_MAX, g.n_envs = UINT32_MAX, g.seq = UINT64_MAX;
    g.first = UINT32_MAX, g.n_actions = UINT32_MAX, g.dtype = 0xff, g.ndim = 0xff;
    g.n_reset = UINT32_MAX, g.n_error = UINT32_MAX;
    memset(g.shape, 0xff, sizeof g.shape);
    ck_assert_int_eq(s_parse(&g, &h), APEX_OK);
    ck_assert(h.worker == UINT32_MAX && h.first == UINT32_MAX && h.ndim == 0xff);
}
END_TEST

// ---------------------------------------------------------------------------------------
// HELLO spaces, groups

START_TEST(test_hello_elements) {
    static const struct {
        uint8_t ndim;
        uint32_t shape[4];
        uint64_t want;
    } cases[] = {
        {0, {0, 0, 0, 0}, 1},                            // a scalar
        {1, {4, 0, 0, 0}, 4},                            // CartPole
        {3, {10, 10, 4, 0}, 400},                        // MinAtar
        {4, {2, 3, 5, 7}, 210},                          // the highest rank
        {5, {2, 3, 5, 7}, 0},                            // past it
        {0xff, {1, 1, 1, 1}, 0},                         //
        {1, {0, 0, 0, 0}, 0},                            // a dim 0
        {2, {3, 0, 0, 0}, 0},                            //
        {1, {1u << 30, 0, 0, 0}, 1u << 30},              // a dim at its bound
        {1, {(1u << 30) + 1, 0, 0, 0}, 0},               // past it
        {1, {UINT32_MAX, 0, 0, 0}, 0},                   //
        {1, {4, 1, 0, 0}, 0},                            // a dim beyond the rank
        {2, {4, 2, 0, 9}, 0},                            //
        {2, {1u << 16, 1u << 15, 0, 0}, 1ull << 31},     // 2^31 elements: the bound
        {2, {1u << 16, (1u << 15) + 1, 0, 0}, 0},        // past it
        {4, {1u << 30, 1u << 30, 1u << 30, 1u << 30}, 0} // no overflow on the way
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pywire_header_t h = {.ndim = cases[i].ndim};
        memcpy(h.shape, cases[i].shape, sizeof h.shape);
        ck_assert_msg(pywire_hello_elements(&h) == cases[i].want, "case %zu: %llu", i,
                      (unsigned long long)pywire_hello_elements(&h));
    }
}
END_TEST

START_TEST(test_spaces_equal) {
    pywire_spaces_t sp = {.n_actions = 3, .dtype = PYWIRE_DT_FLOAT32, .ndim = 2, .shape = {2, 2}};
    pywire_header_t h;
    pywire_header_init(&h, PYWIRE_RESULT, &sp, 0, 0, 1, 1, 0);
    ck_assert(pywire_spaces_equal(&h, &sp));
    for (int k = 0; k < 9; k++) {
        pywire_header_t g = h;
        switch (k) {
        case 0:
            g.n_actions = 4;
            break;
        case 1:
            g.dtype = PYWIRE_DT_UINT8;
            break;
        case 2:
            g.ndim = 1;
            break;
        case 3:
            g.shape[0] = 4;
            break;
        case 4:
            g.shape[1] = 1;
            break;
        case 5:
            g.shape[2] = 1;
            break; // beyond the rank, still part of the spaces
        case 6:
            g.action_dim = 1; // the continuous half of the action space
            break;
        case 7:
            g.layout = PYWIRE_LAYOUT_CHW; // rows transposed, where the run has them as they are
            break;
        default:
            g.shape[3] = 1;
            break;
        }
        ck_assert_msg(!pywire_spaces_equal(&g, &sp), "field %d", k);
    }
}
END_TEST

// A HELLO's observation shape against the run's frame ([env] obs_shape / obs_dim,
// obs_layout): only the exact shape fits, and (H, W) for a grayscale H x W x 1.
START_TEST(test_obs_fits) {
    enum { HWC = PYWIRE_LAYOUT_AS_IS, CHW = PYWIRE_LAYOUT_CHW };
    static const struct {
        uint8_t ndim;
        uint32_t shape[4];
        uint32_t dim, h, w, c, layout;
        int want;
    } cases[] = {
        {1, {4}, 4, 0, 0, 0, HWC, 1},                // CartPole: a vector of obs_dim
        {1, {5}, 4, 0, 0, 0, HWC, 0},                // another length
        {2, {2, 2}, 4, 0, 0, 0, HWC, 0},             // as many elements, not a vector
        {0, {0}, 1, 0, 0, 0, HWC, 0},                // a scalar is not (1,)
        {3, {84, 84, 4}, 28224, 84, 84, 4, HWC, 1},  // channels last
        {3, {4, 84, 84}, 28224, 84, 84, 4, HWC, 0},  // channels first, read as last: refused
        {3, {4, 84, 84}, 28224, 84, 84, 4, CHW, 1},  // ... fits when the worker transposes
        {3, {84, 84, 4}, 28224, 84, 84, 4, CHW, 0},  // channels last, declared first
        {3, {84, 4, 84}, 28224, 84, 84, 4, HWC, 0},  // neither
        {3, {84, 84, 1}, 7056, 84, 84, 1, HWC, 1},   // a grayscale frame
        {2, {84, 84}, 7056, 84, 84, 1, HWC, 1},      // ... without its channel axis
        {2, {84, 84}, 7056, 84, 84, 1, CHW, 1},      // ... which has nothing to transpose
        {3, {1, 84, 84}, 7056, 84, 84, 1, CHW, 1},   // (1, H, W) channels first
        {3, {1, 84, 84}, 7056, 84, 84, 1, HWC, 0},   //
        {2, {84, 84}, 28224, 84, 84, 4, HWC, 0},     // (H, W) is one channel only
        {2, {42, 168}, 7056, 84, 84, 1, HWC, 0},     // another image of as many pixels
        {3, {10, 10, 4}, 400, 10, 10, 4, HWC, 1},    // MinAtar
        {4, {1, 10, 10, 4}, 400, 10, 10, 4, HWC, 0}, // a rank-4 batch of one
        {3, {84, 84, 4}, 28224, 0, 0, 0, HWC, 0},    // an image for a vector run
        {1, {28224}, 28224, 84, 84, 4, HWC, 0},      // a vector for an image run
        {3, {84, 84, 0}, 0, 84, 84, 0, HWC, 0},      // an invalid shape never fits
        {3, {84, 84, 4}, 28224, 84, 84, 4, 7, 1},    // an unknown layout reads as is (the
                                                     // caller compares the layout fields)
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pywire_header_t h = {.ndim = cases[i].ndim};
        memcpy(h.shape, cases[i].shape, sizeof h.shape);
        int got = pywire_obs_fits(&h, cases[i].dim, cases[i].h, cases[i].w, cases[i].c,
                                  cases[i].layout);
        ck_assert_msg(got == cases[i].want, "case %zu: %d", i, got);
    }
}
END_TEST

// A RESULT must be exactly one group's slice. first is a u32 from the peer: one of 2^31 or
// more once became a negative group index in pyenv.c (an out-of-bounds read and write).
START_TEST(test_result_group) {
    static const struct {
        uint32_t n_envs, first, n, groups;
        int want;
    } cases[] = {
        {1, 0, 1, 1, 0},
        {1, 1, 1, 1, -1},
        {1, 1, 1, 2, 1},
        {1, 2, 1, 2, -1},
        {1, 0x7fffffffu, 1, 1, -1},
        {1, 0x80000000u, 1, 1, -1},
        {1, 0x80000000u, 1, 2, -1},
        {1, UINT32_MAX, 1, 1, -1},
        {2, 0, 1, 1, -1},
        {0, 0, 1, 1, -1},
        {3, 0, 3, 2, 0},
        {3, 3, 3, 2, 1},
        {3, 6, 3, 2, -1},
        {3, 4, 3, 2, -1},
        {2, 3, 3, 2, -1},
        {4, 4, 3, 2, -1},
        {3, 0xfffffffdu, 3, 2, -1},
        {1, 0, 0, 1, -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pywire_header_t h = {.n_envs = cases[i].n_envs, .first = cases[i].first};
        ck_assert_msg(pywire_result_group(&h, cases[i].n, cases[i].groups) == cases[i].want,
                      "case %zu: %d", i, pywire_result_group(&h, cases[i].n, cases[i].groups));
    }
}
END_TEST

// ---------------------------------------------------------------------------------------
// Replies

#define N_MAX 8
#define ROW_MAX 64

// A reply under construction: its header fields and its five frames' bytes.
typedef struct {
    s_fields hf;
    pywire_spaces_t sp;
    uint8_t obs[N_MAX * ROW_MAX], rew[N_MAX * 8], flags[N_MAX], reset[N_MAX * ROW_MAX];
    uint8_t errs[N_MAX * (8 + 300)];
    size_t len[5];
    pywire_header_t h;
    pywire_frame_t f[5];
} s_reply;

static void s_set_reward(s_reply *r, int k, double v) { memcpy(r->rew + 8 * k, &v, 8); }

static void s_set_obs(uint8_t *rows, int k, int i, float v) {
    memcpy(rows + (size_t)16 * k + 4 * (size_t)i, &v, 4);
}

// Appends an error record (env, text) to the errors frame.
static void s_add_error(s_reply *r, uint32_t env, const char *text) {
    uint32_t len = (uint32_t)strlen(text);
    memcpy(r->errs + r->len[4], &env, 4);
    memcpy(r->errs + r->len[4] + 4, &len, 4);
    memcpy(r->errs + r->len[4] + 8, text, len);
    r->len[4] += 8 + len;
}

// The valid RESULT of s_fields_default: env 6 goes on, env 7 terminates (and is reset), env
// 8 faults (and is reset).
static void s_reply_default(s_reply *r) {
    memset(r, 0, sizeof *r);
    r->hf = s_fields_default();
    r->hf.n_reset = 2;
    r->hf.n_error = 1;
    r->sp = (pywire_spaces_t){.n_actions = 3,
                              .dtype = PYWIRE_DT_FLOAT32,
                              .ndim = 1,
                              .shape = {4, 0, 0, 0},
                              .row_bytes = 16};
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < 4; i++) {
            s_set_obs(r->obs, k, i, k == 2 ? 0.0f : 0.5f * (float)(k * 4 + i) - 1.0f);
            s_set_obs(r->reset, k, i, k < 2 ? 0.25f * (float)i : 0.0f);
        }
    }
    s_set_reward(r, 0, 0.5);
    s_set_reward(r, 1, -1.0);
    s_set_reward(r, 2, 0.0);
    r->flags[0] = 0;
    r->flags[1] = PYWIRE_TERMINATED | PYWIRE_RESET_FLAG;
    r->flags[2] = PYWIRE_ERROR | PYWIRE_RESET_FLAG;
    r->len[0] = 3 * 16, r->len[1] = 3 * 8, r->len[2] = 3, r->len[3] = 2 * 16;
    s_add_error(r, 8, "boom\x01\n end");
}

// Parses the header and points the frames at the buffers; returns pywire_check_reply's code.
static int s_check(s_reply *r, int is_reset) {
    ck_assert_int_eq(s_parse(&r->hf, &r->h), APEX_OK);
    const uint8_t *data[5] = {r->obs, r->rew, r->flags, r->reset, r->errs};
    for (int i = 0; i < 5; i++) {
        r->f[i] = (pywire_frame_t){data[i], r->len[i]};
    }
    char err[512] = "";
    int rc = pywire_check_reply(&r->h, r->f, &r->sp, is_reset, err, sizeof err);
    ck_assert_msg(rc == APEX_OK || rc == APEX_EINVAL, "code %d", rc);
    ck_assert_msg(rc == APEX_OK ? err[0] == '\0' : err[0] != '\0', "rc %d, reason '%s'", rc, err);
    return rc;
}

START_TEST(test_reply_valid) {
    s_reply r;
    s_reply_default(&r);
    ck_assert_int_eq(s_check(&r, 0), APEX_OK);
    // The error record's text, printable only, and the pointer past it.
    const uint8_t *rec = r.f[4].data;
    char text[PYWIRE_ERR_TEXT_MAX + 1];
    pywire_take_error(&rec, text, sizeof text);
    ck_assert_str_eq(text, "boom?? end");
    ck_assert_ptr_eq(rec, r.f[4].data + r.f[4].len);
    // A RESET_DONE: start observations, only ERROR flags, no reset rows.
    s_reply_default(&r);
    r.hf.type = PYWIRE_RESET_DONE, r.hf.first = 0, r.hf.n_reset = 0;
    r.flags[1] = 0, r.flags[2] = PYWIRE_ERROR;
    r.len[3] = 0, r.len[4] = 0;
    s_add_error(&r, 2, "reset raised");
    ck_assert_int_eq(s_check(&r, 1), APEX_OK);
    // uint8 frames of shape (2, 2, 4) whose bytes would be NaN as float32: only bytes.
    s_reply_default(&r);
    r.hf.dtype = r.sp.dtype = PYWIRE_DT_UINT8;
    r.hf.ndim = r.sp.ndim = 3;
    r.hf.shape[0] = r.sp.shape[0] = 2, r.hf.shape[1] = r.sp.shape[1] = 2;
    r.hf.shape[2] = r.sp.shape[2] = 4;
    memset(r.obs, 0xff, sizeof r.obs);
    memset(r.reset, 0xff, sizeof r.reset);
    ck_assert_int_eq(s_check(&r, 0), APEX_OK);
    // No envs at all: nothing to read, nothing wrong (which envs a reply covers is the
    // handler's check: pywire_result_group).
    s_reply_default(&r);
    r.hf.n_envs = 0, r.hf.n_reset = 0, r.hf.n_error = 0;
    memset(r.len, 0, sizeof r.len);
    ck_assert_int_eq(s_check(&r, 0), APEX_OK);
}
END_TEST

// Every frame one byte short, one byte long, empty; counts that do not fit the frames.
START_TEST(test_reply_sizes) {
    s_reply r;
    for (int i = 0; i < 5; i++) {
        const long deltas[] = {-1, 1, -(long)sizeof r.errs};
        for (int d = 0; d < 3; d++) {
            s_reply_default(&r);
            long len = (long)r.len[i] + deltas[d];
            r.len[i] = len < 0 ? 0 : (size_t)len;
            ck_assert_msg(s_check(&r, 0) == APEX_EINVAL, "frame %d, %+ld", i, deltas[d]);
        }
    }
    const int64_t count_deltas[] = {-1, 1, (int64_t)UINT32_MAX - 2};
    for (int d = 0; d < 3; d++) {
        s_reply_default(&r);
        r.hf.n_reset = (uint32_t)(r.hf.n_reset + count_deltas[d]);
        ck_assert_int_eq(s_check(&r, 0), APEX_EINVAL);
        s_reply_default(&r);
        r.hf.n_error = (uint32_t)(r.hf.n_error + count_deltas[d]);
        ck_assert_int_eq(s_check(&r, 0), APEX_EINVAL);
        s_reply_default(&r);
        r.hf.n_envs = (uint32_t)(r.hf.n_envs + count_deltas[d]);
        ck_assert_int_eq(s_check(&r, 0), APEX_EINVAL);
    }
    // The largest n_envs with the real frames: refused on sizes, nothing read past them.
    s_reply_default(&r);
    r.hf.n_envs = UINT32_MAX;
    ck_assert_int_eq(s_check(&r, 0), APEX_EINVAL);
    // A RESET_DONE with reset rows.
    s_reply_default(&r);
    r.hf.type = PYWIRE_RESET_DONE;
    r.flags[1] = PYWIRE_ERROR, r.hf.n_error = 2;
    s_add_error(&r, 7, "x");
    ck_assert_int_eq(s_check(&r, 1), APEX_EINVAL);
}
END_TEST

// Row sizes from the HELLO times counts from the peer: a product that wraps around must not
// pass as a short frame. row_bytes 2^63 is no real run's, but the check must not depend on
// what the caller allowed (n = 2: 2 * 2^63 wraps to 0, the length of an empty frame).
START_TEST(test_reply_size_overflow) {
    s_reply r;
    s_reply_default(&r);
    r.sp.dtype = r.hf.dtype = PYWIRE_DT_UINT8; // no observation is read
    r.sp.row_bytes = (size_t)1 << 63;
    r.hf.n_envs = 2, r.hf.n_reset = 0, r.hf.n_error = 0;
    memset(r.flags, 0, sizeof r.flags);
    r.len[0] = 0, r.len[1] = 16, r.len[2] = 2, r.len[3] = 0, r.len[4] = 0;
    ck_assert_int_eq(s_check(&r, 0), APEX_EINVAL);
    // The same through n_reset: two resets of 2^63 bytes.
    r.sp.row_bytes = 16;
    r.hf.n_envs = 2, r.hf.n_reset = 2;
    r.flags[0] = r.flags[1] = PYWIRE_TRUNCATED | PYWIRE_RESET_FLAG;
    r.len[0] = 32, r.len[3] = 32;
    ck_assert_int_eq(s_check(&r, 0), APEX_OK); // the sane version passes
    r.sp.row_bytes = (size_t)1 << 63;
    r.len[0] = 0, r.len[3] = 0;
    ck_assert_int_eq(s_check(&r, 0), APEX_EINVAL);
}
END_TEST

// The flag rules of pywire.h, restated: known bits only; with ERROR neither TERMINATED nor
// TRUNCATED; without ERROR, RESET exactly when the episode ended; a RESET_DONE only ERROR.
static int s_flag_ok(uint8_t f, int is_reset) {
    int ended = (f & 3) != 0, reset = (f & 4) != 0, error = (f & 8) != 0;
    if (f > 15) {
        return 0;
    }
    if (is_reset) {
        return (f & ~8) == 0;
    }
    return error ? !ended : reset == ended;
}

// Every flag byte of a one-env reply, with the rows and records its bits call for, so that
// only the flag rule can fail.
START_TEST(test_reply_flags) {
    for (int is_reset = 0; is_reset < 2; is_reset++) {
        int ok_count = 0;
        for (int f = 0; f < 256; f++) {
            s_reply r;
            s_reply_default(&r);
            r.hf.type = is_reset ? PYWIRE_RESET_DONE : PYWIRE_RESULT;
            r.hf.first = is_reset ? 0 : 6;
            r.hf.n_envs = 1;
            r.flags[0] = (uint8_t)f;
            int reset = (f & 4) != 0, error = (f & 8) != 0;
            r.hf.n_reset = (uint32_t)reset;
            r.hf.n_error = (uint32_t)error;
            r.len[0] = 16, r.len[1] = 8, r.len[2] = 1, r.len[3] = reset ? 16 : 0, r.len[4] = 0;
            if (error) {
                s_add_error(&r, r.hf.first, "e");
            }
            int want = s_flag_ok((uint8_t)f, is_reset) && !(is_reset && reset);
            ck_assert_msg((s_check(&r, is_reset) == APEX_OK) == want, "flags 0x%02x, reset %d", f,
                          is_reset);
            ok_count += want;
        }
        // RESULT: 0, T|R, U|R, T|U|R, E, E|R; RESET_DONE: 0, E.
        ck_assert_int_eq(ok_count, is_reset ? 2 : 6);
    }
}
END_TEST

// Rewards travel as float64 and must be finite float32s.
START_TEST(test_reply_rewards) {
    const double bad[] = {NAN,
                          -NAN,
                          INFINITY,
                          -INFINITY,
                          1e300,
                          -1e300,
                          nextafter((double)FLT_MAX, INFINITY),
                          -nextafter((double)FLT_MAX, INFINITY)};
    const double good[] = {0.0, -0.0, (double)FLT_MAX, -(double)FLT_MAX, 1e-320, 1e38, -1e38};
    for (int k = 0; k < 3; k++) {
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            s_reply r;
            s_reply_default(&r);
            s_set_reward(&r, k, bad[i]);
            ck_assert_msg(s_check(&r, 0) == APEX_EINVAL, "env %d reward %g", k, bad[i]);
        }
        for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
            s_reply r;
            s_reply_default(&r);
            s_set_reward(&r, k, good[i]);
            ck_assert_msg(s_check(&r, 0) == APEX_OK, "env %d reward %g", k, good[i]);
        }
    }
    // A NaN with a payload, as raw bits.
    s_reply r;
    s_reply_default(&r);
    uint64_t nan_bits = 0x7ff0000000000001ull;
    memcpy(r.rew + 8, &nan_bits, 8);
    ck_assert_int_eq(s_check(&r, 0), APEX_EINVAL);
}
END_TEST

// float32 observations, in both the step rows and the reset rows, must be finite; every
// position of every row is looked at.
START_TEST(test_reply_obs_finite) {
    const uint32_t bad[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0xffffffffu};
    for (int rows = 0; rows < 2; rows++) {
        int n_rows = rows ? 2 : 3;
        for (int k = 0; k < n_rows; k++) {
            for (int i = 0; i < 4; i++) {
                for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
                    s_reply r;
                    s_reply_default(&r);
                    float v;
                    memcpy(&v, &bad[b], 4);
                    s_set_obs(rows ? r.reset : r.obs, k, i, v);
                    ck_assert_msg(s_check(&r, 0) == APEX_EINVAL, "%s row %d [%d] 0x%08x",
                                  rows ? "reset" : "obs", k, i, bad[b]);
                    // The same bytes as uint8 frames are just bytes.
                    r.hf.dtype = r.sp.dtype = PYWIRE_DT_UINT8;
                    r.hf.shape[0] = r.sp.shape[0] = 16;
                    ck_assert_int_eq(s_check(&r, 0), APEX_OK);
                }
            }
        }
    }
    s_reply r;
    s_reply_default(&r);
    s_set_obs(r.obs, 0, 0, FLT_MAX);
    s_set_obs(r.reset, 1, 3, -FLT_MAX);
    s_set_obs(r.obs, 1, 1, 1e-45f); // a denormal
    ck_assert_int_eq(s_check(&r, 0), APEX_OK);
}
END_TEST

// The spaces of a reply are the HELLO's: any field that differs is refused.
START_TEST(test_reply_spaces) {
    for (int k = 0; k < 8; k++) {
        s_reply r;
        s_reply_default(&r);
        switch (k) {
        case 0:
            r.hf.n_actions = 2;
            break;
        case 1:
            r.hf.n_actions = UINT32_MAX;
            break;
        case 2:
            r.hf.dtype = PYWIRE_DT_UINT8;
            break;
        case 3:
            r.hf.dtype = PYWIRE_DT_OTHER;
            break;
        case 4:
            r.hf.ndim = 2, r.hf.shape[1] = 1;
            break; // (4, 1): the same size
        case 5:
            r.hf.ndim = 0;
            break;
        case 6:
            r.hf.shape[0] = 5;
            break;
        default:
            r.hf.shape[3] = 1;
            break;
        }
        ck_assert_msg(s_check(&r, 0) == APEX_EINVAL, "case %d", k);
    }
}
END_TEST

START_TEST(test_reply_error_records) {
    char text[PYWIRE_ERR_TEXT_MAX + 1];
    memset(text, 'x', PYWIRE_ERR_TEXT_MAX);
    text[PYWIRE_ERR_TEXT_MAX] = '\0';
    for (int k = 0; k < 10; k++) {
        s_reply r;
        s_reply_default(&r);
        r.len[4] = 0;
        int want = APEX_EINVAL;
        switch (k) {
        case 0:
            s_add_error(&r, 8, text);
            want = APEX_OK;
            break; // the longest text
        case 1:    // one byte longer
            s_add_error(&r, 8, text);
            uint32_t too_long = PYWIRE_ERR_TEXT_MAX + 1;
            memcpy(r.errs + 4, &too_long, 4);
            r.errs[r.len[4]++] = 'x';
            break;
        case 2:
            s_add_error(&r, 7, "wrong env");
            break;
        case 3:
            s_add_error(&r, 9, "wrong env");
            break;
        case 4:
            s_add_error(&r, 2, "a local index, not first + k");
            break;
        case 5:
            break; // missing
        case 6:    // a length past the end of the frame
            s_add_error(&r, 8, "abc");
            r.errs[4] = 4;
            break;
        case 7: // a record cut inside its 8-byte head
            s_add_error(&r, 8, "abc");
            r.len[4] = 7;
            break;
        case 8: // a byte after the records
            s_add_error(&r, 8, "abc");
            r.errs[r.len[4]++] = 0;
            break;
        default: // a second record for an env without ERROR
            s_add_error(&r, 8, "abc");
            s_add_error(&r, 6, "extra");
            break;
        }
        ck_assert_msg(s_check(&r, 0) == want, "case %d", k);
    }
    // Two ERROR envs: their records in env order, not the other way round.
    s_reply r;
    s_reply_default(&r);
    r.flags[0] = PYWIRE_ERROR, r.hf.n_error = 2, r.len[4] = 0;
    s_add_error(&r, 8, "second");
    s_add_error(&r, 6, "first");
    ck_assert_int_eq(s_check(&r, 0), APEX_EINVAL);
    r.len[4] = 0;
    s_add_error(&r, 6, "first");
    s_add_error(&r, 8, "second");
    ck_assert_int_eq(s_check(&r, 0), APEX_OK);
    const uint8_t *rec = r.f[4].data;
    char out[8];
    pywire_take_error(&rec, out, sizeof out);
    ck_assert_str_eq(out, "first");
    pywire_take_error(&rec, out, 4); // truncated to its buffer, still terminated
    ck_assert_str_eq(out, "sec");
    ck_assert_ptr_eq(rec, r.f[4].data + r.f[4].len);
}
END_TEST

// ---------------------------------------------------------------------------------------
// The local transport: the reply is copied out of the shared memory before it is checked

// Writes r's frames into reply region `region` of l as a worker does: the lengths, then
// each frame at its 8-aligned offset after the 64-byte head (pylocal.h).
static void s_worker_write(pylocal_t *l, int region, const s_reply *r) {
    uint8_t *base = l->mem + (size_t)l->regions * l->req_bytes + (size_t)region * l->rep_bytes;
    const uint8_t *data[5] = {r->obs, r->rew, r->flags, r->reset, r->errs};
    uint32_t lens[5];
    size_t off = PYLOCAL_HEAD_BYTES;
    for (int i = 0; i < 5; i++) {
        lens[i] = (uint32_t)r->len[i];
        memcpy(base + off, data[i], r->len[i]);
        off = (off + r->len[i] + 7) & ~(size_t)7;
    }
    memcpy(base, lens, sizeof lens);
}

START_TEST(test_local_copies_first) {
    s_reply r;
    s_reply_default(&r);
    ck_assert_int_eq(s_check(&r, 0), APEX_OK);
    pylocal_t l;
    const int N = 3;
    ck_assert_int_eq(pylocal_init(&l, 2, pylocal_request_bytes(N, 0), pylocal_reply_bytes(N, 16)),
                     0);
    size_t cap = pylocal_reply_bytes(N, 16);
    uint8_t *scratch = malloc(cap), *copy = malloc(cap);
    ck_assert(scratch && copy);
    s_worker_write(&l, 1, &r);
    pywire_frame_t f[PYLOCAL_FRAMES];
    char err[256];
    ck_assert_int_eq(pylocal_take_frames(&l, 1, scratch, f, err, sizeof err), 0);
    for (int i = 0; i < 5; i++) { // the worker's frames, in the caller's memory
        ck_assert_uint_eq(f[i].len, r.len[i]);
        ck_assert(memcmp(f[i].data, r.f[i].data, r.len[i]) == 0);
        ck_assert(f[i].data >= scratch && f[i].data + f[i].len <= scratch + cap);
    }
    memcpy(copy, scratch, cap);
    // The worker scribbles over the region after the actor took it: lengths, rows, flags,
    // NaNs everywhere. What was taken does not change, and passes the check as it did.
    size_t region_off = (size_t)l.regions * l.req_bytes + l.rep_bytes;
    memset(l.mem + region_off, 0xff, l.rep_bytes);
    ck_assert(memcmp(copy, scratch, cap) == 0);
    ck_assert_int_eq(pywire_check_reply(&r.h, f, &r.sp, 0, err, sizeof err), APEX_OK);
    // Taken again now, the scribbled lengths do not fit the region: refused, not read.
    ck_assert_int_eq(pylocal_take_frames(&l, 1, scratch, f, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "overflows"));
    // Region 0 was never written: all lengths 0, five empty frames (refused by the check).
    ck_assert_int_eq(pylocal_take_frames(&l, 0, scratch, f, err, sizeof err), 0);
    ck_assert(f[0].len == 0 && f[4].len == 0);
    ck_assert_int_eq(pywire_check_reply(&r.h, f, &r.sp, 0, err, sizeof err), APEX_EINVAL);
    pylocal_fini(&l);
    free(scratch);
    free(copy);
}
END_TEST

// Frame lengths in the shared memory at and past the region's bound.
START_TEST(test_local_frame_bounds) {
    pylocal_t l;
    ck_assert_int_eq(pylocal_init(&l, 1, pylocal_request_bytes(1, 0), pylocal_reply_bytes(1, 16)),
                     0);
    uint8_t *scratch = malloc(l.rep_bytes);
    ck_assert_ptr_nonnull(scratch);
    uint8_t *base = l.mem + l.req_bytes;
    const size_t room = l.rep_bytes - PYLOCAL_HEAD_BYTES;
    static const struct {
        uint32_t lens[5];
        int ok;
    } cases[] = {
        {{0, 0, 0, 0, 0}, 1},
        {{0, 0, 0, 0, 0xffffffffu}, 0},
        {{0xffffffffu, 1, 0, 0, 0}, 0},
        {{0x80000000u, 0x80000000u, 0, 0, 0}, 0},
    };
    pywire_frame_t f[PYLOCAL_FRAMES];
    char err[256];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(base, cases[i].lens, sizeof cases[i].lens);
        ck_assert_int_eq(pylocal_take_frames(&l, 0, scratch, f, err, sizeof err) == 0, cases[i].ok);
    }
    // One frame filling the region exactly, then one byte more; the last frame likewise
    // after four 8-byte ones.
    uint32_t lens[5] = {(uint32_t)room, 0, 0, 0, 0};
    memcpy(base, lens, sizeof lens);
    ck_assert_int_eq(pylocal_take_frames(&l, 0, scratch, f, err, sizeof err), 0);
    ck_assert_uint_eq(f[0].len, room);
    lens[0]++;
    memcpy(base, lens, sizeof lens);
    ck_assert_int_eq(pylocal_take_frames(&l, 0, scratch, f, err, sizeof err), -1);
    uint32_t tail[5] = {8, 8, 8, 8, (uint32_t)(room - 32)};
    memcpy(base, tail, sizeof tail);
    ck_assert_int_eq(pylocal_take_frames(&l, 0, scratch, f, err, sizeof err), 0);
    ck_assert(f[4].data + f[4].len == scratch + l.rep_bytes);
    tail[4]++;
    memcpy(base, tail, sizeof tail);
    ck_assert_int_eq(pylocal_take_frames(&l, 0, scratch, f, err, sizeof err), -1);
    tail[3] = 9, tail[4] -= 1; // padding counts: 9 bytes take 16
    memcpy(base, tail, sizeof tail);
    ck_assert_int_eq(pylocal_take_frames(&l, 0, scratch, f, err, sizeof err), -1);
    pylocal_fini(&l);
    free(scratch);
}
END_TEST

// ---------------------------------------------------------------------------------------
// Text from peers, and names

START_TEST(test_text_helpers) {
    char out[8];
    pywire_copy_text(out, sizeof out, "ab\x7f\x80\n\tcdefgh", 12);
    ck_assert_str_eq(out, "ab????c"); // printable ASCII only, truncated and terminated
    pywire_copy_text(out, 1, "abc", 3);
    ck_assert_str_eq(out, "");
    out[0] = 'z';
    pywire_copy_text(out, 0, "abc", 3); // nothing written
    ck_assert_int_eq(out[0], 'z');
    pywire_copy_text(out, sizeof out, "a\0b", 3);
    ck_assert_str_eq(out, "a?b");
    char s[64];
    const uint32_t shape[PYWIRE_MAX_NDIM + 4] = {4, 10, 10, 7, 99, 99, 99, 99};
    pywire_shape_str(s, sizeof s, 1, shape);
    ck_assert_str_eq(s, "(4,)");
    pywire_shape_str(s, sizeof s, 0, shape);
    ck_assert_str_eq(s, "()");
    pywire_shape_str(s, sizeof s, 3, shape + 1);
    ck_assert_str_eq(s, "(10, 10, 7)");
    pywire_shape_str(s, sizeof s, 4, shape);
    ck_assert_str_eq(s, "(4, 10, 10, 7)");
    pywire_shape_str(s, sizeof s, 5, shape); // past the rank bound: no dim read
    ck_assert_str_eq(s, "(invalid)");
    pywire_shape_str(s, sizeof s, 255, shape);
    ck_assert_str_eq(s, "(invalid)");
    pywire_shape_str(s, 6, 3, shape + 1);
    ck_assert_str_eq(s, "(10, ");
    ck_assert_str_eq(pywire_dtype_name(PYWIRE_DT_FLOAT32), "float32");
    ck_assert_str_eq(pywire_dtype_name(PYWIRE_DT_UINT8), "uint8");
    ck_assert_str_eq(pywire_dtype_name(PYWIRE_DT_OTHER), "unsupported-dtype");
    ck_assert_str_eq(pywire_dtype_name(255), "unsupported-dtype");
}
END_TEST

Suite *pywire_suite(void) {
    Suite *s = suite_create("pywire");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_header_layout);
    tcase_add_test(tc, test_header_bounds);
    tcase_add_test(tc, test_hello_elements);
    tcase_add_test(tc, test_obs_fits);
    tcase_add_test(tc, test_hello_bounds);
    tcase_add_test(tc, test_spaces_equal);
    tcase_add_test(tc, test_result_group);
    tcase_add_test(tc, test_reply_valid);
    tcase_add_test(tc, test_reply_sizes);
    tcase_add_test(tc, test_reply_size_overflow);
    tcase_add_test(tc, test_reply_flags);
    tcase_add_test(tc, test_reply_rewards);
    tcase_add_test(tc, test_reply_obs_finite);
    tcase_add_test(tc, test_reply_spaces);
    tcase_add_test(tc, test_reply_error_records);
    tcase_add_test(tc, test_local_copies_first);
    tcase_add_test(tc, test_local_frame_bounds);
    tcase_add_test(tc, test_text_helpers);
    suite_add_tcase(s, tc);
    return s;
}
