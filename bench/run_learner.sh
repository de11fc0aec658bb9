#!/usr/bin/env bash
# run_learner.sh: apex learner updates/s vs the PyTorch peer, back to back, same threads.
#
#   bash bench/run_learner.sh                 # 1 thread
#   LEARNER_BENCH_THREADS="1 2" bash bench/run_learner.sh
#
# Runs build/bench/bench_learner (small 4-256-256-dueling(2) and large 84-512-512-
# dueling(18), batch 512, Adam, clip 40) and ../shared/peers/torch_learner.py with the same
# shapes and thread count, then prints the ratios. Medians over timed windows; the machine
# is shared, so expect noise of +-10% between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/machine.sh
BUILD=${BUILD:-build}
BENCH="$BUILD/bench/bench_learner"
PEER=../shared/peers/torch_learner.py
PY=/usr/bin/python3
[ -x "$BENCH" ] || make --no-print-directory "$BENCH" >/dev/null

# Runs the peer once; shows its output as comments and prints its median updates/s
# (field 3 of its "RESULT <name>.updates_per_s <median> <min> <max> updates/s" line).
peer() {
  local out
  out=$("$PY" "$PEER" "$@")
  sed 's/^/# peer: /' <<<"$out" >&2
  awk '/^RESULT .*updates_per_s/ {print $3}' <<<"$out"
}

for t in ${LEARNER_BENCH_THREADS:-1}; do
  sfx=""; [ "$t" = 1 ] || sfx=".t$t"
  out=$("$BENCH" --threads "$t")
  echo "$out"
  ours_small=$(awk -v k="learner.small$sfx.updates_per_s" '$1=="BENCH" && $2==k {print $3}' <<<"$out")
  ours_large=$(awk -v k="learner.large$sfx.updates_per_s" '$1=="BENCH" && $2==k {print $3}' <<<"$out")
  if [ ! -f "$PEER" ]; then
    echo "run_learner: peer $PEER not found; ratios skipped" >&2
    continue
  fi
  torch_small=$(peer --threads "$t")
  torch_large=$(peer --threads "$t" --obs 84 --hidden 512 --actions 18)
  echo "BENCH torch.learner.small$sfx.updates_per_s $torch_small updates/s"
  echo "BENCH torch.learner.large$sfx.updates_per_s $torch_large updates/s"
  awk -v a="$ours_small" -v b="$torch_small" -v s="$sfx" \
    'BEGIN {printf "BENCH learner.small%s.ratio_vs_torch %.2f x\n", s, a / b}'
  awk -v a="$ours_large" -v b="$torch_large" -v s="$sfx" \
    'BEGIN {printf "BENCH learner.large%s.ratio_vs_torch %.2f x\n", s, a / b}'
done
