#!/usr/bin/env bash
# ZeRO's memory on this machine (issue #30): what a learner group's ranks allocate per stage,
# and the largest Q-network a group fits, read off the allocator and the kernel's limits, not
# computed from the trainer's sizes. Runs build/tests/zero_ranks (the trainer on fixed
# batches, tests/zero_ranks.c) under mpirun; ~10 min, most of it the training in (3).
#
# (1) The memory table: stages 0-3 x N = 1, 2, 4, 8 ranks (oversubscribed on 2 cores) on
#     84-4096-4096-dueling(18) (17.2 M parameters), batch 8 per rank. Per rank (the largest
#     rank's), bytes of online parameters, target, gradients, optimizer state, stage 3's
#     gathered blocks and the passes' activations (train_memory_t: xalloc tallies around each
#     part), and glibc's count of what trainer_new_group allocated (mallinfo2): as bytes per
#     parameter beside ZeRO's formulas adapted to fp32 Adam with a target network (stage 0
#     20; 1: 12 + 8/N; 2: 8 + 12/N; 3: 20/N).
#       zero.mem.stage<S>.n<N>.bytes_per_param   measured (the tallies' sum over P)
#       zero.mem.stage<S>.n<N>.formula            ZeRO's
#       zero.stage3.param_bytes_per_rank_ratio    stage 3's online + target bytes per rank
#                                                 over stage 0's, N = 2 (goal <= 0.55)
# (2) The largest network per stage and N (zero.max_params.stage<S>.n<N>): a machine of
#     ZERO_BUDGET_GIB (default 20: a 24 GiB machine less the OS, replay server and actors)
#     split evenly, each rank's RLIMIT_DATA = budget / N (what N devices of that memory would
#     be), and a binary search on the width H of 84-H-H-dueling(18) for the largest whose
#     trainer fits on every rank (trainer_fits: the large blocks malloc'ed together under the
#     limit, then freed; an MPI rank's own data, ~150-200 MB of libmpi and OpenBLAS, counts).
# ZERO_PARTS (default "1 2 3") runs some of the parts.
# (3) The paper's point: stage 3 with 8 ranks trains (20 steps on one fixed batch, the loss
#     printed) a network that stage 0 with 8 ranks cannot allocate: H = ZERO_DEMO_H (default
#     16384, 270 M parameters, ~5.4 GB per rank in stage 0 against a budget of 2.5 GiB), and
#     stage 0's refusal with the bytes it needed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
BUDGET_GIB=${ZERO_BUDGET_GIB:-20}
DEMO_H=${ZERO_DEMO_H:-16384}
make -s build/tests/zero_ranks
ZR=build/tests/zero_ranks
TMP=$(mktemp -d /tmp/apex_zmem.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
MPI=(mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader
     --mca btl_vader_single_copy_mechanism none --mca mpi_yield_when_idle 1)
echo "BENCH zero_memory.cpu $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1 | tr ' ' '_') ($(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo))"
echo "BENCH zero_memory.openblas_core $(OPENBLAS_VERBOSE=2 bin/apex-learner --help-config 2>&1 | sed -n 's/^Core: //p' | head -1)"

PARTS=${ZERO_PARTS:-1 2 3}
part() { [[ " $PARTS " == *" $1 "* ]]; }

# (1) the memory table
part 1 && for n in 1 2 4 8; do
  "${MPI[@]}" -np "$n" "$ZR" net=wide:4096 stage=0,1,2,3 mem=1 rows=$((8 * n)) >"$TMP/mem$n.txt"
done
part 1 && "$PY" - "$TMP" <<'PY'
import sys, collections
P = 4096 * 4096 + 105 * 4096 + 19
cols = ["opt", "grad", "param", "heap", "gather", "target", "work"]
rows = collections.defaultdict(list)
for n in (1, 2, 4, 8):
    for line in open(f"{sys.argv[1]}/mem{n}.txt"):
        f = line.split()
        if f[0] != "mem":
            continue
        rank, size, stage = int(f[1]), int(f[2]), int(f[3])
        rows[(stage, size)].append(dict(zip(cols, map(int, f[4:]))))
formula = {0: lambda n: 20, 1: lambda n: 12 + 8 / n, 2: lambda n: 8 + 12 / n, 3: lambda n: 20 / n}
print(f"BENCH zero.mem.params {P}")
print("| stage | N | online | target | gradients | optimizer | gathered blocks | activations | total (tallies) | glibc heap | bytes/param | ZeRO formula |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
MB = 1e6
for stage in range(4):
    for n in (1, 2, 4, 8):
        r = max(rows[(stage, n)], key=lambda m: m["param"] + m["grad"] + m["opt"] + m["gather"])
        online = r["param"] - r["target"]
        total = r["param"] + r["grad"] + r["opt"] + r["gather"] + r["work"]
        model = r["param"] + r["grad"] + r["opt"] + r["gather"]
        bpp = model / P
        print(f"| {stage} | {n} | {online / MB:.1f} | {r['target'] / MB:.1f} | {r['grad'] / MB:.1f} | {r['opt'] / MB:.1f} | {r['gather'] / MB:.1f} | {r['work'] / MB:.2f} | {total / MB:.1f} | {r['heap'] / MB:.1f} | {bpp:.2f} | {formula[stage](n):.2f} |")
        print(f"BENCH zero.mem.stage{stage}.n{n}.bytes_per_param {bpp:.3f}")
        print(f"BENCH zero.mem.stage{stage}.n{n}.formula {formula[stage](n):.3f}")
p3 = max(m["param"] for m in rows[(3, 2)])
p0 = max(m["param"] for m in rows[(0, 2)])
print(f"BENCH zero.stage3.param_bytes_per_rank_ratio {p3 / p0:.3f} (N = 2, online + target per rank over stage 0's; goal <= 0.55)")
PY

# (2) the largest network per stage and N
budget=$((BUDGET_GIB * 1024 * 1024 * 1024))
fits() { # fits STAGE N H: 0 when every rank's trainer fits in budget / N
  "${MPI[@]}" -np "$2" "$ZR" net=wide:"$3" stage="$1" fits=1 rows=$((8 * $2)) \
    data_limit=$((budget / $2)) >/dev/null 2>&1
}
echo "BENCH zero.max.budget_bytes $budget (per rank: budget / N)"
part 2 && for stage in 0 1 2 3; do
  for n in 1 2 4 8; do
    lo=64 hi=65536 # lo fits; hi does not (2^32 parameters: more than a learner takes)
    fits "$stage" "$n" "$lo" || { echo "BENCH zero.max_params.stage$stage.n$n 0 (not even H = $lo)"; continue; }
    while [ $((hi - lo)) -gt $((lo / 64 > 8 ? lo / 64 : 8)) ]; do
      mid=$(((lo + hi) / 2))
      if fits "$stage" "$n" "$mid"; then lo=$mid; else hi=$mid; fi
    done
    echo "BENCH zero.max_params.stage$stage.n$n $((lo * lo + 105 * lo + 19)) (H = $lo)"
  done
done

# (3) stage 3 trains what stage 0 cannot allocate, 8 ranks of budget / 8 each; lr 1e-5 (a
# 16384-wide layer moves far with the fixture's 3e-3) and the target frozen (target_update
# 1000), so that the 20 steps on one fixed batch are one regression and the loss should fall.
part 3 || exit 0
P=$((DEMO_H * DEMO_H + 105 * DEMO_H + 19))
echo "BENCH zero.demo.params $P (84-$DEMO_H-$DEMO_H-dueling(18), 8 ranks of $((budget / 8)) bytes)"
rc=0
"${MPI[@]}" -np 8 "$ZR" net=wide:"$DEMO_H" stage=0 rows=8 steps=20 fixed=1 print=1 lr=1e-5 target=1000 \
  data_limit=$((budget / 8)) >"$TMP/demo0.out" 2>"$TMP/demo0.err" || rc=$?
echo "BENCH zero.demo.stage0.exit $rc"
sed -n 's/.*\(rank 0 of 8 cannot allocate.*\)/BENCH zero.demo.stage0.refusal \1/p' "$TMP/demo0.err" | head -1
t0=$(date +%s)
"${MPI[@]}" -np 8 "$ZR" net=wide:"$DEMO_H" stage=3 rows=8 steps=20 fixed=1 print=1 time=1 lr=1e-5 target=1000 \
  data_limit=$((budget / 8)) >"$TMP/demo3.out" 2>"$TMP/demo3.err" || { echo "BENCH zero.demo.stage3.failed"; tail -5 "$TMP/demo3.err"; }
echo "BENCH zero.demo.stage3.seconds $(($(date +%s) - t0)) (start-up, init and 20 steps)"
"$PY" - "$TMP/demo3.out" <<'PY'
import sys
loss = [float(l.split()[2]) for l in open(sys.argv[1]) if l.startswith("loss ")]
t = [l.split() for l in open(sys.argv[1]) if l.startswith("time ")]
print(f"BENCH zero.demo.stage3.steps {len(loss)}")
if loss:
    print("BENCH zero.demo.stage3.loss " + " ".join(f"{x:.4g}" for x in loss))
    print(f"BENCH zero.demo.stage3.loss_first_last {loss[0]:.4g} {loss[-1]:.4g} ({'falling' if loss[-1] < loss[0] else 'NOT falling'})")
if t:
    print(f"BENCH zero.demo.stage3.ms_per_step {float(t[0][3]):.0f} (comm {float(t[0][4]):.2f})")
PY
