#!/usr/bin/env bash
# run_mujoco.sh: a MuJoCo task's env steps/s against the bare mj_step loop over the same model
# (issue #28's env.mujoco_halfcheetah.steps_per_s; goal >= 90 % of the bare loop).
#
#   MUJOCO_ASSETS=/path/to/gymnasium/envs/mujoco/assets bash bench/run_mujoco.sh
#   MUJOCO_BENCH_TASKS="HalfCheetah-v4:half_cheetah.xml Hopper-v4:hopper.xml" ...
#
# The models are Gymnasium's (apex ships none): MUJOCO_ASSETS, else models/mujoco/ (where
# scripts/fetch-mujoco-models installs them), else the assets of an importable gymnasium
# package. Without them the benchmark is skipped with a message.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/machine.sh
BUILD=${BUILD:-build}
BENCH="$BUILD/bench/bench_mujoco"
PY=${PYTHON:-/usr/bin/python3}
[ -x "$BENCH" ] || make --no-print-directory "$BENCH" >/dev/null
assets=${MUJOCO_ASSETS:-}
if [ -z "$assets" ] && [ -f models/mujoco/half_cheetah.xml ]; then
  assets=models/mujoco
fi
if [ -z "$assets" ]; then
  assets=$("$PY" -c 'import os, gymnasium; print(os.path.join(os.path.dirname(gymnasium.__file__), "envs/mujoco/assets"))' 2>/dev/null || true)
fi
if [ -z "$assets" ] || [ ! -d "$assets" ]; then
  echo "run_mujoco: no Gymnasium MuJoCo assets (set MUJOCO_ASSETS=<gymnasium>/envs/mujoco/assets); skipped" >&2
  exit 0
fi
for tm in ${MUJOCO_BENCH_TASKS:-HalfCheetah-v4:half_cheetah.xml}; do
  "$BENCH" --task "${tm%%:*}" --model "$assets/${tm#*:}" --steps "${MUJOCO_BENCH_STEPS:-20000}" 2>/dev/null
done
