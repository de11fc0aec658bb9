#!/usr/bin/env bash
# smoke: slow
# Sharded replay survives the death of a shard: configs/cartpole.ini with [replay] shards = 2
# and durability = wal, 2 actors (actor 0 inserts into shard 0, actor 1 into shard 1), run by
# `apex-local --restart on-failure`. Once the learner trains from both shards, shard 1 is
# killed with SIGKILL (after its first snapshot). The learner must report it down on its own,
# after the kill and before the restarted shard is up again (its timestamps against the
# restarted shard's restore line; the delay is printed), keep training from shard 0
# meanwhile, and take it back once the
# launcher has restarted it and it has restored its own snapshot and log (replay1/); the run
# must then solve CartPole (a greedy 100-episode evaluation >= 475, taken after the restart:
# --min-seconds keeps an earlier one from ending the run). At the end (SIGTERM, everything
# stops in order) no acknowledged batch may be missing: for each actor, the seqs its shard's
# exactly-once marks (apex-replay --shard k --dump) lack must all be at or above the first
# seq the actor still held unacknowledged when it stopped, and it dropped none. The run's
# replay ratio holds throughout (samples_per_insert over both shards' inserts).
# Deadlines are generous; nothing waits for a fixed time.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
RUNS="$TMP/runs"
RUN="$RUNS/cartpole"
ep() { echo "tcp://127.0.0.1:$(free_port)"; }
I0=$(ep); I1=$(ep); S0=$(ep); S1=$(ep); PUB=$(ep); ST=$(ep)
# key: replay.shards
SETS=(--set replay.shards=2 --set "endpoints.replay_insert_bind=$I0,$I1" --set "endpoints.replay_insert=$I0,$I1"
      --set "endpoints.replay_sample_bind=$S0,$S1" --set "endpoints.replay_sample=$S0,$S1"
      --set "endpoints.learner_weights_bind=$PUB" --set "endpoints.learner_weights=$PUB"
      --set "endpoints.learner_stats_bind=$ST" --set "endpoints.learner_stats=$ST"
      --set run.out_dir="$RUNS" --set run.target_return=475 --set run.max_seconds=0
      --set replay.durability=wal --set replay.snapshot_interval_s=3
      --set actor.max_pending_batches=4096 --set actor.send_batch=400)
# send_batch 400 (not 50): the exactly-once marks that the final check reads cover the last
# DEDUPE_WINDOW (8192) seqs of each actor, and at 50 transitions a batch a run to 45 s sends
# ~12 000, so the seqs around the kill would have slid out of view.
MIN_S=${SHARD_KILL_MIN_SECONDS:-45}
scripts/apex-local configs/cartpole.ini --bin "$APEX_BIN" --quiet --restart on-failure --min-seconds "$MIN_S" \
  "${SETS[@]}" >"$TMP/launcher.out" 2>&1 &
LPID=$!
PIDS+=("$LPID")
wait_for 30 grep -q "all daemons up" "$TMP/launcher.out" || bad "the cluster did not start: $(tail -3 "$TMP/launcher.out")"
R1=$(sed -n "s/.*all daemons up:.* replay1\[\([0-9]*\)\].*/\1/p" "$TMP/launcher.out")
both() { grep -q "replay shard 0 .* answers" "$RUN/learner.log" && grep -q "replay shard 1 .* answers" "$RUN/learner.log"; }
wait_for 60 both && wait_for 120 gt updates 300 \
  && key_ok replay.shards "the learner trains from both shards (updates $(col updates))" || bad "no training from two shards: $(tail -3 "$RUN/learner.log")"
# Killed after its first snapshot, so that the restore reads both a snapshot and the log.
wait_for 60 test -s "$RUN/replay1/snapshot.bin" || bad "shard 1 wrote no snapshot"
kill_at=$(date +%s.%N)
kill -9 "$R1"
wait_for 30 grep -q "replay shard 1 .* is down" "$RUN/learner.log" \
  && ok "the learner reports shard 1 down: $(grep -o 'replay shard 1 .* is down: [^;]*' "$RUN/learner.log" | head -1)" \
  || bad "shard 1's death was not reported"
wait_for 60 grep -q "replay1 restarted" "$TMP/launcher.out" && ok "the launcher restarted shard 1" || bad "no restart: $(tail -3 "$TMP/launcher.out")"
# The first start logs a "restored from" line too (nothing to restore): wait for the second,
# the restarted shard's, and require that it read the snapshot it had written.
restored_twice() { [ "$(grep -c "restored from .*/replay1 in" "$RUN/replay1.log" || true)" -ge 2 ]; }
wait_for 60 restored_twice || true
# The report came from the learner's own liveness check: after the SIGKILL, and before the
# restarted shard had restored (a learner that only noticed once shard 1 answered again, or
# never, fails this).
"$PY" - "$RUN/learner.log" "$kill_at" "$RUN/replay1.log" <<'PY' && ok "shard 1 reported down by the learner itself (see above)" || bad "shard 1's down report is not between the kill and the restart (see above)"
import datetime, re, sys
def ts(line):
    return datetime.datetime.strptime(line.split()[0], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()
kill = float(sys.argv[2])
down = next((ts(l) for l in open(sys.argv[1]) if re.search(r"replay shard 1 .* is down", l)), None)
back = [ts(l) for l in open(sys.argv[3]) if re.search(r"restored from .*/replay1 in", l)]
up = back[1] if len(back) > 1 else None
f = lambda t: "%.2f s" % (t - kill) if t is not None else "never"
print("    after the SIGKILL: reported down %s, the restarted shard restored %s" % (f(down), f(up)))
sys.exit(0 if down is not None and up is not None and kill < down < up else 1)
PY
restore=$(grep -o 'restored from .*' "$RUN/replay1.log" | tail -1 | sed 's/ in [0-9]* ms//')
restored_twice && grep -qE ": [1-9][0-9]* transitions in the snapshot" <<<"$restore" \
  && ok "shard 1 restored its own state: $restore" || bad "shard 1 did not restore its snapshot from replay1/: $restore"
back() { grep -q "replay shard 1 .* is back" "$RUN/learner.log"; }
wait_for 60 back && ok "the learner took shard 1 back: $(grep -o 'is back after.*' "$RUN/learner.log" | head -1)" \
  || bad "shard 1 was not taken back"
meanwhile=$(grep -o "[0-9]* sample requests went to the other shards meanwhile" "$RUN/learner.log" | head -1 | cut -d' ' -f1)
[ "${meanwhile:-0}" -gt 0 ] && ok "training went on from shard 0 while shard 1 was down ($meanwhile requests)" \
  || bad "no requests while shard 1 was down"
wait_for 400 grep -q "stopping: solved" "$TMP/launcher.out" \
  && ok "solved after the kill: $(grep -o 'solved: .*' "$TMP/launcher.out")" || bad "not solved: $(tail -3 "$RUN/eval.csv" 2>/dev/null)"
rc=0; wait "$LPID" || rc=$?
[ "$rc" = 0 ] && ok "launcher exit 0" || bad "launcher exit $rc: $(tail -5 "$TMP/launcher.out")"
# The run's replay ratio (the learner holds it over both shards), across the kill: over every
# window of metrics rows, rows trained <= samples_per_insert x rows inserted (summed over the
# shards) + the limiter's bound (2 x spi_tolerance + one request) + the requests in flight.
"$PY" - "$RUN/metrics.csv" "$RUN/config.ini" <<'PY' && ok "the run's replay ratio held across the kill (see above)" || bad "the learner sampled past the replay ratio"
import configparser, csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
c = configparser.ConfigParser(inline_comment_prefixes=None)
c.read(sys.argv[2])
spi, tol = float(c["replay"]["samples_per_insert"]), float(c["replay"]["spi_tolerance"])
B, bpr, pf = (int(c["learner"][k]) for k in ("batch_size", "batches_per_request", "prefetch"))
slack = 2 * tol + 2 * bpr * B + pf * bpr * B
worst = max((int(rows[j]["updates"]) - int(rows[k]["updates"])) * B
            - spi * (int(rows[j]["replay_inserted"]) - int(rows[k]["replay_inserted"]))
            for k in range(len(rows)) for j in range(k + 1, len(rows)))
print("    %d rows; worst window %+.0f rows against spi x inserted (slack %.0f)" % (len(rows), worst, slack))
sys.exit(0 if worst <= slack else 1)
PY
for k in 0 1; do
  expect_rc 0 "apex-replay --shard $k --dump restores shard $k" "$APEX_BIN/apex-replay" -c "$RUN/config.ini" --shard $k --dump "$TMP/dump$k.csv"
  "$PY" - "$TMP/dump$k.csv.marks" "$RUN/actor$k.log" "$k" <<'PY' && ok "shard $k holds every batch actor $k saw acknowledged (see above)" || bad "shard $k lost acknowledged batches of actor $k"
import csv, re, sys
stop = [l for l in open(sys.argv[2]) if "stopping after" in l][-1]
m = re.search(r"(\d+) acked, (\d+) dropped, (\d+) unacked from seq (\d+) \(epoch (\d+)\)", stop)
acked, dropped, unacked, first_unacked, epoch = map(int, m.groups())
rows = [r for r in csv.DictReader(open(sys.argv[1])) if int(r["actor"]) == int(sys.argv[3])]
assert len(rows) == 1, rows
r = rows[0]
missing = [int(x) for x in r["missing"].split()]
lost = [q for q in missing if q < first_unacked]
print("    actor %s: %d acked, %d dropped, first unacked seq %d; the shard holds seqs below %s "
      "(marks window from %s) missing %s of them, %d below the first unacked"
      % (sys.argv[3], acked, dropped, first_unacked, r["hwm"], r["window_first"], r["missing_count"], len(lost)))
ok = int(r["epoch"]) == epoch and dropped == 0 and not lost and int(r["window_first"]) == 0 \
     and int(r["hwm"]) >= first_unacked and int(r["missing_count"]) == len(missing)
sys.exit(0 if ok else 1)
PY
done
finish
