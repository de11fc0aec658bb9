#!/usr/bin/env bash
# run_learner.sh: apex learner updates/s vs the PyTorch peer, back to back, same threads.
#
#   bash bench/run_learner.sh                 # 1 thread
#   LEARNER_BENCH_THREADS="1 2" bash bench/run_learner.sh
#   LEARNER_BENCH_ROUNDS=5 bash bench/run_learner.sh      # conv nets: rounds (default 3)
#   LEARNER_BENCH_NETS="minatar" bash bench/run_learner.sh  # any of: mlp minatar nature
#   PYTHON=/usr/bin/python3 (the peer's interpreter; it needs torch, else the ratios are skipped)
#
# MLPs: build/bench/bench_learner (small 4-256-256-dueling(2) and large 84-512-512-
# dueling(18), batch 512, Adam, clip 40) and ../shared/peers/torch_learner.py with the same
# shapes and thread count, then the ratios.
# Conv nets (MinAtar body, batch 512, vs `--net minatar --actions 6`; Nature body, batch 128,
# vs `--net nature --actions 6 --batch 128`): apex and the peer alternate for ROUNDS rounds;
# each BENCH value is the median over the rounds, a ratio the median of the rounds' own
# ratios, and "#" lines keep every round (min..max is the spread). bench_learner's
# gemm_efficiency line is the update's GEMM rate against the same run's 1024^3 sgemm.
# bench_learner runs as the product does by default ([run] blas_library = auto: OpenBLAS's
# products, oneDNN's convolution primitives for the Atari bodies where libdnnl2 loads).
# On a CPU with AVX512_BF16 each conv round also runs [learner] precision = bf16 (one
# thread): BENCH learner.<net>.bf16.updates_per_s and learner.<net>.bf16.vs_fp32 (the
# median of the rounds' bf16 / fp32).
# Where oneDNN loads (Debian's libdnnl2), each conv round also runs [run] blas_library =
# onednn (its sgemm for the products too) and openblas (everything on OpenBLAS: im2col, the
# default before auto): BENCH learner.<net>.onednn.updates_per_s, .onednn.ratio_vs_torch,
# learner.<net>.openblas.updates_per_s, .openblas.ratio_vs_torch, and
# learner.<net>.bf16.vs_openblas_fp32.
# Medians over timed windows; the machine is shared, so expect noise of +-10% between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/machine.sh
source bench/lib.sh
BUILD=${BUILD:-build}
BENCH="$BUILD/bench/bench_learner"
PEER=../shared/peers/torch_learner.py
PY=${PYTHON:-/usr/bin/python3}
ROUNDS=${LEARNER_BENCH_ROUNDS:-3}
NETS=${LEARNER_BENCH_NETS:-mlp minatar nature}
[ -x "$BENCH" ] || make --no-print-directory "$BENCH" >/dev/null
# The peer needs PyTorch (Debian: apt-get install python3-torch). Without it the ratios are
# skipped with a message: a peer that fails to import must not turn into a ratio of "inf".
HAVE_PEER=0
if [ ! -f "$PEER" ]; then
  echo "run_learner: peer $PEER not found; ratios skipped" >&2
elif ! "$PY" -c 'import torch' 2>/dev/null; then
  echo "run_learner: $PY cannot import torch (apt-get install python3-torch); ratios skipped" >&2
else
  HAVE_PEER=1
fi

# Runs the peer once; shows its output as comments and prints its median updates/s
# (field 3 of its "RESULT <name>.updates_per_s <median> <min> <max> updates/s" line).
peer() {
  local out v
  out=$("$PY" "$PEER" "$@") || { echo "run_learner: the peer failed: $PEER $*" >&2; return 1; }
  sed 's/^/# peer: /' <<<"$out" >&2
  v=$(awk '/^RESULT .*updates_per_s/ {print $3}' <<<"$out")
  [ -n "$v" ] || { echo "run_learner: no RESULT line from the peer: $PEER $*" >&2; return 1; }
  echo "$v"
}

has_net() { [[ " $NETS " == *" $1 "* ]]; }

# [learner] precision = bf16 where this CPU has it (bench_learner refuses, exit 2, elsewhere):
# the conv nets' rounds run it too, between fp32 and the peer, one thread (the kernel's).
HAVE_BF16=0
if "$BENCH" --precision bf16 --net small --runs 1 --iters 1 >/dev/null 2>&1; then
  HAVE_BF16=1
else
  echo "# run_learner: no bf16 on this CPU ([learner] precision = bf16 refused): fp32 only"
fi

# [run] blas_library = onednn where it loads (bench_learner exits non-zero when it cannot).
HAVE_ONEDNN=0
if "$BENCH" --library onednn --net small --runs 1 --iters 1 >/dev/null 2>&1; then
  HAVE_ONEDNN=1
else
  echo "# run_learner: oneDNN does not load here (apt-get install libdnnl2): OpenBLAS only"
fi

for t in ${LEARNER_BENCH_THREADS:-1}; do
  sfx=""; [ "$t" = 1 ] || sfx=".t$t"
  if has_net mlp; then
    out=$("$BENCH" --threads "$t" --net small --net large)
    echo "$out"
    ours_small=$(bench_field "$out" BENCH "learner.small$sfx.updates_per_s")
    ours_large=$(bench_field "$out" BENCH "learner.large$sfx.updates_per_s")
    if [ "$HAVE_PEER" = 1 ]; then
      torch_small=$(peer --threads "$t")
      torch_large=$(peer --threads "$t" --obs 84 --hidden 512 --actions 18)
      echo "BENCH torch.learner.small$sfx.updates_per_s $torch_small updates/s"
      echo "BENCH torch.learner.large$sfx.updates_per_s $torch_large updates/s"
      awk -v a="$ours_small" -v b="$torch_small" -v s="$sfx" \
        'BEGIN {printf "BENCH learner.small%s.ratio_vs_torch %.2f x\n", s, a / b}'
      awk -v a="$ours_large" -v b="$torch_large" -v s="$sfx" \
        'BEGIN {printf "BENCH learner.large%s.ratio_vs_torch %.2f x\n", s, a / b}'
    fi
  fi

  # The conv nets: name, bench_learner flags, peer flags, goal (ratio).
  # Goals: issue #32's, fp32 against fp32.
  for spec in "minatar|--net minatar|--net minatar --actions 6 --iters 50 --windows 3|2" \
    "nature|--net nature|--net nature --actions 6 --batch 128 --iters 8 --windows 3 --warmup 5|1.5"; do
    IFS='|' read -r name ours_flags peer_flags goal <<<"$spec"
    has_net "$name" || continue
    apex_v=() eff_v=() cpu_v=() peer_v=() ratio_v=() b16_v=() b16_ratio_v=() dnn_v=() dnn_ratio_v=()
    ob_v=() ob_ratio_v=() b16_ob_v=()
    for r in $(seq 1 "$ROUNDS"); do
      # shellcheck disable=SC2086 # the flags are words
      out=$("$BENCH" --threads "$t" $ours_flags --runs 5)
      sed "s/^/# round $r: /" <<<"$out"
      a=$(bench_field "$out" BENCH "learner.$name$sfx.updates_per_s")
      apex_v+=("$a")
      eff_v+=("$(bench_field "$out" BENCH "learner.$name$sfx.gemm_efficiency")")
      cpu_v+=("$(awk '/updates per CPU second/ {for (i = 1; i <= NF; i++) if ($i == "updates" && $(i+1) == "per") {print $(i-1); exit}}' <<<"$out")")
      b=""
      if [ "$HAVE_BF16" = 1 ] && [ "$t" = 1 ]; then
        # shellcheck disable=SC2086
        out=$("$BENCH" --threads 1 --precision bf16 $ours_flags --runs 5)
        sed "s/^/# round $r: /" <<<"$out"
        b=$(bench_field "$out" BENCH "learner.$name.bf16.updates_per_s")
        b16_v+=("$b")
        b16_ratio_v+=("$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.4f", b / a}')")
      fi
      d="" o=""
      if [ "$HAVE_ONEDNN" = 1 ]; then
        # shellcheck disable=SC2086
        out=$("$BENCH" --threads "$t" --library onednn $ours_flags --runs 5)
        sed "s/^/# round $r onednn: /" <<<"$out"
        d=$(bench_field "$out" BENCH "learner.$name$sfx.updates_per_s")
        dnn_v+=("$d")
        # shellcheck disable=SC2086
        out=$("$BENCH" --threads "$t" --library openblas $ours_flags --runs 5)
        sed "s/^/# round $r openblas: /" <<<"$out"
        o=$(bench_field "$out" BENCH "learner.$name$sfx.updates_per_s")
        ob_v+=("$o")
        [ -z "$b" ] || b16_ob_v+=("$(awk -v a="$o" -v b="$b" 'BEGIN {printf "%.4f", b / a}')")
      fi
      if [ "$HAVE_PEER" = 1 ]; then
        # shellcheck disable=SC2086
        p=$(peer --threads "$t" $peer_flags)
        peer_v+=("$p")
        ratio_v+=("$(awk -v a="$a" -v b="$p" 'BEGIN {printf "%.4f", a / b}')")
        [ -z "$d" ] || dnn_ratio_v+=("$(awk -v a="$d" -v b="$p" 'BEGIN {printf "%.4f", a / b}')")
        [ -z "$o" ] || ob_ratio_v+=("$(awk -v a="$o" -v b="$p" 'BEGIN {printf "%.4f", a / b}')")
        echo "# round $r: apex $a, torch $p updates/s, ratio $(awk -v a="$a" -v b="$p" 'BEGIN {printf "%.2f", a / b}')"
      fi
    done
    echo "# $name: apex updates/s per round: ${apex_v[*]}; per CPU second of the updating thread: ${cpu_v[*]}"
    echo "BENCH learner.$name$sfx.updates_per_s $(bench_median "${apex_v[@]}") updates/s"
    echo "BENCH learner.$name$sfx.gemm_efficiency $(bench_median "${eff_v[@]}") %"
    if [ ${#b16_v[@]} -gt 0 ]; then
      echo "# $name: bf16 updates/s per round: ${b16_v[*]}; bf16 / fp32: ${b16_ratio_v[*]}"
      echo "BENCH learner.$name.bf16.updates_per_s $(bench_median "${b16_v[@]}") updates/s"
      printf "BENCH learner.%s.bf16.vs_fp32 %.2f x\n" "$name" "$(bench_median "${b16_ratio_v[@]}")"
    fi
    if [ ${#dnn_v[@]} -gt 0 ]; then
      echo "# $name: [run] blas_library = onednn updates/s per round: ${dnn_v[*]}"
      echo "BENCH learner.$name$sfx.onednn.updates_per_s $(bench_median "${dnn_v[@]}") updates/s"
      echo "# $name: [run] blas_library = openblas updates/s per round: ${ob_v[*]}"
      echo "BENCH learner.$name$sfx.openblas.updates_per_s $(bench_median "${ob_v[@]}") updates/s"
    fi
    if [ ${#b16_ob_v[@]} -gt 0 ]; then
      echo "# $name: bf16 / openblas fp32 per round: ${b16_ob_v[*]}"
      printf "BENCH learner.%s.bf16.vs_openblas_fp32 %.2f x\n" "$name" "$(bench_median "${b16_ob_v[@]}")"
    fi
    if [ ${#dnn_ratio_v[@]} -gt 0 ]; then
      echo "# $name: onednn / torch per round: ${dnn_ratio_v[*]}; openblas / torch: ${ob_ratio_v[*]} (goal >= $goal)"
      printf "BENCH learner.%s%s.onednn.ratio_vs_torch %.2f x\n" "$name" "$sfx" "$(bench_median "${dnn_ratio_v[@]}")"
      printf "BENCH learner.%s%s.openblas.ratio_vs_torch %.2f x\n" "$name" "$sfx" "$(bench_median "${ob_ratio_v[@]}")"
    fi
    if [ ${#peer_v[@]} -gt 0 ]; then
      echo "# $name: torch updates/s per round: ${peer_v[*]}; ratios: ${ratio_v[*]} (goal >= $goal)"
      echo "BENCH torch.learner.$name$sfx.updates_per_s $(bench_median "${peer_v[@]}") updates/s"
      printf "BENCH learner.%s%s.ratio_vs_torch %.2f x\n" "$name" "$sfx" "$(bench_median "${ratio_v[@]}")"
    fi
  done
done
