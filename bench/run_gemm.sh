#!/usr/bin/env bash
# bench/run_gemm.sh: the single-precision GEMM rate of every BLAS installed here, side by side
# in one process (issue #32; bench/bench_gemm.c): apex's (OpenBLAS with the kernel an apex
# daemon runs on this CPU), BLIS and oneDNN, 1024^3, one thread, then two.
#   GEMM_ARGS="--windows 7 --window 1" bash bench/run_gemm.sh
# BENCH sgemm.1024 (apex's), sgemm.1024.blis, sgemm.1024.onednn, sgemm.1024.vs_best (goal
# >= 0.9: apex within 10 % of the best installed library), and the same with .t2 for two
# threads.
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
