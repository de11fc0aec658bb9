// cpu.h: what the CPU's vector units can do, from CPUID (issue #32).
//
// A BLAS library picks its kernels from a table of CPU models, and a table is always behind:
// Debian's OpenBLAS 0.3.21 does not know Intel's Emerald Rapids (family 6, model 207) and
// falls back to its 2004 SSE3 kernel there, 3-8x below the CPU. What a core can do is in
// its feature bits, not its model number, so apex reads those: the instruction sets that
// decide a GEMM's speed (AVX, AVX2 + FMA, AVX-512 F/CD/BW/DQ/VL, AVX512_BF16, AMX) and
// whether the operating system saves their registers (XGETBV), without which an instruction
// set is unusable even when CPUID reports it. model/blas.h turns them into a kernel.
// What it does not do: cache sizes, core counts, frequencies. Not x86-64: every flag 0.
// Thread-safe (reads only).
#ifndef APEX_CPU_H
#define APEX_CPU_H

#include <stddef.h>

typedef struct {
    char vendor[13]; // "GenuineIntel", "AuthenticAMD", ...
    int family;      // display family (base + extended) and model, as /proc/cpuinfo shows
    int model;
    int sse3, avx, avx2, fma;                            // usable (CPUID and the OS)
    int avx512f, avx512cd, avx512bw, avx512dq, avx512vl; // usable: the OS saves ZMM state
    int avx512_bf16;                                     // vdpbf16ps and friends
    int amx_tile, amx_bf16, amx_int8;                    // reported by CPUID (tiles)
} cpu_features_t;

// Reads this CPU's features. Never fails: an unknown CPU has every flag 0.
void cpu_detect(cpu_features_t *out);

// The AVX-512 foundation OpenBLAS's SkylakeX kernels need (F, CD, BW, DQ, VL).
int cpu_has_avx512(const cpu_features_t *f);

// One line for the log, e.g. "AuthenticAMD family 26 model 2: avx2 fma avx512(f cd bw dq
// vl) avx512_bf16". Writes at most n bytes (NUL included).
void cpu_describe(const cpu_features_t *f, char *buf, size_t n);

#endif
