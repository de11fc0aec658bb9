// group.c: the learner group over MPI (see group.h). The only file of apex that includes
// mpi.h: the Makefile adds MPI's flags for it alone and links libmpi into the learner.
#define LOG_MODULE "group"
#include "group.h"

#include "apex.h"
#include "clock.h"
#include "log.h"
#include "parse.h"
#include "signals.h"
#include "xalloc.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct group {
    int rank, size;
    int mpi; // MPI_Init was called (and MPI_Finalize is due)
    MPI_Comm comm;
    int64_t comm_ns;
    MPI_Request pending[GROUP_MAX_PENDING]; // group_iallgather_f32's; MPI_REQUEST_NULL: free
    char yield[16];      // GROUP_YIELD_ENV as MPI_Init found it ("" = no MPI, or too long)
    int yield_defaulted; // group_new set GROUP_YIELD_ENV itself
};

// ----------------------------------------------------------------------------
// launch detection

// A positive integer from the environment, or 0.
static int s_env_int(const char *name) {
    const char *v = getenv(name);
    int64_t x;
    return v && parse_int64(v, 1, 1 << 20, &x) == 0 ? (int)x : 0;
}

int group_launch_size(void) {
    int n = s_env_int("OMPI_COMM_WORLD_SIZE");
    if (n == 0 && getenv("SLURM_STEP_ID")) {
        // Only an srun step: a batch script itself has SLURM_PROCID = 0 and no launcher
        // to talk to, and MPI_Init there would be a singleton.
        n = s_env_int("SLURM_STEP_NUM_TASKS");
    }
    if (n == 0) {
        n = s_env_int("PMI_SIZE");
    }
    if (n == 0 && getenv("PMIX_RANK")) {
        n = 2; // some launcher is there; MPI_Comm_size tells the truth
    }
    return n > 1 ? n : 1;
}

// ----------------------------------------------------------------------------
// lifecycle

group_t *group_new(void) {
    group_t *g = xcalloc(1, sizeof *g);
    g->size = 1;
    if (group_launch_size() == 1) {
        return g;
    }
    // OpenMPI reads its MCA parameters from the environment in MPI_Init, so this is what
    // `mpirun --mca mpi_yield_when_idle 1` does for its ranks. Only where nobody chose: a
    // value the user exported, or mpirun's --mca (which exports it to the ranks), stands.
    // (A value in an MCA parameter file is overridden: the environment wins over files.)
    // setenv is safe here: the learner calls group_new before it starts any thread of its
    // own (ZeroMQ's context comes later).
    if (!getenv(GROUP_YIELD_ENV)) {
        g->yield_defaulted = setenv(GROUP_YIELD_ENV, "1", 0) == 0;
    }
    const char *y = getenv(GROUP_YIELD_ENV);
    if (y && strlen(y) < sizeof g->yield) {
        strcpy(g->yield, y);
    }
    int provided = 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        log_error("MPI_Init_thread failed");
        xfree(g);
        return NULL;
    }
    g->mpi = 1;
    // A communicator of our own, so that nothing else using COMM_WORLD can match our
    // collectives; errors stay fatal (a broken group cannot go on).
    MPI_Comm_dup(MPI_COMM_WORLD, &g->comm);
    for (int i = 0; i < GROUP_MAX_PENDING; i++) {
        g->pending[i] = MPI_REQUEST_NULL;
    }
    MPI_Comm_rank(g->comm, &g->rank);
    MPI_Comm_size(g->comm, &g->size);
    if (g->size > GROUP_MAX_RANKS) {
        log_error("learner group of %d ranks; at most %d", g->size, GROUP_MAX_RANKS);
        group_destroy(&g);
        return NULL;
    }
    if (provided < MPI_THREAD_FUNNELED) {
        // Only this thread calls MPI; ZeroMQ's threads exist but never do.
        log_debug("MPI thread level %d (asked for FUNNELED)", provided);
    }
    return g;
}

void group_destroy(group_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    group_t *g = *self_p;
    if (g->mpi) {
        MPI_Comm_free(&g->comm);
        MPI_Finalize(); // collective in OpenMPI: every rank gets here on an orderly stop
    }
    xfree(g);
    *self_p = NULL;
}

int group_rank(const group_t *self) { return self->rank; }
int group_size(const group_t *self) { return self->size; }
int group_uses_mpi(const group_t *self) { return self->mpi; }
int64_t group_comm_ns(const group_t *self) { return self->comm_ns; }
const char *group_yield(const group_t *self) { return self->yield; }
int group_yield_defaulted(const group_t *self) { return self->yield_defaulted; }

void group_shard_range(size_t n, int size, int rank, size_t *offset, size_t *count) {
    APEX_ASSERT(size >= 1 && rank >= 0 && rank < size);
    size_t base = n / (size_t)size, rem = n % (size_t)size, r = (size_t)rank;
    *offset = r * base + (r < rem ? r : rem);
    *count = base + (r < rem ? 1 : 0);
}

size_t group_shard_max(size_t n, int size) { return (n + (size_t)size - 1) / (size_t)size; }

// ----------------------------------------------------------------------------
// collectives (in MPI, counts are ints: parameter arrays stay below 2^31 floats)

void group_allreduce_f32(group_t *self, float *x, size_t n) {
    if (!self->mpi) {
        return;
    }
    APEX_ASSERT(n <= INT32_MAX);
    int64_t t0 = clock_now_ns();
    MPI_Allreduce(MPI_IN_PLACE, x, (int)n, MPI_FLOAT, MPI_SUM, self->comm);
    self->comm_ns += clock_now_ns() - t0;
}

void group_allreduce_f64(group_t *self, double *x, int n) {
    if (!self->mpi) {
        return;
    }
    int64_t t0 = clock_now_ns();
    MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_SUM, self->comm);
    self->comm_ns += clock_now_ns() - t0;
}

void group_reduce_scatter_f32(group_t *self, const float *send, float *recv,
                              const int *recvcounts) {
    if (!self->mpi) {
        if (send) {
            memcpy(recv, send, (size_t)recvcounts[0] * sizeof(float));
        }
        return;
    }
    int64_t t0 = clock_now_ns();
    MPI_Reduce_scatter(send ? (const void *)send : MPI_IN_PLACE, recv, recvcounts, MPI_FLOAT,
                       MPI_SUM, self->comm);
    self->comm_ns += clock_now_ns() - t0;
}

void group_allgather_f32(group_t *self, float *buf, const int *counts, const int *displs) {
    if (!self->mpi) {
        return;
    }
    int64_t t0 = clock_now_ns();
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs, MPI_FLOAT, self->comm);
    self->comm_ns += clock_now_ns() - t0;
}

int group_iallgather_f32(group_t *self, float *buf, const int *counts, const int *displs) {
    if (!self->mpi) {
        return -1; // complete: a group of one holds every block already
    }
    int h = 0;
    while (h < GROUP_MAX_PENDING && self->pending[h] != MPI_REQUEST_NULL) {
        h++;
    }
    APEX_ASSERT(h < GROUP_MAX_PENDING); // the caller waits for its requests
    int64_t t0 = clock_now_ns();
    MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs, MPI_FLOAT, self->comm,
                    &self->pending[h]);
    self->comm_ns += clock_now_ns() - t0;
    return h;
}

void group_wait(group_t *self, int handle) {
    if (handle < 0) {
        return;
    }
    APEX_ASSERT(self->mpi && handle < GROUP_MAX_PENDING &&
                self->pending[handle] != MPI_REQUEST_NULL);
    int64_t t0 = clock_now_ns();
    MPI_Wait(&self->pending[handle], MPI_STATUS_IGNORE); // sets it to MPI_REQUEST_NULL
    self->comm_ns += clock_now_ns() - t0;
}

void group_gather_f32(group_t *self, const float *send, void *recv, const int *counts,
                      const int *displs) {
    if (!self->mpi) {
        if (recv) {
            memmove((char *)recv + (size_t)displs[0] * sizeof(float), send,
                    (size_t)counts[0] * sizeof(float));
        }
        return;
    }
    int64_t t0 = clock_now_ns();
    MPI_Gatherv(send, counts[self->rank], MPI_FLOAT, recv, counts, displs, MPI_FLOAT, 0,
                self->comm);
    self->comm_ns += clock_now_ns() - t0;
}

void group_round(group_t *self, double *x, int n) {
    APEX_ASSERT(n >= 1 && n <= 32);
    if (!self->mpi) {
        return;
    }
    int64_t t0 = clock_now_ns();
    double in[32];
    memcpy(in, x, (size_t)n * sizeof(double));
    MPI_Request req;
    MPI_Iallreduce(in, x, n, MPI_DOUBLE, MPI_SUM, self->comm, &req);
    // Test, then sleep 20, 40, ... up to GROUP_ROUND_SLEEP_MAX_US between tests: a rank
    // waiting for another's batch sleeps instead of spinning on a core the replay server
    // and the other ranks need. The wait adds at most that much latency to a round.
    long sleep_us = 20;
    for (int done = 0;;) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done) {
            break;
        }
        if (signals_should_stop() && clock_now_ns() - t0 > GROUP_STOP_ABORT_MS * 1000000LL) {
            // Asked to stop, and the others do not come: a rank died or hangs, and a
            // collective cannot be left any other way.
            log_error("stopping, and the learner group has not answered for %d s: aborting it",
                      GROUP_STOP_ABORT_MS / 1000);
            MPI_Abort(self->comm, 1);
        }
        struct timespec ts = {0, sleep_us * 1000L};
        nanosleep(&ts, NULL);
        sleep_us = APEX_MIN(sleep_us * 2, (long)GROUP_ROUND_SLEEP_MAX_US);
    }
    // Not in comm_ns: a round is mostly waiting for another rank's batch, not moving data.
}
