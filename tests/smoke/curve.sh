#!/usr/bin/env bash
# [security] mode = curve through the launcher: the whole cluster trains over CurveZMQ, and a
# plaintext actor and an actor with an unauthorized key get nothing into the replay server.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
KEYS="$TMP/keys"
"$APEX_BIN/apex-keygen" "$KEYS" >/dev/null
"$APEX_BIN/apex-keygen" "$TMP/other" actor >/dev/null # a key pair nobody authorized
RUNS="$TMP/runs"
SEC=(--set security.mode=curve --set security.key_dir="$KEYS" --set security.authorized_keys="$KEYS/authorized_keys")
SETS=($(endpoint_sets) --set run.out_dir="$RUNS" --set run.target_return=100000 --set run.max_seconds=0 --set actor.num_actors=4)
scripts/apex-local configs/smoke.ini --bin "$APEX_BIN" --no-eval --actors 2 "${SETS[@]}" "${SEC[@]}" \
  --set actor.num_actors=2 >"$TMP/launcher.out" 2>&1 &
LPID=$!; PIDS+=("$LPID")
RUN="$RUNS/smoke"
wait_for 60 gt updates 20 && ok "the cluster trains over CURVE ($(col updates) updates)" || bad "no training over CURVE"
wait_for 60 gt actor_version_min 2 && ok "actors receive weights over CURVE" || bad "no weights over CURVE"
grep -q "CURVE on" "$RUN/replay.log" && grep -q "CURVE on" "$RUN/learner.log" && ok "both servers run CURVE" || bad "no CURVE lines"
cfg="$RUN/config.ini"
# Intruders: (a) plaintext (mode none), (b) a valid key pair that is not authorized.
"$APEX_BIN/apex-actor" -c "$cfg" --index 0 --set security.mode=none --set actor.stats_interval_ms=200 >"$TMP/plain.log" 2>&1 &
P1=$!; PIDS+=("$P1")
cp -r "$KEYS" "$TMP/keys2"; cp "$TMP/other/actor.key" "$TMP/keys2/actor.key"; chmod 600 "$TMP/keys2/actor.key"
"$APEX_BIN/apex-actor" -c "$cfg" --index 1 --set security.key_dir="$TMP/keys2" >"$TMP/intruder.log" 2>&1 &
P2=$!; PIDS+=("$P2")
wait_for 60 grep -q "refused client .* not in \[security\] authorized_keys" "$RUN/replay.log" && ok "the replay server refuses the unauthorized key" || bad "no refusal logged"
for l in plain intruder; do
  wait_for 60 grep -q "not acknowledging" "$TMP/$l.log" && ok "$l actor reports the replay server not acknowledging" || bad "$l actor log: $(tail -2 "$TMP/$l.log")"
  if [ "$l" = intruder ]; then
    grep -q "not acknowledging.*refusing this actor's key: is the public key of this actor's key pair in .*authorized_keys on the replay host?" "$TMP/$l.log" \
      && ok "the intruder's log says the server may be refusing its key" || bad "no hint about a refused key: $(grep -m1 'not acknowledging' "$TMP/$l.log")"
  fi
  wait_for 30 grep -q " acked [0-9]*" "$TMP/$l.log" || true # its status lines
  acked=$({ grep -o " acked [0-9]*" "$TMP/$l.log" || true; } | tail -1 | awk '{print $2}')
  [ -n "$acked" ] && [ "$acked" = 0 ] && ok "$l actor: 0 batches accepted" || bad "$l actor got '${acked}' batches in"
done
kill -TERM "$P1" "$P2"; wait "$P1" "$P2" || true
kill -TERM "$LPID"; rc=0; wait "$LPID" || rc=$?
[ "$rc" = 0 ] && ok "launcher and daemons exit 0" || bad "launcher exit $rc"
finish
