#!/usr/bin/env bash
# smoke: slow
# [env] id = python learns (#17.4): configs/python-cartpole.ini as shipped -- CartPole-v1 in
# Python (python/apex_cartpole.py, Gymnasium's transcribed; the test of it against the
# reference is check_pyenv's) stepped by each apex-actor's env worker over the local
# transport -- through scripts/apex-local, until a greedy evaluation (100 episodes, on the
# built-in CartPole-v1: [env] eval_id) reaches 475. A functional check, not a timing claim:
# the budget only keeps a broken run from going on forever (PY_LEARN_MAX_SECONDS, default
# 420). Also: the actors really stepped Python (their logs), and no worker outlives the run.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
RUNS="$TMP/runs"
RUN="$RUNS/python-cartpole"
rc=0
scripts/apex-local configs/python-cartpole.ini --bin "$APEX_BIN" --quiet $(endpoint_sets) \
  --set run.out_dir="$RUNS" --set run.seed=1 \
  --set run.max_seconds="${PY_LEARN_MAX_SECONDS:-420}" >"$TMP/launcher.out" 2>&1 || rc=$?
grep -q "stop at greedy eval >= 475 (evaluated on CartPole-v1, \[env\] eval_id)" "$TMP/launcher.out" \
  && ok "the launcher evaluates on [env] eval_id" || bad "launcher: $(grep -m1 'run directory' "$TMP/launcher.out")"
grep -q "stopping: solved: greedy mean return" "$TMP/launcher.out" \
  && ok "the Python CartPole learned: $(grep -o 'solved: .*' "$TMP/launcher.out")" \
  || { bad "not solved within the budget"; tail -5 "$TMP/launcher.out"; tail -3 "$RUN/eval.csv" 2>/dev/null; }
[ "$rc" = 0 ] && ok "launcher exit 0" || bad "launcher exit $rc"
for i in 0 1; do
  grep -q "actor $i: 8 x python (apex_cartpole:CartPoleEnv) (in overlapped groups)" "$RUN/actor$i.log" \
    && grep -q "python env bridge at local (pipes and shared memory): 1 worker x 8 envs" "$RUN/actor$i.log" \
    && ok "actor $i stepped the Python envs over the local transport" || bad "actor $i: $(grep -m1 'actor $i:' "$RUN/actor$i.log")"
  for p in $({ grep -o "worker [0-9]*: started pid [0-9]*" "$RUN/actor$i.log" || true; } | awk '{print $5}'); do
    [ ! -e "/proc/$p" ] && ok "actor $i's worker $p ended with it" || bad "actor $i's worker $p outlived the run"
  done
done
[ -s "$RUN/best.bin" ] && ok "best.bin kept" || bad "no best.bin"
finish
