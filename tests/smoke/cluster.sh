#!/usr/bin/env bash
# The whole system through the launcher: replay, learner and 2 actors on loopback with a
# tiny config. Checks that transitions reach the replay server, the learner trains and sends
# priorities back, the actors take new weight versions, metrics.csv fills, a checkpoint
# appears and loads in apex-eval, SIGTERM stops everything with status 0 and leaves no
# process behind; then that a daemon killed mid-run is reported by the launcher (exit 1).
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
RUNS="$TMP/runs"
SETS=($(endpoint_sets) --set run.out_dir="$RUNS" --set run.target_return=100000 --set run.max_seconds=0)
RUN="$RUNS/smoke"

# col NAME: value of a column in the last row of metrics.csv (empty if none yet).

scripts/apex-local configs/smoke.ini --bin "$APEX_BIN" --no-eval "${SETS[@]}" >"$TMP/launcher.out" 2>&1 &
LPID=$!
PIDS+=("$LPID")

wait_for 60 gt replay_inserted 0 && ok "transitions reach the replay server" || bad "no transitions in replay"
wait_for 60 gt updates 20 && ok "the learner trains ($(col updates) updates)" || bad "learner did not train"
wait_for 60 gt priority_updates 0 && ok "priorities flow back to the replay server" || bad "no priority updates"
wait_for 60 gt actor_version_min 2 && ok "actors act with new weights (v$(col actor_version_min))" || bad "actors stuck on old weights"
wait_for 60 gt episodes 0 && ok "episode stats reach the learner ($(col episodes) episodes)" || bad "no episodes reported"
wait_for 30 test -s "$RUN/checkpoint.bin" && ok "a checkpoint appears" || bad "no checkpoint"
rows=$(($(wc -l <"$RUN/metrics.csv") - 1))
[ "$rows" -ge 2 ] && ok "metrics.csv has $rows rows" || bad "metrics.csv has $rows rows"

kill -TERM "$LPID"
rc=0; wait "$LPID" || rc=$?
[ "$rc" = 0 ] && ok "SIGTERM: launcher and daemons exit 0" || { bad "launcher exit $rc"; tail -20 "$TMP/launcher.out"; }
sleep 0.5
if pgrep -f "$RUNS" >/dev/null; then bad "orphan processes: $(pgrep -af "$RUNS")"; else ok "no orphan processes"; fi
for f in replay.log learner.log actor0.log actor1.log config.ini; do
  [ -s "$RUN/$f" ] && ok "run dir has $f" || bad "run dir lacks $f"
done
grep -q "final checkpoint written" "$RUN/learner.log" && ok "final checkpoint at shutdown" || bad "no final checkpoint line"

expect_rc 0 "apex-eval loads the checkpoint" "$APEX_BIN/apex-eval" -c "$RUN/config.ini" --checkpoint "$RUN/checkpoint.bin" --episodes 5
grep -q "episodes 5 .*mean" "$TMP/out" && ok "apex-eval prints the summary: $(cat "$TMP/out")" || bad "apex-eval output: $(cat "$TMP/out")"

# Failure path: kill an actor mid-run; the launcher must name it and exit 1. The learner
# resumes from the checkpoint of the first run.
scripts/apex-local configs/smoke.ini --bin "$APEX_BIN" --no-eval "${SETS[@]}" >"$TMP/launcher2.out" 2>&1 &
LPID=$!
PIDS+=("$LPID")
wait_for 30 grep -q "all daemons up" "$TMP/launcher2.out" || bad "second run did not start"
grep -q "resumed from" "$RUN/learner.log" && ok "the learner resumed from its checkpoint" || bad "no resume"
sleep 1
pkill -9 -f "apex-actor -c $RUN/config.ini --index 1" || true
rc=0; wait "$LPID" || rc=$?
[ "$rc" = 1 ] && ok "launcher exits 1 when a daemon dies" || bad "launcher exit $rc after a kill"
grep -q "actor1 died unexpectedly" "$TMP/launcher2.out" && ok "launcher names the dead daemon" || { bad "launcher output:"; tail -20 "$TMP/launcher2.out"; }
sleep 0.5
if pgrep -f "$RUNS" >/dev/null; then bad "orphans after failure: $(pgrep -af "$RUNS")"; else ok "no orphans after failure"; fi
finish
