#!/usr/bin/env bash
# smoke: slow
# bench/fanout.py reduced (issue #29): 32 actor processes against one apex-replay and one
# apex-learner, their weights served by one apex-relay over ipc://, for a few seconds. Checks
# what the full benchmark reports on: every actor's batches acknowledged, no acknowledged
# transition missing from the replay, the learner's
# weights egress about one message per version (the relay's, not one per actor), every version it published
# in the window reached every actor within 2 s (the refresh period here is 0.2 s), no
# daemon died. bench/RESULTS.md has the full table (8 to 256 actors, with and without
# relays).
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
N=${FANOUT_ACTORS:-32}
"$PY" bench/fanout.py --bin "$APEX_BIN" --actors "$N" --relays 1 --warmup 4 --window 5 \
  --total-rate 640 --prefix smoke --keep "$TMP/runs" >"$TMP/out" 2>"$TMP/err" || true
v() { awk -v k="smoke.a$N.$1" '$1 == "BENCH" && $2 == k {print $3}' "$TMP/out"; }
if [ -z "$(v lost)" ]; then
  bad "fanout.py measured nothing: $(tail -3 "$TMP/err")"
  finish
fi
[ "$(v actors_acked)" = "$N" ] && ok "all $N actors' batches acknowledged" \
  || bad "$(v actors_acked) of $N actors acknowledged: $(tail -3 "$TMP/err")"
# Stored but not acknowledged: a batch whose ack was still on its way when its actor stopped
# (SIGTERM: an actor does not wait for acks): at most the last batch of each actor.
[ "$(v lost)" = 0 ] && [ "$(v unacked)" -le $((N * 50)) ] \
  && ok "no acknowledged transition lost ($(v unacked) stored whose acks were in flight at the stop)" \
  || bad "lost $(v lost), stored unacknowledged $(v unacked)"
# The learner's egress per version: the relay's one message, plus the answers to its
# heartbeat re-asks when no version came for a second (more of them on a slow machine, where
# the learner publishes less often); without the relay it is N messages per version.
msg=$(v weights_message_bytes)
awk -v b="$(v learner_weights_bytes_per_version)" -v m="${msg:-0}" -v n="$N" 'BEGIN { exit !(m > 0 && b >= m && b < n * m / 4) }' \
  && ok "learner egress $(v learner_weights_bytes_per_version) bytes per version: $(awk -v b="$(v learner_weights_bytes_per_version)" -v m="$msg" 'BEGIN { printf "%.2f", b / m }') ${msg}-byte messages through the relay, not $N" \
  || bad "learner egress $(v learner_weights_bytes_per_version) bytes per version (a message is ${msg:-?} bytes, $N actors)"
awk -v p="$(v version_lag_max_s)" -v n="$(v versions_never_reached)" 'BEGIN { exit !(p != "" && p + 0 <= 2.0 && n == 0) }' \
  && ok "every version reached every actor, at most $(v version_lag_max_s) s after it was published (p50 $(v version_lag_p50_s) s)" \
  || bad "version lag max $(v version_lag_max_s) s, $(v versions_never_reached) versions never reached all actors"
grep -q "died or failed" "$TMP/err" && bad "$(grep -m1 "died or failed" "$TMP/err")" || ok "no daemon died"
finish
