#!/usr/bin/env bash
# The "it learns" gate: the real cluster with configs/cartpole.ini and a fixed seed must
# reach a greedy evaluation (100 episodes) of at least 195 -- far above random (~22) --
# within a generous budget. A functional check, not a timing claim: the budget only keeps a
# broken learner from running forever (LEARN_MAX_SECONDS, default 240).
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
RUNS="$TMP/runs"
rc=0
scripts/apex-local configs/cartpole.ini --bin "$APEX_BIN" --quiet $(endpoint_sets) \
  --set run.out_dir="$RUNS" --set run.seed=1 --set run.target_return=195 \
  --set run.max_seconds="${LEARN_MAX_SECONDS:-240}" >"$TMP/launcher.out" 2>&1 || rc=$?
grep -q "stopping: solved: greedy mean return" "$TMP/launcher.out" \
  && ok "CartPole-v1 learned: $(grep -o 'solved: .*' "$TMP/launcher.out")" \
  || { bad "not solved within the budget"; tail -5 "$TMP/launcher.out"; tail -3 "$RUNS/cartpole/eval.csv" 2>/dev/null; }
[ "$rc" = 0 ] && ok "launcher exit 0" || bad "launcher exit $rc"
[ -s "$RUNS/cartpole/best.bin" ] && ok "best.bin kept" || bad "no best.bin"
finish
