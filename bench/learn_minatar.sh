#!/usr/bin/env bash
# learn_minatar.sh (make learn-minatar): issue #14's learning table. For each MinAtar game,
# one run of configs/minatar-<game>.ini through scripts/apex-local for a wall-clock budget,
# and the return its evaluator measured (100 episodes at epsilon 0.1, eval.csv) at each mark
# (default 10, 20 and 30 minutes): the last evaluation that had finished by then, counted
# from the start of the daemons. Then, with MINATAR_SRC set, the PyTorch peer
# ../shared/peers/torch_minatar_dqn.py (the paper's DQN on the real MinAtar) for the same
# budget on the games of LEARN_MINATAR_PEER_GAMES, and its return100 (training return at
# epsilon 0.1, what the paper plots) at the same marks. Prints
#   BENCH learn.minatar_<game>.return_at_<m>s <r> return
#   BENCH learn.minatar_<game>.frames_at_<m>s <n> frames
#   BENCH learn.minatar_<game>.dqn_return_reached_at_<m>s 0|1 (the paper's DQN return at 5M
#         frames: asterix 17, breakout 10, freeway 50, seaquest 20, space_invaders 43)
#   BENCH torch.learn.minatar_<game>.return_at_<m>s / frames_at_<m>s
# and a table. Each run should have the machine to itself (the issue's rule): the script runs
# them one after another; the header prints the load average before each run.
#
# Environment:
#   LEARN_MINATAR_GAMES       default "breakout asterix freeway seaquest space_invaders"
#   LEARN_MINATAR_BUDGET_S    seconds per run (default 1800)
#   LEARN_MINATAR_MARKS       seconds at which to read the return (default "600 1200 1800";
#                             marks above the budget are skipped)
#   LEARN_MINATAR_SEED        default 1
#   LEARN_MINATAR_SETS        extra "section.key=value" overrides for every apex run
#   LEARN_MINATAR_OUT         run directories (default runs/learnminatar; removed per run first)
#   LEARN_MINATAR_PEER_GAMES  default "breakout" ("" = no peer)
#   MINATAR_SRC               checkout of kenjyoung/MinAtar for the peer (none: no peer)
#   BIN, PYTHON
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/machine.sh
source bench/lib.sh
bench_learn_init || exit 1
GAMES=${LEARN_MINATAR_GAMES:-breakout asterix freeway seaquest space_invaders}
BUDGET=${LEARN_MINATAR_BUDGET_S:-1800}
MARKS=${LEARN_MINATAR_MARKS:-600 1200 1800}
SEED=${LEARN_MINATAR_SEED:-1}
OUT=${LEARN_MINATAR_OUT:-runs/learnminatar}
PEER_GAMES=${LEARN_MINATAR_PEER_GAMES-breakout}
PEER=../shared/peers/torch_minatar_dqn.py
declare -A DQN=([asterix]=17 [breakout]=10 [freeway]=50 [seaquest]=20 [space_invaders]=43)

mkdir -p "$OUT"
marks=()
for m in $MARKS; do awk -v m="$m" -v b="$BUDGET" 'BEGIN { exit !(m + 0 <= b + 0) }' && marks+=("$m"); done
[ ${#marks[@]} -gt 0 ] || { echo "learn_minatar: no mark within the budget of $BUDGET s" >&2; exit 2; }
# s_mark SECONDS: a mark as the summary line shows it: minutes, or seconds below one minute
# (a short budget's marks printed as "0 min" before).
s_mark() { if [ "$1" -ge 60 ]; then awk -v m="$1" 'BEGIN { printf "%g min", m / 60 }'; else echo "$1 s"; fi; }


STATUS=0
TABLE=()
row() { TABLE+=("$(printf '%-6s %-15s' "$1" "$2")$3"); }

for g in $GAMES; do
  cfg="configs/minatar-${g//_/-}.ini"
  [ -f "$cfg" ] || { echo "# $cfg: missing, skipped"; continue; }
  name="learnminatar-$g-$SEED" dir="$OUT/learnminatar-$g-$SEED"
  sets=(--set "run.seed=$SEED" --set "run.name=$name" --set "run.out_dir=$OUT" --set "run.max_seconds=$BUDGET")
  while read -r s; do sets+=(--set "$s"); done < <(free_port_sets)
  for s in ${LEARN_MINATAR_SETS:-}; do sets+=(--set "$s"); done
  rm -rf "$dir"
  echo "# $(date -u +%H:%M:%SZ) load $(cut -d' ' -f1-3 /proc/loadavg); apex: scripts/apex-local $cfg --quiet ${sets[*]}"
  log="$OUT/$name.launcher.log"
  scripts/apex-local "$cfg" --quiet "${sets[@]}" >"$log" 2>&1 || { echo "# $g: launcher exit $?, see $log"; STATUS=1; }
  grep -E "^apex-local: (stopping|evaluation of)" "$log" | sed 's/^/#   /'
  # eval.csv's elapsed_s counts from the evaluator's start, which the launcher starts with the
  # other daemons; the row of a mark is the last evaluation that had finished by then.
  line=""
  for m in "${marks[@]}"; do
    read -r r f < <(awk -F, -v m="$m" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
      $c["elapsed_s"] + 0 <= m + 0 { r = $c["eval_mean"]; f = $c["env_frames"] }
      END { print (r == "" ? "none" : r), (f == "" ? "none" : f) }' "$dir/eval.csv" 2>/dev/null || echo "none none")
    echo "BENCH learn.minatar_$g.return_at_${m}s $r return"
    echo "BENCH learn.minatar_$g.frames_at_${m}s $f frames"
    reached=$(awk -v r="$r" -v t="${DQN[$g]}" 'BEGIN { print (r != "none" && r + 0 >= t + 0) ? 1 : 0 }')
    echo "BENCH learn.minatar_$g.dqn_return_reached_at_${m}s $reached (DQN at 5M frames: ${DQN[$g]})"
    line+=$(printf '  %6s: %7s (%s frames)' "$(s_mark "$m")" "$r" "$f")
  done
  row apex "$g" "$line"
done

if [ -n "$PEER_GAMES" ] && [ -n "${MINATAR_SRC:-}" ] && [ -f "$PEER" ]; then
  for g in $PEER_GAMES; do
    plog="$OUT/torch-$g-$SEED.log"
    echo "# $(date -u +%H:%M:%SZ) load $(cut -d' ' -f1-3 /proc/loadavg); peer: $PYTHON $PEER --minatar-src $MINATAR_SRC --game $g --seed $SEED --budget-s $BUDGET"
    "$PYTHON" "$PEER" --minatar-src "$MINATAR_SRC" --game "$g" --seed "$SEED" --budget-s "$BUDGET" >"$plog" 2>&1 ||
      { echo "# peer $g: exit $?, see $plog"; STATUS=1; }
    line=""
    for m in "${marks[@]}"; do
      read -r r f < <(sed -n 's/^# t=\([0-9.]*\) frames=\([0-9]*\) .*return100=\([-0-9.na]*\).*/\1 \2 \3/p' "$plog" |
        awk -v m="$m" '$1 + 0 <= m + 0 { r = $3; f = $2 } END { print (r == "" ? "none" : r), (f == "" ? "none" : f) }')
      echo "BENCH torch.learn.minatar_$g.return_at_${m}s $r return"
      echo "BENCH torch.learn.minatar_$g.frames_at_${m}s $f frames"
      line+=$(printf '  %6s: %7s (%s frames)' "$(s_mark "$m")" "$r" "$f")
    done
    row torch "$g" "$line"
  done
elif [ -n "$PEER_GAMES" ]; then
  echo "# peer skipped: set MINATAR_SRC to a checkout of kenjyoung/MinAtar (and have $PEER)"
fi

echo "# tool   game           returns (apex: eval at epsilon 0.1, 100 episodes; torch: training return100)"
for r in "${TABLE[@]}"; do echo "# $r"; done
exit $STATUS
