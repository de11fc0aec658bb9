// framestack.c: see framestack.h.
#include "framestack.h"

#include "apex.h"
#include "xalloc.h"

#include <string.h>

void framestack_init(framestack_t *fs, int n_envs, int k, size_t frame_bytes) {
    APEX_ASSERT(n_envs >= 1 && k >= 1 && k <= FRAMESTACK_MAX && frame_bytes > 0);
    fs->n_envs = n_envs;
    fs->k = k;
    fs->frame_bytes = frame_bytes;
    fs->stack_bytes = (size_t)k * frame_bytes;
    fs->stacks = xcalloc((size_t)n_envs, fs->stack_bytes);
}

void framestack_fini(framestack_t *fs) {
    free(fs->stacks);
    memset(fs, 0, sizeof *fs);
}

void framestack_reset(framestack_t *fs, int e, const void *frame) {
    APEX_ASSERT(e >= 0 && e < fs->n_envs);
    uint8_t *s = fs->stacks + (size_t)e * fs->stack_bytes;
    for (int i = 0; i < fs->k; i++) {
        memcpy(s + (size_t)i * fs->frame_bytes, frame, fs->frame_bytes);
    }
}

void framestack_push(framestack_t *fs, int e, const void *frame) {
    APEX_ASSERT(e >= 0 && e < fs->n_envs);
    uint8_t *s = fs->stacks + (size_t)e * fs->stack_bytes;
    size_t keep = fs->stack_bytes - fs->frame_bytes;
    memmove(s, s + fs->frame_bytes, keep);
    memcpy(s + keep, frame, fs->frame_bytes);
}

void framestack_final(const framestack_t *fs, int e, const void *frame, void *out) {
    APEX_ASSERT(e >= 0 && e < fs->n_envs);
    const uint8_t *s = framestack_obs(fs, e);
    size_t keep = fs->stack_bytes - fs->frame_bytes;
    memcpy(out, s + fs->frame_bytes, keep);
    memcpy((uint8_t *)out + keep, frame, fs->frame_bytes);
}
