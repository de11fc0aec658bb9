// check_tbevents.c: TensorBoard event files. The byte-level vectors of the notes (CRC-32C,
// masked CRCs, the two Event encodings and their framing CRCs); files read back record by
// record by a small protobuf decoder of this file's own (not protobuf-c); the file-name rule
// and two files in one second; write failures (a file-size limit, which stops root too)
// that keep every earlier record readable; and the independent Python reader
// tests/tb_read.py (official protobuf runtime), whose CSV must equal what was written.
#include "check_apex.h"

#include "apex.h"
#include "fileio.h"
#include "tbevents.h"
#include "xalloc.h"

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

// ---------------------------------------------------------------------------------------
// helpers: files, hex, hostnames

static unsigned char *s_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = xmalloc((size_t)n + 1);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static size_t s_unhex(unsigned char *out, const char *hex) {
    size_t n = strlen(hex) / 2;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        ck_assert_int_eq(sscanf(hex + 2 * i, "%2x", &v), 1);
        out[i] = (unsigned char)v;
    }
    return n;
}

static uint32_t s_u32le(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

// The expected framed record of data: the notes' length CRC and data CRC given literally.
static size_t s_expected_record(unsigned char *out, const char *hex, uint32_t len_crc,
                                uint32_t data_crc) {
    unsigned char data[256];
    size_t n = s_unhex(data, hex);
    memset(out, 0, 8);
    out[0] = (unsigned char)n; // < 256 here
    for (int i = 0; i < 4; i++) {
        out[8 + i] = (unsigned char)(len_crc >> (8 * i));
        out[12 + n + (size_t)i] = (unsigned char)(data_crc >> (8 * i));
    }
    memcpy(out + 12, data, n);
    return n + 16;
}

static const char *s_host(void) {
    static char host[256];
    if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') {
        snprintf(host, sizeof host, "localhost");
    }
    return host;
}

static const char *s_basename(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static int s_cmp_names(const void *a, const void *b) { return strcmp(a, b); }

// Event files of dir (names containing "tfevents"), sorted; returns how many.
static int s_list(const char *dir, char names[][256], int max) {
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strstr(e->d_name, "tfevents") && n < max) {
            snprintf(names[n++], 256, "%s", e->d_name);
        }
    }
    closedir(d);
    qsort(names, (size_t)n, 256, s_cmp_names);
    return n;
}

// ---------------------------------------------------------------------------------------
// an independent decoder: TFRecord framing, then Event / Summary / Value by hand

#define S_MAX_VALUES 16
#define S_TAG_MAX 128

typedef struct {
    double wall_time;
    int64_t step;
    char file_version[64]; // "" when absent
    int has_summary;
    int n;
    char tags[S_MAX_VALUES][S_TAG_MAX]; // cut to S_TAG_MAX - 1 bytes
    size_t tag_len[S_MAX_VALUES];       // the full length
    float values[S_MAX_VALUES];
} s_event;

static uint64_t s_varint(const unsigned char **p, const unsigned char *end) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        ck_assert_msg(*p < end, "varint runs past its field");
        unsigned char b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            return v;
        }
    }
    ck_abort_msg("varint longer than 10 bytes");
    return 0;
}

// A length-delimited field: returns its start and sets *n, after checking it fits.
static const unsigned char *s_bytes(const unsigned char **p, const unsigned char *end, size_t *n) {
    *n = (size_t)s_varint(p, end);
    ck_assert_msg(*n <= (size_t)(end - *p), "length-delimited field runs past its message");
    const unsigned char *s = *p;
    *p += *n;
    return s;
}

static void s_parse_value(const unsigned char *p, const unsigned char *end, s_event *ev) {
    ck_assert_int_lt(ev->n, S_MAX_VALUES);
    int i = ev->n++, has_value = 0;
    ev->tags[i][0] = '\0';
    while (p < end) {
        uint64_t key = s_varint(&p, end);
        if (key == 0x0a) { // tag = 1, length-delimited
            size_t n;
            const unsigned char *s = s_bytes(&p, end, &n);
            ev->tag_len[i] = n;
            n = APEX_MIN(n, (size_t)S_TAG_MAX - 1);
            memcpy(ev->tags[i], s, n);
            ev->tags[i][n] = '\0';
        } else if (key == 0x15) { // simple_value = 2, fixed32
            ck_assert_int_ge(end - p, 4);
            uint32_t bits = s_u32le(p);
            memcpy(&ev->values[i], &bits, 4);
            p += 4;
            has_value = 1;
        } else {
            ck_abort_msg("unexpected key 0x%llx in Summary.Value", (unsigned long long)key);
        }
    }
    ck_assert_msg(has_value, "Summary.Value without simple_value");
}

static void s_parse_event(const unsigned char *p, size_t len, s_event *ev) {
    const unsigned char *end = p + len;
    memset(ev, 0, sizeof *ev);
    while (p < end) {
        uint64_t key = s_varint(&p, end);
        size_t n;
        const unsigned char *s;
        switch (key) {
        case 0x09: // wall_time = 1, fixed64 double
            ck_assert_int_ge(end - p, 8);
            uint64_t bits = (uint64_t)s_u32le(p) | (uint64_t)s_u32le(p + 4) << 32;
            memcpy(&ev->wall_time, &bits, 8);
            p += 8;
            break;
        case 0x10: // step = 2, varint
            ev->step = (int64_t)s_varint(&p, end);
            break;
        case 0x1a: // file_version = 3
            s = s_bytes(&p, end, &n);
            ck_assert_uint_lt(n, sizeof ev->file_version);
            memcpy(ev->file_version, s, n);
            break;
        case 0x2a: { // summary = 5, whose field 1 repeats Value
            s = s_bytes(&p, end, &n);
            ev->has_summary = 1;
            const unsigned char *q = s, *qend = s + n;
            while (q < qend) {
                ck_assert_uint_eq(s_varint(&q, qend), 0x0a);
                size_t vn;
                const unsigned char *v = s_bytes(&q, qend, &vn);
                s_parse_value(v, v + vn, ev);
            }
            break;
        }
        default:
            ck_abort_msg("unexpected key 0x%llx in Event", (unsigned long long)key);
        }
    }
}

// Reads every record of path, checking both CRCs of each and that nothing follows the last
// one; parses up to max events into out. Returns the number of records.
static int s_read_records(const char *path, s_event *out, int max) {
    size_t len;
    unsigned char *buf = s_slurp(path, &len);
    int n = 0;
    size_t off = 0;
    while (off < len) {
        ck_assert_msg(len - off >= 12, "%s:%zu: truncated header", path, off);
        uint64_t dlen = (uint64_t)s_u32le(buf + off) | (uint64_t)s_u32le(buf + off + 4) << 32;
        ck_assert_msg(tbevents_masked_crc(buf + off, 8) == s_u32le(buf + off + 8),
                      "%s:%zu: length CRC", path, off);
        ck_assert_msg(dlen + 16 <= len - off, "%s:%zu: truncated record", path, off);
        const unsigned char *data = buf + off + 12;
        ck_assert_msg(tbevents_masked_crc(data, (size_t)dlen) == s_u32le(data + dlen),
                      "%s:%zu: data CRC", path, off);
        ck_assert_int_lt(n, max);
        s_parse_event(data, (size_t)dlen, &out[n++]);
        off += (size_t)dlen + 16;
    }
    free(buf);
    return n;
}

static int s_same_float(float a, float b) {
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

// ---------------------------------------------------------------------------------------
// byte-level vectors (tensorboard notes)

#define S_EV_VERSION_HEX "09000000000000f03f1a0d627261696e2e4576656e743a32"
#define S_EV_LOSS_HEX "09000000000000f03f10052a0d0a0b0a046c6f7373150000003f"

START_TEST(test_crc_vectors) {
    ck_assert_uint_eq(fileio_crc32c(0, "123456789", 9), 0xE3069283u);
    unsigned char zeros[32] = {0};
    ck_assert_uint_eq(fileio_crc32c(0, zeros, sizeof zeros), 0x8a9136aau);
    ck_assert_uint_eq(tbevents_masked_crc("", 0), 0xa282ead8u);
    // rustboard's masked_crc test: an Event with field 3, "CRC test, one two" (17 bytes).
    static const char rb[] = "\x1a\x11" // split: "\x11C" would be one hex escape
                             "CRC test, one two";
    ck_assert_uint_eq(tbevents_masked_crc(rb, sizeof rb - 1), 0x5794d08au);
    // The framing CRCs of the two Events: over the 8 length bytes, and over the data.
    unsigned char len8[8] = {24}, data[64];
    ck_assert_uint_eq(tbevents_masked_crc(len8, 8), 0x224b7fa3u);
    size_t n = s_unhex(data, S_EV_VERSION_HEX);
    ck_assert_uint_eq(n, 24);
    ck_assert_uint_eq(tbevents_masked_crc(data, n), 0x7a57bf86u);
    len8[0] = 26;
    ck_assert_uint_eq(tbevents_masked_crc(len8, 8), 0x2dd89b12u);
    n = s_unhex(data, S_EV_LOSS_HEX);
    ck_assert_uint_eq(n, 26);
    ck_assert_uint_eq(tbevents_masked_crc(data, n), 0xf98f6d1eu);
}
END_TEST

START_TEST(test_file_bytes_match_vectors) {
    // Event{wall_time 1, file_version} then Event{wall_time 1, step 5, summary{loss 0.5}}:
    // the whole file must be exactly the two framed records of the notes.
    const char *dir = check_tmpdir();
    tbevents_t *w = tbevents_new_at(dir, 1.0);
    ck_assert_ptr_nonnull(w);
    unsigned char want[128];
    size_t n1 = s_expected_record(want, S_EV_VERSION_HEX, 0x224b7fa3u, 0x7a57bf86u);
    size_t got_len;
    unsigned char *got = s_slurp(tbevents_path(w), &got_len);
    ck_assert_uint_eq(got_len, n1); // the first record is written and flushed by new
    ck_assert(memcmp(got, want, n1) == 0);
    free(got);

    const char *tags[] = {"loss"};
    double values[] = {0.5};
    ck_assert_int_eq(tbevents_scalars(w, 5, 1.0, tags, values, 1), APEX_OK);
    ck_assert_int_eq(tbevents_pending(w), 1);
    got = s_slurp(tbevents_path(w), &got_len);
    ck_assert_uint_eq(got_len, n1); // buffered, not yet written
    free(got);
    ck_assert_int_eq(tbevents_flush(w), APEX_OK);
    ck_assert_int_eq(tbevents_pending(w), 0);
    size_t n2 = s_expected_record(want + n1, S_EV_LOSS_HEX, 0x2dd89b12u, 0xf98f6d1eu);
    got = s_slurp(tbevents_path(w), &got_len);
    ck_assert_uint_eq(got_len, n1 + n2);
    ck_assert(memcmp(got, want, n1 + n2) == 0);
    free(got);
    tbevents_destroy(&w);
    ck_assert_ptr_null(w);
    tbevents_destroy(&w); // NULL is fine
    tbevents_destroy(NULL);
    check_rmtree(dir);
}
END_TEST

// ---------------------------------------------------------------------------------------
// read back

// Step i of s_write_steps: 3 scalars whose values are exact in float.
static const char *const s_tags3[] = {"train/loss", "replay/size", "time/train_frac"};
static void s_step_values(int i, double v[3]) {
    v[0] = 0.25 * i;
    v[1] = -(double)i;
    v[2] = i % 2 ? 0.0 : 1.5;
}

static int s_write_steps(tbevents_t *w, int from, int to) {
    int rc = APEX_OK;
    for (int i = from; i < to; i++) {
        double v[3];
        s_step_values(i, v);
        int r = tbevents_scalars(w, (int64_t)i * 100, 1000.0 + i, s_tags3, v, 3);
        rc = rc == APEX_OK ? r : rc;
    }
    return rc;
}

// The file must hold the version record then exactly the given steps, in order.
static void s_check_steps(const char *path, const int *steps, int n) {
    s_event *ev = xcalloc((size_t)n + 2, sizeof *ev);
    int got = s_read_records(path, ev, n + 2);
    ck_assert_int_eq(got, n + 1);
    ck_assert_str_eq(ev[0].file_version, TBEVENTS_FILE_VERSION);
    ck_assert(!ev[0].has_summary);
    for (int k = 0; k < n; k++) {
        const s_event *e = &ev[k + 1];
        int i = steps[k];
        double v[3];
        s_step_values(i, v);
        ck_assert_str_eq(e->file_version, "");
        ck_assert(e->has_summary);
        ck_assert_int_eq(e->step, (int64_t)i * 100);
        ck_assert(e->wall_time == 1000.0 + i);
        ck_assert_int_eq(e->n, 3);
        for (int j = 0; j < 3; j++) {
            ck_assert_str_eq(e->tags[j], s_tags3[j]);
            ck_assert(s_same_float(e->values[j], (float)v[j]));
        }
    }
    free(ev);
}

START_TEST(test_read_back_records) {
    const char *dir = check_tmpdir();
    char sub[600];
    snprintf(sub, sizeof sub, "%s/a/b/tb", dir); // mkdir -p
    tbevents_t *w = tbevents_new_at(sub, 1.0);
    ck_assert_ptr_nonnull(w);
    // Flushed now and then, and between flushes often enough more than the buffer holds
    // (~900 of these records), so that tbevents_scalars also flushes by itself.
    enum { N = 3000 };
    int *steps = xmalloc(N * sizeof *steps);
    for (int i = 0; i < N; i++) {
        steps[i] = i;
        ck_assert_int_eq(s_write_steps(w, i, i + 1), APEX_OK);
        if (i % 1300 == 7 || i == 20) {
            ck_assert_int_eq(tbevents_flush(w), APEX_OK);
        }
        if (i == 1306) { // 1286 records since the last flush: some were written to make room
            ck_assert_int_lt(tbevents_pending(w), 1286);
        }
    }
    char path[1024];
    snprintf(path, sizeof path, "%s", tbevents_path(w));
    tbevents_destroy(&w); // flushes the rest
    s_check_steps(path, steps, N);
    free(steps);
    check_rmtree(dir);
}
END_TEST

START_TEST(test_special_values_and_sizes) {
    // Zero wall time and zero step (proto3 leaves them out: the reader's default is the same
    // zero), negative and large steps, an empty summary, float edge cases, and a record
    // larger than the initial buffer (it grows).
    const char *dir = check_tmpdir();
    tbevents_t *w = tbevents_new_at(dir, 0.0);
    ck_assert_ptr_nonnull(w);
    char want_name[512];
    snprintf(want_name, sizeof want_name, "events.out.tfevents.0000000000.%s", s_host());
    ck_assert_str_eq(s_basename(tbevents_path(w)), want_name);
    const char *tags[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"};
    double v[] = {0.0, -0.0, 0.1, 1e-45, 3.4e38, 1e39, -INFINITY, NAN, 123456789.0, -2.5};
    ck_assert_int_eq(tbevents_scalars(w, 0, 0.0, tags, v, 10), APEX_OK);
    ck_assert_int_eq(tbevents_scalars(w, -3, 1.5, tags, v, 0), APEX_OK);
    ck_assert_int_eq(tbevents_scalars(w, (int64_t)1 << 40, 2.5, tags + 9, v + 9, 1), APEX_OK);
    static char big[S_MAX_VALUES][5001]; // 16 tags of 5000 bytes: more than the buffer
    const char *bt[S_MAX_VALUES];
    double bv[S_MAX_VALUES];
    for (int i = 0; i < S_MAX_VALUES; i++) {
        memset(big[i], 'x', 5000);
        big[i][0] = (char)('A' + i);
        big[i][5000] = '\0';
        bt[i] = big[i];
        bv[i] = i;
    }
    ck_assert_int_eq(tbevents_scalars(w, 7, 3.0, bt, bv, S_MAX_VALUES), APEX_OK);
    ck_assert_int_eq(tbevents_pending(w), 1); // the three before it were written to make room
    char path[1024];
    snprintf(path, sizeof path, "%s", tbevents_path(w));
    tbevents_destroy(&w);

    s_event ev[6];
    ck_assert_int_eq(s_read_records(path, ev, 6), 5);
    ck_assert(ev[0].wall_time == 0.0);
    ck_assert_str_eq(ev[0].file_version, TBEVENTS_FILE_VERSION);
    ck_assert(ev[1].has_summary && ev[1].step == 0 && ev[1].wall_time == 0.0 && ev[1].n == 10);
    for (int i = 0; i < 10; i++) {
        ck_assert_str_eq(ev[1].tags[i], tags[i]);
        ck_assert_msg(s_same_float(ev[1].values[i], (float)v[i]), "value %d: %a", i,
                      (double)ev[1].values[i]);
    }
    ck_assert(signbit(ev[1].values[1]));
    ck_assert(isinf(ev[1].values[5]) && ev[1].values[5] > 0);
    ck_assert(ev[2].has_summary && ev[2].step == -3 && ev[2].wall_time == 1.5 && ev[2].n == 0);
    ck_assert(ev[3].step == (int64_t)1 << 40 && ev[3].n == 1 && ev[3].values[0] == -2.5f);
    ck_assert(ev[4].step == 7 && ev[4].n == S_MAX_VALUES);
    for (int i = 0; i < S_MAX_VALUES; i++) {
        ck_assert_uint_eq(ev[4].tag_len[i], 5000);
        ck_assert_int_eq(ev[4].tags[i][0], 'A' + i);
        ck_assert(ev[4].values[i] == (float)i);
    }
    check_rmtree(dir);
}
END_TEST

START_TEST(test_record_too_large) {
    // TBEVENTS_MAX_TAGS tags of 1100 bytes: over TBEVENTS_RECORD_MAX, refused, nothing kept.
    const char *dir = check_tmpdir();
    tbevents_t *w = tbevents_new_at(dir, 1.0);
    ck_assert_ptr_nonnull(w);
    char *tag = xmalloc(1101);
    memset(tag, 't', 1100);
    tag[1100] = '\0';
    const char **tags = xmalloc(TBEVENTS_MAX_TAGS * sizeof *tags);
    double *v = xcalloc(TBEVENTS_MAX_TAGS, sizeof *v);
    for (int i = 0; i < TBEVENTS_MAX_TAGS; i++) {
        tags[i] = tag;
    }
    ck_assert_int_eq(tbevents_scalars(w, 1, 1.0, tags, v, TBEVENTS_MAX_TAGS), APEX_EINVAL);
    ck_assert_int_eq(tbevents_pending(w), 0);
    // The largest legal count with short tags is fine.
    for (int i = 0; i < TBEVENTS_MAX_TAGS; i++) {
        tags[i] = "train/x";
    }
    ck_assert_int_eq(tbevents_scalars(w, 1, 1.0, tags, v, TBEVENTS_MAX_TAGS), APEX_OK);
    ck_assert_int_eq(tbevents_flush(w), APEX_OK);
    ck_assert_uint_eq(tbevents_dropped(w), 0);
    tbevents_destroy(&w);
    free(tag);
    free(tags);
    free(v);
    check_rmtree(dir);
}
END_TEST

START_TEST(test_negative_count_aborts) {
    const char *dir = check_tmpdir();
    tbevents_t *w = tbevents_new_at(dir, 1.0);
    ck_assert_ptr_nonnull(w);
    check_rmtree(dir);                           // the abort below skips any cleanup
    tbevents_scalars(w, 0, 1.0, NULL, NULL, -1); // a programming error: asserts
}
END_TEST

// ---------------------------------------------------------------------------------------
// file names

START_TEST(test_file_names) {
    // Three writers opened in one second: the plain name, then ".001", ".002", each sorting
    // after the one before, each a complete file of its own.
    const char *dir = check_tmpdir();
    tbevents_t *w[3];
    for (int i = 0; i < 3; i++) {
        w[i] = tbevents_new_at(dir, 1234567890.75 + 0.1 * i);
        ck_assert_ptr_nonnull(w[i]);
    }
    char want[512];
    snprintf(want, sizeof want, "events.out.tfevents.1234567890.%s", s_host());
    ck_assert_str_eq(s_basename(tbevents_path(w[0])), want);
    strcat(want, ".001");
    ck_assert_str_eq(s_basename(tbevents_path(w[1])), want);
    want[strlen(want) - 1] = '2';
    ck_assert_str_eq(s_basename(tbevents_path(w[2])), want);
    ck_assert_int_lt(strcmp(tbevents_path(w[0]), tbevents_path(w[1])), 0);
    ck_assert_int_lt(strcmp(tbevents_path(w[1]), tbevents_path(w[2])), 0);
    // A later second sorts after all of them.
    tbevents_t *later = tbevents_new_at(dir, 1234567891.0);
    ck_assert_ptr_nonnull(later);
    ck_assert_int_lt(strcmp(tbevents_path(w[2]), tbevents_path(later)), 0);
    for (int i = 0; i < 3; i++) {
        int step = i;
        double v[3];
        s_step_values(i, v);
        ck_assert_int_eq(s_write_steps(w[i], i, i + 1), APEX_OK);
        char path[1024];
        snprintf(path, sizeof path, "%s", tbevents_path(w[i]));
        tbevents_destroy(&w[i]);
        s_check_steps(path, &step, 1);
    }
    tbevents_destroy(&later);
    char names[8][256];
    ck_assert_int_eq(s_list(dir, names, 8), 4);

    // The current time: ten digits, this host.
    tbevents_t *now = tbevents_new(dir);
    ck_assert_ptr_nonnull(now);
    const char *b = s_basename(tbevents_path(now));
    ck_assert_int_eq(strncmp(b, "events.out.tfevents.", 20), 0);
    for (int i = 20; i < 30; i++) {
        ck_assert(b[i] >= '0' && b[i] <= '9');
    }
    ck_assert_int_eq(b[30], '.');
    ck_assert_int_eq(strncmp(b + 31, s_host(), strlen(s_host())), 0);
    tbevents_destroy(&now);
    check_rmtree(dir);
}
END_TEST

START_TEST(test_bad_directories) {
    // A path through a regular file, and one through a device: NULL (logged), no crash.
    const char *dir = check_tmpdir();
    char file[600], sub[700];
    snprintf(file, sizeof file, "%s/plain", dir);
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    snprintf(sub, sizeof sub, "%s/tb", file);
    ck_assert_ptr_null(tbevents_new_at(sub, 1.0));
    ck_assert_ptr_null(tbevents_new_at(file, 1.0));
    ck_assert_ptr_null(tbevents_new_at("/dev/full", 1.0));
    check_rmtree(dir);
}
END_TEST

// ---------------------------------------------------------------------------------------
// write failures: a file-size limit (RLIMIT_FSIZE) makes write(2) fail with EFBIG part way,
// as a full disk does with ENOSPC, and unlike permission bits it stops root too. Each test
// runs in its own forked process (CK_FORK), so the limit dies with it. The limit applies to
// every file of the process, Check's own message file too (every ck_assert appends to it),
// so nothing is asserted while it is on: the results are kept and checked after.

static int s_limit_file_size(rlim_t bytes) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {bytes, RLIM_INFINITY};
    return setrlimit(RLIMIT_FSIZE, &rl);
}

static long long s_file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

START_TEST(test_failed_write_keeps_records_and_retries) {
    const char *dir = check_tmpdir();
    tbevents_t *w = tbevents_new_at(dir, 1.0);
    ck_assert_ptr_nonnull(w);
    const char *path = tbevents_path(w);
    ck_assert_int_eq(s_write_steps(w, 0, 10), APEX_OK);
    ck_assert_int_eq(tbevents_flush(w), APEX_OK);
    long long size0 = s_file_size(path);
    int steps[30];
    for (int i = 0; i < 30; i++) {
        steps[i] = i;
    }

    // Room for a record and a half: the flush writes part of the 20 and fails, twice.
    int lim = s_limit_file_size((rlim_t)size0 + 100);
    int buffered = s_write_steps(w, 10, 30); // only buffered
    int flush1 = tbevents_flush(w);
    long long size1 = s_file_size(path);
    int pending1 = tbevents_pending(w);
    int flush2 = tbevents_flush(w);
    long long size2 = s_file_size(path);
    int pending2 = tbevents_pending(w);
    int unlim = s_limit_file_size(RLIM_INFINITY);
    ck_assert(lim == 0 && unlim == 0);
    ck_assert_int_eq(buffered, APEX_OK);
    ck_assert_int_eq(flush1, APEX_ENOSPC);
    ck_assert_int_eq(size1, size0); // cut back to the last complete record
    ck_assert_int_eq(pending1, 20);
    ck_assert_int_eq(flush2, APEX_ENOSPC); // still full: the same state
    ck_assert_int_eq(size2, size0);
    ck_assert_int_eq(pending2, 20);
    s_check_steps(path, steps, 10);

    // The disk has recovered: the retry writes all of them, in order, nothing lost.
    ck_assert_int_eq(tbevents_flush(w), APEX_OK);
    ck_assert_int_eq(tbevents_pending(w), 0);
    ck_assert_uint_eq(tbevents_dropped(w), 0);
    s_check_steps(path, steps, 30);
    tbevents_destroy(&w);
    check_rmtree(dir);
}
END_TEST

START_TEST(test_full_buffer_drops_oldest_pending) {
    // While writes fail the records pile up; when the buffer is full the ones that could not
    // be written are dropped and counted, the new one is kept, and the file stays valid.
    const char *dir = check_tmpdir();
    tbevents_t *w = tbevents_new_at(dir, 1.0);
    ck_assert_ptr_nonnull(w);
    char path[1024];
    snprintf(path, sizeof path, "%s", tbevents_path(w));
    ck_assert_int_eq(s_write_steps(w, 0, 5), APEX_OK);
    ck_assert_int_eq(tbevents_flush(w), APEX_OK);
    long long size0 = s_file_size(path);
    int lim = s_limit_file_size((rlim_t)size0);
    int i = 5, rc = APEX_OK;
    for (; rc == APEX_OK && i < 100000; i++) {
        rc = s_write_steps(w, i, i + 1);
    }
    int last = i - 1; // the record that found the buffer full is the only one kept
    uint64_t dropped = tbevents_dropped(w);
    int pending = tbevents_pending(w);
    long long size1 = s_file_size(path);
    int next = s_write_steps(w, i, i + 1); // room again: just buffered
    int unlim = s_limit_file_size(RLIM_INFINITY);
    ck_assert(lim == 0 && unlim == 0);
    ck_assert_int_eq(rc, APEX_ENOSPC);
    ck_assert_uint_eq(dropped, (uint64_t)(last - 5));
    ck_assert_int_gt(last - 5, 500); // a 64 KiB buffer of ~70-byte records
    ck_assert_int_eq(pending, 1);
    ck_assert_int_eq(size1, size0);
    ck_assert_int_eq(next, APEX_OK);
    tbevents_destroy(&w); // flushes the two
    int steps[] = {0, 1, 2, 3, 4, last, i};
    s_check_steps(path, steps, 7);
    check_rmtree(dir);
}
END_TEST

START_TEST(test_first_record_failure) {
    // Not even the first record fits: NULL, and no empty file is left behind.
    const char *dir = check_tmpdir();
    int lim = s_limit_file_size(10);
    tbevents_t *w = tbevents_new_at(dir, 1.0);
    int unlim = s_limit_file_size(RLIM_INFINITY);
    ck_assert(lim == 0 && unlim == 0);
    ck_assert_ptr_null(w);
    char names[4][256];
    ck_assert_int_eq(s_list(dir, names, 4), 0);
    check_rmtree(dir);
}
END_TEST

// ---------------------------------------------------------------------------------------
// the independent reader: tests/tb_read.py with the official protobuf runtime

#define S_PY "/usr/bin/python3"
#define S_PY_SKIP 77 // tb_read.py: python3-protobuf missing

// Runs tb_read.py on dir; returns its exit status, the CSV in *csv (caller frees). Its
// stderr is shown when the exit status is not want.
static int s_run_reader(const char *dir, char **csv, int want) {
    const char *root = getenv("APEX_SRC_DIR");
    char cmd[2048], err[700];
    snprintf(err, sizeof err, "%s.err", dir);
    snprintf(cmd, sizeof cmd, "%s '%s/tests/tb_read.py' '%s' 2>'%s'", S_PY,
             root && *root ? root : ".", dir, err);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t cap = 1 << 16, len = 0;
    char *buf = xmalloc(cap);
    for (size_t n; (n = fread(buf + len, 1, cap - len - 1, p)) > 0;) {
        len += n;
        if (cap - len < 1024) {
            cap *= 2;
            buf = xrealloc(buf, cap);
        }
    }
    buf[len] = '\0';
    int st = pclose(p);
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    if (rc != want) {
        size_t elen = 0;
        unsigned char *e = s_slurp(err, &elen);
        fprintf(stderr, "tb_read.py %s: exit %d: %.*s\n", dir, rc, (int)elen, (const char *)e);
        free(e);
    }
    unlink(err);
    *csv = buf;
    return rc;
}

// 1 when the reader can run here; else 0 after saying so (check_reference_missing: a
// visible skip, or under CI=true a failure).
static int s_reader_available(void) {
    static const char *test = "check_tbevents: test_python_reader_sees_what_was_written";
    if (access(S_PY, X_OK) != 0) {
        check_reference_missing(test, "no " S_PY);
        return 0;
    }
    if (system(S_PY " -c 'import google.protobuf' 2>/dev/null") != 0) {
        check_reference_missing(test, S_PY " has no google.protobuf (scripts/install-deps.sh "
                                           "installs python3-protobuf)");
        return 0;
    }
    return 1;
}

typedef struct {
    int64_t step;
    const char *tag;
    double value;
} s_scalar;

START_TEST(test_python_reader_sees_what_was_written) {
    if (!s_reader_available()) {
        return;
    }
    const char *dir = check_tmpdir();
    static const s_scalar want[] = {
        {0, "train/loss", 0.0},
        {0, "replay/size", -0.0},
        {100, "train/loss", 0.1},
        {100, "replay/size", 123456789.0},
        {200, "train/loss", 1e-45},
        {200, "replay/size", 3.4e38},
        {300, "train/loss", 1e39},
        {300, "replay/size", -INFINITY},
        {-4, "train/loss", NAN},
        {-4, "replay/size", -2.5},
        {(int64_t)1 << 40, "actors/mean_return_100", 195.25},
        {(int64_t)1 << 40, "time/train_frac", 0.3333333333},
    };
    int n = (int)APEX_ARRAY_LEN(want);
    // Two writers in one second: the second file sorts after the first and is read after it.
    tbevents_t *w = tbevents_new_at(dir, 1700000000.25);
    ck_assert_ptr_nonnull(w);
    for (int i = 0; i < n; i += 2) {
        if (i == 8) {
            tbevents_destroy(&w);
            w = tbevents_new_at(dir, 1700000000.5);
            ck_assert_ptr_nonnull(w);
        }
        const char *tags[] = {want[i].tag, want[i + 1].tag};
        double v[] = {want[i].value, want[i + 1].value};
        ck_assert_int_eq(want[i].step, want[i + 1].step);
        ck_assert_int_eq(tbevents_scalars(w, want[i].step, 1700000000.0 + i, tags, v, 2), APEX_OK);
    }
    tbevents_destroy(&w);
    char names[4][256];
    ck_assert_int_eq(s_list(dir, names, 4), 2);

    char *csv;
    ck_assert_int_eq(s_run_reader(dir, &csv, 0), 0);
    char *save = NULL, *line = strtok_r(csv, "\n", &save);
    ck_assert_ptr_nonnull(line);
    ck_assert_str_eq(line, "step,tag,value");
    for (int i = 0; i < n; i++) {
        line = strtok_r(NULL, "\n", &save);
        ck_assert_msg(line != NULL, "CSV ends after %d of %d rows", i, n);
        char tag[128];
        long long step;
        char value[64];
        ck_assert_msg(sscanf(line, "%lld,%127[^,],%63s", &step, tag, value) == 3, "row %s", line);
        ck_assert_int_eq(step, want[i].step);
        ck_assert_str_eq(tag, want[i].tag);
        float got = (float)strtod(value, NULL); // exact: the reader prints a float32's repr
        ck_assert_msg(s_same_float(got, (float)want[i].value), "row %d: %s, want %a", i, line,
                      (double)(float)want[i].value);
    }
    ck_assert_ptr_null(strtok_r(NULL, "\n", &save));
    free(csv);

    // The reader is not a rubber stamp: one flipped byte of data fails its CRC check.
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, names[1]);
    size_t len;
    unsigned char *buf = s_slurp(path, &len);
    buf[len - 6] ^= 0x01;
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
    fclose(f);
    free(buf);
    ck_assert_int_eq(s_run_reader(dir, &csv, 1), 1);
    free(csv);
    check_rmtree(dir);
}
END_TEST

Suite *tbevents_suite(void) {
    Suite *s = suite_create("tbevents");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_crc_vectors);
    tcase_add_test(tc, test_file_bytes_match_vectors);
    tcase_add_test(tc, test_read_back_records);
    tcase_add_test(tc, test_special_values_and_sizes);
    tcase_add_test(tc, test_record_too_large);
    tcase_add_test_raise_signal(tc, test_negative_count_aborts, SIGABRT);
    tcase_add_test(tc, test_file_names);
    tcase_add_test(tc, test_bad_directories);
    tcase_add_test(tc, test_failed_write_keeps_records_and_retries);
    tcase_add_test(tc, test_full_buffer_drops_oldest_pending);
    tcase_add_test(tc, test_first_record_failure);
    tcase_add_test(tc, test_python_reader_sees_what_was_written);
    tcase_set_timeout(tc, 60); // the Python reader starts an interpreter; loaded CI machines
    suite_add_tcase(s, tc);
    return s;
}
