#!/usr/bin/env bash
# smoke: slow
# Recovery keeps learning: configs/cartpole.ini with [replay] durability = wal through
# `apex-local --restart on-failure`, run until it has settled: solved (a greedy evaluation
# of 100 episodes >= 475), past [learner] lr_steps (the learning rate at its end), and the
# last 100 evaluations at a median >= 475. Then the replay server is killed with SIGKILL,
# restarted by the launcher, and restores its data and rate limiter. Then:
#   - the learner never bursts: no metrics row after the kill runs above twice the rate
#     the config caps it at (actors x envs x max_steps_per_s x samples_per_insert /
#     batch_size). The actors run at 800 steps/s here (the config's 2 400), so that the cap
#     (800 updates/s) is well below what the learner can do even on a loaded 2-core machine
#     (at 2 400 the cap is about the learner's own speed there, and a burst cannot show).
#     With the sample count forgotten on restore (and no clamp on the credit: the defect
#     this was written for) it ran 3 900 updates/s after the kill;
#   - training goes on for REPLAY_KILL_UPDATES (default 30 000) more updates, and the greedy
#     evaluations after the restore (apex-eval --follow evaluates versions as they come)
#     hold a median >= 400 over that stretch. A solved CartPole DQN falls back now and then
#     on its own, with no kill (docs/architecture.md, "CartPole after it is solved"): about
#     1 stretch in 12 has a median below 400. So when the first stretch falls short, a second
#     trial decides: the run is let settle again (as before the first kill), the replay is
#     killed again, and the next stretch is judged. The check fails when both fall short (a
#     defect that breaks learning after a restore fails every trial; two falls of the
#     DQN's own in a row, each from a settled run, are ~1 in 150).
# Deadlines are generous; nothing here waits for a fixed time.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
UPD=${REPLAY_KILL_UPDATES:-30000}
STEPS_PER_S=800
RUNS="$TMP/runs"
RUN="$RUNS/cartpole"
SETS=($(endpoint_sets) --set run.out_dir="$RUNS" --set run.target_return=100000 --set run.max_seconds=0
      --set replay.durability=wal --set replay.snapshot_interval_s=5
      --set actor.max_steps_per_s=$STEPS_PER_S)
scripts/apex-local configs/cartpole.ini --bin "$APEX_BIN" --quiet --restart on-failure "${SETS[@]}" >"$TMP/launcher.out" 2>&1 &
LPID=$!
PIDS+=("$LPID")
wait_for 30 grep -q "all daemons up" "$TMP/launcher.out" || bad "the cluster did not start: $(tail -3 "$TMP/launcher.out")"
# replay_pid: the replay server's pid, the launcher's latest word on it.
replay_pid() {
  { sed -n "s/.*all daemons up: replay\[\([0-9]*\)\].*/\1/p; s/^apex-local: replay restarted \[\([0-9]*\)\].*/\1/p" \
      "$TMP/launcher.out" || true; } | tail -n 1
}
# evals_from N: the greedy means in eval.csv from data row N on (1-based).
evals_from() { awk -F, -v n="$1" 'NR > n { print $8 }' "$RUN/eval.csv" 2>/dev/null; } # eval_mean
eval_rows() { echo $(($(wc -l <"$RUN/eval.csv") - 1)); }
solved() { evals_from 1 | awk '$1 >= 475 { f = 1 } END { exit !f }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
count() { grep -c "$1" "$2" 2>/dev/null || true; }
count_gt() { [ "$(count "$1" "$2")" -gt "$3" ]; }
wait_for 300 solved && ok "solved ($(evals_from 1 | wc -l) evaluations)" || bad "not solved within 300 s: $(evals_from 1 | tail -20 | tr '\n' ' ')"
LR_STEPS=$(sed -n 's/^lr_steps *= *//p' configs/cartpole.ini)
[ -n "$LR_STEPS" ] || bad "configs/cartpole.ini sets no lr_steps"
last100() { evals_from 1 | tail -n 100; }
settled() { gt updates "${LR_STEPS:-0}" && [ "$(last100 | wc -l)" -ge 100 ] && awk -v m="$(last100 | median)" 'BEGIN { exit !(m >= 475) }'; }
cfg() { sed -n "s/^$1 *= *//p" configs/cartpole.ini; }
cap=$(($(cfg num_actors) * $(cfg envs_per_actor) * STEPS_PER_S * $(cfg samples_per_insert) / $(cfg batch_size)))

# trial K: from a settled run, kill the replay server, let the launcher restart it, train
# UPD more updates; checks the restart, the restore and the burst, and leaves the greedy
# median of the evaluations after the restore in MED (and their count and lowest in N_AFTER,
# LOW). A run that does not settle (a second trial's, after a fall that never recovers)
# fails it, with MED 0.
trial() {
  local k=$1 rows_at_kill restarts restores u_restart n_before
  if wait_for 300 settled; then
    ok "trial $k: settled before the kill: $(col updates) updates, last 100 evaluations at a median of $(last100 | median)"
  else
    bad "trial $k: not settled within 300 s: $(col updates) updates, last 100 evaluations at a median of $(last100 | median)"
    MED=0 N_AFTER=0 LOW=-
    return
  fi
  rows_at_kill=$(csv_rows)
  restarts=$(count "replay restarted" "$TMP/launcher.out")
  restores=$(count "restored from" "$RUN/replay.log")
  kill -9 "$(replay_pid)"
  wait_for 60 count_gt "replay restarted" "$TMP/launcher.out" "$restarts" && ok "trial $k: the launcher restarted the replay server" ||
    bad "trial $k: no restart: $(tail -3 "$TMP/launcher.out")"
  wait_for 60 count_gt "restored from" "$RUN/replay.log" "$restores" || bad "trial $k: no restore line"
  # Evaluations of versions the learner published after the restore.
  u_restart=$(col updates)
  n_before=$(eval_rows)
  wait_for 300 gt updates $((u_restart + UPD)) && ok "trial $k: training goes on after the restore (updates $u_restart -> $(col updates))" ||
    bad "trial $k: training stalled after the restore (updates $(col updates))"
  enough() { [ "$(evals_from $((n_before + 1)) | wc -l)" -ge 5 ]; }
  wait_for 120 enough || bad "trial $k: fewer than 5 evaluations after the restore"
  MED=$(evals_from $((n_before + 1)) | median)
  N_AFTER=$(evals_from $((n_before + 1)) | wc -l)
  LOW=$(evals_from $((n_before + 1)) | sort -g | awk "NR == 1")
  "$PY" - "$RUN/metrics.csv" "$rows_at_kill" "$cap" <<'PY' && ok "trial $k: no burst after the restore (the cap: $cap updates/s)" || bad "trial $k: the learner burst after the restore"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
after, cap = rows[int(sys.argv[2]):], float(sys.argv[3])
ups = lambda rs: [float(r["updates_per_s"]) for r in rs]
print("    updates/s: median %.0f over the run; max %.0f before the kill, %.0f after (bound: 2 x the cap)" % (
    sorted(ups(rows))[len(rows) // 2], max(ups(rows[:int(sys.argv[2])]) or [0]), max(ups(after))))
sys.exit(0 if after and max(ups(after)) <= 2 * cap else 1)
PY
}
above() { awk -v m="$1" 'BEGIN { exit !(m >= 400) }'; }
trial 1
if above "$MED"; then
  ok "greedy returns stay above 400 after the replay kill: median $MED of $N_AFTER evaluations (lowest $LOW)"
else
  first="median $MED of $N_AFTER evaluations (lowest $LOW)"
  echo "    trial 1: greedy returns after the kill at a $first: the DQN's own fall or the kill? a second trial decides"
  trial 2
  above "$MED" && ok "greedy returns stay above 400 after the second replay kill: median $MED of $N_AFTER evaluations (lowest $LOW; after the first, $first)" ||
    bad "greedy returns after the replay kill fell in both trials: $first, then median $MED of $N_AFTER (lowest $LOW)"
fi
kill -TERM "$LPID"
rc=0; wait "$LPID" || rc=$?
[ "$rc" = 0 ] && ok "SIGTERM: launcher and daemons exit 0" || bad "launcher exit $rc"
finish
