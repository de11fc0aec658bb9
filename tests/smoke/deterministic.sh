#!/usr/bin/env bash
# [run] deterministic (issue #31; docs/architecture.md "Deterministic runs"): the same config,
# seed and topology give bit-identical results. Each case runs the whole cluster twice through
# scripts/apex-local --deterministic to a fixed [learner] max_steps and compares:
#   - the checkpoint's payload (parameters, optimizer state, step: the file after its
#     240-byte header, whose run counters hold wall-clock time) and every optimizer shard;
#   - eval.csv, where the evaluator ran (CartPole with 2 actors, Breakout): apex-local makes a
#     deterministic run evaluate the network at the metrics rows' updates ([eval]
#     every_updates), each one, whenever the evaluator gets to it;
#   - metrics.csv's columns that are the learner's and the replay's (updates, loss, the
#     replay's counters as of each trained batch, the weights version);
# for CartPole with 2 actors, the same with a learner group of 2, with 2 replay shards and a
# group of 2, and MinAtar Breakout (and with stacked frames in the replay's frame storage,
# compressed). Then
# another seed must differ, and a learner killed and resumed, then a replay killed and
# restarted, must say that the run diverges (a restore is not part of the schedule) and go on
# training. ~25 s.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
# (Appended: make asan sets LSAN_OPTIONS for every test; the last suppressions= wins.)
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$ROOT/tests/lsan-mpi.supp:print_suppressions=0:fast_unwind_on_malloc=0"
RUNS="$TMP/runs"

# run NAME CONFIG ARGS...: one deterministic run to its max_steps (EVAL=1: with the
# evaluator, 10 episodes an evaluation, at the metrics rows' updates: apex-local's default).
run() {
  local name=$1 cfg=$2; shift 2
  local rc=0 ev=(--no-eval)
  [ "${EVAL:-0}" = 1 ] && ev=(--set eval.episodes=10)
  # shellcheck disable=SC2046
  scripts/apex-local "$cfg" --bin "$APEX_BIN" --quiet "${ev[@]}" --deterministic $(endpoint_sets) \
    --set run.out_dir="$RUNS" --set run.name="$name" --set run.max_seconds=300 "$@" \
    >"$TMP/$name.out" 2>&1 || rc=$?
  if [ "$rc" != 0 ] || ! grep -q "trained its budget" "$TMP/$name.out"; then
    bad "$name: launcher exit $rc before the budget"
    tail -5 "$TMP/$name.out"
    tail -5 "$RUNS/$name/learner.log" 2>/dev/null || true
  fi
}

# fingerprint NAME: what must be identical between two runs (one line per item).
fingerprint() {
  "$PY" - "$RUNS/$1" <<'PY'
import csv, glob, hashlib, os, sys
d = sys.argv[1]
out = []
with open(os.path.join(d, "checkpoint.bin"), "rb") as f:
    out.append("checkpoint payload " + hashlib.sha256(f.read()[240:]).hexdigest())
for p in sorted(glob.glob(os.path.join(d, "checkpoint.bin.s*"))):
    out.append(os.path.basename(p) + " " + hashlib.sha256(open(p, "rb").read()).hexdigest())
cols = ["updates", "loss", "replay_size", "replay_inserted", "replay_sampled", "weights_version",
        "priority_updates", "stale_updates", "bad_messages", "duplicate_batches",
        "env_frames", "episodes", "mean_return_100", "actor_version_min"]
rows = list(csv.DictReader(open(os.path.join(d, "metrics.csv"))))
h = hashlib.sha256()
for r in rows:
    h.update((",".join(r[c] for c in cols) + "\n").encode())
out.append("metrics %d rows %s (updates %s)" % (len(rows), h.hexdigest(), " ".join(r["updates"] for r in rows)))
# The evaluations (their wall-clock columns, the actors' frame count and the learner's
# random incarnation aside).
p = os.path.join(d, "eval.csv")
if os.path.exists(p):
    ecols = ["updates", "version", "episodes", "eval_mean", "eval_std", "eval_min", "eval_max", "truncated"]
    rows = list(csv.DictReader(open(p)))
    out.append("eval %d rows: %s" % (len(rows), "; ".join(",".join(r[c] for c in ecols) for r in rows)))
print("\n".join(out))
PY
}

# same A B WHAT: the fingerprints of runs A and B are identical.
same() {
  local fa fb
  fa=$(fingerprint "$1"); fb=$(fingerprint "$2")
  if [ "$fa" = "$fb" ]; then
    ok "$3: identical ($(echo "$fa" | head -1 | cut -c1-40)...)"
  else
    bad "$3: the runs differ"
    diff <(echo "$fa") <(echo "$fb") | sed 's/^/       /'
  fi
}

# --- CartPole, 2 actors (configs/smoke.ini), twice; rows every 250 updates.
# key: run.deterministic
# key: learner.metrics_every_updates
EVAL=1 run c1 configs/smoke.ini --set run.deterministic=true --set learner.max_steps=1000 --set learner.metrics_every_updates=250
EVAL=1 run c2 configs/smoke.ini --set learner.max_steps=1000 --set learner.metrics_every_updates=250
same c1 c2 "CartPole, 2 actors"
evals=$(fingerprint c1 | sed -n 's/^eval \([0-9]*\) rows: .*/\1/p')
[ "$evals" = 4 ] && ok "the evaluations identical too: 4, at the rows' updates (their means: $("$PY" -c "import csv,sys; print(' '.join(r['eval_mean'] for r in csv.DictReader(open(sys.argv[1]))))" "$RUNS/c1/eval.csv"))" \
  || bad "evaluations of c1: '$evals' rows, want 4: $(tail -3 "$RUNS/c1/eval.log")"
updates=$("$PY" -c "import csv,sys; print(' '.join(r['updates'] for r in csv.DictReader(open(sys.argv[1]))))" "$RUNS/c1/metrics.csv")
[ "$updates" = "250 500 750 1000" ] \
  && key_ok learner.metrics_every_updates "metrics.csv rows at updates $updates" \
  || bad "metrics.csv rows at updates '$updates', want 250 500 750 1000"
# The actors' columns come from the schedule (the periods' ends as of each row's horizon):
# counted, growing, and a mean return CartPole can have.
"$PY" - "$RUNS/c1/metrics.csv" <<'PY' && ok "the actors' columns are counted in the schedule (frames, episodes, returns grow)" \
  || bad "the actors' columns of a deterministic run"
import csv, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
f = [int(r["env_frames"]) for r in rows]
e = [int(r["episodes"]) for r in rows]
m = [float(r["mean_return_100"]) for r in rows]
v = [int(r["actor_version_min"]) for r in rows]
print("    env_frames %s, episodes %s, mean_return_100 %s, actor_version_min %s" % (f, e, m, v))
ok = f[0] > 0 and e[0] > 0 and f == sorted(f) and e == sorted(e) and f[-1] > f[0]
ok = ok and all(math.isfinite(x) and 8 <= x <= 500 for x in m) and v[-1] > v[0]
sys.exit(0 if ok else 1)
PY
grep -q "deterministic run: samples, priority updates and actors' weights follow a schedule" \
  "$RUNS/c1/learner.log" && ! grep -q "diverges" "$RUNS"/c1/*.log \
  && grep -q "deterministic schedule: horizon [1-9][0-9]*, .* 0 out of turn" "$RUNS/c1/replay.log" \
  && key_ok run.deterministic "the learner follows the schedule, nothing diverged" \
  || bad "deterministic run not announced, or a divergence logged"
# Actors act with the weights of fixed targets: trained ones, not only the initial version.
"$PY" - "$RUNS/c1/actor0.log" <<'PY' && ok "actor 0 acted with weights the learner trained" \
  || bad "actor 0 never took trained weights"
import re, sys
m = re.findall(r"acting with weights v\d+:(\d+)", open(sys.argv[1]).read())
print("    actor 0 stopped acting with version counter %s" % (m[-1] if m else "?"))
sys.exit(0 if m and int(m[-1]) > 1 else 1)
PY

# --- Another seed: another run.
run s2 configs/smoke.ini --set learner.max_steps=1000 --set learner.metrics_every_updates=250 --set run.seed=8
fc1=$(fingerprint c1); fs2=$(fingerprint s2)
if [ "${fc1%%$'\n'*}" != "${fs2%%$'\n'*}" ]; then
  ok "another seed gives another checkpoint"
else
  bad "seed 8 gave seed 7's checkpoint"
fi

# --- A learner group of 2 (ZeRO stage 1: optimizer shards on disk), twice.
run g1 configs/smoke.ini --learners 2 --set learner.max_steps=600
run g2 configs/smoke.ini --learners 2 --set learner.max_steps=600
same g1 g2 "CartPole, learner group of 2"

# --- 3 actors on 2 replay shards (every place asked of both, rows drawn from the two answers
# by mass; each shard holds its actors' share of the ratio: two actors on one, one on the
# other) and a learner group of 2, twice. Each shard's endpoints on ports of their own.
shard_eps() {
  local i s p q
  for i in insert sample; do
    p=$(free_port); q=$(free_port)
    for s in "${i}_bind" "$i"; do
      echo "--set endpoints.replay_$s=tcp://127.0.0.1:$p,tcp://127.0.0.1:$q"
    done
  done
}
SHARD_EPS=$(shard_eps)
# shellcheck disable=SC2086
run r1 configs/smoke.ini --learners 2 --actors 3 --set replay.shards=2 $SHARD_EPS --set learner.max_steps=600
# shellcheck disable=SC2086
run r2 configs/smoke.ini --learners 2 --actors 3 --set replay.shards=2 $SHARD_EPS --set learner.max_steps=600
same r1 r2 "CartPole, 3 actors on 2 replay shards, learner group of 2"
n_ok=$(grep -l "deterministic schedule: horizon [1-9][0-9]*, .* 0 out of turn" "$RUNS"/r1/replay0.log \
  "$RUNS"/r1/replay1.log 2>/dev/null | wc -l)
[ "$n_ok" = 2 ] && grep -q "rank 0 sent [1-9][0-9]* sample requests: \([0-9]*\) to shard 0, \1 to shard 1" \
  "$RUNS/r1/learner.log" && ok "both shards kept their schedule; every place asked of both" \
  || bad "shards: $n_ok of 2 with nothing out of turn; $(grep 'sample requests' "$RUNS/r1/learner.log")"

# --- MinAtar Breakout (conv network, uint8 frames), twice.
EVAL=1 run b1 configs/minatar-breakout.ini --set learner.max_steps=400 --set learner.metrics_every_updates=100 \
  --set replay.min_size_to_sample=2000
EVAL=1 run b2 configs/minatar-breakout.ini --set learner.max_steps=400 --set learner.metrics_every_updates=100 \
  --set replay.min_size_to_sample=2000
same b1 b2 "MinAtar Breakout"
# Stacked frames stored once each, compressed (frame mode: the replay rebuilds stacks).
run f1 configs/minatar-breakout.ini --set learner.max_steps=300 --set env.frame_stack=2 \
  --set replay.compress=lz4 --set replay.min_size_to_sample=2000
run f2 configs/minatar-breakout.ini --set learner.max_steps=300 --set env.frame_stack=2 \
  --set replay.compress=lz4 --set replay.min_size_to_sample=2000
same f1 f2 "MinAtar Breakout, 2 stacked frames stored once, LZ4"

# --- A learner killed and resumed: the run goes on, and says it diverges.
rc=0
# shellcheck disable=SC2046
scripts/apex-local configs/smoke.ini --bin "$APEX_BIN" --quiet --no-eval --deterministic $(endpoint_sets) \
  --restart on-failure --set run.out_dir="$RUNS" --set run.name=k --set run.max_seconds=300 \
  --set learner.checkpoint_interval_s=0.5 --set learner.metrics_every_updates=100 \
  >"$TMP/k.out" 2>&1 &
LPID=$!
PIDS+=("$LPID")
RUN="$RUNS/k"
# Killed once the launcher watches it (a death before is a failed start, not restarted) and
# it has trained 300 updates and written a checkpoint.
if wait_for 120 grep -q "all daemons up" "$TMP/k.out" && wait_for 120 rows_ge 3 \
  && wait_for 60 test -s "$RUN/checkpoint.bin"; then
  pkill -9 -f "apex-learner -c $RUN/config.ini" || true
  wait_for 120 grep -q "deterministic run resumed from a checkpoint: .* diverges" "$RUN/learner.log" \
    && ok "the resumed learner says the run diverges" || bad "no divergence line in learner.log"
  wait_for 60 grep -q "deterministic run: .*diverges" "$RUN/replay.log" \
    && ok "the replay says the learner's schedule started again" \
    || bad "no divergence line in replay.log"
  n0=$(csv_rows)
  wait_for 60 rows_ge $((n0 + 2)) && ok "training goes on after the learner's restart" \
    || bad "no training after the learner's restart"
  # The replay killed (no durability here: it starts empty) and restarted by the launcher.
  pkill -9 -f "apex-replay -c $RUN/config.ini" || true
  wait_for 120 grep -q "far ahead of the schedule (this replay restarted).*diverges" \
    "$RUN/replay.log" && ok "the restarted replay says it follows the learner's schedule" \
    || bad "no divergence line from the restarted replay"
  n0=$(csv_rows)
  wait_for 60 rows_ge $((n0 + 2)) && ok "training goes on after the replay's restart" \
    || bad "no training after the replay's restart"
else
  bad "the run did not get to 300 updates"
fi
kill -TERM "$LPID" 2>/dev/null || true
wait "$LPID" || rc=$?
[ "$rc" = 0 ] && ok "launcher stopped cleanly" || { bad "launcher exit $rc"; tail -5 "$TMP/k.out"; }
finish
