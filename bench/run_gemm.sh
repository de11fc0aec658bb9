#!/usr/bin/env bash
# bench/run_gemm.sh: the single-precision GEMM rate of every BLAS installed here, side by side
# in one process (issue #32; bench/bench_gemm.c): apex's (OpenBLAS with the kernel an apex
# daemon runs on this CPU), BLIS and oneDNN, 1024^3, one thread, then two, then 256^3 (the
# 256-256 MLPs' products at batch 256) on one; with one thread on an AVX512_BF16 CPU also
# apex's bf16 GEMM (model/bf16.h).
#   GEMM_ARGS="--windows 7 --window 1" bash bench/run_gemm.sh
# BENCH sgemm.1024 (apex's), sgemm.1024.blis, sgemm.1024.onednn, sgemm.1024.vs_best (goal
# >= 0.9: apex within 10 % of the best installed library), and the same with .t2 for two
# threads; bf16gemm.<N> and bf16gemm.<N>.vs_sgemm (against apex's sgemm, same run).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN=${BIN:-bin}
source bench/machine.sh
make --no-print-directory "$BUILD/bench/bench_gemm" "$BIN/apex-eval" >/dev/null
# shellcheck disable=SC2086
"$BUILD/bench/bench_gemm" ${GEMM_ARGS:-} 2>&1
# shellcheck disable=SC2086
"$BUILD/bench/bench_gemm" --threads 2 ${GEMM_ARGS:-} 2>&1 | sed 's/^BENCH \(sgemm\.[0-9]*\)/BENCH \1.t2/'
# shellcheck disable=SC2086
"$BUILD/bench/bench_gemm" --size 256 ${GEMM_ARGS:-} 2>&1
