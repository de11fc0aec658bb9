// dnnconv.c: conv bodies on oneDNN's convolution primitives (see dnnconv.h). oneDNN is
// Debian's libdnnl2, loaded by blas.c with dlopen (not a run-time dependency of apex); its
// header (libdnnl-dev, which scripts/install-deps.sh installs) gives the types, and every
// entry point is taken with dlsym into a pointer of the declared function's type, so a
// mismatch is a compile error, not a crash. Built without the header, dnnconv_load says so
// and every conv layer stays conv.c's (the end of this file).
#include "dnnconv.h"

// APEX_NO_DNNL: build as if the header were missing (how the fallback is compile-checked:
// cc -DAPEX_NO_DNNL -c model/dnnconv.c).
#if defined(__has_include) && !defined(APEX_NO_DNNL)
#if __has_include(<oneapi/dnnl/dnnl.h>)
#define APEX_HAVE_DNNL_H 1
#endif
#endif

#ifdef APEX_HAVE_DNNL_H

#include "apex.h"
#include "bf16.h"
#include "cpu.h"
#include "xalloc.h"

#include <dlfcn.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <oneapi/dnnl/dnnl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DNN_FUNCS(X)                                                                               \
    X(dnnl_engine_create)                                                                          \
    X(dnnl_stream_create)                                                                          \
    X(dnnl_stream_destroy)                                                                         \
    X(dnnl_stream_wait)                                                                            \
    X(dnnl_memory_desc_init_by_tag)                                                                \
    X(dnnl_memory_desc_get_size)                                                                   \
    X(dnnl_memory_desc_equal)                                                                      \
    X(dnnl_memory_create)                                                                          \
    X(dnnl_memory_destroy)                                                                         \
    X(dnnl_memory_set_data_handle)                                                                 \
    X(dnnl_memory_get_data_handle)                                                                 \
    X(dnnl_memory_get_memory_desc)                                                                 \
    X(dnnl_primitive_attr_create)                                                                  \
    X(dnnl_primitive_attr_destroy)                                                                 \
    X(dnnl_primitive_attr_set_post_ops)                                                            \
    X(dnnl_primitive_attr_set_scratchpad_mode)                                                     \
    X(dnnl_post_ops_create)                                                                        \
    X(dnnl_post_ops_destroy)                                                                       \
    X(dnnl_post_ops_append_eltwise)                                                                \
    X(dnnl_post_ops_append_sum)                                                                    \
    X(dnnl_convolution_forward_desc_init)                                                          \
    X(dnnl_convolution_backward_data_desc_init)                                                    \
    X(dnnl_convolution_backward_weights_desc_init)                                                 \
    X(dnnl_primitive_desc_create)                                                                  \
    X(dnnl_primitive_desc_destroy)                                                                 \
    X(dnnl_primitive_desc_query_md)                                                                \
    X(dnnl_primitive_desc_query)                                                                   \
    X(dnnl_reorder_primitive_desc_create)                                                          \
    X(dnnl_primitive_create)                                                                       \
    X(dnnl_primitive_destroy)                                                                      \
    X(dnnl_primitive_execute)

#define DNN_DECL(f) static __typeof__(f) *p_##f;
DNN_FUNCS(DNN_DECL)
#undef DNN_DECL
#define D(f) p_##f

static dnnl_engine_t s_engine;
static atomic_int s_enabled;
static atomic_int s_accept_any; // tests: bodies below the work rule and on reference loops

int dnnconv_load(void *handle, char *why, size_t n) {
    if (s_engine) {
        return 0;
    }
#define DNN_SYM(f)                                                                                 \
    if (!(p_##f = (__typeof__(f) *)dlsym(handle, #f))) {                                           \
        snprintf(why, n, "oneDNN has no %s", #f);                                                  \
        return -1;                                                                                 \
    }
    DNN_FUNCS(DNN_SYM)
#undef DNN_SYM
    if (D(dnnl_engine_create)(&s_engine, dnnl_cpu, 0) != dnnl_success) {
        snprintf(why, n, "oneDNN cannot create a CPU engine");
        s_engine = NULL;
        return -1;
    }
    atomic_store(&s_enabled, 1);
    return 0;
}

int dnnconv_enabled(void) { return s_engine && atomic_load(&s_enabled); }

int dnnconv_built(void) { return 1; }

void dnnconv_accept_any(int what) { atomic_store(&s_accept_any, what); }

void dnnconv_set_enabled(int mode) { atomic_store(&s_enabled, mode < 0 ? 0 : mode > 2 ? 2 : mode); }

// ----------------------------------------------------------------------------
// the body

// A reorder from -> to; p NULL when the two are one memory (nothing to do).
typedef struct {
    dnnl_primitive_t p;
    dnnl_memory_t from, to;
} dc_reorder_t;

typedef struct {
    conv_shape_t s; // as oneDNN runs it (layer 0 in space to depth: the s2d shape)
    dnnl_primitive_t fwd, bwd_w, bwd_d;
    char impl[3][48];             // the implementations oneDNN chose (dnnconv_impl)
    dnnl_memory_t w_user, b_user; // oihw and x, over the caller's (or the s2d copy's) arrays
    dnnl_memory_t w, w_bd;        // the weights as forward and backward data read them
    dc_reorder_t w_to, w_to_bd;
    dnnl_memory_t src;  // the input as every pass reads it (layer 0: owned; else the previous dst)
    dnnl_memory_t dst;  // the output, post-ReLU (owned)
    dnnl_memory_t ddst; // dL/d(pre-ReLU output), in dst's layout (owned)
    dnnl_memory_t dw, db; // backward weights' outputs (owned)
    dnnl_memory_t dw_user;
    dc_reorder_t dw_out; // dw -> the caller's dw, added (or -> the s2d copy, replaced)
    size_t dst_elems;    // of dst and ddst, padding included
    // Each pass's scratchpad, over the body's one buffer (dnnl_scratchpad_mode_user: with the
    // library's own mode oneDNN may allocate, and the kernel fault in, megabytes per call);
    // NULL for a pass that needs none.
    dnnl_memory_t scratch[3];
} dc_layer_t;

struct dnnconv {
    int n, B;
    int bf16;          // activations, their gradients and the weights in bfloat16 (see dnnconv.h)
    int train;         // the backward passes exist (dnnconv_create's train)
    int s2d;           // layer 0 runs as space to depth
    conv_shape_t net0; // layer 0 as the network has it
    dnnl_stream_t st;
    dc_layer_t L[DNNCONV_MAX_LAYERS];
    float *x; // the first layer's input as plain nchw floats (space to depth applied)
    // The input written straight into forward's layout (no reorder): element j of a sample's
    // part of src is element gather[j] of its observation row (-1: padding, 0), when src's
    // layout keeps each sample's elements together (dnnconv_create checks it); NULL otherwise.
    int32_t *gather;
    size_t per_sample;     // elements of one sample in src, padding included
    int gather_avx512;     // the CPU has AVX-512 and the table no padding: s_gather_avx512
    int s2d_fast;          // byte frames of a 4x4 space to depth: s_s2d_fast (0: off, 1: each
                           // channel a plane of bytes, 4: 4 channels last)
    size_t s2d_cs, s2d_ps; // its destination: elements from a frame channel's 16 lanes to the
                           // next channel's, and from a position (y', x') to the next
    int plain_fast;        // byte frames into x that is src (direct first layer, plain nchw
                           // fp32): s_plain_fast (0: off, 1: each channel a plane, 4: 4
                           // channels last)
    dnnl_memory_t x_mem;
    dc_reorder_t x_to_src;
    dnnl_memory_t top_user, dtop_user; // conv.h's (OC x OH x OW x B): chwn
    dc_reorder_t top_out, dtop_in;
    float *w_s2d, *dw_s2d; // layer 0's weights and gradient in the s2d shape (oihw)
    int own_input;         // the last layer-0 forward read d's own input
    char why[96];          // what dnnconv_create could not make, when it is more than a name
    void *scratch;         // the passes' scratchpad (one pass runs at a time)
    size_t scratch_bytes;
};

// Every status of a pass: a failure there is a bug of apex or of the library, not bad input.
static void s_ok(dnnl_status_t st, const char *what) {
    if (st != dnnl_success) {
        fprintf(stderr, "dnnconv: %s failed (oneDNN status %d)\n", what, (int)st);
        abort();
    }
}

static dnnl_memory_t s_mem(const dnnl_memory_desc_t *md, void *handle) {
    dnnl_memory_t m = NULL;
    if (D(dnnl_memory_create)(&m, md, s_engine, handle) != dnnl_success) {
        return NULL;
    }
    return m;
}

static const dnnl_memory_desc_t *s_md(dnnl_memory_t m) {
    const dnnl_memory_desc_t *md = NULL;
    D(dnnl_memory_get_memory_desc)(m, &md);
    return md;
}

// A reorder from -> to_md. to: the target memory, or NULL to make one (or to use from itself
// when the layouts agree and nothing is added). sum: to += from. 0, or -1.
static int s_reorder(dc_reorder_t *r, dnnl_memory_t from, const dnnl_memory_desc_t *to_md,
                     dnnl_memory_t to, int sum) {
    *r = (dc_reorder_t){NULL, from, to};
    if (!to && D(dnnl_memory_desc_equal)(s_md(from), to_md)) {
        r->to = from;
        return 0;
    }
    if (!to && !(r->to = s_mem(to_md, DNNL_MEMORY_ALLOCATE))) {
        return -1;
    }
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    int rc = -1;
    if (D(dnnl_primitive_attr_create)(&attr) != dnnl_success) {
        goto out;
    }
    if (sum && (D(dnnl_post_ops_create)(&po) != dnnl_success ||
                D(dnnl_post_ops_append_sum)(po, 1.0f) != dnnl_success ||
                D(dnnl_primitive_attr_set_post_ops)(attr, po) != dnnl_success)) {
        goto out;
    }
    if (D(dnnl_reorder_primitive_desc_create)(&pd, s_md(from), s_engine, to_md, s_engine, attr) !=
            dnnl_success ||
        D(dnnl_primitive_create)(&r->p, pd) != dnnl_success) {
        goto out;
    }
    rc = 0;
out:
    if (pd) {
        D(dnnl_primitive_desc_destroy)(pd);
    }
    if (po) {
        D(dnnl_post_ops_destroy)(po);
    }
    if (attr) {
        D(dnnl_primitive_attr_destroy)(attr);
    }
    return rc;
}

static void s_run_reorder(dnnconv_t *d, const dc_reorder_t *r) {
    if (!r->p) {
        return;
    }
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, r->from}, {DNNL_ARG_TO, r->to}};
    s_ok(D(dnnl_primitive_execute)(r->p, d->st, 2, a), "a reorder");
}

static float *s_ptr(dnnl_memory_t m) {
    void *p = NULL;
    s_ok(D(dnnl_memory_get_data_handle)(m, &p), "dnnl_memory_get_data_handle");
    return p;
}

static void s_set(dnnl_memory_t m, const void *p) {
    s_ok(D(dnnl_memory_set_data_handle)(m, (void *)p), "dnnl_memory_set_data_handle");
}

static void s_dims(dnnl_dims_t d, int a, int b, int c, int e) {
    d[0] = a, d[1] = b, d[2] = c, d[3] = e;
}

static void s_impl(char *dst, size_t n, const_dnnl_primitive_desc_t pd) {
    const char *impl = NULL;
    D(dnnl_primitive_desc_query)(pd, dnnl_query_impl_info_str, 0, &impl);
    snprintf(dst, n, "%s", impl ? impl : "?");
}

// The scratchpad memory pass i of layer l needs (its handle set once the body's buffer is
// sized), growing the buffer's size. 0, or -1.
static int s_scratch(dnnconv_t *d, dc_layer_t *L, int i, const_dnnl_primitive_desc_t pd) {
    const dnnl_memory_desc_t *md = D(dnnl_primitive_desc_query_md)(pd, dnnl_query_scratchpad_md, 0);
    size_t n = md ? D(dnnl_memory_desc_get_size)(md) : 0;
    if (n == 0) {
        return 0;
    }
    d->scratch_bytes = APEX_MAX(d->scratch_bytes, n);
    return (L->scratch[i] = s_mem(md, DNNL_MEMORY_NONE)) ? 0 : -1;
}

// Layer l's primitives and memories. in: the layer's input memory (layer 0: NULL, made here
// in the layout forward chooses). Returns NULL, or what failed.
static const char *s_layer_init(dnnconv_t *d, int l, dnnl_memory_t in) {
    dc_layer_t *L = &d->L[l];
    const conv_shape_t *s = &L->s;
    dnnl_dims_t sd, wd, dd, bd = {s->c_out}, strides = {s->stride, s->stride}, pad = {0, 0};
    s_dims(sd, d->B, s->c_in, s->h, s->w);
    s_dims(wd, s->c_out, s->c_in, s->k, s->k);
    s_dims(dd, d->B, s->c_out, s->oh, s->ow);
    dnnl_memory_desc_t src_any, w_any, b_md, dst_any, w_user_md;
    const dnnl_memory_desc_t *src_md = in ? s_md(in) : &src_any;
    const dnnl_data_type_t dt = d->bf16 ? dnnl_bf16 : dnnl_f32;
    dnnl_memory_desc_t dw_any; // the weight gradient: fp32 either way
    if (D(dnnl_memory_desc_init_by_tag)(&src_any, 4, sd, dt, dnnl_format_tag_any) ||
        D(dnnl_memory_desc_init_by_tag)(&w_any, 4, wd, dt, dnnl_format_tag_any) ||
        D(dnnl_memory_desc_init_by_tag)(&dw_any, 4, wd, dnnl_f32, dnnl_format_tag_any) ||
        D(dnnl_memory_desc_init_by_tag)(&w_user_md, 4, wd, dnnl_f32, dnnl_oihw) ||
        D(dnnl_memory_desc_init_by_tag)(&b_md, 1, bd, dnnl_f32, dnnl_x) ||
        D(dnnl_memory_desc_init_by_tag)(&dst_any, 4, dd, dt, dnnl_format_tag_any)) {
        return "memory descriptors";
    }
    // Forward, with the bias and the ReLU fused. Algorithm "auto": oneDNN may take Winograd
    // (F(4x4, 3x3), AVX-512) for a 3x3 stride-1 layer, which it does for the Nature body's
    // third at the learner's batch: forward 3.10 -> 2.10 ms, backward weights 3.64 -> 2.15
    // (B = 128, Intel 6/167); its backward data is slower (2.93 -> 4.25 ms) and stays
    // direct. Winograd's sums round differently (check_dnnconv's Nature body at B = 16 takes
    // it and agrees with the double reference to 1e-4).
    dnnl_convolution_desc_t cd;
    dnnl_primitive_attr_t attr = NULL, battr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t fpd = NULL, wpd = NULL, dpd = NULL;
    const char *fail = NULL;
    if (D(dnnl_primitive_attr_create)(&battr) ||
        D(dnnl_primitive_attr_set_scratchpad_mode)(battr, dnnl_scratchpad_mode_user)) {
        fail = "primitive attributes";
        goto out;
    }
    if (D(dnnl_convolution_forward_desc_init)(&cd, dnnl_forward_training, dnnl_convolution_auto,
                                              src_md, &w_any, &b_md, &dst_any, strides, pad, pad) ||
        D(dnnl_primitive_attr_create)(&attr) || D(dnnl_post_ops_create)(&po) ||
        D(dnnl_post_ops_append_eltwise)(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f) ||
        D(dnnl_primitive_attr_set_post_ops)(attr, po) ||
        D(dnnl_primitive_attr_set_scratchpad_mode)(attr, dnnl_scratchpad_mode_user) ||
        D(dnnl_primitive_desc_create)(&fpd, &cd, attr, s_engine, NULL) ||
        D(dnnl_primitive_create)(&L->fwd, fpd) || s_scratch(d, L, 0, fpd)) {
        fail = "the forward convolution";
        goto out;
    }
    s_impl(L->impl[0], sizeof L->impl[0], fpd);
    const dnnl_memory_desc_t *fsrc = D(dnnl_primitive_desc_query_md)(fpd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *fw = D(dnnl_primitive_desc_query_md)(fpd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *fdst = D(dnnl_primitive_desc_query_md)(fpd, dnnl_query_dst_md, 0);
    L->src = in ? in : s_mem(fsrc, DNNL_MEMORY_ALLOCATE);
    L->dst = s_mem(fdst, DNNL_MEMORY_ALLOCATE);
    L->w_user = s_mem(&w_user_md, DNNL_MEMORY_NONE);
    L->b_user = s_mem(&b_md, DNNL_MEMORY_NONE);
    if (!L->src || !L->dst || !L->w_user || !L->b_user ||
        s_reorder(&L->w_to, L->w_user, fw, NULL, 0)) {
        fail = "the forward's memories";
        goto out;
    }
    L->w = L->w_to.to;
    L->dst_elems = D(dnnl_memory_desc_get_size)(fdst) / (d->bf16 ? 2 : sizeof(float));
    if (!d->train) { // an inference state's body: forward only
        goto refuse_ref;
    }
    L->ddst = s_mem(fdst, DNNL_MEMORY_ALLOCATE);
    L->db = s_mem(&b_md, DNNL_MEMORY_ALLOCATE);
    L->dw_user = s_mem(&w_user_md, DNNL_MEMORY_NONE);
    if (!L->ddst || !L->db || !L->dw_user) {
        fail = "the backward's memories";
        goto out;
    }
    // Backward weights and data read dL/ddst in dst's layout (the ReLU's mask is applied
    // elementwise between the two) and the input in forward's layout (no copies between the
    // passes); backward data writes dL/din in the layout of the layer below's output.
    if (D(dnnl_convolution_backward_weights_desc_init)(&cd, dnnl_convolution_auto, fsrc, &dw_any,
                                                       &b_md, fdst, strides, pad, pad) ||
        D(dnnl_primitive_desc_create)(&wpd, &cd, battr, s_engine, fpd) ||
        D(dnnl_primitive_create)(&L->bwd_w, wpd) || s_scratch(d, L, 1, wpd)) {
        fail = "the backward-weights convolution";
        goto out;
    }
    s_impl(L->impl[1], sizeof L->impl[1], wpd);
    L->dw = s_mem(D(dnnl_primitive_desc_query_md)(wpd, dnnl_query_diff_weights_md, 0),
                  DNNL_MEMORY_ALLOCATE);
    // Layer 0 in space to depth hands its gradient to the s2d copy (replaced, then permuted
    // and added by dnnconv_backward); every other layer adds to the caller's dw directly.
    if (!L->dw || s_reorder(&L->dw_out, L->dw, &w_user_md, L->dw_user, !(l == 0 && d->s2d))) {
        fail = "the weight gradient's reorder";
        goto out;
    }
    if (l > 0) {
        if (D(dnnl_convolution_backward_data_desc_init)(&cd, dnnl_convolution_direct, fsrc, &w_any,
                                                        fdst, strides, pad, pad) ||
            D(dnnl_primitive_desc_create)(&dpd, &cd, battr, s_engine, fpd) ||
            D(dnnl_primitive_create)(&L->bwd_d, dpd) || s_scratch(d, L, 2, dpd) ||
            s_reorder(&L->w_to_bd, L->w_user,
                      D(dnnl_primitive_desc_query_md)(dpd, dnnl_query_weights_md, 0), NULL, 0)) {
            fail = "the backward-data convolution";
            goto out;
        }
        s_impl(L->impl[2], sizeof L->impl[2], dpd);
        L->w_bd = L->w_to_bd.to;
    }
refuse_ref:
    // oneDNN's reference loops ("ref:any") run any layout combination, at a hundredth of the
    // speed (626 ms for the MinAtar body's backward weights, which im2col + sgemm does in
    // under 1): such a body stays conv.c's.
    for (int i = 0; i < 3 && !fail && !(atomic_load(&s_accept_any) & DNNCONV_ACCEPT_REF); i++) {
        if (strncmp(L->impl[i], "ref", 3) == 0) {
            static const char *const pass[3] = {"forward", "backward-weights", "backward-data"};
            snprintf(d->why, sizeof d->why, "fast %s kernel for layer %d (only %s)", pass[i], l + 1,
                     L->impl[i]);
            fail = d->why;
        }
    }
out:
    if (dpd) {
        D(dnnl_primitive_desc_destroy)(dpd);
    }
    if (wpd) {
        D(dnnl_primitive_desc_destroy)(wpd);
    }
    if (fpd) {
        D(dnnl_primitive_desc_destroy)(fpd);
    }
    if (po) {
        D(dnnl_post_ops_destroy)(po);
    }
    if (attr) {
        D(dnnl_primitive_attr_destroy)(attr);
    }
    if (battr) {
        D(dnnl_primitive_attr_destroy)(battr);
    }
    return fail;
}

static void s_free_mem(dnnl_memory_t m);
static void s_free_prim(dnnl_primitive_t p);
static void s_s2d_fast_init(dnnconv_t *d);
static void s_plain_fast_init(dnnconv_t *d);

// The observation-row element of element i of one sample's x (nchw, C' x H' x W', space to
// depth applied): the mapping of dnnconv_input's loops.
static size_t s_obs_index(const dnnconv_t *d, size_t i) {
    const conv_shape_t *o = &d->net0, *n = &d->L[0].s;
    const size_t f = d->s2d ? (size_t)o->stride : 1, C = (size_t)o->c_in;
    const size_t F = o->frames > 1 ? (size_t)o->frames : 1, cf = C / F;
    const size_t HW = (size_t)o->h * o->w, pix = F > 1 ? cf : C;
    size_t x = i % (size_t)n->w, y = i / (size_t)n->w % (size_t)n->h;
    size_t cp = i / ((size_t)n->w * n->h), c = cp / (f * f), dy = cp / f % f, dx = cp % f;
    size_t base = F > 1 ? (c / cf) * HW * cf + c % cf : c;
    return base + ((y * f + dy) * (size_t)o->w + x * f + dx) * pix;
}

// Where src's layout (chosen by forward) puts each element of x: x filled with its own index
// plus 1 (exact in a float below 2^24), reordered once; a layout that keeps every sample's
// elements together in one run of per_sample floats, the same for every sample, gets the
// gather table, and dnnconv_input writes src directly. Otherwise x and the reorder stay.
static void s_gather_init(dnnconv_t *d) {
    const size_t nx = conv_in_features(&d->L[0].s), B = (size_t)d->B;
    // A bfloat16 src holds no index exactly: the indexes go through an fp32 twin of its
    // layout (the same descriptor, fp32 elements: strides count elements)
    dnnl_memory_desc_t md32 = *s_md(d->L[0].src);
    md32.data_type = dnnl_f32;
    const size_t total = D(dnnl_memory_desc_get_size)(&md32) / sizeof(float);
    if (total % B || nx * B >= ((size_t)1 << 24)) {
        return;
    }
    for (size_t i = 0; i < nx * B; i++) {
        d->x[i] = (float)(i + 1);
    }
    dc_reorder_t r;
    dnnl_memory_t twin = s_mem(&md32, DNNL_MEMORY_ALLOCATE);
    if (!twin || s_reorder(&r, d->x_mem, &md32, twin, 0)) {
        s_free_mem(twin);
        return;
    }
    s_run_reorder(d, &r);
    s_ok(D(dnnl_stream_wait)(d->st), "dnnl_stream_wait");
    s_free_prim(r.p);
    const float *src = s_ptr(twin);
    const size_t per = total / B;
    int32_t *g = xaligned_alloc(per * sizeof *g);
    for (size_t j = 0; j < per; j++) {
        g[j] = src[j] == 0.0f ? -1 : (int32_t)s_obs_index(d, (size_t)src[j] - 1);
    }
    // The first, second and last samples: the same places, shifted by their own (a layout
    // whose samples are runs of equal size does not change between them)
    for (size_t j = 0; j < total; j++) {
        if (j == 2 * per && B > 3) {
            j = (B - 1) * per;
        }
        size_t b = j / per, v = (size_t)src[j];
        int same = v == 0 ? g[j % per] < 0
                          : (v - 1) / nx == b && s_obs_index(d, (v - 1) % nx) == (size_t)g[j % per];
        if (!same) {
            xfree(g);
            s_free_mem(twin);
            return;
        }
    }
    s_free_mem(twin);
    d->gather = g;
    d->per_sample = per;
    // x and its reorder served the table only (the Nature body's x is 14 MB at B = 128)
    s_free_prim(d->x_to_src.p);
    s_free_mem(d->x_mem);
    xfree(d->x);
    d->x_to_src = (dc_reorder_t){NULL, NULL, NULL};
    d->x_mem = NULL;
    d->x = NULL;
#if defined(__x86_64__)
    cpu_features_t f;
    cpu_detect(&f);
    int padded = 0;
    for (size_t j = 0; j < per; j++) {
        padded |= g[j] < 0;
    }
    // Non-temporal stores (the input is megabytes the convolution reads once, from memory
    // anyway: no read for ownership) need every 16 floats on a 64-byte line.
    d->gather_avx512 = f.avx512f && !padded && per % 16 == 0 &&
                       (uintptr_t)s_ptr(d->L[0].src) % 64 == 0;
#endif
}

static dnnconv_t *s_create(const conv_shape_t *shapes, int n, int B, int bf16, int train,
                           int direct, char *why, size_t why_len);

dnnconv_t *dnnconv_create(const conv_shape_t *shapes, int n, int B, int bf16, int train, char *why,
                          size_t why_len) {
    APEX_ASSERT(n >= 1 && n <= DNNCONV_MAX_LAYERS && B >= 1);
    if (!dnnconv_enabled()) {
        snprintf(why, why_len, "oneDNN is not loaded");
        return NULL;
    }
    double work = dnnconv_work(shapes, n);
    if (work < DNNCONV_MIN_WORK && !(atomic_load(&s_accept_any) & DNNCONV_ACCEPT_SMALL)) {
        snprintf(why, why_len,
                 "the conv layers do %.0f multiply-adds per element of their input and output, "
                 "too few (< %d) for oneDNN's body to repay its edges",
                 work, DNNCONV_MIN_WORK);
        return NULL;
    }
    // A forward-only fp32 body tries its first layer direct (where space to depth would
    // apply): oneDNN's kernels for few input channels read plain nchw and have no AVX-512
    // backward-weights counterpart (see dnnconv.h), but forward they beat space to depth.
    // Nature's first layer at B = 128, one thread, input fresh from memory: 5.3 against 6.5
    // ms (jit:avx512_core, Intel 6/167), 8.7 against 10.2 held to AVX2; in bfloat16 the
    // other way (AMX: 2.3 against 1.4), so bf16 bodies keep space to depth. A body whose
    // direct layer gets no JIT kernel (s_create refuses it) tries space to depth instead.
    const conv_shape_t *o = &shapes[0];
    int direct = !train && !bf16 && o->stride > 1 && o->k % o->stride == 0;
    dnnconv_t *d = s_create(shapes, n, B, bf16, train, direct, why, why_len);
    return d || !direct ? d : s_create(shapes, n, B, bf16, train, 0, why, why_len);
}

// dnnconv_create's body; direct: the first layer as it is even where space to depth applies.
static dnnconv_t *s_create(const conv_shape_t *shapes, int n, int B, int bf16, int train,
                           int direct, char *why, size_t why_len) {
    dnnconv_t *d = xcalloc(1, sizeof *d);
    d->n = n, d->B = B, d->bf16 = bf16 != 0, d->train = train != 0;
    d->net0 = shapes[0];
    const char *fail = NULL;
    for (int l = 0; l < n; l++) {
        d->L[l].s = shapes[l];
        d->L[l].s.gemm = NULL;
    }
    const conv_shape_t *o = &shapes[0];
    const int f = o->stride;
    conv_shape_t s2d; // conv_shape_init clears its output before it checks: not L[0].s itself
    if (f > 1 && o->k % f == 0 && !direct &&
        conv_shape_init(&s2d, o->c_in * f * f, o->oh - 1 + o->k / f, o->ow - 1 + o->k / f, o->c_out,
                        o->k / f, 1, NULL, 0) == APEX_OK) {
        d->L[0].s = s2d;
        d->s2d = 1;
        size_t nw = conv_num_params(&d->L[0].s) - (size_t)o->c_out;
        d->w_s2d = xaligned_alloc(nw * sizeof(float));
        d->dw_s2d = xaligned_alloc(nw * sizeof(float));
    }
    const conv_shape_t *s0 = &d->L[0].s;
    if (D(dnnl_stream_create)(&d->st, s_engine, dnnl_stream_default_flags) != dnnl_success) {
        d->st = NULL;
        fail = "a stream";
        goto fail;
    }
    for (int l = 0; l < n && !fail; l++) {
        fail = s_layer_init(d, l, l ? d->L[l - 1].dst : NULL);
    }
    const char *impl0 = d->L[0].impl[0];
    if (!fail && direct && strncmp(impl0, "jit", 3) != 0 && strncmp(impl0, "brg", 3) != 0) {
        fail = "JIT kernel for the direct first layer";
    }
    if (fail) {
        goto fail;
    }
    if (d->scratch_bytes) {
        d->scratch = xaligned_alloc(d->scratch_bytes);
        for (int l = 0; l < n; l++) {
            for (int i = 0; i < 3; i++) {
                if (d->L[l].scratch[i]) {
                    s_set(d->L[l].scratch[i], d->scratch);
                }
            }
        }
    }
    // the observations, as plain nchw floats, into the layout forward chose
    d->x = xaligned_alloc(conv_in_features(s0) * (size_t)B * sizeof(float));
    dnnl_dims_t xd, td;
    dnnl_memory_desc_t x_md, top_md;
    const conv_shape_t *st = &shapes[n - 1];
    s_dims(xd, B, s0->c_in, s0->h, s0->w);
    s_dims(td, B, st->c_out, st->oh, st->ow);
    if (D(dnnl_memory_desc_init_by_tag)(&x_md, 4, xd, dnnl_f32, dnnl_nchw) ||
        D(dnnl_memory_desc_init_by_tag)(&top_md, 4, td, dnnl_f32, dnnl_chwn) ||
        !(d->x_mem = s_mem(&x_md, d->x)) || !(d->top_user = s_mem(&top_md, DNNL_MEMORY_NONE)) ||
        !(d->dtop_user = s_mem(&top_md, DNNL_MEMORY_NONE))) {
        fail = "the edge memories";
        goto fail;
    }
    if (D(dnnl_memory_desc_equal)(&x_md, s_md(d->L[0].src))) {
        D(dnnl_memory_destroy)(d->L[0].src); // forward reads plain nchw: x itself
        d->L[0].src = d->x_mem;
        d->x_to_src = (dc_reorder_t){NULL, d->x_mem, d->x_mem};
    } else if (s_reorder(&d->x_to_src, d->x_mem, s_md(d->L[0].src), d->L[0].src, 0)) {
        fail = "the input's reorder";
        goto fail;
    }
    if (d->x_to_src.p && atomic_load(&s_enabled) != 2) {
        s_gather_init(d);
        s_s2d_fast_init(d);
    } else if (!d->x_to_src.p && atomic_load(&s_enabled) != 2) {
        s_plain_fast_init(d);
    }
    if (s_reorder(&d->top_out, d->L[n - 1].dst, &top_md, d->top_user, 0) ||
        (d->train &&
         s_reorder(&d->dtop_in, d->dtop_user, s_md(d->L[n - 1].ddst), d->L[n - 1].ddst, 0))) {
        fail = "the output's reorders";
        goto fail;
    }
    return d;
fail:
    snprintf(why, why_len, "oneDNN has no %s for this body", fail);
    dnnconv_free(d);
    return NULL;
}

static void s_free_mem(dnnl_memory_t m) {
    if (m) {
        D(dnnl_memory_destroy)(m);
    }
}

static void s_free_prim(dnnl_primitive_t p) {
    if (p) {
        D(dnnl_primitive_destroy)(p);
    }
}

// The memory a reorder made for itself (its target, when it is neither the source nor one
// the body holds elsewhere).
static void s_free_reorder(dc_reorder_t *r, dnnl_memory_t keep) {
    s_free_prim(r->p);
    if (r->to && r->to != r->from && r->to != keep) {
        D(dnnl_memory_destroy)(r->to);
    }
}

void dnnconv_free(dnnconv_t *d) {
    if (!d) {
        return;
    }
    for (int l = 0; l < d->n; l++) {
        dc_layer_t *L = &d->L[l];
        s_free_prim(L->fwd);
        s_free_prim(L->bwd_w);
        s_free_prim(L->bwd_d);
        s_free_reorder(&L->w_to, NULL);
        s_free_reorder(&L->w_to_bd, NULL);
        s_free_prim(L->dw_out.p); // its target is dw_user
        if (l == 0 && L->src != d->x_mem) {
            s_free_mem(L->src); // the others' src is the previous layer's dst
        }
        s_free_mem(L->dst);
        s_free_mem(L->ddst);
        s_free_mem(L->w_user);
        s_free_mem(L->b_user);
        s_free_mem(L->dw);
        s_free_mem(L->db);
        s_free_mem(L->dw_user);
        for (int i = 0; i < 3; i++) {
            s_free_mem(L->scratch[i]);
        }
    }
    xfree(d->scratch);
    s_free_prim(d->x_to_src.p);
    s_free_prim(d->top_out.p);
    s_free_prim(d->dtop_in.p);
    s_free_mem(d->x_mem);
    s_free_mem(d->top_user);
    s_free_mem(d->dtop_user);
    if (d->st) {
        D(dnnl_stream_destroy)(d->st);
    }
    xfree(d->x);
    xfree(d->gather);
    xfree(d->w_s2d);
    xfree(d->dw_s2d);
    free(d);
}

int dnnconv_batch(const dnnconv_t *d) { return d->B; }

int dnnconv_bf16(const dnnconv_t *d) { return d->bf16; }

const char *dnnconv_first_layer(const dnnconv_t *d) { return d->s2d ? "s2d" : "direct"; }

int dnnconv_same_input(const dnnconv_t *a, const dnnconv_t *b) {
    return a->B == b->B && a->s2d == b->s2d && a->bf16 == b->bf16 &&
           D(dnnl_memory_desc_equal)(s_md(a->L[0].src), s_md(b->L[0].src));
}

const char *dnnconv_input_path(const dnnconv_t *d) {
    return d->s2d_fast     ? "4x4 patches"
           : d->gather     ? "gather"
           : d->x_to_src.p ? "reorder"
           : d->plain_fast ? "plain, by vectors"
                           : "plain";
}

const char *dnnconv_impl(const dnnconv_t *d, int l, int pass) {
    APEX_ASSERT(l >= 0 && l < d->n && pass >= 0 && pass < 3);
    return d->L[l].impl[pass][0] ? d->L[l].impl[pass] : NULL;
}

// ----------------------------------------------------------------------------
// the passes

// fp32 -> bfloat16 bits: bf16_round's (nearest even, as oneDNN's reorders and the
// AVX512_BF16 instructions round; a NaN stays a NaN, quieted).
static inline uint16_t s_bf16(float x) {
    float r = bf16_round(x);
    uint32_t u;
    memcpy(&u, &r, sizeof u);
    return (uint16_t)(u >> 16);
}

#if defined(__x86_64__)
// s_bf16 on 16 lanes with AVX-512 F only (bf16.c's conversion needs AVX512_BF16, which an
// fp32 body's CPU may lack: this runs for bf16 bodies, but keeps the one rule).
__attribute__((target("avx512f"))) static inline __m256i s_bf16x16(__m512 v) {
    __m512i u = _mm512_castps_si512(v);
    __m512i r = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i rounded =
        _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), r), 16);
    __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                            _mm512_set1_epi32(0x7f800000));
    return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(rounded, nan, quiet));
}
#endif

#if defined(__x86_64__)
// Samples [0, n) through the table, 16 elements per AVX-512 gather (every entry >= 0: no
// padding), stored non-temporally (dst on 64-byte lines, per a multiple of 16), as floats or
// (bf16) rounded to bfloat16 with s_bf16's rule in integer lanes. A byte gather loads the 4
// bytes at each place and keeps the low one, so it reads up to 3 bytes past an element: the
// caller leaves the last sample, whose row ends the caller's array, to the scalar loop.
__attribute__((target("avx512f"))) static void s_gather_avx512(void *dst, int bf16, const void *obs,
                                                               int obs_u8, float scale,
                                                               const int32_t *g, size_t per,
                                                               size_t O, int n) {
    const __m512 sc = _mm512_set1_ps(scale);
    const __m512i low = _mm512_set1_epi32(0xff);
    for (int b = 0; b < n; b++) {
        const uint8_t *row8 = (const uint8_t *)obs + (size_t)b * O;
        const float *row32 = (const float *)obs + (size_t)b * O;
        float *d32 = (float *)dst + (size_t)b * per;
        uint16_t *d16 = (uint16_t *)dst + (size_t)b * per;
        for (size_t j = 0; j + 16 <= per; j += 16) {
            __m512i at = _mm512_loadu_si512((const void *)(g + j));
            __m512 v = obs_u8 ? _mm512_cvtepi32_ps(_mm512_and_si512(
                                    _mm512_i32gather_epi32(at, (const void *)row8, 1), low))
                              : _mm512_i32gather_ps(at, row32, 4);
            v = _mm512_mul_ps(v, sc);
            if (!bf16) {
                _mm512_stream_ps(d32 + j, v);
                continue;
            }
            _mm256_stream_si256((__m256i *)(void *)(d16 + j), s_bf16x16(v));
        }
        for (size_t j = per / 16 * 16; j < per; j++) {
            float v = scale * (obs_u8 ? (float)row8[g[j]] : row32[g[j]]);
            if (bf16) {
                d16[j] = s_bf16(v);
            } else {
                d32[j] = v;
            }
        }
    }
    _mm_sfence(); // the streamed stores, before the convolution reads them
}
#endif

#if defined(__x86_64__)
// 16 bytes -> 16 floats times sc, or their bfloat16 (s_bf16's rounding), streamed to dst.
__attribute__((target("avx512f,avx512bw"))) static inline void s_store16(void *dst, int bf16,
                                                                         __m128i bytes, __m512 sc) {
    __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(bytes)), sc);
    if (!bf16) {
        _mm512_stream_ps((float *)dst, v);
        return;
    }
    _mm256_stream_si256((__m256i *)dst, s_bf16x16(v));
}

// The first layer's input for a 4x4 space to depth (the Nature body's 8x8 stride 4) from
// byte frames: channels 16 c .. 16 c + 15 at (y', x') are frame channel c's 4x4 patch, lane
// dy 4 + dx = pixel (4 y' + dy, 4 x' + dx), 16 contiguous elements in the layouts forward
// takes (nChw16c: a block; nhwc, bf16's on AMX: a run of the position's channels). The table
// gather reads those 16 bytes one element per lane; here they are four loads of rows. With 4
// channels last (d->s2d_fast 4) a row of the patch is 16 contiguous bytes holding all four
// channels, which one byte shuffle and one dword permutation sort into the four blocks; with
// each channel a plane (4 frames of one channel, frame_stack's layout, or a single channel)
// it is 4 bytes per row. The same values as the table (dnnconv_create compares them).
__attribute__((target("avx512f,avx512bw"))) static void s_s2d_fast(dnnconv_t *d, const uint8_t *obs,
                                                                   float scale) {
    const conv_shape_t *o = &d->net0, *n = &d->L[0].s;
    const size_t O = conv_in_features(o), W = (size_t)o->w, HW = (size_t)o->h * o->w;
    const size_t Hn = (size_t)n->h, Wn = (size_t)n->w, es = d->bf16 ? 2 : 4, C = (size_t)o->c_in;
    const size_t cs = d->s2d_cs, ps = d->s2d_ps;
    const __m512 sc = _mm512_set1_ps(scale);
    uint8_t *dst = (uint8_t *)s_ptr(d->L[0].src);
    const __m512i pat =
        _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    for (int b = 0; b < d->B; b++) {
        const uint8_t *row = obs + (size_t)b * O;
        uint8_t *ds = dst + (size_t)b * d->per_sample * es;
        for (size_t y = 0; y < Hn; y++) {
            for (size_t x = 0; x < Wn; x++) {
                if (d->s2d_fast == 4) {
                    const uint8_t *p = row + (4 * y * W + 4 * x) * 4;
                    __m512i z = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)p));
                    z = _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(p + 4 * W)), 1);
                    z = _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(p + 8 * W)), 2);
                    z = _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(p + 12 * W)), 3);
                    z = _mm512_permutexvar_epi32(idx, _mm512_shuffle_epi8(z, pat));
                    __m128i q[4] = {
                        _mm512_extracti32x4_epi32(z, 0), _mm512_extracti32x4_epi32(z, 1),
                        _mm512_extracti32x4_epi32(z, 2), _mm512_extracti32x4_epi32(z, 3)};
                    for (size_t c = 0; c < 4; c++) {
                        s_store16(ds + (c * cs + (y * Wn + x) * ps) * es, d->bf16, q[c], sc);
                    }
                    continue;
                }
                for (size_t c = 0; c < C; c++) {
                    const uint8_t *p = row + c * HW + 4 * y * W + 4 * x;
                    int32_t r[4];
                    for (int dy = 0; dy < 4; dy++) {
                        memcpy(&r[dy], p + (size_t)dy * W, 4);
                    }
                    s_store16(ds + (c * cs + (y * Wn + x) * ps) * es, d->bf16,
                              _mm_setr_epi32(r[0], r[1], r[2], r[3]), sc);
                }
            }
        }
    }
    _mm_sfence();
}
#endif

static void s_input_gather(dnnconv_t *d, const void *obs, int obs_u8, float scale);

// How byte frames are laid out for the vector input paths: 1 each channel a plane (one
// channel per frame, or a single channel), 4 four channels last, 0 anything else.
static int s_byte_layout(const conv_shape_t *o) {
    const int C = o->c_in, F = o->frames > 1 ? o->frames : 1;
    return F == C || C == 1 ? 1 : C == 4 && F == 1 ? 4 : 0;
}

// The fast paths' self-checks' bytes: each tile's 64 distinct values (131 is odd), so an
// element written to the wrong place shows.
static void s_pattern(uint8_t *obs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        obs[i] = (uint8_t)(i * 131 + i / 251);
    }
}

// Whether s_s2d_fast applies to d, and then whether it writes what the table does, on a batch
// of bytes (any values: the check is of places, not of arithmetic). Sets d->s2d_fast.
static void s_s2d_fast_init(dnnconv_t *d) {
#if defined(__x86_64__)
    const conv_shape_t *o = &d->net0;
    const int C = o->c_in;
    cpu_features_t cpu;
    cpu_detect(&cpu);
    dnnl_dims_t sd = {d->B, d->L[0].s.c_in, d->L[0].s.h, d->L[0].s.w};
    dnnl_memory_desc_t blk, nhwc;
    const dnnl_data_type_t dt = d->bf16 ? dnnl_bf16 : dnnl_f32;
    const size_t Hn = (size_t)d->L[0].s.h, Wn = (size_t)d->L[0].s.w;
    int mode = s_byte_layout(o);
    if (!d->s2d || o->stride != 4 || !d->gather_avx512 || !mode || !cpu.avx512bw ||
        D(dnnl_memory_desc_init_by_tag)(&blk, 4, sd, dt, dnnl_nChw16c) != dnnl_success ||
        D(dnnl_memory_desc_init_by_tag)(&nhwc, 4, sd, dt, dnnl_nhwc) != dnnl_success) {
        return;
    }
    if (D(dnnl_memory_desc_equal)(&blk, s_md(d->L[0].src))) {
        d->s2d_cs = Hn * Wn * 16, d->s2d_ps = 16;
    } else if (D(dnnl_memory_desc_equal)(&nhwc, s_md(d->L[0].src))) {
        d->s2d_cs = 16, d->s2d_ps = 16 * (size_t)C;
    } else {
        return;
    }
    const size_t O = conv_in_features(o), bytes = d->per_sample * (size_t)d->B * (d->bf16 ? 2 : 4);
    uint8_t *obs = xmalloc(O * (size_t)d->B), *want = xmalloc(bytes);
    s_pattern(obs, O * (size_t)d->B);
    s_input_gather(d, obs, 1, 0.5f);
    memcpy(want, s_ptr(d->L[0].src), bytes);
    memset(s_ptr(d->L[0].src), 0xff, bytes); // an element the fast path misses shows
    d->s2d_fast = mode;
    s_s2d_fast(d, obs, 0.5f);
    if (memcmp(want, s_ptr(d->L[0].src), bytes) != 0) {
        d->s2d_fast = 0;
    }
    free(obs);
    free(want);
#else
    (void)d;
#endif
}

// The input through the gather table: src's elements in the order they are stored.
static void s_input_gather(dnnconv_t *d, const void *obs, int obs_u8, float scale) {
    const size_t O = conv_in_features(&d->net0), per = d->per_sample;
    const int32_t *g = d->gather;
    void *dst = s_ptr(d->L[0].src);
    int b = 0;
#if defined(__x86_64__)
    if (d->gather_avx512) {
        b = obs_u8 ? d->B - 1 : d->B;
        s_gather_avx512(dst, d->bf16, obs, obs_u8, scale, g, per, O, b);
    }
#endif
    for (; b < d->B; b++) {
        const uint8_t *row8 = (const uint8_t *)obs + (size_t)b * O;
        const float *row32 = (const float *)obs + (size_t)b * O;
        float *d32 = (float *)dst + (size_t)b * per;
        uint16_t *d16 = (uint16_t *)dst + (size_t)b * per;
        for (size_t j = 0; j < per; j++) {
            float v = g[j] < 0 ? 0.0f : scale * (obs_u8 ? (float)row8[g[j]] : row32[g[j]]);
            if (d->bf16) {
                d16[j] = s_bf16(v);
            } else {
                d32[j] = v;
            }
        }
    }
}

#if defined(__x86_64__)
// Byte frames into x when x is src (a direct first layer on plain nchw fp32): with each
// channel a plane (d->plain_fast 1) a row is x's sample already, in bytes; with 4 channels
// last (4) 16 pixels' 64 bytes are sorted into four channels of 16 by one byte shuffle and
// one dword permutation. The values of dnnconv_input's loops (s_plain_fast_init compares).
__attribute__((target("avx512f,avx512bw"))) static void s_plain_fast(dnnconv_t *d,
                                                                     const uint8_t *obs,
                                                                     float scale) {
    const size_t O = conv_in_features(&d->net0), HW = (size_t)d->net0.h * d->net0.w;
    const __m512 sc = _mm512_set1_ps(scale);
    float *x = d->x;
    if (d->plain_fast == 1) {
        const size_t n = O * (size_t)d->B;
        size_t i = 0;
        for (; i + 16 <= n; i += 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(obs + i));
            _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v)), sc));
        }
        for (; i < n; i++) {
            x[i] = scale * (float)obs[i];
        }
        return;
    }
    const __m512i pat =
        _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    for (int b = 0; b < d->B; b++) {
        const uint8_t *row = obs + (size_t)b * O;
        float *xb = x + (size_t)b * O;
        size_t p = 0;
        for (; p + 16 <= HW; p += 16) {
            __m512i z = _mm512_loadu_si512((const void *)(row + 4 * p));
            z = _mm512_permutexvar_epi32(idx, _mm512_shuffle_epi8(z, pat));
            for (int c = 0; c < 4; c++) {
                __m128i q = c == 0   ? _mm512_extracti32x4_epi32(z, 0)
                            : c == 1 ? _mm512_extracti32x4_epi32(z, 1)
                            : c == 2 ? _mm512_extracti32x4_epi32(z, 2)
                                     : _mm512_extracti32x4_epi32(z, 3);
                _mm512_storeu_ps(xb + (size_t)c * HW + p,
                                 _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(q)), sc));
            }
        }
        for (; p < HW; p++) {
            for (size_t c = 0; c < 4; c++) {
                xb[c * HW + p] = scale * (float)row[4 * p + c];
            }
        }
    }
}
#endif

// Whether s_plain_fast applies to d, and then whether it writes what dnnconv_input's loops
// do, on a batch of bytes. Sets d->plain_fast.
static void s_plain_fast_init(dnnconv_t *d) {
#if defined(__x86_64__)
    const conv_shape_t *o = &d->net0;
    int mode = s_byte_layout(o);
    cpu_features_t cpu;
    cpu_detect(&cpu);
    if (d->s2d || d->bf16 || d->x_to_src.p || !d->x || !mode || !cpu.avx512bw) {
        return;
    }
    const size_t O = conv_in_features(o), n = O * (size_t)d->B;
    uint8_t *obs = xmalloc(n);
    float *want = xaligned_alloc(n * sizeof(float));
    s_pattern(obs, n);
    dnnconv_input(d, obs, 1, 0.5f); // plain_fast 0: the loops
    memcpy(want, d->x, n * sizeof(float));
    memset(d->x, 0xff, n * sizeof(float)); // an element the fast path misses shows (NaN)
    d->plain_fast = mode;
    s_plain_fast(d, obs, 0.5f);
    if (memcmp(want, d->x, n * sizeof(float)) != 0) {
        d->plain_fast = 0;
    }
    free(obs);
    xfree(want);
#else
    (void)d;
#endif
}

// Observation rows -> x, (B x C' x H' x W') floats times scale: with space to depth (factor
// f = the stride, else 1) channel c' = (c f + dy) f + dx, pixel (y, x) is pixel (y f + dy,
// x f + dx) of channel c. The rows are channels last (element (y W + x) C + c), or F frames
// of H W (C / F) (element frame H W (C/F) + (y W + x) (C/F) + c % (C/F)). Then oneDNN's
// reorder into forward's layout, unless that is x's own. (dnnconv_input's path when neither
// the gather table, the 4x4 patches nor the vector plain path applies.)
void dnnconv_input(dnnconv_t *d, const void *obs, int obs_u8, float scale) {
#if defined(__x86_64__)
    if (d->s2d_fast && obs_u8) {
        s_s2d_fast(d, obs, scale);
        return;
    }
    if (d->plain_fast && obs_u8) {
        s_plain_fast(d, obs, scale);
        return;
    }
#endif
    if (d->gather) {
        s_input_gather(d, obs, obs_u8, scale);
        return;
    }
    const conv_shape_t *o = &d->net0, *n = &d->L[0].s;
    const int f = d->s2d ? o->stride : 1, C = o->c_in, F = o->frames > 1 ? o->frames : 1;
    const size_t O = conv_in_features(o), HW = (size_t)o->h * o->w, cf = (size_t)C / F;
    const size_t pix = F > 1 ? cf : (size_t)C; // elements between horizontal neighbours
    const size_t xs = (size_t)f * pix;
    float *dst = d->x;
    for (int b = 0; b < d->B; b++) {
        for (int c = 0; c < C; c++) {
            size_t base = (size_t)b * O + (F > 1 ? (c / cf) * HW * cf + c % cf : (size_t)c);
            for (int dy = 0; dy < f; dy++) {
                for (int dx = 0; dx < f; dx++) {
                    for (int y = 0; y < n->h; y++) {
                        size_t off = base + ((size_t)(y * f + dy) * o->w + dx) * pix;
                        if (obs_u8) {
                            const uint8_t *src = (const uint8_t *)obs + off;
                            for (int x = 0; x < n->w; x++) {
                                dst[x] = scale * (float)src[(size_t)x * xs];
                            }
                        } else {
                            const float *src = (const float *)obs + off;
                            for (int x = 0; x < n->w; x++) {
                                dst[x] = scale * src[(size_t)x * xs];
                            }
                        }
                        dst += n->w;
                    }
                }
            }
        }
    }
    s_run_reorder(d, &d->x_to_src);
}

// Where weight (o, c, i, j) of the network's first layer (OC x C x k x k) sits in its space-
// to-depth form (OC x C f f x k/f x k/f), f the stride.
static size_t s_s2d_at(const conv_shape_t *o, int oc, int c, int i, int j) {
    const size_t f = (size_t)o->stride, kk = (size_t)o->k / f, C = (size_t)o->c_in;
    size_t cp = ((size_t)c * f + (size_t)i % f) * f + (size_t)j % f;
    return (((size_t)oc * C * f * f + cp) * kk + (size_t)i / f) * kk + (size_t)j / f;
}

// back 0: ws = w in the s2d form; back 1: w += ws at the network's places.
static void s_s2d_weights(const float *w, float *w_add, float *ws, const conv_shape_t *o,
                          int back) {
    const int k = o->k;
    size_t a = 0;
    for (int oc = 0; oc < o->c_out; oc++) {
        for (int c = 0; c < o->c_in; c++) {
            for (int i = 0; i < k; i++) {
                for (int j = 0; j < k; j++, a++) {
                    size_t b = s_s2d_at(o, oc, c, i, j);
                    if (back) {
                        w_add[a] += ws[b];
                    } else {
                        ws[b] = w[a];
                    }
                }
            }
        }
    }
}

void dnnconv_forward(dnnconv_t *d, int l, const float *w, const float *b, const dnnconv_t *input_of,
                     float *top) {
    APEX_ASSERT(l >= 0 && l < d->n && (l == d->n - 1) == (top != NULL));
    dc_layer_t *L = &d->L[l];
    dnnl_memory_t src = L->src;
    if (l == 0) {
        d->own_input = !input_of;
        if (input_of) {
            APEX_ASSERT(input_of->B == d->B && input_of->s2d == d->s2d &&
                        D(dnnl_memory_desc_equal)(s_md(input_of->L[0].src), s_md(L->src)));
            src = input_of->L[0].src;
        }
        if (d->s2d) {
            s_s2d_weights(w, NULL, d->w_s2d, &d->net0, 0);
            w = d->w_s2d;
        }
    }
    s_set(L->w_user, w);
    s_set(L->b_user, b);
    s_run_reorder(d, &L->w_to);
    dnnl_exec_arg_t a[5] = {{DNNL_ARG_SRC, src},
                            {DNNL_ARG_WEIGHTS, L->w},
                            {DNNL_ARG_BIAS, L->b_user},
                            {DNNL_ARG_DST, L->dst},
                            {DNNL_ARG_SCRATCHPAD, L->scratch[0]}};
    s_ok(D(dnnl_primitive_execute)(L->fwd, d->st, L->scratch[0] ? 5 : 4, a),
         "the forward convolution");
    if (top) {
        s_set(d->top_user, top);
        s_run_reorder(d, &d->top_out);
    }
    s_ok(D(dnnl_stream_wait)(d->st), "dnnl_stream_wait");
}

// conv_relu_mask on bfloat16 elements: a > 0 is a positive sign and not zero, (int16_t)a > 0.
typedef int16_t v32h __attribute__((vector_size(64)));

static void s_relu_mask_bf16(uint16_t *g, const uint16_t *a, size_t n) {
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        v32h gv, av;
        memcpy(&gv, g + i, sizeof gv);
        memcpy(&av, a + i, sizeof av);
        gv &= (v32h)(av > (v32h){0});
        memcpy(g + i, &gv, sizeof gv);
    }
    for (; i < n; i++) {
        g[i] = (int16_t)a[i] > 0 ? g[i] : 0;
    }
}

void dnnconv_backward(dnnconv_t *d, int l, const float *dtop, const float *w, float *dw,
                      float *db) {
    APEX_ASSERT(l >= 0 && l < d->n && (l == d->n - 1) == (dtop != NULL) && (l == 0 || w) &&
                d->own_input && d->train);
    dc_layer_t *L = &d->L[l];
    if (dtop) {
        s_set(d->dtop_user, dtop);
        s_run_reorder(d, &d->dtop_in);
    }
    dnnl_exec_arg_t a[5] = {{DNNL_ARG_SRC, L->src},
                            {DNNL_ARG_DIFF_DST, L->ddst},
                            {DNNL_ARG_DIFF_WEIGHTS, L->dw},
                            {DNNL_ARG_DIFF_BIAS, L->db},
                            {DNNL_ARG_SCRATCHPAD, L->scratch[1]}};
    s_ok(D(dnnl_primitive_execute)(L->bwd_w, d->st, L->scratch[1] ? 5 : 4, a),
         "the backward-weights convolution");
    s_set(L->dw_user, l == 0 && d->s2d ? d->dw_s2d : dw);
    s_run_reorder(d, &L->dw_out);
    if (l > 0) {
        s_set(L->w_user, w);
        s_run_reorder(d, &L->w_to_bd);
        dc_layer_t *P = &d->L[l - 1];
        dnnl_exec_arg_t b[4] = {{DNNL_ARG_DIFF_DST, L->ddst},
                                {DNNL_ARG_WEIGHTS, L->w_bd},
                                {DNNL_ARG_DIFF_SRC, P->ddst},
                                {DNNL_ARG_SCRATCHPAD, L->scratch[2]}};
        s_ok(D(dnnl_primitive_execute)(L->bwd_d, d->st, L->scratch[2] ? 4 : 3, b),
             "the backward-data convolution");
    }
    s_ok(D(dnnl_stream_wait)(d->st), "dnnl_stream_wait");
    if (l == 0 && d->s2d) {
        s_s2d_weights(NULL, dw, d->dw_s2d, &d->net0, 1);
    }
    const float *g = s_ptr(L->db);
    for (int o = 0; o < L->s.c_out; o++) {
        db[o] += g[o];
    }
    if (l > 0) {
        dc_layer_t *P = &d->L[l - 1];
        if (d->bf16) {
            s_relu_mask_bf16((uint16_t *)s_ptr(P->ddst), (const uint16_t *)s_ptr(P->dst),
                             P->dst_elems);
        } else {
            conv_relu_mask(s_ptr(P->ddst), s_ptr(P->dst), P->dst_elems);
        }
    }
}

#else // built without oneDNN's header: no bodies, conv.c everywhere

#include "apex.h"

#include <stdio.h>

int dnnconv_load(void *handle, char *why, size_t n) {
    (void)handle;
    snprintf(why, n,
             "apex was built without oneDNN's header (apt-get install libdnnl-dev, then "
             "rebuild)");
    return -1;
}
int dnnconv_enabled(void) { return 0; }
int dnnconv_built(void) { return 0; }
void dnnconv_set_enabled(int mode) { (void)mode; }
void dnnconv_accept_any(int what) { (void)what; }
dnnconv_t *dnnconv_create(const conv_shape_t *shapes, int n, int B, int bf16, int train, char *why,
                          size_t why_len) {
    (void)shapes, (void)n, (void)B, (void)bf16, (void)train;
    snprintf(why, why_len, "apex was built without oneDNN's header");
    return NULL;
}
void dnnconv_free(dnnconv_t *d) { APEX_ASSERT(!d); }
// No body exists, so nothing below is ever called with one.
int dnnconv_batch(const dnnconv_t *d) {
    APEX_ASSERT(!d);
    return 0;
}
int dnnconv_bf16(const dnnconv_t *d) {
    APEX_ASSERT(!d);
    return 0;
}
const char *dnnconv_first_layer(const dnnconv_t *d) {
    APEX_ASSERT(!d);
    return "";
}

int dnnconv_same_input(const dnnconv_t *a, const dnnconv_t *b) {
    (void)a;
    (void)b;
    APEX_ASSERT(0);
    return 0;
}
const char *dnnconv_input_path(const dnnconv_t *d) {
    APEX_ASSERT(!d);
    return "";
}
const char *dnnconv_impl(const dnnconv_t *d, int l, int pass) {
    (void)l, (void)pass;
    APEX_ASSERT(!d);
    return NULL;
}
void dnnconv_input(dnnconv_t *d, const void *obs, int obs_u8, float scale) {
    (void)obs, (void)obs_u8, (void)scale;
    APEX_ASSERT(!d);
}
void dnnconv_forward(dnnconv_t *d, int l, const float *w, const float *b, const dnnconv_t *input_of,
                     float *top) {
    (void)l, (void)w, (void)b, (void)input_of, (void)top;
    APEX_ASSERT(!d);
}
void dnnconv_backward(dnnconv_t *d, int l, const float *dtop, const float *w, float *dw,
                      float *db) {
    (void)l, (void)dtop, (void)w, (void)dw, (void)db;
    APEX_ASSERT(!d);
}

#endif

// Multiply-adds of the body's forward per element crossing its edges (the input written in,
// the top output reordered out), per sample: what the body's convolutions can gain against
// what its edges cost (memory-bound passes that conv.c does not make). A shape rule, the same
// in a build without oneDNN's header: blas.c's auto decides from it whether to load oneDNN.
double dnnconv_work(const conv_shape_t *shapes, int n) {
    double macs = 0;
    for (int l = 0; l < n; l++) {
        const conv_shape_t *s = &shapes[l];
        macs += (double)s->oh * s->ow * s->c_out * s->c_in * s->k * s->k;
    }
    return macs / (double)(conv_in_features(&shapes[0]) + conv_out_features(&shapes[n - 1]));
}
