#!/usr/bin/env bash
# The replay ratio holds across a replay server crash. A CartPole run through
# `apex-local --restart on-failure` with [replay] durability = wal and a samples_per_insert
# limit that binds (2 sampled per inserted transition: the learner could go ~3x faster) is
# running when the replay server is killed with SIGKILL; the launcher restarts it and it
# restores its data and its rate limiter. Asserts that over every window from before the kill
# to any later metrics row, the rows the learner trained on (updates x batch_size) stay within
# samples_per_insert x the inserted rows + the limiter's bound (2 x spi_tolerance + max_batch)
# + the requests in flight. (Forgetting the sample count on restore, as the retired
# reset_limiter_on_restore did, let the learner sample 2 x everything ever inserted at once.)
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
RUNS="$TMP/runs"
RUN="$RUNS/smoke"
SPI=2
TOL=2000
SETS=($(endpoint_sets) --set run.out_dir="$RUNS" --set run.target_return=100000 --set run.max_seconds=0
      --set replay.durability=wal --set replay.snapshot_interval_s=2 --set replay.samples_per_insert=$SPI
      --set replay.spi_tolerance=$TOL --set replay.min_size_to_sample=200)
scripts/apex-local configs/smoke.ini --bin "$APEX_BIN" --no-eval --quiet --restart on-failure "${SETS[@]}" >"$TMP/launcher.out" 2>&1 &
LPID=$!
PIDS+=("$LPID")
wait_for 30 grep -q "all daemons up" "$TMP/launcher.out" || bad "the cluster did not start: $(tail -3 "$TMP/launcher.out")"
RPID=$(sed -n "s/.*all daemons up: replay\[\([0-9]*\)\].*/\1/p" "$TMP/launcher.out")
# Long enough before the kill that a burst of 2 x everything inserted would be large.
wait_for 120 gt replay_inserted 40000 && wait_for 60 gt updates 500 && ok "the run trains at the limiter's ratio (updates $(col updates), inserted $(col replay_inserted))" \
  || bad "the run did not get going (updates '$(col updates)', inserted '$(col replay_inserted)')"
rows_before=$(csv_rows)
kill -9 "$RPID"
wait_for 60 grep -q "replay restarted" "$TMP/launcher.out" && ok "the launcher restarted the replay server" || bad "no restart: $(tail -3 "$TMP/launcher.out")"
u_kill=$(col updates)
# Training again after the restore, for a while: until 30 000 more rows were inserted.
i_kill=$(col replay_inserted)
wait_for 120 gt replay_inserted $((i_kill + 30000)) && wait_for 60 gt updates $((u_kill + 200)) \
  && ok "training goes on after the restore (updates $u_kill -> $(col updates))" || bad "no training after the restore (updates $(col updates))"
grep -q "restored from .* limiter credit" "$RUN/replay.log" && ok "the restore reports the limiter credit: $(grep -o 'restored from.*' "$RUN/replay.log" | tail -1 | sed 's/.*; now/now/')" \
  || bad "no restore line with the limiter credit"
batch=$(sed -n 's/^batch_size = //p' "$RUN/config.ini"); bpr=$(sed -n 's/^batches_per_request = //p' "$RUN/config.ini")
prefetch=$(sed -n 's/^prefetch = //p' "$RUN/config.ini"); maxb=$(sed -n 's/^max_batch = //p' "$RUN/config.ini")
"$PY" - "$RUN/metrics.csv" "$rows_before" "$SPI" "$TOL" "$batch" "$bpr" "$prefetch" "$maxb" <<'PY' \
  && ok "the replay ratio held across the restart (see above)" || bad "the learner sampled past the replay ratio after the restart"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
k0, spi, tol, B, bpr, pf, maxb = int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), *map(int, sys.argv[5:9])
slack = 2 * tol + maxb + pf * bpr * B  # the limiter's bound, plus the requests in flight
worst, bad = -1e18, []
for k in range(max(0, k0 - 2), k0):  # windows starting in the rows just before the kill
    for j in range(k + 1, len(rows)):
        trained = (int(rows[j]["updates"]) - int(rows[k]["updates"])) * B
        allowed = spi * (int(rows[j]["replay_inserted"]) - int(rows[k]["replay_inserted"])) + slack
        worst = max(worst, trained - allowed)
        if trained > allowed:
            bad.append((k, j, trained, allowed))
peak = max(float(r["updates_per_s"]) for r in rows[k0:]) if rows[k0:] else 0
print("    %d rows, %d after the kill; worst window %+.0f rows against the bound (slack %d); peak "
      "updates/s after the kill %.0f" % (len(rows), len(rows) - k0, worst, slack, peak))
if bad:
    print("    first violation: rows %d..%d trained %d rows, allowed %d" % bad[0])
sys.exit(1 if bad or len(rows) <= k0 + 2 else 0)
PY
kill -TERM "$LPID"
rc=0; wait "$LPID" || rc=$?
[ "$rc" = 0 ] && ok "SIGTERM: launcher and daemons exit 0" || bad "launcher exit $rc"
finish
