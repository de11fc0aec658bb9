#!/usr/bin/env bash
# bench/run_replay.sh: the apex replay store (build/bench/bench_replay) and the numpy PER
# peer (../shared/peers/numpy_per.py) back to back, at the same sizes (capacity 2^20,
# obs_dim 4, ops add50 / sample512 / update512), then the ratio apex / peer per op:
#   BENCH replay.<op> <v> <unit>                  (from bench_replay)
#   RESULT per_numpy_obs4.<op> ...                (the peer's own lines, unchanged)
#   BENCH replay.<op>.ratio_vs_numpy <x> x
# The peer reports sample/update as rows/s with calls/s in its trailing comment; batches/s
# is that calls/s. Environment: BUILD (build tree), PYTHON (needs numpy), PEER (script),
# ROUNDS (default 3).
#
# The two run in ROUNDS alternated rounds (apex, peer, apex, peer, ...), and each line
# above is the median over the rounds, the ratio being the median of the rounds' own
# ratios: on this shared machine the numpy peer's speed moves by 2x from one invocation
# to the next (1 992 to 3 969 sample calls/s within one hour) while apex's moves by a few
# percent, so a single pair of runs says more about the neighbours than about either. The
# "#" lines keep every round's numbers.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/machine.sh
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

ROUNDS=${ROUNDS:-3}
apex_all="" peer_all=""
for r in $(seq 1 "$ROUNDS"); do
  echo "# round $r apex:  $bin --capacity-log2 $CAP_LOG2 --obs-dim $OBS_DIM --reps $REPS"
  out=$("$bin" --capacity-log2 "$CAP_LOG2" --obs-dim "$OBS_DIM" --reps "$REPS")
  sed 's/^/#   /' <<<"$out"
  apex_all+="$(sed "s/^/$r /" <<<"$out")"$'\n'
  echo "# round $r peer:  $PYTHON $PEER --variants numpy --ops add50,sample512,update512" \
       "--capacity-log2 $CAP_LOG2 --obs-dim $OBS_DIM --windows $REPS"
  out=$("$PYTHON" "$PEER" --variants numpy --ops add50,sample512,update512 \
    --capacity-log2 "$CAP_LOG2" --obs-dim "$OBS_DIM" --windows "$REPS")
  sed 's/^/#   /' <<<"$out"
  peer_all+="$(sed "s/^/$r /" <<<"$out")"$'\n'
done

# median: the middle of its arguments (the lower middle for an even count).
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
status=0
for op in add50 sample512 update512; do
  apex=() peer=() ratio=()
  for r in $(seq 1 "$ROUNDS"); do
    a=$(awk -v r="$r" -v n="replay.$op" '$1 == r && $2 == "BENCH" && $3 == n { print $4 }' <<<"$apex_all")
    if [ "$op" = add50 ]; then  # transitions/s on both sides
      p=$(awk -v r="$r" -v n="per_numpy_obs$OBS_DIM.$op" '$1 == r && $2 == "RESULT" && $3 == n { print $4 }' <<<"$peer_all")
    else                        # batches/s = the peer's calls/s
      p=$(awk -v r="$r" -v n="per_numpy_obs$OBS_DIM.$op" \
        '$1 == r && $2 == "RESULT" && $3 == n && $NF == "calls/s" { print $(NF - 1) }' <<<"$peer_all")
    fi
    if [ -z "$a" ] || [ -z "$p" ]; then
      echo "run_replay: no $op number in round $r (apex '$a', peer '$p')" >&2
      status=1
      continue 2
    fi
    apex+=("$a") peer+=("$p")
    ratio+=("$(awk -v a="$a" -v p="$p" 'BEGIN { printf "%.2f", a / p }')")
  done
  unit=$([ "$op" = add50 ] && echo transitions/s || echo batches/s)
  echo "# replay.$op per round: apex ${apex[*]}; peer ${peer[*]}; ratio ${ratio[*]}"
  echo "BENCH replay.$op $(median "${apex[@]}") $unit"
  echo "BENCH replay.$op.numpy_peer $(median "${peer[@]}") $unit"
  awk -v op="$op" -v x="$(median "${ratio[@]}")" \
    'BEGIN { printf "BENCH replay.%s.ratio_vs_numpy %.1f x\n", op, x }'
done
exit $status
