// check_fcodec.c: frame compression (common/fcodec.h): LZ4 and zstd round trips byte for byte
// at several levels (frames of noise, of MinAtar-like blocks, of one byte, float32 frames);
// a blob that is corrupt, cut short, or of another frame size is refused, never trusted;
// the level changes what comes out (a key that changes nothing would be a defect).
#include "check_apex.h"

#include "fcodec.h"
#include "rng.h"

#include <stdlib.h>
#include <string.h>

#define N (84 * 84)

static void s_blocks(uint8_t *f, int p) {
    for (int y = 0; y < 84; y++) {
        for (int x = 0; x < 84; x++) {
            f[y * 84 + x] = (uint8_t)(((x / 8 + y / 8 + p) % 5 == 0) ? 63 * (1 + (x / 8) % 4) : 0);
        }
    }
}

START_TEST(test_round_trips) {
    static uint8_t src[N], back[N];
    static uint8_t blob[2 * N];
    rng_t rng;
    rng_init(&rng, 3);
    int kinds[] = {FCODEC_LZ4, FCODEC_ZSTD};
    int levels[] = {0, 1, 3, 9};
    for (int k = 0; k < 2; k++) {
        for (int l = 0; l < 4; l++) {
            fcodec_t *c = fcodec_new(kinds[k], levels[l]);
            ck_assert_ptr_nonnull(c);
            ck_assert_uint_le(2 * N, sizeof blob);
            ck_assert_uint_le(fcodec_bound(kinds[k], N), sizeof blob);
            for (int t = 0; t < 4; t++) {
                if (t == 0) {
                    for (int i = 0; i < N; i++) {
                        src[i] = (uint8_t)rng_next_u64(&rng);
                    }
                } else if (t == 1) {
                    s_blocks(src, l);
                } else if (t == 2) {
                    memset(src, 7, N);
                } else {
                    float *f = (float *)(void *)src;
                    for (int i = 0; i < N / 4; i++) {
                        f[i] = (float)rng_uniform(&rng) - 0.5f;
                    }
                }
                size_t n = fcodec_compress(c, src, N, blob, sizeof blob);
                ck_assert_uint_gt(n, 0);
                if (t == 1 || t == 2) {
                    ck_assert_uint_lt(n * 5, N); // blocks compress
                }
                memset(back, 0xAA, N);
                ck_assert_int_eq(fcodec_decompress(c, blob, n, back, N), 0);
                ck_assert_mem_eq(back, src, N);
                // Another frame size, a cut blob, a flipped byte: refused.
                ck_assert_int_eq(fcodec_decompress(c, blob, n, back, N - 1), -1);
                ck_assert_int_eq(fcodec_decompress(c, blob, n / 2, back, N), -1);
                blob[0] ^= 0xFF;
                ck_assert_int_eq(
                    fcodec_decompress(c, blob, n, back, N) == 0 && memcmp(back, src, N) == 0, 0);
            }
            fcodec_destroy(&c);
        }
    }
    ck_assert_ptr_null(fcodec_new(FCODEC_NONE, 0));
    ck_assert_ptr_null(fcodec_new(7, 0));
}
END_TEST

// Garbage never decompresses to a frame by accident, and never reads or writes out of bounds
// (ASan watches the latter).
START_TEST(test_garbage_refused) {
    static uint8_t junk[512], back[N];
    rng_t rng;
    rng_init(&rng, 5);
    for (int k = FCODEC_LZ4; k <= FCODEC_ZSTD; k++) {
        fcodec_t *c = fcodec_new(k, 0);
        for (int t = 0; t < 200; t++) {
            size_t n = 1 + rng_next_u64(&rng) % sizeof junk;
            for (size_t i = 0; i < n; i++) {
                junk[i] = (uint8_t)rng_next_u64(&rng);
            }
            ck_assert_int_eq(fcodec_decompress(c, junk, n, back, N), -1);
        }
        fcodec_destroy(&c);
    }
}
END_TEST

// The level is not ignored: zstd at 19 makes a smaller blob than at 1 on a textured frame,
// LZ4's acceleration 64 a larger one than 1.
START_TEST(test_levels_matter) {
    static uint8_t src[N], blob[2 * N];
    for (int i = 0; i < N; i++) {
        src[i] = (uint8_t)((i * 7 + (i / 84) * 13) % 29 + ((i % 84) / 21) * 40);
    }
    fcodec_t *z1 = fcodec_new(FCODEC_ZSTD, 1), *z19 = fcodec_new(FCODEC_ZSTD, 19);
    fcodec_t *l1 = fcodec_new(FCODEC_LZ4, 1), *l64 = fcodec_new(FCODEC_LZ4, 64);
    size_t a = fcodec_compress(z1, src, N, blob, sizeof blob);
    size_t b = fcodec_compress(z19, src, N, blob, sizeof blob);
    size_t c = fcodec_compress(l1, src, N, blob, sizeof blob);
    size_t d = fcodec_compress(l64, src, N, blob, sizeof blob);
    ck_assert_msg(b < a, "zstd 19: %zu bytes, zstd 1: %zu", b, a);
    ck_assert_msg(d > c, "lz4 acceleration 64: %zu bytes, 1: %zu", d, c);
    fcodec_destroy(&z1);
    fcodec_destroy(&z19);
    fcodec_destroy(&l1);
    fcodec_destroy(&l64);
}
END_TEST

Suite *fcodec_suite(void) {
    Suite *s = suite_create("fcodec");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_round_trips);
    tcase_add_test(tc, test_garbage_refused);
    tcase_add_test(tc, test_levels_matter);
    suite_add_tcase(s, tc);
    return s;
}
