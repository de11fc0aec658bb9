// cpu.c: see cpu.h.
#include "cpu.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static int s_cpuid(unsigned leaf, unsigned sub, unsigned r[4]) {
    return __get_cpuid_count(leaf, sub, &r[0], &r[1], &r[2], &r[3]);
}

// XCR0: which register states the OS saves on a context switch. Only valid with OSXSAVE.
static uint64_t s_xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}

void cpu_detect(cpu_features_t *out) {
    memset(out, 0, sizeof *out);
    unsigned r[4];
    if (!s_cpuid(0, 0, r)) {
        return;
    }
    unsigned max_leaf = r[0];
    memcpy(out->vendor, &r[1], 4); // EBX, EDX, ECX spell the vendor
    memcpy(out->vendor + 4, &r[3], 4);
    memcpy(out->vendor + 8, &r[2], 4);
    if (!s_cpuid(1, 0, r)) {
        return;
    }
    unsigned base_family = (r[0] >> 8) & 0xF, base_model = (r[0] >> 4) & 0xF;
    out->family = (int)base_family + (base_family == 0xF ? (int)((r[0] >> 20) & 0xFF) : 0);
    out->model = (int)base_model +
                 (base_family == 0x6 || base_family == 0xF ? (int)(((r[0] >> 16) & 0xF) << 4) : 0);
    unsigned ecx1 = r[2];
    out->sse3 = ecx1 & 1;
    int osxsave = (ecx1 >> 27) & 1;
    uint64_t xcr0 = osxsave ? s_xgetbv0() : 0;
    int os_ymm = (xcr0 & 0x6) == 0x6;             // SSE and AVX state
    int os_zmm = os_ymm && (xcr0 & 0xE0) == 0xE0; // opmask, ZMM_Hi256, Hi16_ZMM
    out->avx = os_ymm && ((ecx1 >> 28) & 1);
    out->fma = out->avx && ((ecx1 >> 12) & 1);
    if (max_leaf < 7 || !s_cpuid(7, 0, r)) {
        return;
    }
    unsigned ebx7 = r[1], edx7 = r[3], max_sub7 = r[0];
    out->avx2 = out->avx && ((ebx7 >> 5) & 1);
    out->avx512f = os_zmm && ((ebx7 >> 16) & 1);
    out->avx512dq = out->avx512f && ((ebx7 >> 17) & 1);
    out->avx512cd = out->avx512f && ((ebx7 >> 28) & 1);
    out->avx512bw = out->avx512f && ((ebx7 >> 30) & 1);
    out->avx512vl = out->avx512f && ((ebx7 >> 31) & 1);
    out->amx_bf16 = (edx7 >> 22) & 1;
    out->amx_tile = (edx7 >> 24) & 1;
    out->amx_int8 = (edx7 >> 25) & 1;
    if (max_sub7 >= 1 && s_cpuid(7, 1, r)) {
        out->avx512_bf16 = out->avx512f && ((r[0] >> 5) & 1);
    }
}
#else
void cpu_detect(cpu_features_t *out) { memset(out, 0, sizeof *out); }
#endif

int cpu_has_avx512(const cpu_features_t *f) {
    return f->avx512f && f->avx512cd && f->avx512bw && f->avx512dq && f->avx512vl;
}

// Appends to buf[0..n) at *o, keeping it NUL-terminated however long the text gets.
static void s_add(char *buf, size_t n, size_t *o, const char *text) {
    if (*o + 1 < n) {
        snprintf(buf + *o, n - *o, "%s", text);
        *o += strlen(buf + *o);
    }
}

void cpu_describe(const cpu_features_t *f, char *buf, size_t n) {
    if (n == 0) {
        return;
    }
    size_t o = 0;
    char head[64];
    snprintf(head, sizeof head, "%s family %d model %d:", f->vendor[0] ? f->vendor : "unknown",
             f->family, f->model);
    buf[0] = '\0';
    s_add(buf, n, &o, head);
    s_add(buf, n, &o, f->sse3 ? " sse3" : "");
    s_add(buf, n, &o, f->avx ? " avx" : "");
    s_add(buf, n, &o, f->avx2 ? " avx2" : "");
    s_add(buf, n, &o, f->fma ? " fma" : "");
    if (f->avx512f) {
        s_add(buf, n, &o, " avx512(f");
        s_add(buf, n, &o, f->avx512cd ? " cd" : "");
        s_add(buf, n, &o, f->avx512bw ? " bw" : "");
        s_add(buf, n, &o, f->avx512dq ? " dq" : "");
        s_add(buf, n, &o, f->avx512vl ? " vl" : "");
        s_add(buf, n, &o, ")");
    }
    s_add(buf, n, &o, f->avx512_bf16 ? " avx512_bf16" : "");
    s_add(buf, n, &o, f->amx_tile ? " amx" : "");
    s_add(buf, n, &o, f->amx_bf16 ? " amx_bf16" : "");
}
