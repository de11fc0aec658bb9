#!/usr/bin/env bash
# run_learner_dpg.sh: the DPG / TD3 learner update's updates/s against the PyTorch peer
# (issue #28's learner.dpg.updates_per_s), HalfCheetah-v4's sizes: 17 observations, 6
# actions, 256-256 MLPs, batch 256, TD3 options on, Adam 3e-4, same thread count.
#
#   bash bench/run_learner_dpg.sh
#   DPG_BENCH_ROUNDS=5 DPG_BENCH_THREADS="1 2" bash bench/run_learner_dpg.sh
#   PYTHON=/usr/bin/python3 (the peer's interpreter; it needs torch, else the ratio is skipped)
#
# build/bench/bench_learner_dpg and ../shared/peers/torch_td3.py --td3 alternate for ROUNDS
# rounds (default 3); each BENCH value is the median over the rounds, the ratio the median of
# the rounds' own ratios; "#" lines keep every round.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/machine.sh
source bench/lib.sh
BUILD=${BUILD:-build}
BENCH="$BUILD/bench/bench_learner_dpg"
PEER=../shared/peers/torch_td3.py
PY=${PYTHON:-/usr/bin/python3}
ROUNDS=${DPG_BENCH_ROUNDS:-3}
[ -x "$BENCH" ] || make --no-print-directory "$BENCH" >/dev/null
HAVE_PEER=0
if [ ! -f "$PEER" ]; then
  echo "run_learner_dpg: peer $PEER not found; ratio skipped" >&2
elif ! "$PY" -c 'import torch' 2>/dev/null; then
  echo "run_learner_dpg: $PY cannot import torch (apt-get install python3-torch); ratio skipped" >&2
else
  HAVE_PEER=1
fi

for t in ${DPG_BENCH_THREADS:-1}; do
  sfx=""
  [ "$t" -gt 1 ] && sfx=".t$t"
  apex_v=() peer_v=() ratio_v=()
  for r in $(seq "$ROUNDS"); do
    out=$("$BENCH" --threads "$t")
    sed 's/^/# apex: /' <<<"$out"
    a=$(bench_field "$out" BENCH "learner.dpg$sfx.updates_per_s")
    apex_v+=("$a")
    if [ "$HAVE_PEER" = 1 ]; then
      pout=$("$PY" "$PEER" --td3 --threads "$t") || { echo "run_learner_dpg: the peer failed" >&2; exit 1; }
      sed 's/^/# peer: /' <<<"$pout"
      p=$(awk '/^RESULT .*updates_per_s/ {print $3}' <<<"$pout")
      [ -n "$p" ] || { echo "run_learner_dpg: no RESULT line from the peer" >&2; exit 1; }
      peer_v+=("$p")
      ratio_v+=("$(awk -v a="$a" -v b="$p" 'BEGIN {printf "%.3f", a / b}')")
      echo "# round $r: apex $a, torch $p updates/s"
    fi
  done
  echo "BENCH learner.dpg$sfx.updates_per_s $(bench_median "${apex_v[@]}") updates/s"
  if [ "$HAVE_PEER" = 1 ]; then
    echo "BENCH torch.learner.dpg$sfx.updates_per_s $(bench_median "${peer_v[@]}") updates/s"
    printf "BENCH learner.dpg%s.ratio_vs_torch %.2f x\n" "$sfx" "$(bench_median "${ratio_v[@]}")"
  fi
done
