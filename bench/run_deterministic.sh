#!/usr/bin/env bash
# What [run] deterministic costs (issue #31): the whole cluster through scripts/apex-local on
# this machine, the same config and [learner] max_steps with and without --deterministic,
# alternated (async, det, async, det ...) so that a change of load hits both alike.
#   det.<cfg>.async.updates_per_s, det.<cfg>.det.updates_per_s
#       updates over the training span (learner.log: "first batch received" to "stopped at
#       update N"), median over the rounds
#   det.<cfg>.det_vs_async      the ratio of the two medians (1 = free)
#   det.<cfg>.async.seconds_to_budget, det.<cfg>.det.seconds_to_budget
#       launcher start to the learner's stop, median (start-up and replay fill included)
# Configs: cartpole (configs/cartpole.ini, the main job: actors paced at 2400 steps/s, so the
# learner's rate is set by the replay ratio over the actors' frames) and breakout
# (configs/minatar-breakout.ini: conv learner, unpaced actors), each also with [replay]
# shards = 2 (cartpole_shards2, breakout_shards2: both runs sharded; the deterministic one
# asks every place of both shards and draws its rows from the two answers). DET_ROUNDS
# (default 2), DET_STEPS_CARTPOLE (default 6000), DET_STEPS_BREAKOUT (default 3000),
# DET_CASES (default "cartpole breakout cartpole_shards2 breakout_shards2"). ~6 min.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/machine.sh
BIN=${BIN:-bin}
PY=/usr/bin/python3
ROUNDS=${DET_ROUNDS:-2}
TMP=$(mktemp -d /tmp/apex_det.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

# one CFG NAME STEPS MODE [SETS...]: one run; prints "updates_per_s seconds_to_budget".
one() {
  local cfg=$1 name=$2 steps=$3 mode=$4 t0 t1
  shift 4
  local extra=("$@")
  [ "$mode" = det ] && extra+=(--deterministic)
  t0=$(date +%s.%N)
  scripts/apex-local "$cfg" --bin "$BIN" --quiet --no-eval "${extra[@]}" \
    --set run.out_dir="$TMP" --set run.name="$name" --set run.max_seconds=600 \
    --set learner.max_steps="$steps" >"$TMP/$name.out" 2>&1 \
    || { echo "run $name failed:" >&2; tail -5 "$TMP/$name.out" >&2; exit 1; }
  t1=$(date +%s.%N)
  "$PY" - "$TMP/$name/learner.log" "$steps" "$t0" "$t1" <<'PY'
import datetime, re, sys
log, steps, t0, t1 = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
def ts(line):
    return datetime.datetime.strptime(line[:23], "%Y-%m-%dT%H:%M:%S.%f").timestamp()
first = stop = None
for line in open(log):
    if first is None and "first batch received" in line:
        first = ts(line)
    if re.search(r"stopped at update %d " % steps, line):
        stop = ts(line)
if first is None or stop is None:
    sys.exit("no training span in " + log)
print("%.2f %.2f" % (steps / (stop - first), t1 - t0))
PY
}

bench_cfg() {
  local key=$1 cfg=$2 steps=$3
  shift 3
  local a=() d=() as=() ds=() r out
  for r in $(seq 1 "$ROUNDS"); do
    for mode in async det; do
      out=$(one "$cfg" "$key-$mode-$r" "$steps" "$mode" "$@")
      echo "  $key $mode round $r: $out (updates/s, seconds to the budget)"
      if [ "$mode" = async ]; then a+=("${out% *}"); as+=("${out#* }"); else d+=("${out% *}"); ds+=("${out#* }"); fi
    done
  done
  "$PY" - "$key" "${a[*]}" "${d[*]}" "${as[*]}" "${ds[*]}" <<'PY'
import statistics as st, sys
k = sys.argv[1]
a, d, sa, sd = ([float(x) for x in s.split()] for s in sys.argv[2:6])
ma, md = st.median(a), st.median(d)
print(f"BENCH det.{k}.async.updates_per_s {ma:.1f} updates/s")
print(f"BENCH det.{k}.det.updates_per_s {md:.1f} updates/s")
print(f"BENCH det.{k}.det_vs_async {md / ma:.3f} ratio")
print(f"BENCH det.{k}.async.seconds_to_budget {st.median(sa):.1f} s")
print(f"BENCH det.{k}.det.seconds_to_budget {st.median(sd):.1f} s")
PY
}

for c in ${DET_CASES:-cartpole breakout cartpole_shards2 breakout_shards2}; do
  case $c in
    cartpole) bench_cfg cartpole configs/cartpole.ini "${DET_STEPS_CARTPOLE:-6000}" ;;
    breakout) bench_cfg breakout configs/minatar-breakout.ini "${DET_STEPS_BREAKOUT:-3000}" ;;
    cartpole_shards2) bench_cfg cartpole_shards2 configs/cartpole.ini "${DET_STEPS_CARTPOLE:-6000}" \
      --set replay.shards=2 ;;
    breakout_shards2) bench_cfg breakout_shards2 configs/minatar-breakout.ini "${DET_STEPS_BREAKOUT:-3000}" \
      --set replay.shards=2 ;;
    *) echo "run_deterministic.sh: unknown case $c" >&2; exit 2 ;;
  esac
done
