// framestack.h: the last K frames of each env as one observation ([env] frame_stack = K,
// issue #27): what the DQN papers and Gymnasium's FrameStackObservation give an agent, kept
// by the actor and the evaluator so that envs (built-in or Python) emit single frames.
//
// Layout: frame-major, oldest first. A stack is K frames of frame_bytes each, back to back:
// [ f_{t-K+1} | ... | f_{t-1} | f_t ], each frame as the env emits it (an HxWxC image channels
// last, or a vector). For a vector env that is the concatenation; for images the network
// reads it as K frames of C channels (nn.h's in_frames), which for grayscale (C = 1) is also
// the (K, H, W) array of Gymnasium's FrameStackObservation. Frame-major and not channels
// interleaved, so that pushing a frame is one memmove and one memcpy, and a replay that stores
// frames (issue #27) rebuilds a stack with K memcpys.
// At an episode's start the stack is its first frame K times (Gymnasium's padding_type
// "reset", the DQN papers' practice): framestack_reset. Each step pushes the new frame:
// framestack_push. For the n-step transition that ends an episode, framestack_final writes the
// stack the final frame would have made (the transition's next_obs) without changing the env's
// stack, which the caller then resets with the next episode's first frame.
// Plain data (STYLE S2): the caller owns it; init allocates n_envs stacks once, nothing after.
// Not thread-safe.
#ifndef APEX_FRAMESTACK_H
#define APEX_FRAMESTACK_H

#include <stddef.h>
#include <stdint.h>

#define FRAMESTACK_MAX 16 // [env] frame_stack's upper bound

typedef struct {
    int n_envs, k;
    size_t frame_bytes, stack_bytes; // stack_bytes = k * frame_bytes
    uint8_t *stacks;                 // (n_envs, stack_bytes): each env's current stack
} framestack_t;

// n_envs stacks of k (1..FRAMESTACK_MAX) frames of frame_bytes, zeroed (each env is reset
// with its first frame before use).
void framestack_init(framestack_t *fs, int n_envs, int k, size_t frame_bytes);
void framestack_fini(framestack_t *fs);

// Env e's stack becomes `frame` k times.
void framestack_reset(framestack_t *fs, int e, const void *frame);
// Env e's stack drops its oldest frame and takes `frame` as its newest.
void framestack_push(framestack_t *fs, int e, const void *frame);
// Writes into out (stack_bytes) env e's stack with `frame` pushed; env e's own is unchanged.
void framestack_final(const framestack_t *fs, int e, const void *frame, void *out);
// Env e's current stack (stack_bytes), valid until the next call on e.
static inline const uint8_t *framestack_obs(const framestack_t *fs, int e) {
    return fs->stacks + (size_t)e * fs->stack_bytes;
}

#endif
