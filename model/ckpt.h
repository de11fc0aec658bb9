// ckpt.h: the checkpoint file format (STYLE S19) and its atomic writer / validating reader.
//
// File = a fixed 240-byte header (format 2; format 1 had 168, see below), then the payload: n_arrays float32 arrays of num_params
// floats each, back to back, in the nn_params_t layout (the trainer writes online,
// target, optimizer m, optimizer v). Everything is little-endian (the header is the
// in-memory struct below; a static assert refuses big-endian hosts).
//
// Header fields, in order: magic "APEXCKPT"; format version; header size; the network
// shape (obs_dim, n_actions, n_hidden, dueling, hidden[4], input h/w/c, n_conv, conv[4]
// {filters, kernel, stride}, input dtype and scale); num_params; learner step;
// optimizer kind, n_arrays, optimizer step; the learner's RNG state (xoshiro, 4 x u64);
// caller extras (weights version, 4 spare counters); payload length in bytes; CRC32C of
// the payload; CRC32C of the header bytes before it. CRC32C (Castagnoli, reflected poly
// 0x82F63B78, the iSCSI/ext4 one) is implemented here, table-driven.
//
// Writing goes to "<path>.tmp", fsync, rename over path, fsync of the directory, so a
// reader sees the old file or the new one, never half of one. Any failure unlinks the
// temp file and leaves the previous checkpoint untouched.
// Format 1 (builds before conv layers) is the same without the input shape and conv
// fields: MLP checkpoints of those builds load as they are (their parameter layout is the
// MLP's of today). Only format 2 is written.
// Reading validates, in order: size, magic ("not an apex checkpoint"), format version,
// header CRC, network shape against the configured one (the error names both), payload
// length against the file size (truncated), payload CRC. The destination arrays are
// written only after every check has passed.
// Errors (apex_err, each logged once with the path through log_error):
//   APEX_EIO (open/read/write/fsync/rename failed), APEX_ENOSPC (disk full, quota, file
//   size limit), APEX_EPROTO (not a checkpoint, truncated, checksum mismatch),
//   APEX_EVERSION (other format version), APEX_EINVAL (shape or array count mismatch).
// Thread-safety: functions are reentrant; two writers to the same path race.
#ifndef APEX_CKPT_H
#define APEX_CKPT_H

#include "nn.h"

#include <stddef.h>
#include <stdint.h>

#define CKPT_MAGIC "APEXCKPT" // 8 bytes, no NUL in the file
#define CKPT_FORMAT_VERSION 2u
#define CKPT_MAX_ARRAYS 8

// Counters the caller wants back on resume; stored verbatim.
typedef struct {
    uint64_t weights_version; // last published weights version
    uint64_t user[4];         // the learner's run totals (CKPT_USER_*); 0 if unused
} ckpt_extra_t;
// What the learner keeps in ckpt_extra_t.user (checkpoints of older builds: frames only).
// CKPT_USER_OPT_SHARDS: 0 when the file holds the optimizer moments itself (4 arrays); M > 0
// when a learner group wrote them to M shard files beside it (2 arrays: online, target).
enum {
    CKPT_USER_FRAMES = 0,
    CKPT_USER_EPISODES = 1,
    CKPT_USER_ELAPSED_MS = 2,
    CKPT_USER_OPT_SHARDS = 3
};
// An optimizer shard file of a learner group (learner/train.c names and validates the set):
// the same header with magic CKPT_SHARD_MAGIC (so that apex-eval cannot take it for a
// checkpoint), num_params and the shape of the whole network, and in extra.user the shard:
// its offset and length in the flat parameter array, its rank and the number of ranks. The
// payload is n_arrays arrays of that length (the trainer writes m, v).
#define CKPT_SHARD_MAGIC "APEXOPTS"
enum { CKPT_SHARD_OFFSET = 0, CKPT_SHARD_COUNT = 1, CKPT_SHARD_RANK = 2, CKPT_SHARD_RANKS = 3 };
// A DPG trainer's checkpoint (learner/train_dpg.h): the same format with magic CKPT_DPG_MAGIC,
// so that a Q-network's reader (the DQN learner, apex-eval) refuses it by its magic, with a
// hint, and the DPG trainer refuses a Q-network's. The shape fields describe the policy
// network; num_params counts the whole model (policy, then critics: train_dpg.h), and each of
// the n_arrays payload arrays holds that many floats. Written with ckpt_write_as and read with
// ckpt_read_as; what the header's shape cannot say the trainer checks (train_dpg.c).
#define CKPT_DPG_MAGIC "APEXDPGC"

typedef struct {
    char magic[8];
    uint32_t format_version;
    uint32_t header_bytes; // sizeof(ckpt_header_t)
    int32_t obs_dim;
    int32_t n_actions;
    int32_t n_hidden;
    int32_t dueling;
    int32_t hidden[NN_MAX_HIDDEN]; // unused entries are 0
    int32_t in_h, in_w, in_c;      // 0, 0, 0: a vector observation of obs_dim
    int32_t in_dtype;              // nn_input_dtype (not compared on load: values, not shapes)
    float in_scale;
    int32_t n_conv;
    int32_t conv[NN_MAX_CONV][3]; // filters, kernel, stride; unused entries are 0
    uint64_t num_params;
    uint64_t learner_step;
    uint32_t optim_kind; // optim_kind
    uint32_t n_arrays;   // float arrays of num_params in the payload
    uint64_t optim_step;
    uint64_t rng_state[4];
    ckpt_extra_t extra;
    uint64_t payload_bytes;
    uint32_t payload_crc32c;
    uint32_t header_crc32c; // over every header byte before this field
} ckpt_header_t;

// Zeroes hdr and fills magic, version, header size and the shape fields from cfg.
void ckpt_header_init(ckpt_header_t *hdr, const nn_config_t *cfg);
// The network shape recorded in hdr.
void ckpt_header_config(const ckpt_header_t *hdr, nn_config_t *cfg);

// Writes hdr (its n_arrays, payload length and both checksums are filled in here) and
// arrays[0..n_arrays-1] (num_params floats each) atomically to path. Returns 0 or an
// apex_err as above; on error the previous file at path is intact and no .tmp remains.
int ckpt_write(const char *path, ckpt_header_t *hdr, const float *const arrays[], int n_arrays);

// ckpt_write in steps, for a writer that never holds every array at once (rank 0 of a ZeRO
// stage 3 learner group gathers them one at a time): open with the header (n_arrays arrays of
// hdr->num_params floats, magic CKPT_MAGIC), append the floats in order in pieces of any
// size, commit (asserts the count; writes the header with both checksums, fsync, rename,
// fsync of the directory: ckpt_write's guarantees). Each returns APEX_OK or the first error
// (as ckpt_write's, logged once); after one, append does nothing and commit removes the temp
// file, the previous file at path intact. commit frees the writer, also after an error, and
// must be called once for every open.
typedef struct ckpt_writer ckpt_writer_t;
int ckpt_writer_open(ckpt_writer_t **out, const char *path, ckpt_header_t *hdr, int n_arrays);
int ckpt_writer_append(ckpt_writer_t *w, const float *x, size_t n);
int ckpt_writer_commit(ckpt_writer_t **w);

// Reads and validates path against the configured network cfg and n_arrays; on success
// fills *hdr and copies the payload into arrays[i] (num_params floats each). On any error
// the arrays and *hdr are left untouched. Allocates one payload-sized buffer (not a hot path).
int ckpt_read(const char *path, const nn_config_t *cfg, ckpt_header_t *hdr, float *const arrays[],
              int n_arrays);

// Reads only the first array (the online network) of a checkpoint written with any number of
// arrays, validating it exactly as ckpt_read does. For apex-eval, which has no optimizer.
int ckpt_read_online(const char *path, const nn_config_t *cfg, ckpt_header_t *hdr, float *online);
// Reads every array of a checkpoint holding 1..max_arrays of them (hdr->n_arrays says how
// many were filled), validating as ckpt_read does.
int ckpt_read_any(const char *path, const nn_config_t *cfg, ckpt_header_t *hdr,
                  float *const arrays[], int max_arrays);

// The floats [lo, lo + count) of every array of a checkpoint holding 1..max_arrays of them
// (hdr->n_arrays says how many were filled) into arrays[i][0..count), validated as
// ckpt_read_any validates (the whole payload's checksum, read in 1 MB pieces): what a ZeRO
// stage 3 rank reads of a checkpoint it cannot hold whole. lo + count <= num_params
// (asserted once the header is read). On error the arrays' contents are unspecified (stage
// into scratch) and *hdr is untouched.
int ckpt_read_range(const char *path, const nn_config_t *cfg, ckpt_header_t *hdr, size_t lo,
                    size_t count, float *const arrays[], int max_arrays);

// An optimizer shard (see CKPT_SHARD_MAGIC): writes hdr (magic set here; the caller fills the
// shape, steps and extra.user[CKPT_SHARD_*]) and arrays of extra.user[CKPT_SHARD_COUNT]
// floats, atomically as ckpt_write. Reading validates as ckpt_read does, plus the shard's
// length against count; arrays[i] receive count floats each. Errors as for checkpoints.
int ckpt_write_shard(const char *path, ckpt_header_t *hdr, const float *const arrays[],
                     int n_arrays);
int ckpt_read_shard(const char *path, const nn_config_t *cfg, size_t count, ckpt_header_t *hdr,
                    float *const arrays[], int n_arrays);

// A file of another kind (CKPT_DPG_MAGIC): ckpt_write with magic (8 bytes, no NUL) and
// hdr->num_params floats per array as the caller set it (ckpt_header_init sets the count of
// cfg; a DPG model's is larger). ckpt_read_as validates as ckpt_read does, with the shape
// fields against cfg and the header's count against num_params. Errors as for checkpoints.
int ckpt_write_as(const char *path, const char *magic, ckpt_header_t *hdr,
                  const float *const arrays[], int n_arrays);
int ckpt_read_as(const char *path, const char *magic, const nn_config_t *cfg, uint64_t num_params,
                 ckpt_header_t *hdr, float *const arrays[], int n_arrays);

// The policy mu(s) of a continuous run, for apex-eval: from a DPG checkpoint (CKPT_DPG_MAGIC,
// learner/train_dpg.c: header shape = the policy cfg, array 0 = [mu | critics]) the first
// nn_num_params(cfg) floats of array 0, whatever the critics' size (the header's count must
// exceed the policy's); from a checkpoint of one network (CKPT_MAGIC: apex-eval --follow's
// best.bin of a continuous run) its online array, as ckpt_read_online. Validates as
// ckpt_read does (shape against cfg, lengths, both checksums); on success fills *hdr and
// policy (nn_num_params(cfg) floats). Errors as for checkpoints.
int ckpt_read_policy(const char *path, const nn_config_t *cfg, ckpt_header_t *hdr, float *policy);

#endif
