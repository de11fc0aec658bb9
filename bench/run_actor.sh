#!/usr/bin/env bash
# run_actor.sh: apex actor env steps/s (build/bench/bench_actor: one actor_t, CartPole-v1,
# 64 envs, batched Q inference + initial priorities + encoding + sends to an acking sink,
# 1 OpenBLAS thread) and the Python CartPole peer (../shared/peers/cartpole.py), back to back.
#
# Prints both tools' own lines, then
#   BENCH actor.cartpole64.ratio_vs_python <x> x            apex actor (4-256-256-dueling)
#                                                          / peer "py" (pure-Python env only)
#   BENCH actor.cartpole64.net64x64.ratio_vs_python <x> x   same, 4-64-64-dueling
#   BENCH actor.cartpole64.ratio_vs_numpy64 <x> x           apex actor / peer "np64"
# The peer steps the environment only, with random actions and no network: the ratio shows
# what apex's whole actor step costs against a Python user's bare env stepping.
# Then the same actor on 64 MinAtar/Breakout-v0 envs with MinAtar's conv network (uint8
# 10x10x4 -> 16 3x3 s1 -> 128 -> dueling(6)): actor.minatar_breakout64.env_steps_per_s
# (goal >= 40 k on one core; no peer), and on 64 MinAtar/Breakout-render84-v0 envs with
# frame_stack 4 and the Nature body (issue #27's actor.atari_render64.env_steps_per_s), each
# the median of ACTOR_BENCH_ROUNDS runs (default 3), every run's value and steps per
# actor-thread CPU second in "#" lines.
# The machine is shared and noisy: compare ratios from one run, not numbers across runs.
# Usage: bash bench/run_actor.sh      env: BUILD (default build), PYTHON, PEER
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/machine.sh
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3} # Debian's interpreter has numpy (../shared/peers/README.md)
PEER=${PEER:-../shared/peers/cartpole.py}
bin="$BUILD/bench/bench_actor"

[ -x "$bin" ] || make --no-print-directory "$bin" >&2
source bench/lib.sh
if [ ! -f "$PEER" ]; then
  echo "run_actor: peer $PEER not found (expected ../shared beside the repo)" >&2
  exit 1
fi

echo "# apex:  $bin"
apex_out=$("$bin" --net both)
echo "$apex_out"
echo "# peer:  $PYTHON $PEER"
peer_out=$("$PYTHON" "$PEER")
echo "$peer_out"

get() { awk -v k="$2" '($1 == "BENCH" || $1 == "RESULT") && $2 == k { print $3 }' <<<"$1"; }
big=$(get "$apex_out" actor.cartpole64.env_steps_per_s)
small=$(get "$apex_out" actor.cartpole64.net64x64.env_steps_per_s)
py=$(get "$peer_out" cartpole_py.steps_per_s)
np64=$(get "$peer_out" cartpole_np64.steps_per_s)
if [ -z "$big" ] || [ -z "$small" ] || [ -z "$py" ] || [ -z "$np64" ]; then
  echo "run_actor: could not parse a result (big='$big' small='$small' py='$py' np64='$np64')" >&2
  exit 1
fi
ratio() { awk -v n="$1" -v a="$2" -v p="$3" 'BEGIN { printf "BENCH %s %.2f x\n", n, a / p }'; }
ratio actor.cartpole64.ratio_vs_python "$big" "$py"
ratio actor.cartpole64.net64x64.ratio_vs_python "$small" "$py"
ratio actor.cartpole64.ratio_vs_numpy64 "$big" "$np64"

# The MinAtar actor, then the Atari-shaped one (84x84 renders, frame_stack 4, Nature body).
for case in minatar:actor.minatar_breakout64 atari:actor.atari_render64; do
  net=${case%%:*} name=${case#*:}
  vals=() cpus=()
  for r in $(seq 1 "${ACTOR_BENCH_ROUNDS:-3}"); do
    out=$("$bin" --net "$net")
    sed "s/^/# round $r: /" <<<"$out"
    vals+=("$(get "$out" "$name.env_steps_per_s")")
    cpus+=("$(sed -n 's/.*(\([0-9]*\) steps per actor-cpu second).*/\1/p' <<<"$out" | head -1)")
  done
  echo "# $name: per run ${vals[*]} steps/s; per actor-thread CPU second ${cpus[*]}"
  echo "BENCH $name.env_steps_per_s $(bench_median "${vals[@]}") steps/s"
done
