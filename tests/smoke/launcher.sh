#!/usr/bin/env bash
# The keys only the launcher reads, through scripts/apex-local on configs/smoke.ini: [run]
# max_seconds stops the run, [run] target_return stops it at a solved evaluation, and
# [actor] num_actors is the number of apex-actor processes started. The command that sets
# each key is tagged "# key: section.key" just above it (tags may stack), and the check of its
# effect is key_ok section.key: tests/check_keys.c fails when either goes missing, and this
# script's finish fails a tagged key whose check did not pass, so these keys stay covered.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
RUNS="$TMP/runs"
RUN="$RUNS/smoke"

# An unreachable target: only max_seconds can end the run. Three actors.
# key: run.max_seconds
# key: actor.num_actors
rc=0; scripts/apex-local configs/smoke.ini --bin "$APEX_BIN" --no-eval --quiet $(endpoint_sets) --set run.out_dir="$RUNS" --set run.target_return=100000 --set run.max_seconds=2 --set actor.num_actors=3 >"$TMP/a.out" 2>&1 || rc=$?
grep -q "^apex-local: stopping: max_seconds (2) reached" "$TMP/a.out" && [ "$rc" = 0 ] \
  && key_ok run.max_seconds "max_seconds = 2 stops the run: $(grep -o 'stopping: .*' "$TMP/a.out")" || { bad "max_seconds: exit $rc"; tail -5 "$TMP/a.out"; }
grep -q "; 3 actors;" "$TMP/a.out" && [ -s "$RUN/actor2.log" ] && [ ! -e "$RUN/actor3.log" ] && grep -q "actor2\[" "$TMP/a.out" \
  && key_ok actor.num_actors "num_actors = 3 starts actors 0, 1 and 2" || bad "num_actors: $(grep 'actors' "$TMP/a.out" | head -2); $(ls "$RUN")"

# A target every evaluation reaches: the first checkpoint's evaluation stops the run (the
# learner writes one at start-up), long before max_seconds.
# key: run.target_return
rc=0; scripts/apex-local configs/smoke.ini --bin "$APEX_BIN" --quiet --eval-episodes 5 $(endpoint_sets) --set run.out_dir="$RUNS" --set run.target_return=-1000000 --set run.max_seconds=120 >"$TMP/b.out" 2>&1 || rc=$?
grep -q "^apex-local: stopping: solved: greedy mean return .* >= -1e+06 over 5 episodes" "$TMP/b.out" && [ "$rc" = 0 ] \
  && key_ok run.target_return "target_return = -1e6 stops the run at the first evaluation: $(grep -o 'solved: .*' "$TMP/b.out")" || { bad "target_return: exit $rc"; tail -5 "$TMP/b.out"; }

# A launcher killed with SIGKILL (nothing can catch it) takes its daemons with it: they run
# in sessions of their own, so only their parent-death signal reaches them.
scripts/apex-local configs/smoke.ini --bin "$APEX_BIN" --quiet $(endpoint_sets) --set run.out_dir="$RUNS" \
  --set run.name=orphans --set run.target_return=100000 >"$TMP/c.out" 2>&1 &
LPID=$!
PIDS+=("$LPID")
up() { grep -q "^apex-local: all daemons up" "$TMP/c.out"; }
wait_for 60 up || bad "the launcher did not start its daemons: $(tail -3 "$TMP/c.out")"
dpids=$(sed -n 's/^apex-local: all daemons up: //p' "$TMP/c.out" | grep -o '\[[0-9]*\]' | tr -d '[]' | tr '\n' ' ')
kill -KILL "$LPID"
wait "$LPID" 2>/dev/null || true
none_left() { local p; for p in $dpids; do kill -0 "$p" 2>/dev/null && return 1; done; return 0; }
wait_for 30 none_left && ok "SIGKILL of the launcher: its daemons ($dpids) exit too" \
  || bad "daemons outlived their launcher: $(for p in $dpids; do kill -0 "$p" 2>/dev/null && echo -n "$p "; done)"
for p in $dpids; do kill -KILL "$p" 2>/dev/null || true; done
finish
