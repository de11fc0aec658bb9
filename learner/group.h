// group.h: the learner group, N data-parallel learner ranks over MPI (ZeRO, issue #15).
//
// A group is the processes one launcher started together (mpirun -np N, srun -n N). MPI is
// initialised only when a launcher's variables say this process is one of several
// (group_launch_size): OpenMPI 4.1's singleton MPI_Init would start an orted, and a plain
// `apex-learner` must behave exactly as it always did. Without a launcher the group is one
// rank and every collective is a local no-op (or a copy), so the trainer has one code path.
//
// Collectives over float arrays, on MPI_COMM_WORLD's duplicate (the reductions SUM):
//   group_allreduce_f32         in place (ZeRO stage 0: plain data-parallel gradients)
//   group_reduce_scatter_f32    recvcounts per rank (the shards of group_shard_range)
//   group_allgather_f32         in place, rank r's block at displs[r]; group_iallgather_f32
//                               the same, non-blocking (group_wait)
//   group_gather_f32            rank r's block to rank 0 only
//   group_allreduce_f64         a few doubles (the global gradient norm)
//   group_round                 a few doubles, waiting by sleeping (see below)
// The blocking calls rely on OpenMPI's progress loop, which with mpi_yield_when_idle = 1
// calls sched_yield when nothing progresses: a waiting rank gives its core to the replay
// server instead of spinning on it. group_new makes that the default however the ranks were
// started (mpirun -np N apex-learner, srun, the launchers): it sets
// OMPI_MCA_mpi_yield_when_idle=1 before MPI_Init unless the variable is set already (by the
// user, or by mpirun's --mca, which passes it to the ranks that way; group_yield says which
// value MPI_Init found). OpenMPI's own default yields only when mpirun sees more ranks than
// cores: `mpirun -np 2` on a 2-core machine would spin. (It is not read back through MPI_T:
// in OpenMPI 4.1, MPI_T_init_thread registers every framework's components, and
// MPI_T_finalize closes them again, in a running group; docs/architecture.md.) The blocking
// calls are used where the ranks arrive together (inside a training step, after a round).
// group_round is where a rank may wait long (for another rank's batch): it starts an
// MPI_Iallreduce and tests it with growing sleeps (20 us doubling to
// GROUP_ROUND_SLEEP_MAX_US), so a waiting rank sleeps instead of polling; a small message
// needs only a few progress calls. A rank that
// was asked to stop (signals.h) and waits in a round longer than GROUP_STOP_ABORT_MS aborts
// the job: the others are gone or hung.
// Time spent inside the collectives of training steps and checkpoints is summed in
// group_comm_ns (for comm_frac); rounds are not counted (they are waits for data).
//
// A rank that dies takes the group down (MPI's semantics: mpirun kills the job); errors of
// a collective abort the job (MPI_ERRORS_ARE_FATAL): there is no partial group to go on
// with. What it does not do: point-to-point messages, nested groups, threads (only the
// thread that called group_new may call the rest).
#ifndef APEX_GROUP_H
#define APEX_GROUP_H

#include <stddef.h>
#include <stdint.h>

#define GROUP_ROUND_SLEEP_MAX_US 500
#define GROUP_STOP_ABORT_MS 10000 // a stopping rank's round waits this long, then MPI_Abort
#define GROUP_MAX_RANKS 4096
#define GROUP_MAX_PENDING 8 // non-blocking collectives outstanding at once
#define GROUP_YIELD_ENV "OMPI_MCA_mpi_yield_when_idle" // set to 1 by group_new when unset

typedef struct group group_t;

// The group size a launcher announced in the environment: OMPI_COMM_WORLD_SIZE (mpirun),
// SLURM_STEP_NUM_TASKS with SLURM_STEP_ID (an srun step), PMI_SIZE (MPICH's hydra), or 2
// when only PMIX_RANK says there is a launcher (PMIx without a size variable; MPI then says
// the real size). 1 when none does: a plain process.
int group_launch_size(void);

// Size group_launch_size() > 1: OMPI_MCA_mpi_yield_when_idle=1 unless set (see top; call it
// before any other thread exists: setenv), MPI_Init_thread (FUNNELED: ZeroMQ's I/O threads
// never call MPI), rank and size of MPI_COMM_WORLD. Otherwise a group of one without MPI.
// Returns NULL after logging why (MPI_Init failed, more than GROUP_MAX_RANKS). Call once per
// process; destroy with group_destroy, which calls MPI_Finalize (after a barrier) when MPI was
// used.
group_t *group_new(void);
void group_destroy(group_t **self_p);

int group_rank(const group_t *self);
int group_size(const group_t *self);
int group_uses_mpi(const group_t *self);    // 1 when MPI was initialised
int64_t group_comm_ns(const group_t *self); // ns spent in collectives (not rounds) so far
// GROUP_YIELD_ENV as MPI_Init found it in the environment ("1" when group_new set it), which
// OpenMPI takes for mpi_yield_when_idle (whether a rank waiting in a blocking collective
// yields its core); "" without MPI (a group of one). Borrowed, valid as long as self.
const char *group_yield(const group_t *self);
// 1 when group_new set GROUP_YIELD_ENV itself (it was unset), 0 when it found it set.
int group_yield_defaulted(const group_t *self);

// Shard r of an array of n elements split over size ranks: the first n % size ranks hold
// one more (DeepSpeed's get_data_parallel_partitions). *offset, *count in elements.
void group_shard_range(size_t n, int size, int rank, size_t *offset, size_t *count);
// The largest shard, ceil(n / size): what every rank allocates for its shard.
size_t group_shard_max(size_t n, int size);

// x[0..n) = the sum over ranks of x[0..n), on every rank.
void group_allreduce_f32(group_t *self, float *x, size_t n);
void group_allreduce_f64(group_t *self, double *x, int n);
// send holds sum(recvcounts) floats laid out rank by rank; rank r receives in recv its
// recvcounts[r] floats of the sum. send == NULL: in place, the input is recv itself and the
// result lands at recv[0..recvcounts[rank]). recvcounts may contain zeros.
void group_reduce_scatter_f32(group_t *self, const float *send, float *recv, const int *recvcounts);
// buf (sum(counts) floats): every rank's block [displs[r], displs[r] + counts[r]) is sent
// from its own place to all others.
void group_allgather_f32(group_t *self, float *buf, const int *counts, const int *displs);
// group_allgather_f32 started and left to run (ZeRO stage 3 brings the next layer while the
// current one computes): returns a handle for group_wait, which must be called before buf is
// read or counts and displs change. Without MPI the call is complete at once (handle -1).
// At most GROUP_MAX_PENDING at a time; every rank starts them in the same order (MPI's rule
// for collectives, blocking or not).
int group_iallgather_f32(group_t *self, float *buf, const int *counts, const int *displs);
void group_wait(group_t *self, int handle);
// Rank 0 receives every rank's send (counts[r] floats) at float offset displs[r] of recv,
// which may be unaligned (bytes of a message); recv is not read on the other ranks (NULL is
// fine). Without MPI: send is copied to recv's displs[0] (recv NULL: nothing).
void group_gather_f32(group_t *self, const float *send, void *recv, const int *counts,
                      const int *displs);
// One synchronisation round: x[0..n) = the sum over ranks, waiting by sleeping (see top).
// n <= 32.
void group_round(group_t *self, double *x, int n);

#endif
