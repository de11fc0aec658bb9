#!/usr/bin/env bash
# Learner group (ZeRO on MPI, issue #15): one apex-learner against a group of 2 ranks, each
# stage, on the MinAtar conv body ([env] id = MinAtar/Breakout-v0, [network] conv = 16x3s1,
# hidden 128, batch 512), replay pre-filled by two actors which are then stopped: the
# learners share the machine's cores with the replay server only.
#   zero.n1.samples_per_s, zero.stage<k>.n2.samples_per_s   metrics.csv, mean over the
#       rows after a warm-up (samples = rows trained by all ranks)
#   zero.n2.samples_per_s_ratio       stage 1 (the default) over one learner; goal >= 1.7
#   zero.stage<k>.opt_bytes_per_rank_ratio    optimizer state per rank over a single
#       learner's (the learner's own accounting, logged at start-up); goal <= 0.55 for 1, 2
#   zero.stage2.grad_bytes_per_rank_ratio     gradient bytes per rank, stage 2 over stage 1
#   zero.stage<k>.comm_frac           share of the training steps' time inside collectives
#       (rank 0's, logged at the stop). The volume is not measured: per rank and step it is
#       2 x 4 bytes x params x (N-1)/N (a reduce-scatter plus an all-gather, the volume of
#       one ring all-reduce), printed as zero.bytes_per_step.
#   zero.*.cpu_us_per_sample          CPU time of the learner (all ranks, all threads) per
#       row trained: what the samples/s ratio would approach on otherwise idle cores, where
#       the ratio is 2 x n1's over the group's (a load-independent view of the overhead).
#   zero.stage3.n2.samples_per_s_vs_stage1   stage 3 (parameters sharded) over stage 1
#   zero.fixture.*.ms_per_step        stage 3 with and without its prefetch, and stage 1,
#       on zero_ranks' fixed batches of a 17 M parameter MLP (see the end)
# ZERO_SECONDS (default 30) per learner run; ~4 min in all.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
PY=/usr/bin/python3
SECS=${ZERO_SECONDS:-30}
WARM=10
TMP=$(mktemp -d /tmp/apex_zero.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT
port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
p1=$(port) p2=$(port) p3=$(port) p4=$(port)
SETS=(--set endpoints.replay_insert_bind=tcp://127.0.0.1:$p1 --set endpoints.replay_insert=tcp://127.0.0.1:$p1
      --set endpoints.replay_sample_bind=tcp://127.0.0.1:$p2 --set endpoints.replay_sample=tcp://127.0.0.1:$p2
      --set endpoints.learner_weights_bind=tcp://127.0.0.1:$p3 --set endpoints.learner_weights=tcp://127.0.0.1:$p3
      --set endpoints.learner_stats_bind=tcp://127.0.0.1:$p4 --set endpoints.learner_stats=tcp://127.0.0.1:$p4
      --set run.out_dir="$TMP/runs" --set env.id=MinAtar/Breakout-v0 --set network.conv=16x3s1
      --set network.hidden=128 --set replay.capacity=65536 --set replay.min_size_to_sample=20000
      --set replay.samples_per_insert=0 --set learner.batch_size=512 --set learner.prefetch=4
      --set learner.threads=1 --set learner.checkpoint_interval_s=1000000
      --set learner.metrics_interval_ms=1000 --set actor.max_steps_per_s=0)
CFG=configs/smoke.ini
MPI=(mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader
     --mca btl_vader_single_copy_mechanism none --mca mpi_yield_when_idle 1)

echo "BENCH zero.cpu $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1 | tr ' ' '_') ($(nproc) cores)"
echo "BENCH zero.openblas_core $(OPENBLAS_VERBOSE=2 "$BIN/apex-learner" --help-config 2>&1 | sed -n 's/^Core: //p' | head -1)"
echo "BENCH zero.load_before $(cut -d' ' -f1 /proc/loadavg)"

# Pre-fill: replay plus two actors until 20 000 transitions are held, then the actors stop.
"$BIN/apex-replay" -c "$CFG" "${SETS[@]}" --set run.name=replay >"$TMP/replay.log" 2>&1 &
PIDS+=($!)
for i in 0 1; do
  "$BIN/apex-actor" -c "$CFG" "${SETS[@]}" --set run.name=fill --index $i >"$TMP/actor$i.log" 2>&1 &
  PIDS+=($!)
  APIDS+=($!)
done
held() { grep -o 'size [0-9]*' "$TMP/replay.log" | tail -1 | awk '{print $2}'; }
for _ in $(seq 1 600); do
  [ "$(held || echo 0)" -ge 30000 ] 2>/dev/null && break
  sleep 0.5
done
kill -TERM "${APIDS[@]}" 2>/dev/null || true
wait "${APIDS[@]}" 2>/dev/null || true
echo "BENCH zero.replay_prefilled $(held) transitions"

# run_learner NAME NP STAGE: trains for SECS, stops by SIGTERM to the rank(s), prints the
# mean samples/s after the warm-up.
run_learner() {
  local name=$1 np=$2 stage=$3 pid
  local args=(-c "$CFG" "${SETS[@]}" --set run.name="$name" --set learner.zero_stage="$stage" --no-resume)
  if [ "$np" = 1 ]; then
    "$BIN/apex-learner" "${args[@]}" >"$TMP/$name.log" 2>&1 &
  else
    "${MPI[@]}" -np "$np" "$BIN/apex-learner" "${args[@]}" >"$TMP/$name.log" 2>&1 &
  fi
  pid=$!
  PIDS+=("$pid")
  sleep "$SECS"
  local ranks=$pid
  [ "$np" = 1 ] || ranks=$(cat "/proc/$pid/task/$pid/children")
  # CPU time of the rank(s) so far (utime + stime, all threads), in clock ticks.
  local ticks=0 r
  for r in $ranks; do
    ticks=$((ticks + $(awk '{print $14 + $15}' "/proc/$r/stat")))
  done
  kill -TERM $ranks
  wait "$pid" || echo "bench: $name exited $?" >&2
  local updates
  updates=$(sed -n 's/.*stopped at update \([0-9]*\).*/\1/p' "$TMP/$name.log" | head -1)
  awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" -v u="$updates" -v np="$np" -v n="$name" \
    'BEGIN {printf "%.2f\n", t / hz * 1e6 / (u * 512 * np)}' >"$TMP/$name.cpu"
  "$PY" - "$TMP/runs/$name/metrics.csv" "$WARM" <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if float(r["elapsed_s"]) >= float(sys.argv[2])]
rows = rows[:-1] or rows  # the last row is the partial one written at the stop
print(sum(float(r["samples_per_s"]) for r in rows) / max(1, len(rows)))
PY
}
mem() { # mem LOG FIELD: rank 0's bytes of FIELD (gradients / optimizer state)
  sed -n "s/.*rank 0 memory: .*$2 \([0-9]*\).*/\1/p" "$1" | head -1
}

n1=$(run_learner n1 1 0)
echo "BENCH zero.n1.samples_per_s $n1"
echo "BENCH zero.n1.cpu_us_per_sample $(cat "$TMP/n1.cpu") us (the learner's CPU time over rows trained)"
# A single learner's bytes: the same accounting, a group of one (no MPI) of stage 0.
params=$(sed -n 's/.*learner: \([0-9]*\) parameters.*/\1/p' "$TMP/n1.log" | head -1)
full_opt=$((params * 8))
full_grad=$((params * 4))
echo "BENCH zero.params $params"
echo "BENCH zero.bytes_per_step $((2 * 4 * params / 2)) bytes per rank and step (N = 2: 2 x 4 x params x (N-1)/N, stated, not measured)"
declare -A sps
for stage in 0 1 2 3; do
  sps[$stage]=$(run_learner "s$stage" 2 "$stage")
  log="$TMP/s$stage.log"
  echo "BENCH zero.stage$stage.n2.samples_per_s ${sps[$stage]}"
  echo "BENCH zero.stage$stage.n2.cpu_us_per_sample $(cat "$TMP/s$stage.cpu") us (both ranks' CPU time over rows trained)"
  opt=$(mem "$log" "optimizer state")
  grad=$(mem "$log" "gradients")
  eval "grad$stage=$grad"
  awk -v a="$opt" -v b="$full_opt" -v s="$stage" 'BEGIN {printf "BENCH zero.stage%s.opt_bytes_per_rank_ratio %.3f\n", s, a / b}'
  frac=$(sed -n 's/.*rank 0: collectives \([0-9.]*\)%.*/\1/p' "$log" | head -1)
  awk -v f="$frac" -v s="$stage" 'BEGIN {printf "BENCH zero.stage%s.comm_frac %.3f\n", s, f / 100}'
done
awk -v a="$grad2" -v b="$grad1" 'BEGIN {printf "BENCH zero.stage2.grad_bytes_per_rank_ratio %.3f (vs stage 1)\n", a / b}'
p3=$(mem "$TMP/s3.log" "params")
p1=$(mem "$TMP/s1.log" "params")
awk -v a="$p3" -v b="$p1" 'BEGIN {printf "BENCH zero.stage3.param_bytes_per_rank_ratio_daemon %.3f (rank 0 online + target, vs stage 1)\n", a / b}'
awk -v a="${sps[3]}" -v b="${sps[1]}" 'BEGIN {printf "BENCH zero.stage3.n2.samples_per_s_vs_stage1 %.2f x\n", a / b}'
awk -v a="$grad1" -v b="$full_grad" 'BEGIN {printf "BENCH zero.stage1.grad_bytes_per_rank_ratio %.3f (vs a single learner)\n", a / b}'
awk -v a="${sps[1]}" -v b="$n1" 'BEGIN {printf "BENCH zero.n2.samples_per_s_ratio %.2f x (stage 1 over one learner; goal >= 1.7)\n", a / b}'
for stage in 0 2 3; do
  awk -v a="${sps[$stage]}" -v b="$n1" -v s="$stage" 'BEGIN {printf "BENCH zero.stage%s.n2.samples_per_s_ratio %.2f x\n", s, a / b}'
done
# Stage 3's layer prefetch (the next block's all-gather during the current block's GEMM)
# against gathering each block when asked, and stage 1 on the same fixture: 2 ranks of
# build/tests/zero_ranks on 84-4096-4096-dueling(18) (17.2 M parameters), 32 rows per rank,
# 20 steps, alternated twice; ms per step and the share inside collectives (rank 0's).
make -s build/tests/zero_ranks
zr() { "${MPI[@]}" -np 2 build/tests/zero_ranks net=wide:4096 rows=64 steps=20 time=1 "$@" | sed -n 's/^time [0-9]* [0-9]* //p'; }
for rep in 1 2; do
  for v in "stage=3 prefetch=1" "stage=3 prefetch=0" "stage=1"; do
    read -r ms frac <<<"$(zr $v)"
    echo "BENCH zero.fixture.$(echo "$v" | tr ' =' '._').ms_per_step $ms (comm $frac, round $rep)"
  done
done
echo "BENCH zero.load_after $(cut -d' ' -f1 /proc/loadavg)"
