#!/usr/bin/env bash
# smoke: slow
# Frame mode (issue #27: each frame sent and stored once) survives kill -9 of a replay shard,
# with nothing acknowledged lost. configs/smoke.ini (CartPole) with [env] frame_stack = 4, so
# stacks of float frames, [replay] frame_storage on (the default), shards = 2 and durability =
# wal, run by `apex-local --restart on-failure`. Shard 1 (actor 1's) is killed with SIGKILL
# twice: after its first snapshot, and again after it restored. Checked:
# - the learner trains from both shards, before and after the kills;
# - each restart restores frames (the snapshot's frame sections and the log's batches);
# - no acknowledged batch is missing (the exactly-once marks of apex-replay --shard k --dump
#   against what each actor saw acknowledged, as shard_kill.sh) and no row was refused for
#   frames that never came: every frame a stored row names was stored (the re-sent batches
#   that arrive after new ones are held back for order, not given up on);
# - the dumped rows are stacks of CartPole frames (each row's next_obs stack is its obs stack
#   moved on by n steps, unless the episode ended: the frames came back in their order).
# FRAMES_COMPRESS=zstd|lz4 runs it with [replay] compress (frames_kill_zstd.sh does). Marked
# slow (not run under ASan) for CI's budget: frames_kill_zstd.sh runs the same paths and the
# compressed ones under ASan.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
RUNS="$TMP/runs"
RUN="$RUNS/smoke"
ep() { echo "tcp://127.0.0.1:$(free_port)"; }
I0=$(ep); I1=$(ep); S0=$(ep); S1=$(ep); PUB=$(ep); ST=$(ep)
# key: replay.frame_storage
SETS=(--set replay.shards=2 --set "endpoints.replay_insert_bind=$I0,$I1" --set "endpoints.replay_insert=$I0,$I1"
      --set "endpoints.replay_sample_bind=$S0,$S1" --set "endpoints.replay_sample=$S0,$S1"
      --set "endpoints.learner_weights_bind=$PUB" --set "endpoints.learner_weights=$PUB"
      --set "endpoints.learner_stats_bind=$ST" --set "endpoints.learner_stats=$ST"
      --set run.out_dir="$RUNS" --set run.max_seconds=0 --set run.target_return=100000
      --set env.frame_stack=4 --set replay.frame_storage=true --set "replay.compress=${FRAMES_COMPRESS:-none}"
      --set replay.durability=wal --set replay.snapshot_interval_s=2
      --set actor.max_pending_batches=4096 --set actor.send_batch=200 --set actor.max_steps_per_s=300)
scripts/apex-local configs/smoke.ini --bin "$APEX_BIN" --quiet --no-eval --restart on-failure "${SETS[@]}" \
  >"$TMP/launcher.out" 2>&1 &
LPID=$!
PIDS+=("$LPID")
wait_for 30 grep -q "all daemons up" "$TMP/launcher.out" || bad "the cluster did not start: $(tail -3 "$TMP/launcher.out")"
both() { grep -q "replay shard 0 .* answers" "$RUN/learner.log" && grep -q "replay shard 1 .* answers" "$RUN/learner.log"; }
wait_for 60 both && wait_for 120 gt updates 200 \
  && key_ok replay.frame_storage "the learner trains from two frame-mode shards (updates $(col updates))" \
  || bad "no training: $(tail -3 "$RUN/learner.log")"
grep -q "frames [1-9][0-9]* inserted" "$RUN/replay1.log" && ok "shard 1 stores frames: $(grep -o 'frames [0-9]* inserted.*' "$RUN/replay1.log" | tail -1)" \
  || bad "shard 1 logs no frames"
restarts() { grep -c "replay1 restarted" "$TMP/launcher.out" || true; }
restores() { grep -c "restored from .*/replay1 in" "$RUN/replay1.log" || true; }
for k in 1 2; do
  wait_for 60 test -s "$RUN/replay1/snapshot.bin" || bad "shard 1 wrote no snapshot"
  R1=$(pgrep -f "apex-replay .*--shard 1" | head -1)
  [ -n "$R1" ] || bad "no shard 1 process"
  kill -9 "$R1"
  wait_for 60 bash -c "[ \$(grep -c 'replay1 restarted' '$TMP/launcher.out') -ge $k ]" || bad "no restart $k"
  wait_for 60 bash -c "[ \$(grep -c 'restored from .*/replay1 in' '$RUN/replay1.log') -ge $((k + 1)) ]" \
    && ok "kill $k: shard 1 restarted and restored: $(grep -o 'restored from .*' "$RUN/replay1.log" | tail -1)" \
    || bad "kill $k: no restore"
  u=$(col updates)
  wait_for 90 gt updates $((u + 100)) || bad "no training after kill $k"
done
back() { grep -q "replay shard 1 .* is back" "$RUN/learner.log"; }
wait_for 60 back && ok "the learner took shard 1 back" || bad "shard 1 was not taken back"
i1=$(grep -o 'frames [0-9]* inserted' "$RUN/replay1.log" | tail -1 | cut -d' ' -f2)
wait_for 60 bash -c "[ \$(grep -o 'frames [0-9]* inserted' '$RUN/replay1.log' | tail -1 | cut -d' ' -f2) -gt ${i1:-0} ]" \
  && ok "shard 1 takes frames again after the restores" || bad "shard 1 takes no frames after the restores"
kill -TERM "$LPID"
rc=0; wait "$LPID" || rc=$?
[ "$rc" = 0 ] && ok "SIGTERM: launcher and daemons exit 0" || bad "launcher exit $rc: $(tail -5 "$TMP/launcher.out")"
for k in 0 1; do
  missing=$(grep -o 'rows refused for missing frames [0-9]*' "$RUN/replay$k.log" | awk '{s += $NF} END {print s + 0}')
  skipped=$(grep -o 'gaps given up on [0-9]*' "$RUN/replay$k.log" | awk '{s += $NF} END {print s + 0}')
  final=$(grep -o 'stopping: .*' "$RUN/replay$k.log" | tail -1)
  [ "$missing" = 0 ] && [ "$skipped" = 0 ] && ok "shard $k: no row refused for missing frames, no gap given up ($final)" \
    || bad "shard $k: $missing rows refused for missing frames, $skipped gaps given up"
  expect_rc 0 "apex-replay --shard $k --dump restores shard $k" "$APEX_BIN/apex-replay" -c "$RUN/config.ini" --shard $k --dump "$TMP/dump$k.csv"
  "$PY" - "$TMP/dump$k.csv.marks" "$RUN/actor$k.log" "$k" <<'PY' && ok "shard $k holds every batch actor $k saw acknowledged (see above)" || bad "shard $k lost acknowledged batches of actor $k"
import csv, re, sys
stop = [l for l in open(sys.argv[2]) if "stopping after" in l][-1]
m = re.search(r"(\d+) acked, (\d+) dropped, (\d+) unacked from seq (\d+) \(epoch (\d+)\)", stop)
acked, dropped, unacked, first_unacked, epoch = map(int, m.groups())
r = [r for r in csv.DictReader(open(sys.argv[1])) if int(r["actor"]) == int(sys.argv[3])][0]
missing = [int(x) for x in r["missing"].split()]
lost = [q for q in missing if q < first_unacked]
print("    actor %s: %d acked, %d dropped, first unacked seq %d; %d of the seqs below it missing"
      % (sys.argv[3], acked, dropped, first_unacked, len(lost)))
ok = int(r["epoch"]) == epoch and dropped == 0 and not lost and int(r["window_first"]) == 0 \
     and int(r["hwm"]) >= first_unacked
sys.exit(0 if ok else 1)
PY
  # Rows are CartPole stacks of 4 frames of 4 floats: next_obs (n = 3 steps on, or fewer at an
  # episode's end) shares its oldest frame with obs's newest when n = 3 and nothing ended.
  "$PY" - "$TMP/dump$k.csv" <<'PY' && ok "shard $k's dumped rows are frame stacks in order (see above)" || bad "shard $k's rows are not consistent stacks"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
obs = lambda r, p: [float(r["%s%d" % (p, j)]) for j in range(16)]
full = same = 0
for r in rows:
    o, n = obs(r, "obs"), obs(r, "next_obs")
    if abs(float(r["discount"]) - 0.99 ** 3) < 1e-5:  # a full 3-step window
        full += 1
        same += o[12:16] == n[0:4]
print("    %d rows, %d of them full 3-step windows, %d of those share the frame they must" % (len(rows), full, same))
sys.exit(0 if rows and full > 0 and same == full else 1)
PY
done
finish
