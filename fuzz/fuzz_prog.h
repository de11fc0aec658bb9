// fuzz_prog.h: reading a fuzz input as a program of operations (the handler harnesses,
// fuzz_replay.c and fuzz_learner.c), with numbers drawn where bugs live.
//
// A handler harness does not feed raw bytes to one decoder: it runs a sequence of messages
// through a daemon's handlers, most of them well formed (encoded by wire_encode from fields
// the input chooses), so that the fuzzer spends its time past the decoder, in what the daemon
// does with a valid message. Numbers come from an edge table most of the time (0, -0, the
// smallest and largest of the type, each wire bound and the next representable value past
// it, NaN, infinities, denormals) and from raw input bytes otherwise. An exhausted input
// reads as zeros, so every input is a complete program.
#ifndef APEX_FUZZ_PROG_H
#define APEX_FUZZ_PROG_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "wire.h"

typedef struct {
    const uint8_t *p;
    size_t n;
} fuzz_prog_t;

static inline int fuzz_prog_done(const fuzz_prog_t *in) { return in->n == 0; }

static inline uint8_t fuzz_u8(fuzz_prog_t *in) {
    if (in->n == 0) {
        return 0;
    }
    in->n--;
    return *in->p++;
}

static inline void fuzz_bytes(fuzz_prog_t *in, void *out, size_t n) {
    size_t k = n < in->n ? n : in->n;
    memcpy(out, in->p, k);
    memset((uint8_t *)out + k, 0, n - k);
    in->p += k, in->n -= k;
}

static inline uint32_t fuzz_u32(fuzz_prog_t *in) {
    uint32_t v;
    fuzz_bytes(in, &v, sizeof v);
    return v;
}

// Mostly small (where counts and ids live), sometimes any, sometimes at the type's edge.
static inline uint64_t fuzz_u64(fuzz_prog_t *in) {
    uint8_t b = fuzz_u8(in);
    switch (b >> 5) {
    case 0:
    case 1:
    case 2:
        return b & 31;
    case 3:
        return UINT64_MAX - (b & 3);
    case 4:
        return (uint64_t)1 << (b & 63);
    case 5:
        return ((uint64_t)1 << (b & 63)) - 1;
    default: {
        uint64_t v;
        fuzz_bytes(in, &v, sizeof v);
        return v;
    }
    }
}

static inline float fuzz_f32(fuzz_prog_t *in) {
    static const float edge[] = {0.0f,
                                 -0.0f,
                                 1.0f,
                                 -1.0f,
                                 0.5f,
                                 0.25f,
                                 2.0f,
                                 100.0f,
                                 FLT_MIN,
                                 FLT_TRUE_MIN,
                                 -FLT_TRUE_MIN,
                                 FLT_MAX,
                                 -FLT_MAX,
                                 INFINITY,
                                 -INFINITY,
                                 NAN,
                                 1e-8f,
                                 1e20f,
                                 1e28f,
                                 WIRE_PRIORITY_MAX,
                                 WIRE_BETA_MAX,
                                 0x1.000002p+0f,    // the float after 1 (beta, discount, weight)
                                 0x1.fffffep-1f,    // the float before 1
                                 0x1.c363cep+127f}; // the float after WIRE_PRIORITY_MAX
    uint8_t b = fuzz_u8(in);
    if (b < 224) {
        return edge[b % (sizeof edge / sizeof edge[0])];
    }
    float v;
    fuzz_bytes(in, &v, sizeof v);
    return v;
}

static inline double fuzz_f64(fuzz_prog_t *in) {
    static const double edge[] = {0.0,
                                  -0.0,
                                  1.0,
                                  0.5,
                                  DBL_MIN,
                                  DBL_TRUE_MIN,
                                  -DBL_TRUE_MIN,
                                  DBL_MAX,
                                  -1.0,
                                  INFINITY,
                                  -INFINITY,
                                  NAN,
                                  1e300,
                                  (double)FLT_MAX,
                                  WIRE_MASS_MAX,
                                  0x1.fffffe0000001p+127, // the double after WIRE_MASS_MAX
                                  1e-30,
                                  1e20};
    uint8_t b = fuzz_u8(in);
    if (b < 224) {
        return edge[b % (sizeof edge / sizeof edge[0])];
    }
    double v;
    fuzz_bytes(in, &v, sizeof v);
    return v;
}

static inline int32_t fuzz_i32(fuzz_prog_t *in) {
    static const int32_t edge[] = {0, 1, 2, 3, -1, INT32_MAX, INT32_MIN, 5, 17};
    uint8_t b = fuzz_u8(in);
    if (b < 224) {
        return edge[b % (sizeof edge / sizeof edge[0])];
    }
    int32_t v;
    fuzz_bytes(in, &v, sizeof v);
    return v;
}

#endif
