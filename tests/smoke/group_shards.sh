#!/usr/bin/env bash
# A learner group over sharded replay: scripts/apex-local --learners 2 with [replay] shards = 2
# on the smoke config (2 actors: actor 0 inserts into shard 0, actor 1 into shard 1), run for
# a few seconds and stopped by the launcher. From the daemons' own outputs:
#   - both ranks train: they stop at the same update, past 50, with the final checkpoint;
#   - each rank samples from both shards (its "sent N sample requests: a to shard 0, b to
#     shard 1" line at the stop), and both shards served samples (their replay stats);
#   - each rank chooses with a stream of its own: the ranks' logged first 64 choices of shard
#     differ, in about as many places as independent draws at their frequencies would
#     (2 f (1 - f) of them, f = shard 0's share). With one stream shared by the ranks (as
#     before issue #26) the n-th choices of the two ranks agree but where their views of the
#     shards' masses differ, and this check fails.
# ~20 s.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
# LeakSanitizer under make asan: OpenMPI's allocations (tests/lsan-mpi.supp, check_group.c).
# (Appended: make asan sets LSAN_OPTIONS for every test; the last suppressions= wins.)
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$ROOT/tests/lsan-mpi.supp:print_suppressions=0:fast_unwind_on_malloc=0"
CFG=configs/smoke.ini
RUNS="$TMP/runs"
RUN="$RUNS/smoke"
ep() { echo "tcp://127.0.0.1:$(free_port)"; }
I0=$(ep); I1=$(ep); S0=$(ep); S1=$(ep); PUB=$(ep); ST=$(ep)
SETS=(--set replay.shards=2 --set "endpoints.replay_insert_bind=$I0,$I1" --set "endpoints.replay_insert=$I0,$I1"
      --set "endpoints.replay_sample_bind=$S0,$S1" --set "endpoints.replay_sample=$S0,$S1"
      --set "endpoints.learner_weights_bind=$PUB" --set "endpoints.learner_weights=$PUB"
      --set "endpoints.learner_stats_bind=$ST" --set "endpoints.learner_stats=$ST"
      --set run.out_dir="$RUNS" --set run.max_seconds="${GROUP_SHARDS_SECONDS:-10}")
rc=0
scripts/apex-local "$CFG" --bin "$APEX_BIN" --quiet --no-eval --learners 2 "${SETS[@]}" \
  >"$TMP/launcher.out" 2>&1 || rc=$?
[ "$rc" = 0 ] && ok "launcher exit 0" || { bad "launcher exit $rc"; tail -20 "$RUN/learner.log"; }
stops=$(sed -n 's/.*stopped at update \([0-9]*\) (final checkpoint written).*/\1/p' "$RUN/learner.log" | sort -u)
n_stops=$(grep -c "stopped at update .* (final checkpoint written)" "$RUN/learner.log" || true)
[ "$n_stops" = 2 ] && [ "$(echo "$stops" | wc -l)" = 1 ] && [ "${stops:-0}" -gt 50 ] \
  && ok "both ranks trained and stopped at update $stops with the final checkpoint" \
  || bad "stops: $n_stops lines, updates: ${stops:-none}"
# Rank 0 logs as apex-learner[pid], rank 1 as apex-learner.1[pid].
"$PY" - "$RUN/learner.log" <<'PY' && ok "each rank sent sample requests to both shards (see above)" || bad "a rank did not sample both shards"
import re, sys
per = {}
for line in open(sys.argv[1]):
    m = re.search(r"rank (\d+) sent (\d+) sample requests: (\d+) to shard 0, (\d+) to shard 1", line)
    if m:
        r, n, a, b = map(int, m.groups())
        per[r] = (a, b)
        print("    rank %d: %d requests, %d to shard 0, %d to shard 1" % (r, n, a, b))
sys.exit(0 if sorted(per) == [0, 1] and all(a > 0 and b > 0 for a, b in per.values()) else 1)
PY
for k in 0 1; do
  s=$(sed -n 's/.*stopping: .* inserted, \([0-9]*\) sampled.*/\1/p' "$RUN/replay$k.log" | tail -1)
  [ "${s:-0}" -gt 0 ] && ok "shard $k sampled $s rows" || bad "shard $k: no samples in replay$k.log"
done
"$PY" - "$RUN/learner.log" <<'PY' && ok "the ranks chose shards with streams of their own (see above)" || bad "the ranks chose shards alike: one stream for both?"
import re, sys
seq = {}
for line in open(sys.argv[1]):
    m = re.search(r"rank (\d+)'s first 64 choices of shard \(its stream: seed \d+, index \d+\): ([0-9 ]+)$", line.rstrip())
    if m:
        seq[int(m.group(1))] = [int(x) for x in m.group(2).split()]
if sorted(seq) != [0, 1] or any(len(s) != 64 for s in seq.values()):
    print("    choices logged: %s" % {r: len(s) for r, s in seq.items()})
    sys.exit(1)
a, b = seq[0], seq[1]
differ = sum(x != y for x, y in zip(a, b))
f = (a.count(0) + b.count(0)) / 128.0
expect = 64 * 2 * f * (1 - f)
print("    rank 0: %s" % "".join(map(str, a)))
print("    rank 1: %s" % "".join(map(str, b)))
print("    they differ in %d of 64 choices; independent draws at shard 0's share %.2f: %.1f" % (differ, f, expect))
# Independent: differ ~ Binomial(64, 2f(1-f)); at least a third of its mean is ~4 standard
# deviations below it for f in [0.2, 0.8]. Shared: only where the ranks' views of the masses
# straddle the draw.
sys.exit(0 if 0.2 <= f <= 0.8 and differ >= expect / 3 else 1)
PY
finish
