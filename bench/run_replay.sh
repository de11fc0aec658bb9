#!/usr/bin/env bash
# bench/run_replay.sh: the apex replay store (build/bench/bench_replay) and the numpy PER
# peer (../shared/peers/numpy_per.py) back to back, at the same sizes (capacity 2^20,
# obs_dim 4, ops add50 / sample512 / update512), then the ratio apex / peer per op:
#   BENCH replay.<op> <v> <unit>                  (from bench_replay)
#   RESULT per_numpy_obs4.<op> ...                (the peer's own lines, unchanged)
#   BENCH replay.<op>.ratio_vs_numpy <x> x
# The peer reports sample/update as rows/s with calls/s in its trailing comment; batches/s
# is that calls/s. Environment: BUILD (build tree), PYTHON (needs numpy), PEER (script).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
PEER=${PEER:-../shared/peers/numpy_per.py}
CAP_LOG2=20
OBS_DIM=4
REPS=5

bin="$BUILD/bench/bench_replay"
if [ ! -x "$bin" ]; then
  make --no-print-directory "$bin"
fi
if [ ! -f "$PEER" ]; then
  echo "run_replay: peer $PEER not found (expected ../shared beside the repo)" >&2
  exit 1
fi

echo "# apex:  $bin --capacity-log2 $CAP_LOG2 --obs-dim $OBS_DIM --reps $REPS"
apex_out=$("$bin" --capacity-log2 "$CAP_LOG2" --obs-dim "$OBS_DIM" --reps "$REPS")
echo "$apex_out"
echo "# peer:  $PYTHON $PEER --variants numpy --ops add50,sample512,update512" \
     "--capacity-log2 $CAP_LOG2 --obs-dim $OBS_DIM --windows $REPS"
peer_out=$("$PYTHON" "$PEER" --variants numpy --ops add50,sample512,update512 \
  --capacity-log2 "$CAP_LOG2" --obs-dim "$OBS_DIM" --windows "$REPS")
echo "$peer_out"

status=0
for op in add50 sample512 update512; do
  apex=$(awk -v n="replay.$op" '$1 == "BENCH" && $2 == n { print $3 }' <<<"$apex_out")
  if [ "$op" = add50 ]; then  # transitions/s on both sides
    peer=$(awk -v n="per_numpy_obs$OBS_DIM.$op" '$1 == "RESULT" && $2 == n { print $3 }' <<<"$peer_out")
  else                        # batches/s = the peer's calls/s
    peer=$(awk -v n="per_numpy_obs$OBS_DIM.$op" \
      '$1 == "RESULT" && $2 == n && $NF == "calls/s" { print $(NF - 1) }' <<<"$peer_out")
  fi
  if [ -z "$apex" ] || [ -z "$peer" ]; then
    echo "run_replay: no $op number (apex '$apex', peer '$peer')" >&2
    status=1
    continue
  fi
  awk -v op="$op" -v a="$apex" -v p="$peer" \
    'BEGIN { printf "BENCH replay.%s.ratio_vs_numpy %.1f x\n", op, a / p }'
done
exit $status
