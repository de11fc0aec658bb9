// pylocal.h: the local transport of the Python env bridge: shared memory for the frames and
// two pipes for the headers, between the actor and one worker process it spawned itself.
// ("Pipes": AF_UNIX stream socket pairs used one way each, so that writing to a dead worker
// is an EPIPE error and never a SIGPIPE.)
//
// What it does: for each spawned worker, one memfd (created once, kept across restarts)
// mapped by both processes, split into `regions` request regions then `regions` reply
// regions (one pair per group of the bridge), and a fresh pair of pipes per child process.
// A message is its 72-byte pywire header written to a pipe (one small write, whole or not at
// all) after its payload frames were written to the sender's region for the message's group:
//   region: [5 x u32 frame lengths][pad to 64][frame 0][pad to 8][frame 1][pad to 8] ...
// The pipe's write and read are the turn-taking and the memory barrier: the reader looks at
// a region only after the header came, and each side writes a region only when it holds the
// turn for that group (the actor after reading the group's reply, the worker after reading
// its request). The frames are the ones of pywire.h, in the same order and with the same
// checks: pylocal_take_frames copies them out of the shared memory into the caller's
// private buffer FIRST, so a worker that scribbles on the region afterwards cannot change
// what was checked.
//
// Why not ZeroMQ for a child on this host: a round trip over libzmq costs each side ~10
// thread wake-ups (I/O threads, mailboxes) and, in Python, a getpid per signal; over pipes
// it is one read and one write system call per side, and the frames are one memcpy. The
// pipes and the memfd are inherited by that one child only (nothing listens on a port, so
// there is nothing for CURVE to protect), and either side sees the other's death as EOF.
//
// What it does not do: know the message types (pyenv.c does), allocate after
// pylocal_init, or block (the actor's ends are non-blocking). Plain data (STYLE S2); one
// thread.
#ifndef APEX_PYLOCAL_H
#define APEX_PYLOCAL_H

#include <stddef.h>
#include <stdint.h>

#include "pywire.h"

#define PYLOCAL_FRAMES 5
#define PYLOCAL_HEAD_BYTES 64 // the lengths table, padded

typedef struct {
    int shm_fd;       // memfd, -1 = none
    uint8_t *mem;     // mapped (regions * (req_bytes + rep_bytes))
    size_t req_bytes; // one request region
    size_t rep_bytes; // one reply region
    int regions;
    int to_child[2];                 // pipe: [0] the child's (its fd 4), [1] ours; -1 = closed
    int from_child[2];               // pipe: [0] ours, [1] the child's (its fd 5)
    uint8_t rx[PYWIRE_HEADER_BYTES]; // a header being read
    size_t rx_len;
} pylocal_t;

// Bytes of a reply region for N envs of row bytes (RESET_DONE: N start observations and N
// error records; a HELLO's text and bounds), and of a request region (N seeds, N actions of
// an int32 or, action_dim > 0, of action_dim float32s, a REFUSE).
size_t pylocal_reply_bytes(int N, size_t row);
size_t pylocal_request_bytes(int N, int action_dim);

// Creates and maps the memfd. Returns 0, or -1 after logging why (a start-up error). The
// pipes are closed until pylocal_open_pipes.
int pylocal_init(pylocal_t *l, int regions, size_t req_bytes, size_t rep_bytes);
// Unmaps and closes everything. A zeroed or finished pylocal_t is a no-op.
void pylocal_fini(pylocal_t *l);

// Makes fresh pipes for a new child (closing the old ones) and writes the three fds the
// child gets as its 3, 4, 5 (memfd, requests, replies) into fds. Returns 0, or -1 (logged).
int pylocal_open_pipes(pylocal_t *l, int fds[3]);
// After the child was forked: closes the child's pipe ends here, so that its death reads
// as EOF.
void pylocal_spawned(pylocal_t *l);
// Closes our pipe ends (the child is gone or being killed); sends fail from then on.
void pylocal_close_pipes(pylocal_t *l);
// 1 while our ends are open.
int pylocal_is_open(const pylocal_t *l);
// Our read end (for poll), or -1.
int pylocal_read_fd(const pylocal_t *l);

// Writes payload (len bytes: one frame) into request region `region`, then the header to
// the pipe. Never blocks. Returns 0, or -1 with the reason in err (a full pipe: the worker
// does not read; a closed one; a payload too large for the region).
int pylocal_send(pylocal_t *l, int region, const pywire_header_t *h, const void *payload,
                 size_t len, char *err, size_t errlen);
// Reads what the pipe holds of the next header. Returns 1 with a whole header in hdr, 0
// when none is complete yet, -1 at EOF or on an error (the worker is gone; reason in err).
int pylocal_recv_header(pylocal_t *l, uint8_t hdr[PYWIRE_HEADER_BYTES], char *err, size_t errlen);
// Copies reply region `region`'s frames into scratch (pylocal_reply_bytes of them, the
// caller's private memory) and points f[0 .. PYLOCAL_FRAMES) into scratch. Returns 0, or
// -1 with the reason in err (lengths that do not fit the region).
int pylocal_take_frames(const pylocal_t *l, int region, uint8_t *scratch,
                        pywire_frame_t f[PYLOCAL_FRAMES], char *err, size_t errlen);

#endif
