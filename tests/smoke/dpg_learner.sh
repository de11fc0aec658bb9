#!/usr/bin/env bash
# The DPG learner (continuous actions, issue #28) through the real daemons: apex-replay and
# apex-learner with [env] id = external, obs_dim 3, action_dim 1 in [-2, 2], and no actor: a
# python peer (apexwire.py over pyzmq, written from proto/apex.proto) inserts transitions
# with float32 actions and asks the learner for weights as an actor does. Checks:
#   - the learner starts with the continuous config and says it trains DPG (TD3);
#   - it trains: metrics.csv rows with updates and a positive critic_loss, the DPG columns;
#   - its Weights hold the policy then the first critic (num_params = the obs 3 -> 32 -> 1
#     policy's 161 + the (3 + 1) -> 32 -> 1 critic's 193: the actors' initial priorities),
#     the first at update 0, a newer one later with other params;
#   - it writes a DPG checkpoint (magic APEXDPGC) at an update > 0;
#   - kill -9 and a restart: it resumes from that checkpoint (log line, update > 0), its
#     Weights are of a new incarnation (version >> 32 higher) from that update on, and it
#     trains on past it; SIGTERM stops both daemons with exit 0.
# Waits are for conditions (wait_for), never for a time.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
RUNS="$TMP/runs"
RUN="$RUNS/dpg"
POLICY=161  # (3 x 32 + 32) + (32 x 1 + 1)
CRITIC=193  # ((3 + 1) x 32 + 32) + (32 x 1 + 1)
WEIGHTS=$((POLICY + CRITIC))
SETS=($(endpoint_sets) --set env.id=external --set env.obs_dim=3 --set env.action_dim=1
      --set env.action_low=-2 --set env.action_high=2 --set run.out_dir="$RUNS" --set run.name=dpg
      --set network.hidden=32 --set replay.capacity=4096 --set replay.min_size_to_sample=64
      --set replay.samples_per_insert=0 --set learner.batch_size=32
      --set learner.metrics_interval_ms=200 --set learner.checkpoint_interval_s=0.5
      --set learner.publish_every=10)
ep() { local s; for s in "${SETS[@]}"; do [[ $s == endpoints.$1=* ]] && echo "${s#*=}"; done; return 0; }
exited() { [ ! -e "/proc/$1" ] || grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }
stop() {
  kill -"$2" "$1" 2>/dev/null || true
  wait_for 30 exited "$1" || { echo "  .... pid $1 ignored SIG$2 for 30 s: killed"; kill -9 "$1" 2>/dev/null || true; }
  RC=0; wait "$1" 2>/dev/null || RC=$?
}

cat >"$TMP/dpg_peer.py" <<'PY'
"""dpg_peer.py APEXWIRE_DIR MODE ...: the python side of dpg_learner.sh.
  insert EP N           N transitions with float32 actions in one batch per 64, acked
  weights EP HAVE OUT   one WeightsRequest(have_version HAVE); the answer's version,
                        learner_step, num_params and params (JSON) into OUT
  ckpt PATH             the checkpoint's magic and learner_step (ckpt_header_t)"""
import json
import math
import struct
import sys

import zmq

sys.path.insert(0, sys.argv[1])
import apexwire  # noqa: E402
from apexwire import _bytes, _uint  # noqa: E402

MODE, ARGS = sys.argv[2], sys.argv[3:]
ctx = zmq.Context()


def dealer(ep, ident=None):
    s = ctx.socket(zmq.DEALER)
    if ident:
        s.setsockopt(zmq.IDENTITY, ident)
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.RCVTIMEO, 10000)
    s.connect(ep)
    return s


def cont_batch(seq, rows):
    """A TransitionBatch of continuous actions: actions (field 7) float32[count][1],
    action_dim (field 14) 1."""
    obs = [[math.sin(r + 0.1 * seq), math.cos(r), 0.5] for r in range(rows)]
    act = [2.0 * math.sin(3.0 * r + seq) for r in range(rows)]
    rew = [-(a - o[0]) ** 2 for a, o in zip(act, obs)]
    f32 = lambda v: struct.pack("<%df" % len(v), *v)
    body = (_uint(1, 0) + _uint(2, seq) + _uint(4, rows) + _uint(5, 3) +
            _bytes(6, f32([x for o in obs for x in o])) + _bytes(7, f32(act)) +
            _bytes(8, f32(rew)) + _bytes(9, f32([0.99] * rows)) +
            _bytes(10, f32([x for o in obs for x in reversed(o)])) + _uint(12, 1) +
            _uint(14, 1))
    return apexwire.envelope(2, body)


if MODE == "insert":
    s, n = dealer(ARGS[0], b"actor-0"), int(ARGS[1])
    want = set(range((n + 63) // 64))
    for seq in sorted(want):
        s.send(cont_batch(seq, 64))
    while want:
        body, f = apexwire.decode(s.recv())
        if body == apexwire.BODY_INSERT_ACK:
            want -= set(apexwire.ack_seqs(f))
    print("acked")
elif MODE == "weights":
    s = dealer(ARGS[0])
    s.send(apexwire.envelope(9, _uint(1, int(ARGS[1]))))
    body, f = apexwire.decode(s.recv())
    assert body == 6, "not a Weights: body %s" % body
    n = f.get(3, 0)
    params = list(struct.unpack("<%df" % n, f.get(4, b"")))
    json.dump({"version": f.get(1, 0), "step": f.get(2, 0), "n": n, "params": params},
              open(ARGS[2], "w"))
elif MODE == "ckpt":
    h = open(ARGS[0], "rb").read(136)
    # ckpt_header_t: magic[8], 2 x u32, 4 x i32, hidden[4], in_h/w/c, in_dtype, in_scale,
    # n_conv, conv[4][3] (120 bytes so far), num_params u64, learner_step u64.
    print(h[:8].decode("latin-1"), struct.unpack_from("<Q", h, 128)[0])
PY
peer() { "$PY" "$TMP/dpg_peer.py" "$ROOT/tests/smoke" "$@"; }
# jget FILE KEY: a number from a weights answer.
jget() { "$PY" -c "import json,sys; print(json.load(open('$1'))['$2'])"; }

"$APEX_BIN/apex-replay" -c configs/smoke.ini "${SETS[@]}" 2>"$TMP/replay.log" &
REPLAY=$!; PIDS+=($REPLAY)
"$APEX_BIN/apex-learner" -c configs/smoke.ini "${SETS[@]}" 2>"$TMP/learner.log" &
LEARNER=$!; PIDS+=($LEARNER)
WEP=$(ep learner_weights)
if wait_for 30 grep -q "learner: DPG (TD3, twin critics): policy $POLICY and critic $CRITIC published of" "$TMP/learner.log"; then
  ok "apex-learner starts with continuous actions and trains DPG (TD3), publishing $POLICY + $CRITIC"
else
  bad "apex-learner did not start as DPG:"; tail -5 "$TMP/learner.log" | sed 's/^/       /'
fi

# The initial policy, before any data.
peer weights "$WEP" 0 "$TMP/w0.json"
[ "$(jget "$TMP/w0.json" n)" = $WEIGHTS ] && [ "$(jget "$TMP/w0.json" step)" = 0 ] \
  && ok "the first Weights: the policy and a critic ($WEIGHTS floats) at update 0" \
  || bad "first Weights: num_params $(jget "$TMP/w0.json" n), step $(jget "$TMP/w0.json" step)"

[ "$(peer insert "$(ep replay_insert)" 512)" = acked ] && ok "512 transitions with float32 actions acked" || bad "insert"
wait_for 60 gt updates 50 && wait_for 30 gt critic_loss 0 \
  && ok "it trains: metrics.csv updates $(col updates), critic_loss $(col critic_loss)" \
  || bad "no training in metrics.csv: updates '$(col updates)', critic_loss '$(col critic_loss)'"
head -1 "$RUN/metrics.csv" | grep -q ',critic_loss,actor_loss,q_mean,critic_grad_norm,actor_grad_norm,policy_updates,skipped_steps$' \
  && ok "metrics.csv has the DPG columns" || bad "metrics.csv header: $(head -1 "$RUN/metrics.csv")"
gt policy_updates 0 && ok "policy updates: $(col policy_updates), actor_loss $(col actor_loss)" || bad "no policy update"

# A newer version: asked with the first one held.
peer weights "$WEP" "$(jget "$TMP/w0.json" version)" "$TMP/w1.json"
"$PY" - "$TMP/w0.json" "$TMP/w1.json" $WEIGHTS <<'PY' && ok "a newer Weights: policy and critic at a later update, changed" || bad "newer Weights"
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
n = int(sys.argv[3])
sys.exit(0 if b["version"] > a["version"] and b["step"] > 0 and b["n"] == n and
         b["params"] != a["params"] else 1)
PY

# A checkpoint past update 0.
ck_step() { peer ckpt "$RUN/checkpoint.bin" 2>/dev/null | awk '$1 == "APEXDPGC" {print $2}'; }
ck_past() { local s; s=$(ck_step); [ -n "$s" ] && [ "$s" -gt "$1" ]; }
if wait_for 30 ck_past 0; then ok "a DPG checkpoint (APEXDPGC) at update $(ck_step)"; else bad "no DPG checkpoint past update 0"; fi
CK=$(ck_step)

# kill -9, restart: resumes from the checkpoint on disk and trains on.
stop $LEARNER 9
CK=$(ck_step) # the last one written before the kill
"$APEX_BIN/apex-learner" -c configs/smoke.ini "${SETS[@]}" 2>"$TMP/learner2.log" &
LEARNER=$!; PIDS+=($LEARNER)
if wait_for 30 grep -q "resumed from .*checkpoint.bin at update $CK," "$TMP/learner2.log"; then
  ok "after kill -9 it resumes from the checkpoint at update $CK"
else
  bad "no resume at update $CK:"; grep -i "resum\|start" "$TMP/learner2.log" | head -3 | sed 's/^/       /'
fi
peer weights "$WEP" 0 "$TMP/w2.json"
"$PY" - "$TMP/w1.json" "$TMP/w2.json" "$CK" $WEIGHTS <<'PY' && ok "its Weights: a new incarnation, from update $CK on" || bad "resumed Weights: $(head -c 120 "$TMP/w2.json")"
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
sys.exit(0 if b["version"] >> 32 > a["version"] >> 32 and b["step"] >= int(sys.argv[3]) and
         b["n"] == int(sys.argv[4]) else 1)
PY
wait_for 60 gt updates $((CK + 20)) && ok "it trains on past the checkpoint (updates $(col updates))" || bad "no training after the resume (updates $(col updates))"

stop $LEARNER TERM
[ "$RC" = 0 ] && ok "SIGTERM stops the learner (exit 0)" || bad "learner exit $RC"
grep -q "stopped at update .* (final checkpoint written)" "$TMP/learner2.log" && ok "final checkpoint written" || bad "no final checkpoint"
stop $REPLAY TERM
[ "$RC" = 0 ] && ok "SIGTERM stops the replay (exit 0)" || bad "replay exit $RC"
finish
