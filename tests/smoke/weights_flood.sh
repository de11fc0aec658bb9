#!/usr/bin/env bash
# A flood against the learner's weights endpoint (a ROUTER answering WeightsRequests,
# learner.c s_reader_weights), from a peer that sends as fast as it can: WeightsRequests from
# a DEALER that never reads its answers, garbage frames from another, and the attack that
# once stalled a PUB learner (subscriptions from SUB/XSUB sockets, 1000 of them again on every
# reconnect, and raw ones without end), which a ROUTER refuses at the handshake.
# Asserts, while the flood goes on: a real actor keeps receiving new weights, the learner's
# memory stays bounded (a PUB or XPUB kept every subscription; a CI run once grew 2.5 GB and
# published nothing for a minute), the garbage is counted and logged at a bounded rate, and
# nothing died.
# WEIGHTS_FLOOD_N: messages sent before the checks start (default 150 000);
# WEIGHTS_FLOOD_EXTRA_KB: memory allowed on top (make asan: ASan's quarantine keeps freed memory).
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
N=${WEIGHTS_FLOOD_N:-150000}
RUNS="$TMP/runs"
RUN="$RUNS/smoke"
SETS=($(endpoint_sets) --set run.out_dir="$RUNS" --set run.target_return=100000 --set run.max_seconds=0)
EP=$(for s in "${SETS[@]}"; do [[ $s == endpoints.learner_weights=* ]] && echo "${s#*=}"; done; true)
scripts/apex-local configs/smoke.ini --bin "$APEX_BIN" --no-eval --quiet "${SETS[@]}" >"$TMP/launcher.out" 2>&1 &
LPID=$!
PIDS+=("$LPID")
wait_for 60 gt actor_version_min 2 && ok "the cluster trains and actors take weights" || bad "no weights at the actors"
wait_for 30 grep -q "all daemons up" "$TMP/launcher.out" || true
LEARNER_PID=$(sed -n "s/.*all daemons up: .*learner\[\([0-9]*\)\].*/\1/p" "$TMP/launcher.out")
[ -n "$LEARNER_PID" ] || bad "no learner pid in: $(cat "$TMP/launcher.out")"
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$LEARNER_PID/status"; }
rss0=$(rss_kb)

# actor_version: the newest "weights vI:C" of actor 0's status lines, as one number.
actor_version() {
  "$PY" - "$RUN/actor0.log" <<'PY'
import re, sys
v = re.findall(r"weights v(\d+):(\d+)", open(sys.argv[1]).read())
print((int(v[-1][0]) << 32 | int(v[-1][1])) if v else 0)
PY
}
"$PY" - "$EP" "$N" "$TMP/flood.done" >"$TMP/flood.out" 2>&1 <<'PY' &
import os, random, sys, time, zmq
ep, n, done = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ctx = zmq.Context()

def varint(v):
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)

def request(have):  # Envelope{version = 1, weights_request = WeightsRequest{have_version}}
    body = b"\x08" + varint(have)
    return b"\x08\x01" + b"\x4a" + varint(len(body)) + body

def sock(kind, **opts):
    s = ctx.socket(kind)
    s.setsockopt(zmq.LINGER, 0)
    for k, v in opts.items():
        s.setsockopt(getattr(zmq, k), v)
    s.connect(ep)
    return s

subs = [sock(zmq.SUB, RCVHWM=1) for _ in range(4)]  # refused by a ROUTER at the handshake
for s in subs:
    for _ in range(250):
        s.setsockopt(zmq.SUBSCRIBE, os.urandom(40))
xsub = sock(zmq.XSUB)
asker = sock(zmq.DEALER, RCVHWM=1, RCVBUF=4096)  # asks without end, never reads an answer
junk = sock(zmq.DEALER)                          # garbage, one frame and multipart
sent = 0
rng = random.Random(7)
while not os.path.exists(done + ".stop"):
    try:
        k = sent % 8
        if k < 5:
            asker.send(request(rng.getrandbits(64) if k else 0), zmq.NOBLOCK)
        elif k == 5:
            junk.send(os.urandom(rng.randrange(1, 64)), zmq.NOBLOCK)
        elif k == 6:
            junk.send_multipart([request(0), b"extra"], zmq.NOBLOCK)
        else:
            xsub.send(b"\x01" + os.urandom(40), zmq.NOBLOCK)
        sent += 1
        if sent == n:
            open(done, "w").write("%d messages sent\n" % n)
    except zmq.Again:
        time.sleep(0.001)
print("flood: %d messages sent in all" % sent, flush=True)
PY
FPID=$!
PIDS+=("$FPID")
wait_for 120 test -s "$TMP/flood.done" && ok "the flood is on: $(cat "$TMP/flood.done") so far" || bad "the flood did not get going: $(tail -2 "$TMP/flood.out")"
has_version() { [ "$(actor_version)" -gt 0 ]; }
wait_for 30 has_version || bad "actor 0 logs no weights version"
v0=$(actor_version)
newer() { [ "$(actor_version)" -gt "$v0" ]; }
# New versions come every 10 updates and are taken every 50 frames: a stalled learner or a
# starved weights endpoint would show as the actor's version standing still. Generous
# deadline (status lines come every 10 s).
wait_for 60 newer && ok "actor 0 keeps receiving new weights during the flood (v$((v0 >> 32)):$((v0 & 0xFFFFFFFF)) -> newer)" \
  || bad "actor 0 stuck at v$((v0 >> 32)):$((v0 & 0xFFFFFFFF)) during the flood"
# What the flood may cost the learner: queues bounded per connection (RCVHWM 16 requests,
# SNDHWM 4 answers sharing the weights' buffers). 64 MB is far below what keeping 150 000
# subscriptions took (~1.7 kB each).
rss1=$(rss_kb)
limit_kb=$((65536 + ${WEIGHTS_FLOOD_EXTRA_KB:-0}))
[ $((rss1 - rss0)) -lt "$limit_kb" ] && ok "the learner's memory stays bounded under the flood (VmRSS ${rss0} -> ${rss1} kB, limit +${limit_kb} kB)" \
  || bad "the learner grew by $(((rss1 - rss0) / 1024)) MB under the flood (VmRSS ${rss0} -> ${rss1} kB)"
wait_for 30 grep -q "weights endpoint: dropped a message that is not a weights request" "$RUN/learner.log" \
  && ok "the learner drops and counts the garbage (logged at a bounded rate: $(grep -c 'weights endpoint: dropped' "$RUN/learner.log") lines)" \
  || bad "no dropped-message line in learner.log"
wait_for 30 gt weights_refused 0 && gt weights_answers 0 \
  && ok "metrics.csv counts the endpoint: weights_answers $(col weights_answers), weights_refused $(col weights_refused), weights_held $(col weights_held)" \
  || bad "metrics.csv: weights_answers '$(col weights_answers)', weights_refused '$(col weights_refused)'"
touch "$TMP/flood.done.stop"
wait "$FPID" || true
echo "    $(cat "$TMP/flood.out")"
kill -0 "$LPID" 2>/dev/null && ok "every daemon alive after the flood" || bad "the launcher stopped: $(tail -3 "$TMP/launcher.out")"
kill -TERM "$LPID"
rc=0; wait "$LPID" || rc=$?
[ "$rc" = 0 ] && ok "SIGTERM: launcher and daemons exit 0" || bad "launcher exit $rc"
finish
