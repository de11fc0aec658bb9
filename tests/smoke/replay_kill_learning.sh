#!/usr/bin/env bash
# smoke: slow
# Recovery keeps learning: configs/cartpole.ini with [replay] durability = wal through
# `apex-local --restart on-failure`, run until a greedy evaluation (100 episodes) is solved
# (>= 475); then the replay server is killed with SIGKILL, restarted by the launcher, and
# restores its data and rate limiter. Training goes on for REPLAY_KILL_UPDATES (default
# 4000) more updates, and the greedy evaluations after the restore (apex-eval --follow
# evaluates versions as they come) must stay above 400: their median over that stretch, so
# that the ordinary dips of one CartPole version do not count, a collapse does. (With the
# sample count forgotten on restore, the learner ran 7 000 - 11 500 updates/s for seconds and
# greedy returns fell to 170 and stayed there.) Deadlines are generous; nothing here waits for
# a fixed time.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
UPD=${REPLAY_KILL_UPDATES:-4000}
RUNS="$TMP/runs"
RUN="$RUNS/cartpole"
SETS=($(endpoint_sets) --set run.out_dir="$RUNS" --set run.target_return=100000 --set run.max_seconds=0
      --set replay.durability=wal --set replay.snapshot_interval_s=5)
scripts/apex-local configs/cartpole.ini --bin "$APEX_BIN" --quiet --restart on-failure "${SETS[@]}" >"$TMP/launcher.out" 2>&1 &
LPID=$!
PIDS+=("$LPID")
wait_for 30 grep -q "all daemons up" "$TMP/launcher.out" || bad "the cluster did not start: $(tail -3 "$TMP/launcher.out")"
RPID=$(sed -n "s/.*all daemons up: replay\[\([0-9]*\)\].*/\1/p" "$TMP/launcher.out")
# evals_from N: the greedy means in eval.csv from data row N on (1-based).
evals_from() { awk -F, -v n="$1" 'NR > n { print $8 }' "$RUN/eval.csv" 2>/dev/null; } # eval_mean
solved() { evals_from 1 | awk '$1 >= 475 { f = 1 } END { exit !f }'; }
wait_for 300 solved && ok "solved before the kill (greedy evals: $(evals_from 1 | tr '\n' ' '))" || bad "not solved within 300 s: $(evals_from 1 | tr '\n' ' ')"
kill -9 "$RPID"
wait_for 60 grep -q "replay restarted" "$TMP/launcher.out" && ok "the launcher restarted the replay server" || bad "no restart: $(tail -3 "$TMP/launcher.out")"
wait_for 60 grep -q "restored from" "$RUN/replay.log" || bad "no restore line"
# Evaluations of checkpoints written after the restore: from the eval.csv row after the
# first checkpoint that follows the restart.
u_restart=$(col updates)
n_before=$(($(wc -l <"$RUN/eval.csv") - 1))
wait_for 300 gt updates $((u_restart + UPD)) && ok "training goes on after the restore (updates $u_restart -> $(col updates))" \
  || bad "training stalled after the restore (updates $(col updates))"
enough() { [ "$(evals_from $((n_before + 1)) | wc -l)" -ge 5 ]; }
wait_for 120 enough || bad "fewer than 5 evaluations after the restore"
med=$(evals_from $((n_before + 1)) | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
n_after=$(evals_from $((n_before + 1)) | wc -l)
low=$(evals_from $((n_before + 1)) | sort -g | head -1)
awk -v m="$med" 'BEGIN { exit !(m >= 400) }' \
  && ok "greedy returns stay above 400 after the replay kill: median $med of $n_after evaluations (lowest $low)" \
  || bad "greedy returns after the replay kill fell: median $med of $n_after evaluations (lowest $low)"
"$PY" - "$RUN/metrics.csv" <<'PY' || true
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("    updates/s over the run: max %.0f, median %.0f" % (
    max(float(r["updates_per_s"]) for r in rows), sorted(float(r["updates_per_s"]) for r in rows)[len(rows) // 2]))
PY
kill -TERM "$LPID"
rc=0; wait "$LPID" || rc=$?
[ "$rc" = 0 ] && ok "SIGTERM: launcher and daemons exit 0" || bad "launcher exit $rc"
finish
