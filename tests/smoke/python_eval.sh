#!/usr/bin/env bash
# apex-eval steps a Python env itself (#27.5): configs/python-cartpole.ini with [env] eval_id
# emptied, through scripts/apex-local, which now starts apex-eval --follow for it; the
# evaluator's own env worker (local transport) evaluates each version on 20 episodes, writes
# eval.csv rows and best.bin, and the run stops at a target_return of 45 (low, to be quick:
# a functional check, not a timing claim; PY_EVAL_MAX_SECONDS, default 300, only keeps a
# broken run from going on forever). [env] eval_kwargs = {"max_episode_steps": 50} gives the
# evaluator's envs a time limit of 50 (the actors' stay at kwargs' 500): no evaluation
# episode returns more than 50, and the run stops when they all reach it. No evaluation
# worker outlives the run.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
RUNS="$TMP/runs"
RUN="$RUNS/python-cartpole"
rc=0
# key: env.eval_kwargs
scripts/apex-local configs/python-cartpole.ini --set 'env.eval_kwargs={"max_episode_steps": 50}' \
  --bin "$APEX_BIN" --quiet $(endpoint_sets) --set env.eval_id= --set run.out_dir="$RUNS" \
  --set run.target_return=45 --set eval.episodes=20 --set run.max_seconds="${PY_EVAL_MAX_SECONDS:-300}" \
  >"$TMP/launcher.out" 2>&1 || rc=$?
grep -q "stop at greedy eval >= 45 (evaluated by apex-eval's own Python env workers)" "$TMP/launcher.out" \
  && ok "the launcher starts apex-eval for a python run without eval_id" \
  || bad "launcher: $(grep -m1 'run directory' "$TMP/launcher.out")"
grep -q "stopping: solved: greedy mean return" "$TMP/launcher.out" \
  && ok "stopped at target_return: $(grep -o 'solved: .*' "$TMP/launcher.out")" \
  || { bad "not solved within the budget"; tail -5 "$TMP/launcher.out"; }
[ "$rc" = 0 ] && ok "launcher exit 0" || bad "launcher exit $rc"
grep -q "python env bridge at local (pipes and shared memory): 1 worker x 20 envs" "$RUN/eval.log" \
  && ok "apex-eval stepped its own Python envs" || bad "eval.log: $(grep -m1 'bridge' "$RUN/eval.log")"
rows=$(($(wc -l <"$RUN/eval.csv") - 1))
[ "$rows" -ge 1 ] && awk -F, 'NR > 1 && $7 != 20 { exit 1 }' "$RUN/eval.csv" \
  && ok "eval.csv: $rows rows of 20 episodes" || bad "eval.csv: $(tail -2 "$RUN/eval.csv")"
# eval_max (column 11) at most 50, and 50 in the last row (the episodes the limit cut).
awk -F, 'NR > 1 && $11 > 50 { exit 1 } END { exit $11 != 50 }' "$RUN/eval.csv" \
  && key_ok env.eval_kwargs "eval_kwargs: evaluation episodes end at 50 steps (eval_max <= 50, 50 last)" \
  || bad "eval_kwargs: $(tail -2 "$RUN/eval.csv")"
[ -s "$RUN/best.bin" ] && ok "best.bin kept" || bad "no best.bin"
for p in $({ grep -o "worker [0-9]*: started pid [0-9]*" "$RUN/eval.log" || true; } | awk '{print $5}'); do
  [ ! -e "/proc/$p" ] && ok "the evaluator's worker $p ended with it" || bad "the evaluator's worker $p outlived the run"
done
! grep -l "runtime error\|AddressSanitizer\|LeakSanitizer" "$RUN"/*.log 2>/dev/null \
  && ok "no sanitizer report in any log" || bad "a sanitizer report (see above)"
finish
