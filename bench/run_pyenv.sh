#!/usr/bin/env bash
# run_pyenv.sh: env steps/s over the Python env bridge (build/bench/bench_pyenv: envs/pyenv.c
# with python/apex_env.py workers stepping 64 reference CartPoles, random actions) against
# the same 64 envs in a plain Python loop (bench/pyenv_plain_loop.py), which the binary runs
# itself before and after the bridge. It prints every BENCH line, among them
#   BENCH actor.python_cartpole64.ratio_vs_plain_loop <x> x   best shape / plain loop
# The reference CartPole is ../shared/peers/cartpole_env.py (or $APEX_PYENV_CARTPOLE).
# Usage: bash bench/run_pyenv.sh     env: BUILD (default build), PYENV_BENCH_ARGS
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/machine.sh
BUILD=${BUILD:-build}
bin="$BUILD/bench/bench_pyenv"
[ -x "$bin" ] || make --no-print-directory "$bin" >&2
# Worker and bridge log lines go to stderr; the results to stdout.
# shellcheck disable=SC2086
"$bin" ${PYENV_BENCH_ARGS:-} 2>/dev/null
