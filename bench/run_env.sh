#!/usr/bin/env bash
# run_env.sh: CartPole-v1 stepping, apex (bench/bench_env.c: 64 envs in one vecenv_t, one core)
# against the Python peer (../shared/peers/cartpole.py), measured back to back.
#
# Prints both tools' own lines, then
#   BENCH env.cartpole.ratio_vs_python <x> x        apex / peer "py" (pure-Python CartPole,
#                                                   the headline peer, ~661 k steps/s)
#   BENCH env.cartpole.ratio_vs_numpy64 <x> x       apex / peer "np64" (numpy, 64 envs)
# The machine is shared and noisy: compare ratios from one run, not numbers across runs.
# Usage (repo root or anywhere): bash bench/run_env.sh     env: BUILD (default build)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/machine.sh
BUILD=${BUILD:-build}
PY=/usr/bin/python3 # Debian's interpreter has numpy (see ../shared/peers/README.md)

[ -x "$BUILD/bench/bench_env" ] || make --no-print-directory "$BUILD/bench/bench_env" >&2

apex_out=$("$BUILD/bench/bench_env")
echo "$apex_out"
peer_out=$("$PY" ../shared/peers/cartpole.py)
echo "$peer_out"

apex=$(awk '$1 == "BENCH" && $2 == "env.cartpole.steps_per_s" { print $3 }' <<<"$apex_out")
py=$(awk '$1 == "RESULT" && $2 == "cartpole_py.steps_per_s" { print $3 }' <<<"$peer_out")
np64=$(awk '$1 == "RESULT" && $2 == "cartpole_np64.steps_per_s" { print $3 }' <<<"$peer_out")
if [ -z "$apex" ] || [ -z "$py" ] || [ -z "$np64" ]; then
  echo "run_env.sh: could not parse a result (apex='$apex' py='$py' np64='$np64')" >&2
  exit 1
fi
awk -v a="$apex" -v p="$py" 'BEGIN { printf "BENCH env.cartpole.ratio_vs_python %.1f x\n", a / p }'
awk -v a="$apex" -v p="$np64" 'BEGIN { printf "BENCH env.cartpole.ratio_vs_numpy64 %.1f x\n", a / p }'
