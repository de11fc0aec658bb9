#!/usr/bin/env bash
# smoke: slow
# Continuous control through the real daemons (issue #28): Pendulum-v1 with Ape-X DPG
# (configs/pendulum.ini via apex-local: 2 DPG actors with Gaussian noise per env, the replay
# server, the DPG learner with TD3's options, the evaluator) learns within a fixed budget of
# PENDULUM_LEARN_UPDATES learner updates (default 6000 of 128 transitions; the limiter holds
# samples_per_insert = 32, so that is also a fixed number of frames, ~24 000, printed),
# evaluated on the final checkpoint: 100 greedy episodes, mean >= PENDULUM_LEARN_MIN (default
# -400). A random policy averages about -1 200 and a swung-up, balanced pendulum about -150
# (Gymnasium's leaderboard bar is -200): tuned runs reach -140 after ~16 000 frames, so the
# bar leaves room for a slow seed's tail without passing an unlearned policy. The launcher's
# stop on target_return is off (0 is unreachable: every step costs), so the budget decides;
# the wall-clock deadline is only a safety net. PENDULUM_SEED=k runs [run] seed k (seeds 1-4
# on a 2-vCPU Zen 5: -135, -285, -163, -137).
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
UPDATES=${PENDULUM_LEARN_UPDATES:-6000}
MIN=${PENDULUM_LEARN_MIN:--400}
RUNS="$TMP/runs"
RUN="$RUNS/pendulum"
SETS=($(endpoint_sets) --set run.out_dir="$RUNS" --set run.max_seconds=600 --set run.target_return=0
      --set learner.max_steps="$UPDATES" --set eval.interval_s=30 ${PENDULUM_SEED:+--set run.seed=$PENDULUM_SEED})
rc=0
scripts/apex-local configs/pendulum.ini --bin "$APEX_BIN" --quiet "${SETS[@]}" >"$TMP/launcher.out" 2>&1 || rc=$?
grep -q "reached \[learner\] max_steps = $UPDATES" "$RUN/learner.log" && ok "the DPG learner ran its budget of $UPDATES updates ($(col env_frames) frames)" \
  || bad "the learner did not finish its budget: $(grep stopping "$TMP/launcher.out" | tail -1)"
"$APEX_BIN/apex-eval" -c "$RUN/config.ini" --checkpoint "$RUN/checkpoint.bin" --episodes 100 >"$TMP/eval.out" 2>"$TMP/eval.err" \
  || bad "apex-eval failed: $(cat "$TMP/eval.err")"
mean=$(sed -n 's/.* mean \([-0-9.]*\) .*/\1/p' "$TMP/eval.out")
awk -v m="${mean:--99999}" -v t="$MIN" 'BEGIN { exit !(m >= t) }' \
  && ok "Pendulum learned: greedy mean return $mean over 100 episodes (random: ~-1200; bar $MIN)" \
  || bad "Pendulum did not learn enough: mean ${mean:-?} (bar $MIN): $(cat "$TMP/eval.out")"
finish
