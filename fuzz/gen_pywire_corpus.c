// gen_pywire_corpus.c: writes the seed corpus of fuzz_pywire, one worker message per file.
//
// Usage: gen_pywire_corpus <corpus dir>. Each file is a 72-byte header (pywire_header_init)
// followed by a local-transport reply region (pylocal.h: 5 x u32 frame lengths, padding to
// 64 bytes, the frames at 8-aligned offsets), the input format fuzz_pywire.c documents. For
// each of fuzz_pywire's profiles: a HELLO with its spaces, RESULTs of the first and the last
// group (episodes going on; ended and reset; an env fault with its error record) and a
// RESET_DONE with a failed reset, so that the seeds pass pywire_check_reply and reach every
// path behind it; then hostile variants of profile 0's RESULT, one rule broken in each.
// Fixed values, no randomness: rerunning gives the same bytes. Rerun with `make fuzz-corpus`
// after a change to pywire.h's format.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pylocal.h"
#include "pywire.h"

// The profiles of fuzz_pywire.c, by the same values (name, spaces, n envs per group, groups).
typedef struct {
    const char *name;
    pywire_spaces_t sp;
    uint32_t n, G, elems;
} s_profile_t;

static const s_profile_t s_profiles[] = {
    {"f32x4",
     {.n_actions = 2, .dtype = PYWIRE_DT_FLOAT32, .ndim = 1, .shape = {4}, .row_bytes = 16},
     2,
     2,
     4},
    {"u8x10x10x4",
     {.n_actions = 6, .dtype = PYWIRE_DT_UINT8, .ndim = 3, .shape = {10, 10, 4}, .row_bytes = 400},
     1,
     1,
     400},
    {"f32scalar", {.n_actions = 3, .dtype = PYWIRE_DT_FLOAT32, .ndim = 0, .row_bytes = 4}, 1, 4, 1},
    {"u8x2",
     {.n_actions = 2, .dtype = PYWIRE_DT_UINT8, .ndim = 1, .shape = {2}, .row_bytes = 2},
     3,
     1,
     2},
    {"f32x3_box2",
     {.action_dim = 2, .dtype = PYWIRE_DT_FLOAT32, .ndim = 1, .shape = {3}, .row_bytes = 12},
     1,
     2,
     3},
    // [env] obs_layout = chw: (4, 6, 6) frames sent channels last, header layout 1.
    {"u8x4x6x6_chw",
     {.n_actions = 4,
      .dtype = PYWIRE_DT_UINT8,
      .ndim = 3,
      .shape = {4, 6, 6},
      .layout = PYWIRE_LAYOUT_CHW,
      .row_bytes = 144},
     2,
     1,
     144},
};

#define FRAME_MAX 4096

typedef struct {
    pywire_header_t h;
    uint8_t f[5][FRAME_MAX];
    size_t len[5];
} s_msg_t;

static void s_add(s_msg_t *m, int i, const void *data, size_t len) {
    if (m->len[i] + len > FRAME_MAX) {
        fprintf(stderr, "gen_pywire_corpus: frame %d too long\n", i);
        exit(1);
    }
    memcpy(m->f[i] + m->len[i], data, len);
    m->len[i] += len;
}

// Row k of an observation: float32 values or 0/1 bytes.
static void s_add_row(s_msg_t *m, int frame, const s_profile_t *p, uint32_t k) {
    for (uint32_t i = 0; i < p->elems; i++) {
        if (p->sp.dtype == PYWIRE_DT_FLOAT32) {
            float v = 0.125f * (float)(k * p->elems + i) - 0.5f;
            s_add(m, frame, &v, 4);
        } else {
            uint8_t b = (uint8_t)((k + i) % 2);
            s_add(m, frame, &b, 1);
        }
    }
}

static void s_add_error(s_msg_t *m, uint32_t env, const char *text) {
    uint32_t len = (uint32_t)strlen(text);
    s_add(m, 4, &env, 4);
    s_add(m, 4, &len, 4);
    s_add(m, 4, text, len);
}

// Writes the header, then the region: lengths, padding, frames at 8-aligned offsets.
static int s_write_msg(const char *dir, const char *name, const s_msg_t *m) {
    static uint8_t buf[PYWIRE_HEADER_BYTES + PYLOCAL_HEAD_BYTES + 5 * (FRAME_MAX + 8)];
    memset(buf, 0, sizeof buf);
    memcpy(buf, &m->h, PYWIRE_HEADER_BYTES);
    uint8_t *region = buf + PYWIRE_HEADER_BYTES;
    size_t off = PYLOCAL_HEAD_BYTES;
    for (int i = 0; i < 5; i++) {
        uint32_t len = (uint32_t)m->len[i];
        memcpy(region + 4 * i, &len, 4);
        memcpy(region + off, m->f[i], m->len[i]);
        off = (off + m->len[i] + 7) & ~(size_t)7;
    }
    size_t total = PYWIRE_HEADER_BYTES + off;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(buf, 1, total, f) == total;
    if (f && fclose(f) != 0) {
        ok = 0;
    }
    if (!ok) {
        fprintf(stderr, "gen_pywire_corpus: %s: %s\n", path, strerror(errno));
    }
    return ok ? 0 : -1;
}

static void s_header(s_msg_t *m, const s_profile_t *p, pywire_type type, uint32_t n,
                     uint32_t first) {
    memset(m, 0, sizeof *m);
    pywire_header_init(&m->h, type, &p->sp, 0, 0x5eedf00d5eedf00dull, n, 42, first);
}

// A RESULT of group g: env k's flags from `kind` (0: every episode goes on; 1: every one
// ended, alternately terminated and truncated, and reset; 2: env 0 faulted and was reset,
// the others go on).
static void s_result(s_msg_t *m, const s_profile_t *p, uint32_t g, int kind) {
    s_header(m, p, PYWIRE_RESULT, p->n, g * p->n);
    for (uint32_t k = 0; k < p->n; k++) {
        uint8_t fl = 0;
        double r = 1.0 - 0.5 * k;
        if (kind == 1) {
            fl = (k % 2 ? PYWIRE_TRUNCATED : PYWIRE_TERMINATED) | PYWIRE_RESET_FLAG;
        } else if (kind == 2 && k == 0) {
            fl = PYWIRE_ERROR | PYWIRE_RESET_FLAG;
            r = 0.0;
        }
        s_add_row(m, 0, p, k);
        s_add(m, 1, &r, 8);
        s_add(m, 2, &fl, 1);
        if (fl & PYWIRE_RESET_FLAG) {
            s_add_row(m, 3, p, 100 + k);
            m->h.n_reset++;
        }
        if (fl & PYWIRE_ERROR) {
            s_add_error(m, m->h.first + k, "step raised ValueError: bad action");
            m->h.n_error++;
        }
    }
}

// The RESET_DONE of all N envs of a worker, the last one's reset failed.
static void s_reset_done(s_msg_t *m, const s_profile_t *p) {
    uint32_t N = p->n * p->G;
    s_header(m, p, PYWIRE_RESET_DONE, N, 0);
    for (uint32_t k = 0; k < N; k++) {
        uint8_t fl = k == N - 1 ? PYWIRE_ERROR : 0;
        double r = 0.0;
        s_add_row(m, 0, p, k);
        s_add(m, 1, &r, 8);
        s_add(m, 2, &fl, 1);
        if (fl) {
            s_add_error(m, k, "reset raised RuntimeError");
            m->h.n_error++;
        }
    }
}

// A HELLO; a continuous profile's has its bounds frame, [-2 .. -2 + D) then [2 .. 2 + D).
static void s_hello(s_msg_t *m, const s_profile_t *p) {
    s_header(m, p, PYWIRE_HELLO, p->n * p->G, 0);
    m->h.seq = 4242; // a HELLO's seq is its pid
    char text[256];
    snprintf(text, sizeof text,
             "make=tests/pyenv_faults.py:counter pid=4242 host=fuzz observation_space=%s "
             "action_space=%s(%u)",
             pywire_dtype_name(p->sp.dtype), p->sp.action_dim ? "Box" : "Discrete",
             p->sp.action_dim ? p->sp.action_dim : p->sp.n_actions);
    s_add(m, 0, text, strlen(text));
    for (int b = 0; b < 2 && p->sp.action_dim; b++) {
        for (int i = 0; i < p->sp.action_dim; i++) {
            float v = (b ? 2.0f : -2.0f) + (float)i;
            s_add(m, 1, &v, 4);
        }
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: gen_pywire_corpus <corpus dir>\n");
        return 2;
    }
    const char *dir = argv[1];
    static s_msg_t m;
    char name[128];
    int rc = 0;
    const size_t n_profiles = sizeof s_profiles / sizeof s_profiles[0];
    for (size_t i = 0; i < n_profiles; i++) {
        const s_profile_t *p = &s_profiles[i];
        s_hello(&m, p);
        snprintf(name, sizeof name, "hello_%s", p->name);
        rc |= s_write_msg(dir, name, &m);
        for (int kind = 0; kind < 3; kind++) {
            uint32_t g = kind == 1 ? p->G - 1 : 0;
            s_result(&m, p, g, kind);
            snprintf(name, sizeof name, "result_%s_%s", p->name,
                     kind == 0   ? "going_on"
                     : kind == 1 ? "ended_last_group"
                                 : "fault");
            rc |= s_write_msg(dir, name, &m);
        }
        s_reset_done(&m, p);
        snprintf(name, sizeof name, "reset_done_%s", p->name);
        rc |= s_write_msg(dir, name, &m);
    }

    // Hostile variants of profile 0's RESULT with a fault (env 0 ERROR|RESET, env 1 going
    // on), one rule broken in each.
    const s_profile_t *p = &s_profiles[0];
    float nan_f = __builtin_nanf("");
    double inf_d = __builtin_inf();
    s_result(&m, p, 0, 2);
    memcpy(m.f[0] + 16 + 4, &nan_f, 4); // env 1's observation
    rc |= s_write_msg(dir, "bad_obs_nan", &m);
    s_result(&m, p, 0, 2);
    memcpy(m.f[3] + 8, &nan_f, 4); // env 0's reset row
    rc |= s_write_msg(dir, "bad_reset_obs_nan", &m);
    s_result(&m, p, 0, 2);
    memcpy(m.f[1] + 8, &inf_d, 8);
    rc |= s_write_msg(dir, "bad_reward_inf", &m);
    s_result(&m, p, 0, 2);
    double big = 1e39; // finite as a double, beyond float32
    memcpy(m.f[1] + 8, &big, 8);
    rc |= s_write_msg(dir, "bad_reward_beyond_f32", &m);
    s_result(&m, p, 0, 2);
    m.f[2][1] = PYWIRE_RESET_FLAG; // RESET without an end, with its row and count
    m.h.n_reset++;
    s_add_row(&m, 3, p, 101);
    rc |= s_write_msg(dir, "bad_flags_reset_alone", &m);
    s_result(&m, p, 0, 2);
    m.f[2][0] = PYWIRE_ERROR | PYWIRE_TERMINATED | PYWIRE_RESET_FLAG;
    rc |= s_write_msg(dir, "bad_flags_error_ended", &m);
    s_result(&m, p, 0, 2);
    uint32_t env = 1; // a worker-local index where first + k belongs
    memcpy(m.f[4], &env, 4);
    rc |= s_write_msg(dir, "bad_record_env", &m);
    s_result(&m, p, 0, 2);
    uint32_t len = PYWIRE_ERR_TEXT_MAX + 1;
    memcpy(m.f[4] + 4, &len, 4);
    rc |= s_write_msg(dir, "bad_record_len", &m);
    s_result(&m, p, 0, 2);
    m.len[4]++; // a byte after the records
    rc |= s_write_msg(dir, "bad_record_trailing", &m);
    s_result(&m, p, 0, 2);
    m.h.n_reset = 0; // env 0 is flagged RESET: the count (and, so, the rows) disagree
    m.len[3] = 0;
    rc |= s_write_msg(dir, "bad_count_reset", &m);
    s_result(&m, p, 0, 2);
    m.len[0] -= 1;
    rc |= s_write_msg(dir, "bad_obs_short", &m);
    s_result(&m, p, 0, 2);
    m.h.shape[0] = 5;
    rc |= s_write_msg(dir, "bad_spaces_shape", &m);
    s_result(&m, &s_profiles[2], 0, 0); // one env per group: first 2^31 is no group
    m.h.first = 0x80000000u;
    rc |= s_write_msg(dir, "bad_group_first_2_31", &m);
    s_result(&m, p, 0, 0);
    m.h.version = PYWIRE_VERSION + 1;
    rc |= s_write_msg(dir, "bad_version2", &m);
    // A header alone, cut short: 40 bytes (the parser must refuse it, nothing more).
    s_result(&m, p, 0, 0);
    char path[1024];
    snprintf(path, sizeof path, "%s/bad_header_short", dir);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(&m.h, 1, 40, f) != 40 || fclose(f) != 0) {
        fprintf(stderr, "gen_pywire_corpus: %s: %s\n", path, strerror(errno));
        rc = -1;
    }
    // A frame table that does not fit the region.
    s_result(&m, p, 0, 2);
    static uint8_t buf[PYWIRE_HEADER_BYTES + PYLOCAL_HEAD_BYTES];
    memset(buf, 0, sizeof buf);
    memcpy(buf, &m.h, PYWIRE_HEADER_BYTES);
    uint32_t huge = 0xfffffff0u;
    memcpy(buf + PYWIRE_HEADER_BYTES + 4 * 4, &huge, 4);
    snprintf(path, sizeof path, "%s/bad_region_table", dir);
    f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, sizeof buf, f) != sizeof buf || fclose(f) != 0) {
        fprintf(stderr, "gen_pywire_corpus: %s: %s\n", path, strerror(errno));
        rc = -1;
    }
    return rc ? 1 : 0;
}
