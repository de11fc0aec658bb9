#!/usr/bin/env bash
# smoke: slow
# apex-slurm --nodes 3 --shards 2 against a real three-node Slurm: scripts/slurm-test-cluster
# start --nodes 3 runs slurmd "nodes" n1..n3, each in its own network namespace with its own
# address (10.233.0.11-13), bridged to the controller's namespace. One CartPole job, 3 actors
# and 2 replay shards, checked through Slurm and the daemons' own logs:
#   - placement (squeue -s), by apex-slurm's rule: replay0, the learner and the evaluator on
#     n1, replay1 on n2 (shard k on node k mod 3), actors 0, 1, 2 on n2, n3, n1;
#   - every actor sends to its own shard (actor i to shard i mod 2: actors 0 and 2 to n1's
#     address, actor 1 to n2's on the config's port + 100), nothing on loopback between nodes;
#   - the traffic between nodes crosses the bridge: established TCP connections from n2 to
#     shard 0, from n3 to shard 1 and from the learner on n1 to shard 1, each from the
#     client node's own address;
#   - the learner samples from both shards (shard 1 at n2's address) and both served samples
#     (the totals of each shard's "replay: stopping:" line in replay0.log / replay1.log);
#   - the job solves (stopped on an eval.csv row), stops in order (the actors, then the
#     learner's final checkpoint, then both shards, by their log lines' timestamps), ends
#     COMPLETED, and leaves no apex process.
# Needs root and network namespaces (skipped where they are not allowed; failed under CI).
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

[ "$(id -u)" = 0 ] || skip "needs root (slurmd, network namespaces)"
export PATH=$PATH:/usr/sbin:/sbin # slurmctld, slurmd, munged
command -v slurmctld >/dev/null && command -v munged >/dev/null ||
  skip "Slurm not installed (APEX_SLURM_DEPS=1 scripts/install-deps.sh)"
command -v ip >/dev/null || skip "iproute2 (ip) not installed"
probe="apex-probe-$$"
ip netns add "$probe" 2>"$TMP/nserr" || skip "network namespaces not permitted ($(head -1 "$TMP/nserr"))"
ip netns del "$probe"

export APEX_SLURM_DIR="$TMP/slurm" APEX_SLURM_NS="asl$$"
slurm_cleanup() {
  set +e
  [ -n "${APEX_SMOKE_KEEP:-}" ] && mkdir -p "$APEX_SMOKE_KEEP" && cp -r "$TMP/runs" "$APEX_SMOKE_KEEP/" 2>/dev/null
  scripts/slurm-test-cluster stop
  cleanup
}
trap slurm_cleanup EXIT
trap 'exit 130' INT TERM HUP

T0=$(date +%s)
# sl CMD...: a Slurm client command, run where the controller is reachable.
sl() { scripts/slurm-test-cluster exec "$@"; }
scripts/slurm-test-cluster start --nodes 3 && ok "three-node test cluster up in $(($(date +%s) - T0)) s: $(sl sinfo -h -N -o '%N/%t' | tr '\n' ' ')" ||
  { bad "the test cluster did not start"; finish; exit 1; }

RUNS="$TMP/runs"
RUN="$RUNS/nodes"
sl scripts/apex-slurm configs/cartpole.ini --bin "$APEX_BIN" --nodes 3 --actors 3 --shards 2 --min-seconds 10 \
  --set run.out_dir="$RUNS" --set run.name=nodes --set run.target_return=195 --set run.max_seconds=300 \
  >"$TMP/submit.out" 2>&1 || bad "apex-slurm: $(cat "$TMP/submit.out")"
JOB=$(sed -n 's/^apex-slurm: submitted job \([0-9]*\).*/\1/p' "$TMP/submit.out")
[ -n "$JOB" ] && ok "job $JOB submitted: $(sed -n 's/^apex-slurm: submitted job [0-9]*: //p' "$TMP/submit.out")"

# The placement rule (scripts/apex-slurm): shard k on node k mod 3, the learner and the
# evaluator on node 0, actor i on node (i + 1) mod 3.
placement() { sl squeue -h -s -j "$JOB" -o '%j@%N' 2>/dev/null | grep -v '^batch@' | sort | tr '\n' ' '; }
WANT="actor0@n2 actor1@n3 actor2@n1 eval@n1 learner@n1 replay0@n1 replay1@n2 "
placed() { [ "$(placement)" = "$WANT" ]; }
wait_for 60 placed && ok "steps spread over the nodes: $(placement)" || bad "placement: '$(placement)', want '$WANT'"
# The config's ports; apex-slurm puts shard k on them + 100 k.
port() { sed -n "s/^$1_bind = tcp:\/\/.*:\([0-9]*\)\$/\1/p" "$RUN/config.ini"; }
INS=$(port replay_insert) SMP=$(port replay_sample)
# Actor i inserts into shard i mod 2 only: actors 0 and 2 into shard 0 at n1's address,
# actor 1 (on n3) into shard 1 at n2's.
SHARD_EP=("tcp://10.233.0.11:$INS" "tcp://10.233.0.12:$((INS + 100))")
connects() { grep -q "batches of [0-9]* to ${SHARD_EP[$(($1 % 2))]}\$" "$RUN/actor$1.log"; }
all_connect() { connects 0 && connects 1 && connects 2; }
wait_for 30 all_connect && ok "every actor sends to its own shard: actors 0, 2 to ${SHARD_EP[0]}, actor 1 to ${SHARD_EP[1]}" ||
  bad "actors' endpoints: $(grep -h 'batches of' "$RUN"/actor*.log)"
# The traffic between nodes goes over the bridge: established TCP connections, seen in the
# client's namespace, from its node's own address to the server's. (i: the client's node,
# then the server's address and port.)
LINKS=("2 10.233.0.11 $INS"           # actor0 -> shard 0
       "3 10.233.0.12 $((INS + 100))"  # actor1 -> shard 1
       "1 10.233.0.12 $((SMP + 100))") # the learner's samples <- shard 1
link_up() {
  nsenter --net="/run/netns/$APEX_SLURM_NS-n$1" ss -Htn state established dst "$2" dport = ":$3" | grep -q "10.233.0.1$1:"
}
over_bridge() {
  local l
  for l in "${LINKS[@]}"; do link_up $l || return 1; done
}
wait_for 30 over_bridge && ok "over the bridge: n2 -> 10.233.0.11:$INS (shard 0), n3 -> 10.233.0.12:$((INS + 100)) (shard 1), n1 -> 10.233.0.12:$((SMP + 100)) (the learner's samples)" ||
  bad "missing connections over the bridge: $(for l in "${LINKS[@]}"; do link_up $l || printf '[%s] ' "$l"; done)"
# The learner's sampling reaches both shards, shard 1 at n2's address (that each served
# samples is checked at the end).
answers() { grep -q "replay shard $1 (tcp://$2:$3) answers" "$RUN/learner.log"; }
both_answer() { answers 0 10.233.0.11 "$SMP" && answers 1 10.233.0.12 "$((SMP + 100))"; }
wait_for 60 both_answer && ok "the learner's sampling reaches both shards: $(grep -o 'replay shard [01] .* answers' "$RUN/learner.log" | tr '\n' ';')" ||
  bad "the learner does not reach both shards: $(grep -h 'replay shard' "$RUN/learner.log" | tail -3)"

job_state() { sl scontrol show job "$JOB" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }
job_ended() { [ -z "$(sl squeue -h -j "$JOB" -o %i 2>/dev/null)" ] && [ -n "$(job_state)" ]; }
wait_for 300 job_ended || bad "job $JOB did not end within 300 s"
grep -q "apex-slurm: solved: greedy mean return" "$RUN/slurm-$JOB.out" && ok "solved on 3 nodes: $(grep -o 'solved: .*' "$RUN/slurm-$JOB.out")" ||
  bad "not solved: $(tail -5 "$RUN/slurm-$JOB.out")"
solved_row() {
  local v
  v=$(sed -n 's/.*solved: .* (v\([0-9]*:[0-9]*\), update \([0-9]*\),.*/\1,\2/p' "$RUN/slurm-$JOB.out")
  [ -n "$v" ] && awk -F, -v want="$v" 'NR > 1 && $5 ":" $6 "," $4 == want && $8 >= 195 { found = 1 } END { exit !found }' "$RUN/eval.csv"
}
solved_row && ok "the stop happened on an eval.csv row ($(($(wc -l <"$RUN/eval.csv") - 1)) evaluations)" || bad "the solved line matches no eval.csv row"
[ "$(job_state)" = COMPLETED ] && ok "job COMPLETED" || bad "job state $(job_state)"
# Both shards served samples: the totals of each one's stop line ("replay: stopping: H
# transitions held, I inserted, S sampled, ...").
stop_line() { grep -h "replay: stopping:" "$RUN/replay$1.log" | tail -1; }
served() { stop_line "$1" | grep -qE " [1-9][0-9]* inserted, [1-9][0-9]* sampled,"; }
served 0 && served 1 && ok "both shards stopped, each having served samples: $(for k in 0 1; do printf 'replay%s: %s; ' $k "$(stop_line $k | grep -o '[0-9]* inserted, [0-9]* sampled')"; done)" ||
  bad "a shard did not stop or served nothing: $(stop_line 0) / $(stop_line 1)"
# In order: every actor's stop line before the learner's final checkpoint, and that before
# both shards' stop lines (the log lines' UTC timestamps sort as text; one machine's clock).
ts() { grep -h "$2" "$RUN/$1.log" | tail -1 | cut -d' ' -f1; }
in_order() {
  local t a l r
  l=$(ts learner "final checkpoint written") && [ -n "$l" ] || return 1
  for a in actor0 actor1 actor2; do t=$(ts $a "stopping after") && [ -n "$t" ] && [[ ! "$t" > "$l" ]] || return 1; done
  for r in replay0 replay1; do t=$(ts $r "replay: stopping:") && [ -n "$t" ] && [[ ! "$l" > "$t" ]] || return 1; done
}
in_order && ok "stopped in order: the actors, the learner (final checkpoint at $(ts learner "final checkpoint written")), then replay0 and replay1" ||
  bad "not stopped in order: actors $(for a in 0 1 2; do ts actor$a "stopping after"; done | tr '\n' ' ')learner $(ts learner "final checkpoint") replays $(ts replay0 "replay: stopping:") $(ts replay1 "replay: stopping:")"
left=$(pgrep -af "apex-(replay|learner|actor|eval) -c $RUN/" || true)
[ -z "$left" ] && ok "no apex process left" || bad "left: $left"
[ "$FAIL" -gt 0 ] && [ -f "$RUN/slurm-$JOB.out" ] && tail -n 15 "$RUN/slurm-$JOB.out"
echo "       slurm_nodes smoke test: $(($(date +%s) - T0)) s"
finish
