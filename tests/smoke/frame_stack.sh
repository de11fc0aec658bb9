#!/usr/bin/env bash
# smoke: slow
# [env] frame_stack (issue #27) through the real daemons, each run via apex-local:
#   - CartPole-v1 with frame_stack = 2 learns (greedy >= 195 over 100 episodes): actors,
#     replay, learner and evaluator all on 8-float stacks of two 4-float frames;
#   - MinAtar Breakout with frame_stack = 2 and its conv net (10x10x4 frames read as 2 frames
#     of 4 channels: in_frames) trains FS_MINATAR_UPDATES updates, and apex-eval evaluates
#     its checkpoint on stacks;
#   - a Python env (python/apex_cartpole.py over the bridge) with frame_stack = 2: the workers
#     emit single frames (the bridge checks obs_dim 4, not 8) and the learner trains on
#     stacks without a bad message.
# The rows themselves (stacks, resets, the truncation's final stack) are checked in
# tests/check_dpg_actor.c's test_frame_stack_rows.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
RUNS="$TMP/runs"
rc=0
scripts/apex-local configs/cartpole.ini --bin "$APEX_BIN" --quiet $(endpoint_sets) \
  --set env.frame_stack=2 --set run.out_dir="$RUNS" --set run.seed=1 --set run.target_return=195 \
  --set run.max_seconds="${LEARN_MAX_SECONDS:-240}" >"$TMP/cartpole.out" 2>&1 || rc=$?
grep -q "stopping: solved: greedy mean return" "$TMP/cartpole.out" \
  && ok "CartPole-v1 on stacks of 2 frames learned: $(grep -o 'solved: .*' "$TMP/cartpole.out")" \
  || { bad "CartPole with frame_stack 2 not solved within the budget (exit $rc)"; tail -5 "$TMP/cartpole.out"; }

RUN="$RUNS/minatar-breakout"
UPD=${FS_MINATAR_UPDATES:-100}
rc=0
scripts/apex-local configs/minatar-breakout.ini --bin "$APEX_BIN" --quiet $(endpoint_sets) \
  --set env.frame_stack=2 --set run.out_dir="$RUNS" --set run.name=minatar-breakout \
  --set replay.min_size_to_sample=500 --set learner.max_steps="$UPD" --set learner.ranks=1 \
  --set run.max_seconds=300 >"$TMP/minatar.out" 2>&1 || rc=$?
grep -q "reached \[learner\] max_steps = $UPD" "$RUN"/learner*.log \
  && ok "MinAtar Breakout on 2-frame stacks trained $UPD updates (conv net on 10x10x8, frame-major)" \
  || { bad "MinAtar with frame_stack 2 did not train (exit $rc)"; grep -h -i -m3 "error\|refus" "$RUN"/*.log; }
"$APEX_BIN/apex-eval" -c "$RUN/config.ini" --checkpoint "$RUN/checkpoint.bin" --episodes 2 >"$TMP/eval.out" 2>"$TMP/eval.err" \
  && grep -q " mean " "$TMP/eval.out" && ok "apex-eval evaluates the stacked checkpoint: $(grep -o 'mean [-0-9.]*' "$TMP/eval.out")" \
  || bad "apex-eval on the stacked checkpoint: $(cat "$TMP/eval.err" "$TMP/eval.out" | head -3)"

RUN="$RUNS/python-cartpole"
rc=0
scripts/apex-local configs/python-cartpole.ini --bin "$APEX_BIN" --quiet $(endpoint_sets) \
  --set env.frame_stack=2 --set run.out_dir="$RUNS" --set run.name=python-cartpole \
  --set python.interpreter="$PY" --set learner.max_steps=200 --set run.max_seconds=300 \
  >"$TMP/python.out" 2>&1 || rc=$?
grep -q "reached \[learner\] max_steps = 200" "$RUN"/learner*.log && [ "$(col bad_messages)" = 0 ] \
  && ok "a Python env's single frames, stacked by the actor: 200 updates, no bad message" \
  || { bad "the Python run with frame_stack 2 (exit $rc): bad_messages '$(col bad_messages)'"; grep -h -i -m3 "error\|refus" "$RUN"/*.log; }
finish
