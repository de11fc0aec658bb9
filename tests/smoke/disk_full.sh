#!/usr/bin/env bash
# A full disk (simulated with a file-size limit, RLIMIT_FSIZE, which makes write(2) fail
# with EFBIG like ENOSPC): the replay's log and snapshots, and the learner's checkpoints.
# Each failure is reported, leaves the previous good file intact, and the daemon keeps
# serving; when the disk "recovers" (the limit is lifted) durability comes back.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
command -v prlimit >/dev/null || skip "prlimit (util-linux) not found"
RUNS="$TMP/runs"
PORT=$(free_port)
EP="tcp://127.0.0.1:$PORT"
acked() { wc -l <"$W/acked.txt" 2>/dev/null || echo 0; }
acked_gt() { [ "$(acked)" -gt "$1" ]; }
# count PATTERN FILE: lines of FILE matching PATTERN (0 when none); count_gt PATTERN FILE N.
count() { grep -c "$1" "$2" 2>/dev/null || true; }
count_gt() { [ "$(count "$1" "$2")" -gt "$3" ]; }

# ---- replay, wal mode: the log hits the limit -------------------------------------------
W="$TMP/w1"; mkdir -p "$W"
SETS=(--set run.out_dir="$RUNS" --set run.name=full --set replay.durability=wal
      --set replay.wal_sync_ms=10 --set replay.snapshot_interval_s=1000 --set replay.capacity=100000
      --set actor.num_actors=2 --set endpoints.replay_insert_bind="$EP"
      --set "endpoints.replay_sample_bind=tcp://127.0.0.1:$(free_port)")
prlimit --fsize=300000:unlimited -- "$APEX_BIN/apex-replay" -c configs/smoke.ini "${SETS[@]}" >"$TMP/r1.log" 2>&1 &
RPID=$!; PIDS+=("$RPID")
"$PY" tests/smoke/replay_driver.py "$EP" "$W" --actors 2 --rows 5 >"$TMP/d1.out" 2>&1 &
DPID=$!; PIDS+=("$DPID")
wait_for 30 grep -q "running WITHOUT durability" "$TMP/r1.log" && ok "log write failure reported: $(grep -m1 'WITHOUT' "$TMP/r1.log" | cut -c1-160)" || bad "no degraded line"
n1=$(acked)
wait_for 30 acked_gt "$n1" && ok "still serving while degraded ($n1 -> $(acked) acked)" || bad "acks stopped while degraded (at $n1)"
kill -0 "$RPID" 2>/dev/null && ok "replay alive" || bad "replay died"
prlimit --pid "$RPID" --fsize=unlimited:unlimited
wait_for 30 grep -q "durability restored" "$TMP/r1.log" && ok "durability restored by a snapshot once the disk recovers" || bad "no recovery line"
touch "$W/stop"; wait "$DPID" || true
kill -TERM "$RPID"; rc=0; wait "$RPID" || rc=$?
[ "$rc" = 0 ] && ok "replay exits 0" || bad "replay exit $rc"
expect_rc 0 "dump after recovery" "$APEX_BIN/apex-replay" -c configs/smoke.ini "${SETS[@]}" --dump "$TMP/dump1.csv"
rows=$(($(wc -l <"$TMP/dump1.csv") - 1)); want=$(( $(acked) * 5 )); [ "$want" -gt 100000 ] && want=100000
[ "$rows" -ge "$want" ] && ok "every acknowledged row the ring can hold restored ($rows rows)" || bad "restored $rows rows, want $want"

# ---- replay, snapshot mode: snapshots hit the limit; the previous one survives ----------
W="$TMP/w2"; mkdir -p "$W"
SETS2=("${SETS[@]}" --set run.name=full2 --set replay.durability=snapshot --set replay.snapshot_interval_s=0.3)
# Its log goes through a pipe, which the file-size limit does not apply to: the stats lines
# go on while snapshots fail.
"$APEX_BIN/apex-replay" -c configs/smoke.ini "${SETS2[@]}" > >(cat >"$TMP/r2.log") 2>&1 &
RPID=$!; PIDS+=("$RPID")
"$PY" tests/smoke/replay_driver.py "$EP" "$W" --actors 2 --rows 5 >"$TMP/d2.out" 2>&1 &
DPID=$!; PIDS+=("$DPID")
SNAP="$RUNS/full2/replay/snapshot.bin"
wait_for 20 test -s "$SNAP" && ok "a first snapshot is written" || bad "no snapshot"
prlimit --pid "$RPID" --fsize=1000:unlimited
# Snapshots are written by one child at a time, which inherits the limit when forked: the
# first to fail was forked after the limit, so from its failure line on no snapshot can
# succeed, and snapshot.bin is the last good one.
wait_for 20 grep -q "replay snapshot failed (disk full)" "$TMP/r2.log" && ok "snapshot failure reported" || bad "no snapshot failure line"
sum1=$(md5sum <"$SNAP")
# The server tries again every snapshot_interval_s (0.3) while it says it is degraded in its
# stats line (one a second): wait for two more of those lines, i.e. several failed tries.
off=$(count "DURABILITY OFF" "$TMP/r2.log")
wait_for 30 count_gt "DURABILITY OFF" "$TMP/r2.log" $((off + 1)) || bad "no stats lines while degraded"
[ "$(md5sum <"$SNAP")" = "$sum1" ] && ok "the previous snapshot is intact after $(($(count "DURABILITY OFF" "$TMP/r2.log") - off)) more degraded stats lines" || bad "snapshot changed while writes fail"
n1=$(acked)
wait_for 30 acked_gt "$n1" && ok "still serving ($n1 -> $(acked) acked)" || bad "acks stopped (at $n1)"
prlimit --pid "$RPID" --fsize=unlimited:unlimited
wait_for 20 grep -q "durability restored" "$TMP/r2.log" && ok "snapshots resume when the disk recovers" || bad "no recovery"
touch "$W/stop"; wait "$DPID" || true
kill -TERM "$RPID"; wait "$RPID" || true

# ---- learner: checkpoints hit the limit; training goes on ---------------------------------
SETS3=(--set run.out_dir="$RUNS" --set run.name=ck $(endpoint_sets) --set learner.checkpoint_interval_s=0.5)
scripts/apex-local configs/smoke.ini --bin "$APEX_BIN" --no-eval --quiet "${SETS3[@]}" --set run.max_seconds=6 >"$TMP/l0.out" 2>&1 || true
CK="$RUNS/ck/checkpoint.bin"
[ -s "$CK" ] && ok "a good checkpoint from a first run" || bad "no first checkpoint"
sum1=$(md5sum <"$CK")
cfg="$RUNS/ck/config.ini"
"$APEX_BIN/apex-replay" -c "$cfg" >"$TMP/r3.log" 2>&1 & PIDS+=($!); R3=$!
# Its log goes through a pipe: the limit applies to every file the learner writes, its log
# too, which would lose the very line this checks once the start-up lines pass 1000 bytes.
prlimit --fsize=1000:unlimited -- "$APEX_BIN/apex-learner" -c "$cfg" > >(cat >"$TMP/l3.log") 2>&1 & PIDS+=($!); L3=$!
"$APEX_BIN/apex-actor" -c "$cfg" --index 0 >"$TMP/a3.log" 2>&1 & PIDS+=($!); A3=$!
wait_for 30 grep -q "checkpoint .* failed: no space" "$TMP/l3.log" && ok "checkpoint failure reported: $(grep -m1 'failed: no space' "$TMP/l3.log" | cut -c1-150)" || bad "no checkpoint failure line"
# The limit applies to every file of the learner (metrics.csv too): watch the replay's
# counters of samples instead (a stats line a second): two more lines with samples in them,
# the second covering only time after the failure was reported.
s1=$(count "samples/s [1-9]" "$TMP/r3.log")
wait_for 60 count_gt "samples/s [1-9]" "$TMP/r3.log" $((s1 + 1)) && kill -0 "$L3" \
  && ok "the learner keeps training ($s1 -> $(count "samples/s [1-9]" "$TMP/r3.log") replay stats lines with samples)" \
  || bad "learner stalled ($s1 -> $(count "samples/s [1-9]" "$TMP/r3.log") stats lines with samples)"
[ "$(md5sum <"$CK")" = "$sum1" ] && ok "the previous checkpoint is intact" || bad "checkpoint changed"
ls "$RUNS/ck/"*.tmp >/dev/null 2>&1 && bad "a .tmp file was left behind" || ok "no temp file left behind"
kill -TERM "$A3" "$L3"; rc=0; wait "$L3" || rc=$?
[ "$rc" = 1 ] && ok "the learner exits 1 when even its final checkpoint fails" || bad "learner exit $rc"
kill -TERM "$R3"; wait "$R3" || true
expect_rc 0 "the intact checkpoint still loads" "$APEX_BIN/apex-eval" -c "$cfg" --checkpoint "$CK" --episodes 2
finish
