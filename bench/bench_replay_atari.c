// bench_replay_atari.c: the replay store holding Atari-shaped transitions (issue #27): 84x84
// uint8 frames, stacks of 4, 3-step returns, in frame mode (each frame stored once, stacks
// rebuilt at sample time; replay/store.h "Frames"). A simulated actor stream of E envs with
// episodes of random length feeds store_add_framed in batches of 50 rows, as apex-actor sends
// them; the store is filled to capacity, then measured in steady state (every add evicts).
//   BENCH replay.atari.bytes_per_transition <B> bytes          what the store allocates per
//                                                              row it holds (rows, tree,
//                                                              frames with their links and
//                                                              the spare frames, maps)
//   BENCH replay.atari.bytes_per_transition.whole_stacks <B> bytes   the same store keeping
//                                                              obs and next_obs whole (sized,
//                                                              not allocated: 113 GB at 2 M)
//   BENCH replay.atari.rss_gb_2m <GB> GB                       the process's resident memory
//                                                              holding 2 M rows (VmRSS; at
//                                                              other sizes rss_gb_<N>k)
//   BENCH replay.atari.insert_frames_per_s <f> frames/s        frames added per second with
//                                                              their rows, one core
//   BENCH replay.atari.sample_stacks_per_s <s> stacks/s        obs and next_obs stacks (2 per
//                                                              row) rebuilt per second in
//                                                              batches of 512, with IS weights
// With --compress lz4|zstd ([replay] compress) the frames are kept compressed, each alone, and
// the content matters; --frames picks it: pattern (blocks of a few gray levels, made up: the
// default, only for uncompressed runs), breakout (4 096 frames of MinAtar/Breakout-
// render84-v0 under random play: the renders apex learns from), or fixture (the 256 frames of
// Gymnasium's classic-control envs drawn by pygame, tests/fixtures/frames: anti-aliased, with
// gradients, so no ratio rests on blocky frames alone). Frames cycle through the pool; each
// is compressed once before the timing (an actor's cost, reported on its own line), so the
// insert rate is the replay's: each blob decompressed once to check it, then stored. Compressed runs print their lines as
// replay.atari.<codec>.<frames>.<name>, plus
//   BENCH replay.atari.<codec>.<frames>.ratio <x> x            frame bytes / mean blob bytes
//   BENCH replay.atari.<codec>.<frames>.compress_frames_per_s  one core compressing frames
//
// Usage: bench_replay_atari [--capacity 2000000] [--frame-capacity 0] [--envs 16] [--reps 5]
//                           [--compress none|lz4|zstd] [--level 0] [--frames pattern|
//                           breakout|fixture] [--fixture PATH]
// (--frame-capacity 0: the store's default, capacity + capacity / 256 + 4096 frames)
#include "apex.h"
#include "clock.h"
#include "env.h"
#include "fcodec.h"
#include "parse.h"
#include "rng.h"
#include "store.h"
#include "xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#define K 4
#define FB (84 * 84)
#define NSTEP 3
#define ROWS_PER_BATCH 50
#define SAMPLE_N 512
#define MAX_ENVS 256
#define MAX_EP 4096
#define POOL_MAX 4096

// The simulated actor: per env, its episode's frame numbers (the last NSTEP + 1 matter) and
// the batch being built.
typedef struct {
    store_t *s;
    rng_t rng;
    int E;
    uint64_t next_fid;
    uint64_t hist[MAX_ENVS][NSTEP + 1]; // last frames of each env's episode, newest last
    int len[MAX_ENVS], target[MAX_ENVS];
    // the batch in flight
    uint8_t *frames;
    uint32_t prev[2 * ROWS_PER_BATCH + 2 * MAX_ENVS];
    uint32_t nf;
    uint64_t first;
    uint64_t obs_f[ROWS_PER_BATCH + MAX_ENVS * NSTEP], next_f[ROWS_PER_BATCH + MAX_ENVS * NSTEP];
    int32_t act[ROWS_PER_BATCH + MAX_ENVS * NSTEP];
    float rew[ROWS_PER_BATCH + MAX_ENVS * NSTEP], disc[ROWS_PER_BATCH + MAX_ENVS * NSTEP];
    uint32_t nr;
    // The frames cycle through this pool; compressed, each pool frame's blob (made once).
    uint8_t *pool;
    int n_pool;
    uint8_t *blobs;
    size_t *blob_at;
    uint32_t *blob_size, sizes[2 * ROWS_PER_BATCH + 2 * MAX_ENVS];
    size_t nbytes; // bytes of the batch's frames so far (compressed: blobs)
    int codec;
    uint64_t frames_total, rows_total;
} s_sim;

static void s_frame(s_sim *m, int e, int first) {
    uint64_t fid = m->next_fid++;
    int p = (int)(fid % (uint64_t)m->n_pool);
    if (m->codec) {
        memcpy(m->frames + m->nbytes, m->blobs + m->blob_at[p], m->blob_size[p]);
        m->sizes[m->nf] = m->blob_size[p];
        m->nbytes += m->blob_size[p];
    } else {
        memcpy(m->frames + (size_t)m->nf * FB, m->pool + (size_t)p * FB, FB);
    }
    m->prev[m->nf++] = first ? 0 : (uint32_t)(fid - m->hist[e][NSTEP]);
    if (first) {
        m->len[e] = 0;
        m->target[e] = 100 + (int)(rng_next_u64(&m->rng) % 1900); // Atari-like lengths
    }
    memmove(m->hist[e], m->hist[e] + 1, NSTEP * sizeof(uint64_t));
    m->hist[e][NSTEP] = fid;
    m->len[e]++;
}

static void s_row(s_sim *m, int e, int back, int term) {
    uint32_t r = m->nr++;
    m->obs_f[r] = m->hist[e][NSTEP - back];
    m->next_f[r] = m->hist[e][NSTEP];
    m->act[r] = (int32_t)(r % 6);
    m->rew[r] = 1.0f;
    m->disc[r] = term ? 0.0f : 0.970299f;
}

static void s_flush(s_sim *m) {
    store_framed_t b = {.actor = 0,
                        .epoch = 1,
                        .first_frame = m->first,
                        .frame_count = m->nf,
                        .frames = m->frames,
                        .frame_prev = m->prev,
                        .count = m->nr,
                        .obs_frames = m->obs_f,
                        .next_frames = m->next_f,
                        .actions = m->act,
                        .rewards = m->rew,
                        .discounts = m->disc,
                        .frame_sizes = m->codec ? m->sizes : NULL};
    // apex-replay's insert: compressed frames are checked (each decompressed once) first.
    char why[160];
    if (store_check_framed(m->s, &b, why, sizeof why) != APEX_OK) {
        fprintf(stderr, "bench_replay_atari: %s\n", why);
        exit(1);
    }
    m->rows_total += store_add_framed(m->s, &b);
    m->frames_total += m->nf;
    m->first += m->nf;
    m->nf = m->nr = 0;
    m->nbytes = 0;
}

// One vector step of every env; ships a batch when it holds ROWS_PER_BATCH rows.
static void s_step(s_sim *m) {
    for (int e = 0; e < m->E; e++) {
        if (m->len[e] == 0 || m->len[e] - 1 >= m->target[e]) {
            s_frame(m, e, 1);
            continue;
        }
        s_frame(m, e, 0);
        int j = m->len[e] - 1;
        if (j >= m->target[e]) {
            for (int back = j < NSTEP ? j : NSTEP; back >= 1; back--) {
                s_row(m, e, back, 1);
            }
        } else if (j >= NSTEP) {
            s_row(m, e, NSTEP, 0);
        }
    }
    if (m->nr >= ROWS_PER_BATCH) {
        s_flush(m);
    }
}

static double s_rss_gb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "VmRSS:", 6) == 0) {
            kb = atof(line + 6);
        }
    }
    if (f) {
        fclose(f);
    }
    return kb / (1024.0 * 1024.0);
}

int main(int argc, char **argv) {
    int64_t cap = 2000000, envs = 16, reps = 5, fcap = 0, level = 0;
    const char *compress = "none", *frames_src = "pattern";
    const char *fixture = "tests/fixtures/frames/classic_control_84.u8.zst";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--compress") == 0) {
            compress = argv[i + 1];
            continue;
        }
        if (strcmp(argv[i], "--frames") == 0) {
            frames_src = argv[i + 1];
            continue;
        }
        if (strcmp(argv[i], "--fixture") == 0) {
            fixture = argv[i + 1];
            continue;
        }
        if (strcmp(argv[i], "--level") == 0) {
            if (parse_int64(argv[i + 1], 0, 65537, &level) != 0) {
                fprintf(stderr, "bench_replay_atari: --level 0..65537\n");
                return 2;
            }
            continue;
        }
        int64_t *dst = strcmp(argv[i], "--capacity") == 0         ? &cap
                       : strcmp(argv[i], "--envs") == 0           ? &envs
                       : strcmp(argv[i], "--reps") == 0           ? &reps
                       : strcmp(argv[i], "--frame-capacity") == 0 ? &fcap
                                                                  : NULL;
        int64_t max = dst == &cap || dst == &fcap ? STORE_CAPACITY_MAX
                      : dst == &envs              ? MAX_ENVS
                                                  : 64;
        if (!dst || parse_int64(argv[i + 1], 1, max, dst) != 0) {
            fprintf(stderr,
                    "usage: bench_replay_atari [--capacity N] [--envs 1..%d] "
                    "[--reps 1..64]\n",
                    MAX_ENVS);
            return 2;
        }
    }
    int codec = strcmp(compress, "lz4") == 0    ? FCODEC_LZ4
                : strcmp(compress, "zstd") == 0 ? FCODEC_ZSTD
                : strcmp(compress, "none") == 0 ? FCODEC_NONE
                                                : -1;
    if (codec < 0 || (strcmp(frames_src, "pattern") && strcmp(frames_src, "breakout") &&
                      strcmp(frames_src, "fixture"))) {
        fprintf(stderr, "bench_replay_atari: --compress none|lz4|zstd, --frames "
                        "pattern|breakout|fixture\n");
        return 2;
    }
    // Line names: the for uncompressed made-up frames, else codec and frames named.
    char pre[96] = "replay.atari";
    if (codec || strcmp(frames_src, "pattern")) {
        snprintf(pre, sizeof pre, "replay.atari.%s.%s", fcodec_name(codec),
                 strcmp(frames_src, "breakout") == 0  ? "minatar_render"
                 : strcmp(frames_src, "fixture") == 0 ? "classic_control"
                                                      : "pattern");
    }
    store_config_t c = {.capacity = (uint32_t)cap,
                        .obs_dim = K * FB,
                        .obs_elem_bytes = 1,
                        .alpha = 0.6,
                        .frame_stack = K,
                        .max_actors = 1,
                        .frame_window = 4096,
                        .frame_capacity = (uint32_t)fcap,
                        .frame_codec = (uint32_t)codec};
    store_config_t whole = c;
    whole.frame_stack = 0;
    whole.frame_codec = 0;
    printf("# capacity %lld rows of 84x84x4 uint8 stacks, n = %d, %lld envs; frames held %u\n",
           (long long)cap, NSTEP, (long long)envs, store_frame_capacity_default((uint32_t)cap));
    if (!codec) {
        printf("BENCH %s.bytes_per_transition %.1f bytes\n", pre,
               (double)store_bytes(&c) / (double)cap);
    }
    printf("BENCH %s.bytes_per_transition.whole_stacks %.1f bytes\n", pre,
           (double)store_bytes(&whole) / (double)cap);
    s_sim *m = xcalloc(1, sizeof *m);
    m->s = store_new(&c);
    if (!m->s) {
        return 1;
    }
    m->E = (int)envs;
    m->codec = codec;
    rng_init(&m->rng, 1);
    m->frames = xmalloc((size_t)(2 * ROWS_PER_BATCH + 2 * MAX_ENVS) *
                        fcodec_bound(codec ? codec : FCODEC_LZ4, FB));
    m->pool = xmalloc((size_t)POOL_MAX * FB);
    if (strcmp(frames_src, "pattern") == 0) { // blocks of a few gray levels, made up
        m->n_pool = 64;
        for (int p = 0; p < 64; p++) {
            for (int y = 0; y < 84; y++) {
                for (int x = 0; x < 84; x++) {
                    m->pool[(size_t)p * FB + y * 84 + x] =
                        (uint8_t)(((x / 8 + y / 8 + p) % 5 == 0) ? 40 * (1 + (x / 8 + p) % 5) : 0);
                }
            }
        }
    } else if (strcmp(frames_src, "breakout") == 0) { // the renders under random play
        vecenv_t v;
        vecenv_init(&v, &env_minatar_breakout_render84_spec, 16, 1, 0, 64);
        int32_t act[16];
        float rew[16];
        uint8_t term[16], trunc[16];
        rng_t ar;
        rng_init(&ar, 3);
        for (m->n_pool = 0; m->n_pool < POOL_MAX; m->n_pool += 16) {
            memcpy(m->pool + (size_t)m->n_pool * FB, v.obs, 16 * (size_t)FB);
            for (int i = 0; i < 16; i++) {
                act[i] = (int32_t)(rng_next_u64(&ar) % 6);
            }
            vecenv_step(&v, act, rew, term, trunc);
            v.done_count = 0;
        }
        vecenv_fini(&v);
    } else { // the classic-control fixture: one zstd file of 256 frames
        FILE *f = fopen(fixture, "rb");
        static uint8_t file[1 << 20];
        size_t n = f ? fread(file, 1, sizeof file, f) : 0;
        if (f) {
            fclose(f);
        }
        size_t got = n ? ZSTD_decompress(m->pool, (size_t)POOL_MAX * FB, file, n) : 0;
        if (!n || ZSTD_isError(got) || got % FB) {
            fprintf(stderr, "bench_replay_atari: cannot read the fixture %s\n", fixture);
            return 1;
        }
        m->n_pool = (int)(got / FB);
    }
    if (codec) { // each pool frame compressed once: the actors' work, timed here on its own
        fcodec_t *fc = fcodec_new(codec, (int)level);
        size_t bound = fcodec_bound(codec, FB), total = 0;
        m->blobs = xmalloc((size_t)m->n_pool * bound);
        m->blob_at = xmalloc((size_t)m->n_pool * sizeof(size_t));
        m->blob_size = xmalloc((size_t)m->n_pool * sizeof(uint32_t));
        int64_t a = clock_now_ns();
        int rounds = 0;
        do {
            total = 0;
            for (int p = 0; p < m->n_pool; p++) {
                m->blob_at[p] = total;
                m->blob_size[p] = (uint32_t)fcodec_compress(fc, m->pool + (size_t)p * FB, FB,
                                                            m->blobs + total, bound);
                total += m->blob_size[p];
            }
            rounds++;
        } while (clock_now_ns() - a < 300000000LL);
        double dt = (double)(clock_now_ns() - a) * 1e-9;
        fcodec_destroy(&fc);
        printf("# %d frames in the pool, mean blob %.1f bytes\n", m->n_pool,
               (double)total / m->n_pool);
        printf("BENCH %s.ratio %.2f x\n", pre, (double)FB * m->n_pool / (double)total);
        printf("BENCH %s.compress_frames_per_s %.0f frames/s\n", pre,
               (double)rounds * m->n_pool / dt);
    }
    int64_t t0 = clock_now_ns();
    while (store_size(m->s) < (uint64_t)cap) {
        s_step(m);
    }
    double fill_s = (double)(clock_now_ns() - t0) * 1e-9;
    printf("# filled %llu rows (%llu frames) in %.1f s (first touch of every page included)\n",
           (unsigned long long)store_size(m->s), (unsigned long long)m->frames_total, fill_s);
    if (cap == 2000000) { // the name for the paper's 2 M
        printf("BENCH %s.rss_gb_2m %.2f GB\n", pre, s_rss_gb());
    } else {
        printf("BENCH %s.rss_gb_%lldk %.2f GB\n", pre, (long long)(cap / 1000), s_rss_gb());
    }
    if (codec) { // what the store uses: the arena as far as the frames reach, not reserved
        printf("BENCH %s.bytes_per_transition %.1f bytes\n", pre,
               (double)store_bytes_used(m->s) / (double)cap);
    }
    // Steady state: every frame and row added evicts the oldest.
    double ins[64], smp[64];
    uint64_t keys[SAMPLE_N];
    float w[SAMPLE_N], rr[SAMPLE_N], dd[SAMPLE_N];
    int32_t aa[SAMPLE_N];
    uint8_t *so = xmalloc((size_t)SAMPLE_N * K * FB), *sn = xmalloc((size_t)SAMPLE_N * K * FB);
    rng_t srng;
    rng_init(&srng, 2);
    for (int64_t r = 0; r < reps; r++) {
        uint64_t f0 = m->frames_total;
        int64_t a = clock_now_ns();
        while (m->frames_total - f0 < 200000) {
            s_step(m);
        }
        ins[r] = (double)(m->frames_total - f0) / ((double)(clock_now_ns() - a) * 1e-9);
        int n = 0;
        a = clock_now_ns();
        for (; n < 40; n++) {
            if (store_sample(m->s, &srng, SAMPLE_N, 0.4f, keys, w, so, aa, rr, dd, sn) != APEX_OK) {
                fprintf(stderr, "bench_replay_atari: sample failed\n");
                return 1;
            }
        }
        smp[r] = 2.0 * SAMPLE_N * n / ((double)(clock_now_ns() - a) * 1e-9);
        printf("# rep %lld: insert %.0f frames/s, sample %.0f stacks/s\n", (long long)r, ins[r],
               smp[r]);
    }
    // Median of the reps (insertion sort: a handful of values).
    for (int64_t i = 1; i < reps; i++) {
        for (int64_t j = i; j > 0 && ins[j] < ins[j - 1]; j--) {
            double t = ins[j];
            ins[j] = ins[j - 1], ins[j - 1] = t;
        }
        for (int64_t j = i; j > 0 && smp[j] < smp[j - 1]; j--) {
            double t = smp[j];
            smp[j] = smp[j - 1], smp[j - 1] = t;
        }
    }
    printf("BENCH %s.insert_frames_per_s %.0f frames/s\n", pre, ins[reps / 2]);
    printf("BENCH %s.sample_stacks_per_s %.0f stacks/s\n", pre, smp[reps / 2]);
    printf("# rows refused for missing frames %llu, evicted with their frames %llu, live %llu\n",
           (unsigned long long)store_frames_missing(m->s),
           (unsigned long long)store_frame_evicted(m->s),
           (unsigned long long)store_live_size(m->s));
    free(so);
    free(sn);
    free(m->pool);
    free(m->blobs);
    free(m->blob_at);
    free(m->blob_size);
    free(m->frames);
    store_destroy(&m->s);
    free(m);
    return 0;
}
