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
# (Wait for the rows themselves: the checkpoint can appear before the second row does.)
wait_for 30 rows_ge 2 && ok "metrics.csv has $(csv_rows) rows" || bad "metrics.csv has $(csv_rows) rows"

kill -TERM "$LPID"
rc=0; wait "$LPID" || rc=$?
[ "$rc" = 0 ] && ok "SIGTERM: launcher and daemons exit 0" || { bad "launcher exit $rc"; tail -20 "$TMP/launcher.out"; }
wait_for 30 no_procs "$RUNS" && ok "no orphan processes" || bad "orphan processes 30 s after the stop: $(pgrep -af "$RUNS")"
for f in replay.log learner.log actor0.log actor1.log config.ini; do
  [ -s "$RUN/$f" ] && ok "run dir has $f" || bad "run dir lacks $f"
done
grep -q "final checkpoint written" "$RUN/learner.log" && ok "final checkpoint at shutdown" || bad "no final checkpoint line"
# TensorBoard: the event file read back by an independent reader (its own CRC-32C, the
# official protobuf runtime) holds exactly the CSV's rows, stepped by env frames.
"$PY" tests/tb_read.py "$RUN/tb" >"$TMP/tb.csv" 2>"$TMP/tb.err" && ok "tb/ event file: every record's CRCs check ($(($(wc -l <"$TMP/tb.csv") - 1)) scalars)" || bad "tb_read.py: $(cat "$TMP/tb.err")"
"$PY" - "$RUN/metrics.csv" "$TMP/tb.csv" <<'PY' && ok "the TensorBoard scalars equal metrics.csv's rows" || bad "TensorBoard scalars differ from metrics.csv"
import csv, struct, sys
rows = list(csv.DictReader(open(sys.argv[1])))
tags = {"elapsed_s": "time/elapsed_s", "env_frames": "actors/env_frames", "updates": "train/updates",
        "loss": "train/loss", "replay_size": "replay/size", "mean_return_100": "actors/mean_return_100",
        "wait_frac": "time/wait_frac", "replay_sampled": "replay/sampled"}
events = []  # one dict per event, in file order
for r in csv.DictReader(open(sys.argv[2])):
    if not events or events[-1].get("_step") != r["step"] or r["tag"] in events[-1]:
        events.append({"_step": r["step"]})
    events[-1][r["tag"]] = float(r["value"])
f32 = lambda x: struct.unpack("f", struct.pack("f", x))[0]
bad = []
if len(events) != len(rows):
    bad.append("%d events for %d rows" % (len(events), len(rows)))
for i, (row, ev) in enumerate(zip(rows, events)):
    if int(ev["_step"]) != int(row["env_frames"]):
        bad.append("row %d: step %s, env_frames %s" % (i, ev["_step"], row["env_frames"]))
    for col, tag in tags.items():
        want, got = float(row[col]), ev.get(tag)
        # The CSV prints 3 decimals (loss: 6 significant digits); the event holds a float32.
        tol = 6e-4 + 2e-6 * abs(want) if col != "loss" else 1e-5 * abs(want) + 1e-12
        if got is None or not (abs(got - f32(want)) <= tol or (got != got and want != want)):
            bad.append("row %d %s: csv %s, event %s" % (i, col, row[col], got))
print("    %d rows, %d events; %s" % (len(rows), len(events), "; ".join(bad[:3]) or "all equal"))
sys.exit(1 if bad else 0)
PY

expect_rc 0 "apex-eval loads the checkpoint" "$APEX_BIN/apex-eval" -c "$RUN/config.ini" --checkpoint "$RUN/checkpoint.bin" --episodes 5
grep -q "episodes 5 .*mean" "$TMP/out" && ok "apex-eval prints the summary: $(cat "$TMP/out")" || bad "apex-eval output: $(cat "$TMP/out")"

# Failure path: kill an actor mid-run; the launcher must name it and exit 1. The learner
# resumes from the checkpoint of the first run.
rows0=$(csv_rows)
scripts/apex-local configs/smoke.ini --bin "$APEX_BIN" --no-eval --resume "${SETS[@]}" >"$TMP/launcher2.out" 2>&1 &
LPID=$!
PIDS+=("$LPID")
wait_for 30 grep -q "all daemons up" "$TMP/launcher2.out" || bad "second run did not start"
wait_for 30 grep -q "resumed from" "$RUN/learner.log" && ok "the learner resumed from its checkpoint" || bad "no resume"
# Mid-run: once the resumed learner has written a metrics row (the check of the counters
# across the resume below needs one).
wait_for 60 rows_ge $((rows0 + 1)) && ok "the resumed learner writes metrics rows ($rows0 -> $(csv_rows))" || bad "no metrics row after the resume"
pkill -9 -f "apex-actor -c $RUN/config.ini --index 1" || true
rc=0; wait "$LPID" || rc=$?
[ "$rc" = 1 ] && ok "launcher exits 1 when a daemon dies" || bad "launcher exit $rc after a kill"
grep -q "actor1 died unexpectedly" "$TMP/launcher2.out" && ok "launcher names the dead daemon" || { bad "launcher output:"; tail -20 "$TMP/launcher2.out"; }
wait_for 30 no_procs "$RUNS" && ok "no orphans after failure" || bad "orphans 30 s after the failure: $(pgrep -af "$RUNS")"
grep -q "^apex-local: resuming the run in $RUN at update [0-9]*" "$TMP/launcher2.out" && ok "the launcher says the run is resumed: $(grep -m1 -o 'resuming the run.*' "$TMP/launcher2.out")" || bad "launcher: $(head -1 "$TMP/launcher2.out")"
# The counters go on across the resume (the checkpoint holds them): no column runs backwards.
"$PY" - "$RUN/metrics.csv" <<'PY' && ok "env_frames, episodes, updates and elapsed_s never decrease across the resume" || bad "a counter ran backwards across the resume"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
bad = [(c, i) for c in ("env_frames", "episodes", "updates", "elapsed_s")
       for i in range(1, len(rows)) if float(rows[i][c]) < float(rows[i - 1][c])]
print("    %d rows; %s" % (len(rows), bad[:3] or "monotonic"))
sys.exit(1 if bad or len(rows) < 3 else 0)
PY
[ "$(ls "$RUN/tb" | grep -c tfevents)" -ge 2 ] && ok "the resumed learner started a new event file in $RUN/tb" || bad "tb/: $(ls "$RUN/tb")"
# A third start without --resume is a new run: the old one is moved aside, nothing resumes.
scripts/apex-local configs/smoke.ini --bin "$APEX_BIN" --no-eval "${SETS[@]}" --set run.max_seconds=2 >"$TMP/launcher3.out" 2>&1 || true
grep -q "^apex-local: new run in $RUN (the previous run there was moved to $RUN.prev" "$TMP/launcher3.out" && [ -s "$RUN.prev/checkpoint.bin" ] \
  && ok "a start without --resume is a new run; the old one is kept in $RUN.prev" || bad "launcher: $(head -1 "$TMP/launcher3.out")"
grep -q "starting from scratch" "$RUN/learner.log" && ! grep -q "resumed from" "$RUN/learner.log" && ok "the new run's learner starts from scratch" || bad "learner.log of the new run: $(grep -m1 'resumed\|scratch' "$RUN/learner.log")"
finish
