#!/usr/bin/env bash
# Replay durability (durability = wal): 3 actors insert known, numbered batches while the
# replay server is killed with SIGKILL at random moments (>= 20 times, including during
# snapshots and log appends) and restarted. At the end every acknowledged (actor, seq) must
# be stored exactly once with its priority, nothing is stored twice, and no restore hangs.
# Once, a torn record is appended to the newest log segment after a kill (what a crash in the
# middle of an append leaves), and that restore must report truncating it.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
KILLS=${REPLAY_CRASH_KILLS:-20}
RUNS="$TMP/runs"
PORT=$(free_port)
EP="tcp://127.0.0.1:$PORT"
SETS=(--set run.out_dir="$RUNS" --set run.name=crash --set replay.durability=wal
      --set replay.wal_sync_ms=10 --set replay.snapshot_interval_s=0.3 --set replay.capacity=300000
      --set actor.num_actors=3 --set endpoints.replay_insert_bind="$EP"
      --set "endpoints.replay_sample_bind=tcp://127.0.0.1:$(free_port)")
W="$TMP/work"
mkdir -p "$W"

start_replay() {
  "$APEX_BIN/apex-replay" -c configs/smoke.ini "${SETS[@]}" >>"$TMP/replay.log" 2>&1 &
  RPID=$!
  PIDS+=("$RPID")
  # Restore must finish and the server must listen: it logs its endpoints when ready.
  local n; n=$(grep -c "inserts on" "$TMP/replay.log" || true)
  wait_for 20 bash -c "[ \$(grep -c 'inserts on' '$TMP/replay.log') -gt $n ]"
}

"$PY" tests/smoke/replay_driver.py "$EP" "$W" --actors 3 --rows 5 >"$TMP/driver.out" 2>&1 &
DPID=$!
PIDS+=("$DPID")
hangs=0
TEAR_AT=3 # after this kill, a torn record is appended to the newest segment
for i in $(seq 1 "$KILLS"); do
  start_replay || { hangs=$((hangs + 1)); echo "restore $i did not finish; replay.log ends:"; tail -n 3 "$TMP/replay.log" | sed "s/^/      /"; }
  sleep "$(python3 -c 'import random; print(round(random.uniform(0.1, 0.9), 2))')"
  kill -9 "$RPID" 2>/dev/null || true
  wait "$RPID" 2>/dev/null || true
  if [ "$i" = "$TEAR_AT" ]; then
    seg=$(ls "$RUNS/crash/replay"/wal-*.log | sort | tail -n 1)
    # A record header promising 4096 bytes, followed by 10: a torn tail.
    printf '\x00\x10\x00\x00\x01\x00\x00\x00\xde\xad\xbe\xef0123456789' >>"$seg"
    torn_before=$(grep -c "torn tail was truncated" "$TMP/replay.log" || true)
  fi
done
[ "$hangs" = 0 ] && ok "$KILLS kill -9 / restart cycles, every restore finished" || bad "$hangs restores hung"
start_replay || bad "final start"
# Every start restored (one line each), and the restored size never went down: the ring is
# larger than everything the driver sends, so a smaller count would be lost data.
n_restores=$(grep -c "restored from" "$TMP/replay.log" || true)
[ "$n_restores" = $((KILLS + 1)) ] && ok "every start reported its restore ($n_restores)" || bad "$n_restores restore lines for $((KILLS + 1)) starts"
"$PY" - "$TMP/replay.log" <<'PY' && ok "the restored size never decreased across restarts" || bad "a restore held fewer transitions than the one before"
import re, sys
sizes = [int(m.group(1)) for m in re.finditer(r"restored from .*; now (\d+) transitions", open(sys.argv[1]).read())]
print("    restored sizes:", sizes[:6], "...", sizes[-3:])
sys.exit(0 if sizes and all(b >= a for a, b in zip(sizes, sizes[1:])) else 1)
PY
torn_after=$(grep -c "torn tail was truncated" "$TMP/replay.log" || true)
[ "$torn_after" -gt "${torn_before:-0}" ] && ok "the torn record appended after kill $TEAR_AT was truncated on restore" || bad "no restore reported the torn tail appended after kill $TEAR_AT"
touch "$W/stop"
rc=0; wait "$DPID" || rc=$?
[ "$rc" = 0 ] && ok "every batch acknowledged in the end: $(cat "$TMP/driver.out")" || bad "driver: $(cat "$TMP/driver.out")"
kill -TERM "$RPID"; rc=0; wait "$RPID" || rc=$?
[ "$rc" = 0 ] && ok "replay exits 0 on SIGTERM" || bad "replay exit $rc"
expect_rc 0 "apex-replay --dump restores the state" "$APEX_BIN/apex-replay" -c configs/smoke.ini "${SETS[@]}" --dump "$TMP/dump.csv"

python3 - "$TMP/dump.csv" "$W/acked.txt" "$W/sent.txt" 5 0.6 <<'PY' && ok "every acknowledged batch stored exactly once with its priority; nothing doubled" || bad "exactly-once check failed"
import collections, csv, sys
dump, acked_path, sent_path, rows, alpha = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
count = collections.Counter()
seen_rows = set()
bad = 0
for r in csv.DictReader(open(dump)):
    a, s, k = int(float(r["obs0"])), int(float(r["obs1"])), int(float(r["obs2"]))
    if (a, s, k) in seen_rows:
        bad += 1
        if bad < 5: print("duplicate row", a, s, k)
    seen_rows.add((a, s, k))
    count[(a, s)] += 1
    want = (1.0 + s % 7) ** alpha
    if abs(float(r["priority_alpha"]) - want) > 1e-4 * want:
        bad += 1
        if bad < 5: print("priority", a, s, r["priority_alpha"], "want", want)
acked = set(tuple(map(int, l.split())) for l in open(acked_path))
missing = [b for b in acked if count[b] != rows]
partial = [b for b, c in count.items() if c != rows]
print("batches stored %d, acknowledged %d, missing %d, partial %d, row problems %d"
      % (len(count), len(acked), len(missing), len(partial), bad))
sys.exit(1 if missing or partial or bad else 0)
PY
finish
