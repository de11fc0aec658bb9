#!/usr/bin/env bash
# run_env.sh: raw environment stepping on one core, apex (bench/bench_env.c: 64 envs in one
# vecenv_t) against Python, measured back to back.
#
# CartPole-v1 against ../shared/peers/cartpole.py:
#   BENCH env.cartpole.ratio_vs_python <x> x        apex / peer "py" (pure-Python CartPole,
#                                                   the headline peer, ~661 k steps/s)
#   BENCH env.cartpole.ratio_vs_numpy64 <x> x       apex / peer "np64" (numpy, 64 envs)
# Pendulum-v1 and MountainCarContinuous-v0 (vecenv_step_cont, uniform actions in the bounds):
#   BENCH env.pendulum.steps_per_s <x> steps/s, BENCH env.mountaincar_continuous.steps_per_s
#   apex's figures alone (no peer).
# The five MinAtar games against the reference itself (kenjyoung/MinAtar, stepped by
# bench/minatar_ref.py: minatar.Environment's defaults, act + state() per step), when
# MINATAR_SRC names a checkout of it (the directory holding the `minatar` package; it is
# never copied into this repository); without it, apex's figures alone. apex and the
# reference alternate for ENV_BENCH_ROUNDS rounds (default 3):
#   BENCH env.minatar_<game>.steps_per_s <median over rounds> steps/s
#   BENCH env.minatar_<game>.ref_steps_per_s <median over rounds> steps/s
#   BENCH env.minatar_<game>.ratio_vs_python <median of the rounds' ratios> x    (goal >= 50)
#   BENCH env.minatar_<game>.cpu_ratio_vs_python <x> x   the same from steps per CPU second
#       of each side (bench_env's thread, the reference's process): on a shared machine the
#       two processes get different shares of a core, which the wall-clock ratio includes
# Then MinAtar/<Game>-render84-v0 beside the plain game (bench_env --only render84):
#   BENCH env.minatar_<game>_render84.steps_per_s <x> steps/s
#   BENCH env.minatar_<game>_render84.cost_vs_plain <x> x   plain rate / rendered rate
# The machine is shared and noisy: compare ratios from one run, not numbers across runs.
# Usage (repo root or anywhere): MINATAR_SRC=/work/ref/MinAtar bash bench/run_env.sh
#   env: BUILD (default build), MINATAR_SRC, ENV_BENCH_ROUNDS
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/machine.sh
source bench/lib.sh
BUILD=${BUILD:-build}
PY=/usr/bin/python3 # Debian's interpreter has numpy (see ../shared/peers/README.md)
ROUNDS=${ENV_BENCH_ROUNDS:-3}
BIN="$BUILD/bench/bench_env"

[ -x "$BIN" ] || make --no-print-directory "$BIN" >&2

apex_out=$("$BIN" --only cartpole)
echo "$apex_out"
peer_out=$("$PY" ../shared/peers/cartpole.py)
echo "$peer_out"

apex=$(bench_field "$apex_out" BENCH env.cartpole.steps_per_s)
py=$(bench_field "$peer_out" RESULT cartpole_py.steps_per_s)
np64=$(bench_field "$peer_out" RESULT cartpole_np64.steps_per_s)
if [ -z "$apex" ] || [ -z "$py" ] || [ -z "$np64" ]; then
  echo "run_env.sh: could not parse a result (apex='$apex' py='$py' np64='$np64')" >&2
  exit 1
fi
awk -v a="$apex" -v p="$py" 'BEGIN { printf "BENCH env.cartpole.ratio_vs_python %.1f x\n", a / p }'
awk -v a="$apex" -v p="$np64" 'BEGIN { printf "BENCH env.cartpole.ratio_vs_numpy64 %.1f x\n", a / p }'

"$BIN" --only continuous

GAMES="asterix breakout freeway seaquest space_invaders"
if [ -z "${MINATAR_SRC:-}" ]; then
  echo "# MinAtar: MINATAR_SRC is not set: apex's figures alone (no reference to compare with)"
  "$BIN" --only minatar
  "$BIN" --only render84
  exit 0
fi
if [ ! -d "$MINATAR_SRC/minatar" ]; then
  echo "run_env.sh: MINATAR_SRC=$MINATAR_SRC holds no minatar package" >&2
  exit 1
fi
# per game, space-separated over the rounds: apex values, reference values, ratios, and the
# ratios of the CPU-second rates
declare -A A R Q C
for r in $(seq 1 "$ROUNDS"); do
  a_out=$("$BIN" --only minatar)
  sed "s/^/# round $r: /" <<<"$a_out"
  r_out=$("$PY" bench/minatar_ref.py --minatar-src "$MINATAR_SRC")
  sed "s/^/# round $r: /" <<<"$r_out"
  for g in $GAMES; do
    a=$(bench_field "$a_out" BENCH "env.minatar_$g.steps_per_s")
    p=$(bench_field "$r_out" RESULT "minatar_${g}_ref.steps_per_s")
    if [ -z "$a" ] || [ -z "$p" ]; then
      echo "run_env.sh: could not parse $g (apex='$a' ref='$p')" >&2
      exit 1
    fi
    A[$g]="${A[$g]:-} $a" R[$g]="${R[$g]:-} $p"
    Q[$g]="${Q[$g]:-} $(awk -v a="$a" -v p="$p" 'BEGIN { printf "%.2f", a / p }')"
    ac=$(bench_field "$a_out" BENCH "env.minatar_$g.steps_per_cpu_s")
    pc=$(bench_field "$r_out" RESULT "minatar_${g}_ref.steps_per_cpu_s")
    C[$g]="${C[$g]:-} $(awk -v a="$ac" -v p="$pc" 'BEGIN { printf "%.2f", a / p }')"
  done
done
for g in $GAMES; do
  # shellcheck disable=SC2086 # the per-round values are words
  echo "# minatar_$g: apex${A[$g]}; reference${R[$g]}; ratios${Q[$g]} (goal >= 50); CPU-second ratios${C[$g]}"
  # shellcheck disable=SC2086
  echo "BENCH env.minatar_$g.steps_per_s $(bench_median ${A[$g]}) steps/s"
  # shellcheck disable=SC2086
  echo "BENCH env.minatar_$g.ref_steps_per_s $(bench_median ${R[$g]}) steps/s"
  # shellcheck disable=SC2086
  printf "BENCH env.minatar_%s.ratio_vs_python %.1f x\n" "$g" "$(bench_median ${Q[$g]})"
  # shellcheck disable=SC2086
  printf "BENCH env.minatar_%s.cpu_ratio_vs_python %.1f x\n" "$g" "$(bench_median ${C[$g]})"
done
# The rendered games (84 x 84 frames) against the plain ones, in one run of bench_env.
"$BIN" --only render84
