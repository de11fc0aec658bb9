#!/usr/bin/env bash
# learn_bench.sh (make learn-bench): wall time and env frames for apex to solve each
# environment, 5 seeds each, with the PyTorch DQN peer side by side on CartPole.
#
# For each of configs/cartpole.ini, configs/acrobot.ini, configs/mountaincar.ini that exists
# (missing ones are skipped with a message) and each seed, runs
#   scripts/apex-local CONFIG --quiet --set run.seed=S --set run.name=learnbench-ENV-S \
#                     --set run.out_dir=DIR [--set endpoints.*=free ports] [extra sets]
# The launcher stops at the first greedy 100-episode evaluation >= [run] target_return or at
# [run] max_seconds; its stop line gives the wall seconds from the start of the daemons to the first
# evaluation >= target, and eval.csv (written by apex-eval --follow) its env frames. Prints
#   BENCH learn.<env>.seed<S>.seconds_to_solve <v> s
#   BENCH learn.<env>.seed<S>.frames_to_solve <v> frames
# per solved run ("# ... not solved (best X)" otherwise), a table, and per env
#   BENCH learn.<env>.median_seconds_to_solve / median_frames_to_solve
# (an unsolved run counts as slower than any solved one; no median line when most runs
# failed). With LEARN_BENCH_PEER=1 (default) it then runs ../shared/peers/torch_dqn.py
# --preset zoo for the same seeds (CartPole only), prints torch.learn.cartpole.* lines the
# same way and the ratios apex / torch (below 1: apex needs less).
#
# Environment:
#   LEARN_BENCH_MAX_SECONDS  cap per run (overrides [run] max_seconds; also the peer's
#                            --max-wall). Default: the config's max_seconds (cartpole: 600).
#   LEARN_BENCH_SEEDS        default "1 2 3 4 5"
#   LEARN_BENCH_ENVS         default "cartpole acrobot mountaincar"
#   LEARN_BENCH_OUT          run directories (default runs/learnbench; removed per run first)
#   LEARN_BENCH_PEER         1 = run the torch peer on CartPole (default), 0 = skip
#   LEARN_BENCH_SETS         extra "section.key=value" overrides for every apex run, e.g.
#                            "eval.interval_s=1" (the evaluator follows the weights stream; its
#                            interval bounds the resolution of seconds_to_solve)
#   LEARN_BENCH_FIXED_PORTS  1 = use the config's endpoints (default 0: free loopback ports,
#                            so that runs of other people on this machine cannot collide)
#   BIN, PYTHON
# Worst case total time: runs x max_seconds (+ start/stop), e.g. 15 x 600 s + 5 peer runs.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/machine.sh
source bench/lib.sh
bench_learn_init || exit 1
PEER=../shared/peers/torch_dqn.py
SEEDS=${LEARN_BENCH_SEEDS:-1 2 3 4 5}
ENVS=${LEARN_BENCH_ENVS:-cartpole acrobot mountaincar}
OUT=${LEARN_BENCH_OUT:-runs/learnbench}
MAXS=${LEARN_BENCH_MAX_SECONDS:-}

mkdir -p "$OUT"

# Value of [section] key in an INI file (the launcher's resolved config.ini).
ini_get() {
  awk -v sec="[$2]" -v key="$3" '
    /^[ \t]*\[/ { in_sec = ($1 == sec) }
    in_sec && $1 == key && $2 == "=" { sub(/^[^=]*=[ \t]*/, ""); print; exit }' "$1"
}


# Median of the numbers on stdin where "inf" marks a failed run; prints "inf" when the
# median run failed, nothing when there is no input.
median() {
  sort -g | awk '{ v[NR] = $1 } END {
    if (NR == 0) exit
    if (NR % 2) m = v[(NR + 1) / 2]; else m = (v[NR / 2] == "inf" || v[NR / 2 + 1] == "inf") ? "inf" : (v[NR / 2] + v[NR / 2 + 1]) / 2
    print m }'
}

STATUS=0        # 1 when a launcher failed (a daemon died or exited nonzero)
TABLE=()        # rows "tool env seed result seconds frames"
declare -A SECS FRAMES  # "tool env" -> newline-separated values ("inf" = not solved)

record() { # tool env seed seconds frames result-text
  local key="$1 $2"
  SECS[$key]+="$4"$'\n'
  FRAMES[$key]+="$5"$'\n'
  TABLE+=("$(printf '%-6s %-12s %4s %10s %12s  %s' "$1" "$2" "$3" "$4" "$5" "$6")")
}

# ---------------------------------------------------------------------------------------
# apex runs

run_apex() { # env seed
  local env=$1 seed=$2 cfg="configs/$1.ini" name="learnbench-$1-$2"
  local dir="$OUT/$name" sets=(--set "run.seed=$seed" --set "run.name=$name" --set "run.out_dir=$OUT")
  [ -n "$MAXS" ] && sets+=(--set "run.max_seconds=$MAXS")
  if [ "${LEARN_BENCH_FIXED_PORTS:-0}" != 1 ]; then
    while read -r s; do sets+=(--set "$s"); done < <(free_port_sets)
  fi
  for s in ${LEARN_BENCH_SETS:-}; do sets+=(--set "$s"); done
  rm -rf "$dir"
  echo "# apex:  scripts/apex-local $cfg --quiet ${sets[*]}"
  local t0 rc log="$OUT/$name.launcher.log"
  t0=$(date +%s.%N)
  scripts/apex-local "$cfg" --quiet "${sets[@]}" >"$log" 2>&1
  rc=$?
  local wall; wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
  grep -E "^apex-local: (stopping|final evaluation)" "$log" | sed 's/^/#   /'
  local target; target=$(ini_get "$dir/config.ini" run target_return)
  local hit="" best=""
  if [ -f "$dir/eval.csv" ] && [ -n "$target" ]; then
    # Seconds from the start of the daemons (the launcher's stop line says it) and the env frames of
    # the first evaluation >= target (eval.csv's columns by name).
    local up; up=$(sed -n 's/^apex-local: stopping: solved: .* (.*, \([0-9.]*\) s after the daemons were started)$/\1/p' "$log")
    local frames; frames=$(awk -F, -v t="$target" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
      $c["eval_mean"] + 0 >= t + 0 { print $c["env_frames"]; exit }' "$dir/eval.csv")
    [ -n "$up" ] && [ -n "$frames" ] && hit="$up $frames"
    best=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
      b == "" || $c["eval_mean"] + 0 > b + 0 { b = $c["eval_mean"] } END { print b }' "$dir/eval.csv")
  fi
  if [ -n "$hit" ]; then
    read -r secs frames <<<"$hit"
    echo "BENCH learn.$env.seed$seed.seconds_to_solve $secs s"
    echo "BENCH learn.$env.seed$seed.frames_to_solve $frames frames"
    record apex "$env" "$seed" "$secs" "$frames" "solved (launcher ran ${wall} s)"
  else
    # The launcher's evaluation after stopping is not in eval.csv; shown for information.
    local final; final=$(sed -n 's/^apex-local: final evaluation: .* mean \([-0-9.]*\).*/\1/p' "$log")
    local why="not solved (best ${best:-none}; final eval ${final:-none}) within ${wall} s"
    if [ $rc -ne 0 ]; then
      why="$why; launcher exit $rc, see $log"
      STATUS=1
    fi
    echo "# learn.$env.seed$seed: $why"
    record apex "$env" "$seed" inf inf "$why"
  fi
}

ran=()
for env in $ENVS; do
  if [ ! -f "configs/$env.ini" ]; then
    echo "# learn_bench: configs/$env.ini does not exist yet: $env skipped"
    continue
  fi
  ran+=("$env")
  for seed in $SEEDS; do
    run_apex "$env" "$seed"
  done
done

# ---------------------------------------------------------------------------------------
# The PyTorch peer on CartPole

run_peer() { # seed max_wall
  local out="$OUT/torch-zoo-$1.log"
  echo "# peer:  $PYTHON $PEER --preset zoo --seed $1 --max-wall $2"
  "$PYTHON" "$PEER" --preset zoo --seed "$1" --max-wall "$2" >"$out" 2>&1
  local res
  res=$(grep '^RESULT ' "$out" | tail -1 | sed 's/^RESULT //' | "$PYTHON" -c '
import json, sys
try:
    r = json.load(sys.stdin)
except ValueError:
    print("error"); sys.exit()
if r.get("solved"):
    print("solved", r["solve_wall_s"], r["solve_steps"])
else:
    print("unsolved", r.get("final_eval", {}).get("mean", "none"), r.get("total_wall_s"))')
  read -r status a b <<<"$res"
  if [ "$status" = solved ]; then
    echo "BENCH torch.learn.cartpole.seed$1.seconds_to_solve $a s"
    echo "BENCH torch.learn.cartpole.seed$1.frames_to_solve $b frames"
    record torch cartpole "$1" "$a" "$b" "solved (zoo preset)"
  else
    echo "# torch.learn.cartpole.seed$1: not solved (last eval ${a:-?}) within ${b:-?} s; see $out"
    record torch cartpole "$1" inf inf "not solved (last eval ${a:-?})"
  fi
}

if [ "${LEARN_BENCH_PEER:-1}" = 1 ] && [[ " ${ran[*]:-} " == *" cartpole "* ]]; then
  if [ -f "$PEER" ]; then
    peer_max=$MAXS
    if [ -z "$peer_max" ]; then # the apex runs' cap, from a resolved CartPole config
      read -r first_seed _ <<<"$SEEDS"
      peer_max=$(ini_get "$OUT/learnbench-cartpole-$first_seed/config.ini" run max_seconds)
    fi
    for seed in $SEEDS; do
      run_peer "$seed" "${peer_max:-600}"
    done
  else
    echo "# learn_bench: peer $PEER not found: torch comparison skipped"
  fi
fi

# ---------------------------------------------------------------------------------------
# Summary

echo "# tool   env          seed    seconds       frames  result"
for row in "${TABLE[@]}"; do echo "# $row"; done
declare -A MED_S MED_F
for key in "${!SECS[@]}"; do
  read -r tool env <<<"$key"
  ms=$(printf '%s' "${SECS[$key]}" | median)
  mf=$(printf '%s' "${FRAMES[$key]}" | median)
  MED_S[$key]=$ms
  MED_F[$key]=$mf
  prefix="learn"; [ "$tool" = torch ] && prefix="torch.learn"
  if [ "$ms" = inf ]; then
    echo "# $prefix.$env: median run not solved"
  else
    echo "BENCH $prefix.$env.median_seconds_to_solve $ms s"
    echo "BENCH $prefix.$env.median_frames_to_solve $mf frames"
  fi
  # The slowest seed (inf: some seed did not solve) and how many solved.
  mx=$(printf '%s' "${SECS[$key]}" | sort -g | tail -1)
  n=$(printf '%s' "${SECS[$key]}" | grep -c .)
  ns=$(printf '%s' "${SECS[$key]}" | grep -vc inf)
  echo "BENCH $prefix.$env.max_seconds_to_solve $mx s"
  echo "BENCH $prefix.$env.seeds_solved $ns of $n"
done
a_s=${MED_S[apex cartpole]:-}; t_s=${MED_S[torch cartpole]:-}
if [ -n "$a_s" ] && [ -n "$t_s" ] && [ "$a_s" != inf ] && [ "$t_s" != inf ]; then
  awk -v a="$a_s" -v t="$t_s" 'BEGIN { printf "BENCH learn.cartpole.seconds_ratio_vs_torch_zoo %.2f x\n", a / t }'
  awk -v a="${MED_F[apex cartpole]}" -v t="${MED_F[torch cartpole]}" \
    'BEGIN { printf "BENCH learn.cartpole.frames_ratio_vs_torch_zoo %.2f x\n", a / t }'
fi
exit $STATUS
