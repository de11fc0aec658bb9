// pywire.h: the wire format of the Python env bridge (envs/pyenv.c <-> python/apex_env.py),
// and the checks every message from a worker passes before it is used.
//
// What it does: lays out the fixed header, names the message types, flags and dtype codes,
// and validates a worker's reply (sizes, counts, flag consistency, finite float32
// observations and rewards, error records) and a HELLO's spaces (a continuous action
// space's bounds frame included). Pure functions over
// caller-owned bytes: no sockets, no allocation, thread-safe.
// What it does not do: protobuf. The worker has no protobuf (numpy and pyzmq only), so the
// bridge has its own small format, versioned separately from proto/apex.proto.
//
// Wire format (version 1). The same text is in python/apex_env.py; change both together.
// ------------------------------------------------------------------------------------------
// The actor binds a ROUTER, workers connect a DEALER (routing ids are libzmq's own); workers
// the actor spawns use the local transport instead (envs/pylocal.h: the same header over a
// pipe, the same frames in shared memory). Every message is multipart; frame 0 is a fixed
// 72-byte header, all integers little-endian:
//
//   off size field
//     0   4  magic      "APXE"
//     4   2  version    1
//     6   2  type       1 HELLO, 2 RESET, 3 STEP, 4 RESULT, 5 RESET_DONE, 6 REFUSE
//     8   4  worker     worker id, 0 .. W-1
//    12   4  n_envs     HELLO: the worker's env count N; otherwise envs in this message (n)
//    16   8  seq        request number chosen by the actor, echoed in the reply; HELLO: pid
//    24   8  nonce      random per worker process, in all its messages; the actor echoes it
//    32   4  first      worker-local index of the message's first env (envs first..first+n-1)
//    36   4  n_actions  action_space.n (HELLO; the actor echoes the agreed value); 0 for a
//                       continuous action space
//    40   1  dtype      observation dtype: 1 float32, 2 uint8, 0 other (HELLO only: refused)
//    41   1  ndim       observation rank, 0..4
//    42   2  action_dim continuous actions: floats per action (a Box of shape (action_dim,)),
//                       1..64; 0 for a Discrete action space
//    44  16  shape      4 x u32 observation shape, unused dims 0
//    60   4  n_reset    RESULT: rows in the reset frame
//    64   4  n_error    RESULT, RESET_DONE: records in the errors frame
//    68   4  layout     0: observation rows are the env's observations as they are; 1: the
//                       worker transposes each channels-first (C, H, W) observation to
//                       channels last (H, W, C) before sending it (--obs-layout chw,
//                       [env] obs_layout = chw); ndim and shape stay the env's own
// dtype, ndim, shape, n_actions, action_dim and layout are the HELLO's in every later
// message of either side. A run is discrete (n_actions >= 1, action_dim 0) or continuous (n_actions 0,
// action_dim >= 1). action_dim was a reserved 0 before continuous actions: a discrete run's
// messages are byte for byte what they were, and a worker from before (which sends 0 there,
// and n_actions 0 for a Box) is refused by the actor's spaces check, naming both sides.
// layout was a reserved 0 before [env] obs_layout, in the same way: rows as they are is 0, so
// every message of a run without obs_layout = chw is byte for byte what it was, and a worker
// from before (which cannot transpose) is refused by a chw run, naming the reason. The HELLO
// declares the env's observation_space (ndim, shape, dtype) as the env has it, so that the
// actor can compare it with the run's frame ([env] obs_shape HxWxC or a vector of obs_dim,
// obs_layout) and name both when they differ; the rows' layout then follows from layout.
//
// Frames after the header (obs rows are the observation's raw bytes, C order; O = bytes/row):
//   HELLO       worker->actor  [hdr][text: "make=... pid=... host=... observation_space=...
//                              action_space=..." UTF-8, at most 1024 bytes]
//                              continuous (action_dim D > 0): [hdr][text][bounds: D x f32
//                              low, then D x f32 high: the Box's bounds as float32]
//   RESET       actor->worker  [hdr first=0 n_envs=N][seeds: N x u64]: env.reset(seed=s) all
//   STEP        actor->worker  [hdr][actions: n x i32, each in 0 .. n_actions-1]
//                              continuous: [hdr][actions: n x D f32, env-major, each finite
//                              and within the HELLO's bounds]
//   RESULT      worker->actor  [hdr][obs: n x O][rewards: n x f64][flags: n x u8]
//                              [reset_obs: n_reset x O][errors]
//   RESET_DONE  worker->actor  like RESULT for the RESET: first=0, n=N, obs = the start
//                              observations, rewards 0, flags only ERROR, n_reset 0
//   REFUSE      actor->worker  [hdr][reason: UTF-8 text]: the worker logs it and exits 3
// flags per env: 1 TERMINATED, 2 TRUNCATED, 4 RESET (the env was reset: its first
// observation is the next row of reset_obs, rows in env order), 8 ERROR (the env faulted:
// this step is void, its obs row is zeros, reward 0, TERMINATED/TRUNCATED clear; RESET is set
// if the reset after the fault succeeded). Without ERROR, RESET is set exactly when
// TERMINATED or TRUNCATED is. Float32 rows and rewards are finite; rewards fit in float32.
// errors: n_error records, one per ERROR env in env order: u32 env (worker-local index),
// u32 len (<= 256), len bytes of UTF-8 text.
// ------------------------------------------------------------------------------------------
#ifndef APEX_PYWIRE_H
#define APEX_PYWIRE_H

#include <stddef.h>
#include <stdint.h>

#define PYWIRE_MAGIC "APXE"
#define PYWIRE_VERSION 1
#define PYWIRE_HEADER_BYTES 72
#define PYWIRE_TEXT_MAX 1024    // HELLO description, REFUSE reason
#define PYWIRE_ERR_TEXT_MAX 256 // one env's error text
#define PYWIRE_MAX_NDIM 4
#define PYWIRE_MAX_ACTION_DIM 64 // = CONFIG_MAX_ACTION_DIM

typedef enum {
    PYWIRE_HELLO = 1,
    PYWIRE_RESET = 2,
    PYWIRE_STEP = 3,
    PYWIRE_RESULT = 4,
    PYWIRE_RESET_DONE = 5,
    PYWIRE_REFUSE = 6
} pywire_type;

enum { PYWIRE_TERMINATED = 1, PYWIRE_TRUNCATED = 2, PYWIRE_RESET_FLAG = 4, PYWIRE_ERROR = 8 };
enum { PYWIRE_DT_OTHER = 0, PYWIRE_DT_FLOAT32 = 1, PYWIRE_DT_UINT8 = 2 };
// The header's layout field: what the worker does to an observation before sending it.
enum { PYWIRE_LAYOUT_AS_IS = 0, PYWIRE_LAYOUT_CHW = 1 };

// The fixed header, laid out as on the wire (little-endian host, natural alignment: no
// padding). Plain data.
typedef struct {
    char magic[4];
    uint16_t version;
    uint16_t type;
    uint32_t worker;
    uint32_t n_envs;
    uint64_t seq;
    uint64_t nonce;
    uint32_t first;
    uint32_t n_actions;
    uint8_t dtype;
    uint8_t ndim;
    uint16_t action_dim;
    uint32_t shape[PYWIRE_MAX_NDIM];
    uint32_t n_reset;
    uint32_t n_error;
    uint32_t layout; // PYWIRE_LAYOUT_*: a reserved 0 before [env] obs_layout
} pywire_header_t;

// The spaces both sides agreed on at the HELLO.
typedef struct {
    uint32_t n_actions;  // 0 for continuous actions
    uint16_t action_dim; // 0 for discrete actions
    uint8_t dtype;       // PYWIRE_DT_FLOAT32 or PYWIRE_DT_UINT8
    uint8_t ndim;
    uint32_t shape[PYWIRE_MAX_NDIM]; // the env's observation_space shape
    uint32_t layout;                 // PYWIRE_LAYOUT_*
    size_t row_bytes;                // bytes of one observation
} pywire_spaces_t;

// One received frame (borrowed bytes, any alignment).
typedef struct {
    const uint8_t *data;
    size_t len;
} pywire_frame_t;

// Fills h for a message from the actor with the agreed spaces (all counts 0 but n_envs).
void pywire_header_init(pywire_header_t *h, pywire_type type, const pywire_spaces_t *sp,
                        uint32_t worker, uint64_t nonce, uint32_t n_envs, uint64_t seq,
                        uint32_t first);
// Parses a header frame. Returns APEX_OK, APEX_EPROTO (size, magic) or APEX_EVERSION, with
// the reason in err.
int pywire_parse_header(const void *frame, size_t len, pywire_header_t *h, char *err,
                        size_t errlen);
// 1 when h's n_actions, action_dim, dtype, ndim, shape and layout are sp's.
int pywire_spaces_equal(const pywire_header_t *h, const pywire_spaces_t *sp);
// A HELLO's observation shape as elements: the product of its dims, or 0 when the rank or
// a dim is invalid (rank above 4, a dim 0 or above 2^30 or set beyond the rank, over 2^31
// elements).
uint64_t pywire_hello_elements(const pywire_header_t *h);
// 1 when a HELLO's observation shape is the run's frame: for a vector run (h_px = 0) the
// shape (dim,); for an image run of h_px x w_px x c channels, with layout AS_IS the shape
// (h_px, w_px, c), with layout CHW (c, h_px, w_px) (which the worker sends transposed); with
// either, (h_px, w_px) when c = 1 (a grayscale frame without a channel axis: the same bytes).
// Looks at ndim and shape only (not the header's layout field: the caller compares that);
// 0 for an invalid shape.
int pywire_obs_fits(const pywire_header_t *h, uint32_t dim, uint32_t h_px, uint32_t w_px,
                    uint32_t c, uint32_t layout);
// A continuous HELLO's bounds frame (h->action_dim D >= 1): exactly 2 D float32s, D at
// most PYWIRE_MAX_ACTION_DIM. Copies them into low and high (PYWIRE_MAX_ACTION_DIM each;
// any values, NaN included: the caller compares them with the run's). Returns APEX_OK, or
// APEX_EINVAL with the reason in err.
int pywire_hello_bounds(const pywire_header_t *h, const pywire_frame_t *bounds, float *low,
                        float *high, char *err, size_t errlen);

// The group a RESULT covers, for a bridge of `groups` groups of n envs per worker: h->first / n
// when the message is exactly one group's slice (n_envs == n, first a multiple of n, the
// group below groups), else -1 (a message to drop). n and groups >= 1.
int pywire_result_group(const pywire_header_t *h, uint32_t n, uint32_t groups);

// Checks the five payload frames (obs, rewards, flags, reset_obs, errors) of a RESULT
// (is_reset 0) or RESET_DONE (1) with header h against sp: sizes, flag consistency and
// counts, rewards finite in float32, float32 observations finite, one well-formed error
// record (env index, length <= PYWIRE_ERR_TEXT_MAX) per ERROR env in env order and nothing
// after them. Does not look at seq, nonce or which envs the message covers (any n_envs and
// n_reset are safe: sizes that overflow are refused). Returns APEX_OK, or APEX_EINVAL with
// the reason in err.
int pywire_check_reply(const pywire_header_t *h, const pywire_frame_t f[5],
                       const pywire_spaces_t *sp, int is_reset, char *err, size_t errlen);
// Copies the text of the error record at *rec (in an errors frame pywire_check_reply
// accepted: reading it is only safe there) into text as printable ASCII (others '?'),
// NUL-terminated within cap, and advances *rec past it.
void pywire_take_error(const uint8_t **rec, char *text, size_t cap);
// Copies len bytes of peer text as printable ASCII (others '?'), NUL-terminated in cap
// (nothing is written when cap is 0).
void pywire_copy_text(char *dst, size_t cap, const void *src, size_t len);

// "float32", "uint8", or "unsupported-dtype" for a wire dtype code.
const char *pywire_dtype_name(int code);
// Writes a shape as Python prints it: "(4,)", "(3, 2, 2)", "()"; "(invalid)" for a rank
// above PYWIRE_MAX_NDIM (only that many dims are read). Truncated to cap, NUL-terminated.
void pywire_shape_str(char *out, size_t cap, int ndim, const uint32_t *shape);

#endif
