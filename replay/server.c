// server.c: see server.h.
#define LOG_MODULE "replay"
#include "server.h"
#include "server_int.h"

#include "apex.h"
#include "clock.h"
#include "config_shard.h"
#include "log.h"
#include "loop.h"
#include "net.h"
#include "rng.h"
#include "security.h"
#include "store.h"
#include "xalloc.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

// ---------------------------------------------------------------------------------------
// Start-up

static size_t s_mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) {
        return 0;
    }
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
            break;
        }
    }
    fclose(f);
    return (size_t)kb * 1024;
}

static size_t s_max_message_bytes(const apex_config_t *c, wire_limits_t *lim) {
    *lim = (wire_limits_t){.obs_dim = (uint32_t)c->env.obs_dim,
                           .obs_dtype = (uint32_t)c->env.obs_dtype,
                           .n_actions = (uint32_t)c->env.n_actions,
                           .action_dim = (uint32_t)c->env.action_dim,
                           .action_low = c->env.action_low,
                           .action_high = c->env.action_high,
                           .max_count = (uint32_t)c->replay.max_batch,
                           .max_actors = (uint32_t)c->actor.num_actors, // bounds dedupe too
                           // Frame mode: batches carry frames, at most max_batch of them.
                           .frame_stack = config_frame_mode(c) ? (uint32_t)c->env.frame_stack : 0,
                           .max_frames = (uint32_t)c->replay.max_batch,
                           .frame_codec = config_frame_mode(c) ? (uint32_t)c->replay.compress : 0};
    lim->max_message_bytes = c->replay.max_message_bytes > 0 ? (size_t)c->replay.max_message_bytes
                                                             : wire_max_message_bytes(lim);
    return lim->max_message_bytes;
}

static int s_open_sockets(replay_server_t *s) {
    const apex_config_t *c = &s->cfg;
    wire_limits_t lim;
    size_t max_bytes = s_max_message_bytes(c, &lim);
    net_opts_t o = {.max_msg_bytes = (int64_t)max_bytes, .rcvhwm = 1000, .sndhwm = 1000};
    // Two I/O threads, one per socket (ZMQ_AFFINITY below): with one, the learner's
    // requests and replies queue in the same event loop behind the actors' stream of
    // batches and acks, and a sample round trip waits for insert traffic it does not need.
    zmq_ctx_set(s->ctx, ZMQ_IO_THREADS, 2);
    // The ZAP handler must be bound before any CURVE server socket accepts a client.
    s->security = security_new(s->ctx, c, "replay", -1, 1);
    if (!s->security) {
        return -1;
    }
    s->insert_sock = net_socket(s->ctx, ZMQ_ROUTER, &o);
    // Replies can be [replay] max_batch rows each: keep few queued for a peer that does not
    // read (a learner keeps at most [learner] prefetch <= 64 requests in flight).
    net_opts_t o_sample = o;
    o_sample.sndhwm = 64;
    s->sample_sock = net_socket(s->ctx, ZMQ_ROUTER, &o_sample);
    if (!s->insert_sock || !s->sample_sock || security_server(s->security, s->insert_sock) ||
        security_server(s->security, s->sample_sock)) {
        return -1;
    }
    // Bit i is I/O thread i. Set before bind, so that the listener and the connections it
    // accepts use that thread.
    uint64_t io_insert = 1, io_sample = 2;
    zmq_setsockopt(s->insert_sock, ZMQ_AFFINITY, &io_insert, sizeof io_insert);
    zmq_setsockopt(s->sample_sock, ZMQ_AFFINITY, &io_sample, sizeof io_sample);
    if (net_bind(s->insert_sock, c->endpoints.replay_insert_bind, s->insert_ep,
                 sizeof s->insert_ep) != 0 ||
        net_bind(s->sample_sock, c->endpoints.replay_sample_bind, s->sample_ep,
                 sizeof s->sample_ep) != 0) {
        return -1;
    }
    return 0;
}

static int s_reader_insert(loop_t *loop, void *sock, void *arg);
static int s_reader_sample(loop_t *loop, void *sock, void *arg);
static int s_timer_limiter(loop_t *loop, void *arg);
static int s_timer_stats(loop_t *loop, void *arg);
static int s_timer_stop(loop_t *loop, void *arg);
static void s_send_ack(void *arg, const uint8_t *id, size_t id_len, uint32_t actor,
                       const uint64_t *seqs, uint32_t n);
static void s_restore_record(void *arg, int kind, const void *payload, size_t len);

// The actors that insert into this shard (config_actor_shard: index mod [replay] shards).
static int s_det_shard_actors(const apex_config_t *cfg) {
    int n = 0;
    for (int a = 0; a < (int)cfg->actor.num_actors; a++) {
        n += config_actor_shard(cfg, a) == cfg->replay.shard;
    }
    return n > 0 ? n : 1; // (config_shard_check: every shard has an actor)
}

replay_server_t *replay_server_new(const apex_config_t *cfg, int listen) {
    _Static_assert(CONFIG_REPLAY_CAPACITY_MAX == STORE_CAPACITY_MAX,
                   "the schema's capacity bound is the store's");
    _Static_assert((int)WIRE_OBS_UINT8 == (int)CONFIG_OBS_UINT8 &&
                       (int)WIRE_OBS_FLOAT32 == (int)CONFIG_OBS_FLOAT32,
                   "wire and config dtypes share their values");
    uint32_t elem = (uint32_t)wire_obs_elem_bytes((uint32_t)cfg->env.obs_dtype);
    store_config_t sc = {.capacity = (uint32_t)cfg->replay.capacity,
                         .obs_dim = (uint32_t)cfg->env.obs_dim,
                         .obs_elem_bytes = elem,
                         .action_dim = (uint32_t)cfg->env.action_dim,
                         .alpha = cfg->replay.alpha};
    if (config_frame_mode(cfg)) {
        sc.frame_stack = (uint32_t)cfg->env.frame_stack;
        sc.frame_capacity = (uint32_t)config_shard_frame_capacity(cfg, cfg->replay.shard);
        sc.max_actors = (uint32_t)cfg->actor.num_actors;
        sc.frame_window = config_frame_window(cfg);
        sc.frame_codec = (uint32_t)cfg->replay.compress;
    }
    size_t need = store_bytes(&sc), avail = s_mem_available();
    if (need == 0 || (avail > 0 && need > avail)) {
        log_error("[replay] capacity %lld needs %.1f MiB but only %.1f MiB are available"
                  "\n---> HINT: lower [replay] capacity",
                  (long long)cfg->replay.capacity, need / 1048576.0, avail / 1048576.0);
        return NULL;
    }
    replay_server_t *s = xcalloc(1, sizeof *s);
    s->cfg = *cfg;
    s->store = store_new(&sc);
    if (!s->store) {
        replay_server_destroy(&s);
        return NULL;
    }
    // Shard k draws from its own stream (k = 0 is the unsharded server's).
    rng_init_stream(&s->rng, (uint64_t)cfg->run.seed, RNG_ROLE_REPLAY, (uint64_t)cfg->replay.shard);
    // O: bytes of one observation.
    // A: bytes of one action.
    size_t B = (size_t)cfg->replay.max_batch, O = (size_t)cfg->env.obs_dim * elem;
    size_t A = wire_action_bytes((uint32_t)cfg->env.action_dim);
    wire_rows_init(&s->rows, B, O, (uint32_t)cfg->env.action_dim);
    s->pending = xcalloc(PENDING_MAX, sizeof *s->pending);
    wire_buf_init(&s->out, 64 + B * (2 * O + A + 20));
    s->replies = xcalloc(REPLY_RING, sizeof *s->replies);
    for (int i = 0; i < REPLY_RING; i++) {
        wire_buf_init(&s->replies[i].buf, 64 + B * (2 * O + A + 20));
        atomic_init(&s->replies[i].in_use, 0);
    }
    wire_limits_t lim;
    s_max_message_bytes(cfg, &lim);
    s->dec = wire_decoder_new(&lim);
    dedupe_init(&s->dedupe, (uint32_t)cfg->actor.num_actors);
    s->gap_since_ms = xcalloc((size_t)cfg->actor.num_actors, sizeof *s->gap_since_ms);
    // A shard sees only its own actors' inserts and, with mass-proportional shard choice, a
    // share of the samples that drifts from its share of the inserts: the run's ratio can only
    // be held where every sample and (through each shard's stats) every insert is known, at
    // the learner (learner/shards.c). Any per-shard hold would also bend the learner's choice
    // of shard away from P_k / sum P. So a shard serves every request it can.
    s->sharded = cfg->replay.shards > 1;
    // A deterministic run's ratio is exact: with a tolerance the learner would always run that
    // far ahead of the inserts (it is served before any further insert is applied), where an
    // asynchronous run only reaches it when its actors stall. Sharded, every place of the
    // schedule is asked of every shard and the learner trains one batch of rows drawn from
    // the K answers (learner/prefetch.c), so each shard holds the ratio for its share of the
    // actors, n_k of N: N / n_k x samples_per_insert per request's rows (K x with as many
    // actors on every shard). Shares by actors keep the shards at the same period for the
    // same place; shares of 1/K with 3 actors on 2 shards let the shard of one actor run a
    // period a place ahead of the other, whose held batches then waited for a place the
    // learner could not ask for yet (a deadlock; docs/architecture.md "Deterministic runs").
    double spi = cfg->replay.samples_per_insert;
    if (s->sharded) {
        spi = cfg->run.deterministic ? spi * (double)cfg->actor.num_actors / s_det_shard_actors(cfg)
                                     : 0.0;
    }
    // What sampling waits for: min_size_to_sample, a shard's share of it in a deterministic
    // run (ceil(min n_k / N)), 1 for the shard of an asynchronous run (s_can_sample).
    s->min_size = (uint64_t)cfg->replay.min_size_to_sample;
    if (s->sharded) {
        uint64_t n = (uint64_t)cfg->actor.num_actors, nk = (uint64_t)s_det_shard_actors(cfg);
        s->min_size = cfg->run.deterministic ? (s->min_size * nk + n - 1) / n : 1;
        s->min_size = s->min_size ? s->min_size : 1;
    }
    limiter_init(&s->limiter, spi, cfg->run.deterministic ? 0.0 : cfg->replay.spi_tolerance,
                 (uint64_t)cfg->replay.max_batch);
    s->acks = acks_new(s_send_ack, s);
    // The ZeroMQ context exists before the sockets: persistence's wake-up pipe needs it.
    s->ctx = zmq_ctx_new();
    persist_state_t ps = {.store = s->store,
                          .dedupe = &s->dedupe,
                          .limiter = &s->limiter,
                          .counters = &s->counters,
                          .acks = s->acks};
    s->persist = persist_new(cfg, s->ctx, &ps);
    if (!s->persist || persist_restore(s->persist, s_restore_record, s) != 0) {
        replay_server_destroy(&s);
        return NULL;
    }
    if (cfg->run.deterministic) {
        // The learner group's requests in flight: [learner] ranks x prefetch (the learner
        // refuses to run deterministic on another number of ranks than the config's).
        int lag = (int)(cfg->learner.ranks * cfg->learner.prefetch);
        s->det = detsched_new((int)cfg->actor.num_actors, (int)cfg->actor.max_pending_batches, lag,
                              (int)cfg->learner.batches_per_request);
        s->det_rows = (uint32_t)(cfg->learner.batch_size * cfg->learner.batches_per_request);
        if (s->sharded) {
            detsched_members(s->det, (int)cfg->replay.shard, (int)cfg->replay.shards);
        }
        size_t na = (size_t)cfg->actor.num_actors;
        s->det_act_frames = xcalloc(na, sizeof(uint64_t));
        s->det_act_episodes = xcalloc(na, sizeof(uint64_t));
        s->det_act_version = xcalloc(na, sizeof(uint64_t));
        log_info("deterministic run: inserts, samples and priority updates in a fixed order; "
                 "samples per insert exact ([replay] spi_tolerance %g not used)",
                 cfg->replay.spi_tolerance);
        if (store_inserted(s->store) > 0) {
            log_warn("deterministic run: this replay restored %llu transitions of an earlier "
                     "process; the schedule starts again, so the run diverges from one that was "
                     "never interrupted",
                     (unsigned long long)store_inserted(s->store));
        }
    }
    if (!listen) {
        return s;
    }
    if (s_open_sockets(s) != 0) {
        replay_server_destroy(&s);
        return NULL;
    }
    s->loop = loop_new();
    // Sample socket first: a turn with both readable serves the learner before the actors.
    loop_add_drain_reader(s->loop, s->sample_sock, s_reader_sample, s);
    loop_add_drain_reader(s->loop, s->insert_sock, s_reader_insert, s);
    security_attach(s->security, s->loop);
    loop_add_timer(s->loop, LIMITER_TICK_MS, s_timer_limiter, s);
    loop_add_timer(s->loop, cfg->replay.stats_interval_ms, s_timer_stats, s);
    loop_add_timer(s->loop, STOP_CHECK_MS, s_timer_stop, s);
    if (persist_attach(s->persist, s->loop) != 0) {
        replay_server_destroy(&s);
        return NULL;
    }
    // Rates start from the restored totals, not from zero.
    s->mark = (s_rate_mark){clock_now_ms(), store_inserted(s->store), s->counters.sampled_rows,
                            s->counters.updated};
    char shard[96] = "";
    if (s->sharded) {
        snprintf(shard, sizeof shard, " (shard %d of %lld: actors i with i mod %lld = %d)",
                 cfg->replay.shard, (long long)cfg->replay.shards, (long long)cfg->replay.shards,
                 cfg->replay.shard);
    }
    log_info("replay: capacity %lld (%.1f MiB)%s, obs_dim %d, alpha %g; inserts on %s, samples "
             "on %s",
             (long long)cfg->replay.capacity, need / 1048576.0, shard, cfg->env.obs_dim,
             cfg->replay.alpha, s->insert_ep, s->sample_ep);
    return s;
}

void replay_server_destroy(replay_server_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    replay_server_t *s = *self_p;
    loop_destroy(&s->loop);
    persist_destroy(&s->persist); // before zmq_ctx_term: the writer holds an inproc socket
    net_close(&s->insert_sock);
    net_close(&s->sample_sock);
    security_destroy(&s->security);
    if (s->ctx) {
        zmq_ctx_term(s->ctx); // after this no lent reply buffer is still held by libzmq
    }
    if (s->replies) {
        for (int i = 0; i < REPLY_RING; i++) {
            wire_buf_fini(&s->replies[i].buf);
        }
        free(s->replies);
        free(s->gap_since_ms);
    }
    acks_destroy(&s->acks);
    dedupe_fini(&s->dedupe);
    wire_decoder_destroy(&s->dec);
    wire_buf_fini(&s->out);
    store_destroy(&s->store);
    wire_rows_fini(&s->rows);
    free(s->pending);
    detsched_destroy(&s->det);
    free(s->det_act_frames);
    free(s->det_act_episodes);
    free(s->det_act_version);
    free(s);
    *self_p = NULL;
}

// ---------------------------------------------------------------------------------------
// Bad input: counted per kind and per peer, logged at most once per BAD_LOG_INTERVAL_MS.

static s_peer *s_peer_for(replay_server_t *s, const uint8_t *id, size_t len) {
    for (int i = 0; i < s->n_peers; i++) {
        if (s->peers[i].id_len == len && memcmp(s->peers[i].id, id, len) == 0) {
            return &s->peers[i];
        }
    }
    // A full table recycles the last entry: hostile peers cycling identities cannot grow it.
    int i = s->n_peers < PEERS_MAX ? s->n_peers++ : PEERS_MAX - 1;
    s_peer *p = &s->peers[i];
    p->id_len = len < ROUTING_ID_MAX ? len : ROUTING_ID_MAX;
    memcpy(p->id, id, p->id_len);
    p->bad = 0;
    return p;
}

static void s_peer_name(const uint8_t *id, size_t len, char *out, size_t n) {
    size_t o = 0;
    for (size_t i = 0; i < len && o + 3 < n; i++) {
        // Printable routing ids (actors set "actor-3") are shown as text, others as hex.
        if (id[i] >= 0x21 && id[i] < 0x7f) {
            out[o++] = (char)id[i];
        } else {
            o += (size_t)snprintf(out + o, n - o, "%02x", id[i]);
        }
    }
    out[o < n ? o : n - 1] = '\0';
}

// why: the reason for the log line; NULL takes the decoder's.
static void s_count_bad(replay_server_t *s, const char *where, const uint8_t *id, size_t id_len,
                        wire_msg_type kind, int err, const char *why) {
    s->bad[kind]++;
    s->bad_total++;
    s_peer *p = s_peer_for(s, id, id_len);
    p->bad++;
    char name[64];
    s_peer_name(id, id_len, name, sizeof name);
    log_every(&s->bad_log, BAD_LOG_INTERVAL_MS, LOG_WARN,
              "%s: dropped bad %s from peer %s (%s: %s); %llu bad from this peer, %llu in all",
              where, kind == WIRE_MSG_NONE ? "frame" : wire_msg_name(kind), name,
              apex_strerror(err), why ? why : wire_decoder_last_error(s->dec),
              (unsigned long long)p->bad, (unsigned long long)s->bad_total);
}

// ---------------------------------------------------------------------------------------
// Inserts

// Both sockets have drain readers (common/loop.h): every other operation on them (a send
// from a timer, the sample socket read between insert slices) must tell the loop, or it
// could block while libzmq holds input whose wake-up signal that operation consumed.
static void s_used(replay_server_t *s, void *sock) {
    if (s->loop) {
        loop_recheck(s->loop, sock);
    }
}

static void s_send_routed(replay_server_t *s, void *sock, const void *id, size_t id_len) {
    s_used(s, sock);
    // DONTWAIT: a peer that stopped reading must not stall the loop; its reply is dropped.
    if (net_send(sock, id, id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) != APEX_OK ||
        net_send(sock, s->out.data, s->out.len, ZMQ_DONTWAIT) != APEX_OK) {
        s->dropped_replies++;
    }
}

static void s_serve_pending(replay_server_t *s, int64_t now);
static void s_serve_watches(replay_server_t *s, int64_t now);

// Sends one InsertAck holding seqs[0..n): the send callback of the ack queues (acks.h),
// which decide when, and coalesce per peer.
static void s_send_ack(void *arg, const uint8_t *id, size_t id_len, uint32_t actor,
                       const uint64_t *seqs, uint32_t n) {
    replay_server_t *s = arg;
    wire_msg_t ack = {.type = WIRE_MSG_INSERT_ACK};
    ack.u.insert_ack = (wire_insert_ack_t){
        .actor_id = actor, .seq = seqs[0], .n_more = n - 1, .more = n > 1 ? seqs + 1 : NULL};
    wire_encode(&ack, &s->out);
    s_send_routed(s, s->insert_sock, id, id_len);
}

// A frame-mode batch as the store takes it (replay/store.h store_framed_t).
static store_framed_t s_framed(const wire_batch_t *b) {
    return (store_framed_t){.actor = b->actor_id,
                            .epoch = b->epoch,
                            .first_frame = b->first_frame,
                            .frame_count = b->frame_count,
                            .frames = b->frames,
                            .frame_prev = b->frame_prev,
                            .count = b->count,
                            .obs_frames = b->obs_frames,
                            .next_frames = b->next_frames,
                            .actions = b->action_dim ? (const void *)b->cont_actions : b->actions,
                            .rewards = b->rewards,
                            .discounts = b->discounts,
                            .prio = b->priorities,
                            .frame_sizes = b->frame_sizes};
}

// Applies a decoded batch: stores it unless (actor, epoch, seq) was stored before, and
// appends its raw message to the log. Shared by live inserts and the start-up log replay
// (raw == NULL: nothing is appended). Returns 1 when stored, 0 for a duplicate.
static int s_apply_batch(replay_server_t *s, const wire_batch_t *b, const void *raw,
                         size_t raw_len) {
    if (dedupe_seen(&s->dedupe, b->actor_id, b->epoch, b->seq)) {
        s->counters.duplicate_batches++;
        return 0;
    }
    uint32_t stored = b->count;
    if (b->frame_stack) { // frame mode (the decoder took it only if configured)
        store_framed_t f = s_framed(b);
        stored = store_add_framed(s->store, &f);
    } else {
        store_add(s->store, b->count, b->obs,
                  b->action_dim ? (const void *)b->cont_actions : b->actions, b->rewards,
                  b->discounts, b->next_obs, b->priorities);
    }
    dedupe_mark(&s->dedupe, b->actor_id, b->epoch, b->seq);
    limiter_inserted(&s->limiter, stored);
    if (raw) {
        persist_log(s->persist, DURABLE_REC_INSERT, raw, raw_len);
    }
    return 1;
}

static void s_apply_update(replay_server_t *s, const wire_priority_update_t *u, const void *raw,
                           size_t raw_len) {
    s->counters.updated += store_update(s->store, u->count, u->keys, u->priorities);
    if (raw) {
        persist_log(s->persist, DURABLE_REC_UPDATE, raw, raw_len);
    }
}

// A log record restored at start-up (persist_restore's callback): decoded and applied with
// the code of live traffic, nothing appended to the log.
static void s_restore_record(void *arg, int kind, const void *payload, size_t len) {
    replay_server_t *s = arg;
    wire_msg_t m;
    int rc = wire_decode(s->dec, payload, len, &m);
    if (rc == APEX_OK && kind == DURABLE_REC_INSERT && m.type == WIRE_MSG_TRANSITION_BATCH &&
        m.u.batch.actor_id < s->dedupe.n_actors) {
        s_apply_batch(s, &m.u.batch, NULL, 0);
    } else if (rc == APEX_OK && kind == DURABLE_REC_UPDATE && m.type == WIRE_MSG_PRIORITY_UPDATE) {
        s_apply_update(s, &m.u.priority_update, NULL, 0);
    } else {
        // Only possible if the config changed between runs (e.g. another [env] id).
        log_warn("log record of kind %d not applicable (%s); skipped", kind,
                 rc == APEX_OK ? "unexpected message" : wire_decoder_last_error(s->dec));
    }
}

// Frame order. A frame-mode batch names frames sent in the actor's earlier batches, so they
// must be stored first. Normally they are: one connection delivers in order. But after a
// replay restart the actor sends its new batches at once and re-sends the unacknowledged old
// ones only when their ack times out, so a batch can arrive before one it depends on. Such a
// batch (store_frame_gap) is held back: neither stored nor acknowledged, the actor sends it
// again after the old ones. Only if the gap outlives 4 ack timeouts (the batch in between
// will not come: the actor dropped it from a full window, or a non-durable restart lost it)
// is it stored anyway, its rows that name the lost frames refused (store_frames_missing).
// A duplicate (dup: stored before) is never held: it is acknowledged again.
static int s_frames_held_back(replay_server_t *s, const wire_batch_t *b, int dup, int64_t now_ms) {
    if (!b->frame_stack || dup) {
        return 0;
    }
    int64_t *since = &s->gap_since_ms[b->actor_id];
    if (!store_frame_gap(s->store, b->actor_id, b->epoch, b->first_frame)) {
        *since = 0;
        return 0;
    }
    if (*since == 0) {
        *since = now_ms;
    }
    if (now_ms - *since < 4 * s->cfg.actor.ack_timeout_ms) {
        s->frames_deferred++;
        log_every(&s->gap_log, BAD_LOG_INTERVAL_MS, LOG_INFO,
                  "actor %u's batch %llu arrived before frames it names (a re-send is due): "
                  "held back until they come; %llu held back so far",
                  b->actor_id, (unsigned long long)b->seq, (unsigned long long)s->frames_deferred);
        return 1;
    }
    *since = 0;
    s->frame_gaps_skipped++;
    log_warn("actor %u: frames before number %llu never came in %lld ms; its rows that name them "
             "are dropped (the actor dropped a batch from a full window, or the replay restarted "
             "without durability)",
             b->actor_id, (unsigned long long)b->first_frame,
             (long long)(4 * s->cfg.actor.ack_timeout_ms));
    return 0;
}

// ---------------------------------------------------------------------------------------
// Deterministic runs (replay/detsched.h: the order; here what is done in it)

static int s_can_sample(const replay_server_t *s, uint32_t n);
static int s_watch_due(const replay_server_t *s, const wire_sample_request_t *req);

static void s_det_diverges(replay_server_t *s, const char *what) {
    log_every(&s->det_log, BAD_LOG_INTERVAL_MS, LOG_WARN,
              "deterministic run: %s; the run diverges from here (a peer restarted?)", what);
}

// The schedule itself starts again or jumps (a learner or this replay restarted): once per
// restart, so always said, never hidden behind a rate-limited line about a stray batch.
static void s_det_restarts(const char *what) {
    log_warn("deterministic run: %s; the run diverges from here", what);
}

static void s_det_hold_insert(replay_server_t *s, const wire_batch_t *b, const uint8_t *idb,
                              size_t idn, const void *raw, size_t raw_len) {
    if (b->det_period == 0) {
        s_det_diverges(s, "a batch of an actor not in deterministic mode");
    }
    if (detsched_hold_insert(s->det, b, idb, idn, raw, raw_len) == DETSCHED_FULL) {
        // The actor waits for acks before it sends more than its window, so this is a peer
        // that does not: it sends the batch again after its ack timeout.
        s_det_diverges(s, "an actor sent more batches than its window");
    }
}

// A period's last batch, applied in its turn: its actor's totals and the returns of the
// period's episodes, in the schedule's order (what metrics.csv's actor columns are made of in
// a deterministic run).
static void s_det_actor_end(replay_server_t *s, const wire_batch_t *b) {
    uint32_t a = b->actor_id; // (below num_actors: the decoder checked)
    s->det_act_frames[a] = b->det_frames;
    s->det_act_episodes[a] = b->det_episodes;
    s->det_act_version[a] = b->weights_version;
    for (uint32_t i = 0; i < b->det_n_returns; i++) {
        s->det_ret[s->det_ret_next] = b->det_returns[i];
        s->det_ret_next = (s->det_ret_next + 1) % WIRE_DET_RETURNS_MAX;
        s->det_ret_n += s->det_ret_n < WIRE_DET_RETURNS_MAX;
    }
}

// The horizon moved: the actors' columns as of it (every member actor ended its periods
// below it, and nothing of a later period is in the totals yet: they are taken right after
// the batch that moved it). The returns are summed oldest first.
static void s_det_snapshot(replay_server_t *s) {
    uint64_t h = detsched_horizon(s->det);
    if (h == s->det_snap_h) {
        return;
    }
    s->det_snap_h = h;
    wire_replay_stats_t *o = &s->det_snap;
    o->det_env_frames = o->det_episodes = 0;
    o->det_version_min = UINT64_MAX;
    const apex_config_t *c = &s->cfg;
    for (int a = 0; a < (int)c->actor.num_actors; a++) {
        if (config_actor_shard(c, a) != c->replay.shard) {
            continue;
        }
        o->det_env_frames += s->det_act_frames[a];
        o->det_episodes += s->det_act_episodes[a];
        o->det_version_min = APEX_MIN(o->det_version_min, s->det_act_version[a]);
    }
    o->det_env_frames = APEX_MIN(o->det_env_frames, WIRE_FRAMES_MAX); // (peers' numbers)
    o->det_episodes = APEX_MIN(o->det_episodes, WIRE_FRAMES_MAX);
    double sum = 0.0;
    int first = (s->det_ret_next - s->det_ret_n + WIRE_DET_RETURNS_MAX) % WIRE_DET_RETURNS_MAX;
    for (int i = 0; i < s->det_ret_n; i++) {
        sum += (double)s->det_ret[(first + i) % WIRE_DET_RETURNS_MAX];
    }
    o->det_return_sum = isfinite(sum) ? sum : 0.0; // (100 floats near FLT_MAX: not finite)
    o->det_return_n = (uint32_t)s->det_ret_n;
}

// Applies held batches in their turn while the next request could not be served yet: a
// sample never lands between two inserts a timing decided.
static int s_det_apply_inserts(replay_server_t *s) {
    const void *raw;
    size_t len, idn;
    const uint8_t *idb;
    int applied = 0;
    while (!s_can_sample(s, s->det_rows) && detsched_peek_insert(s->det, &raw, &len, &idb, &idn)) {
        wire_msg_t m;
        int rc = wire_decode(s->dec, raw, len, &m);
        // It decoded when it came; if it no longer does, it is skipped (out of turn), said.
        wire_batch_t none = {0};
        const wire_batch_t *b = rc == APEX_OK ? &m.u.batch : &none;
        if (detsched_skip_stale_turn(s->det, b)) {
            s_det_diverges(s,
                           "an actor's batch of a later period before the end of its current one");
            s_det_snapshot(s);
            continue;
        }
        if (rc == APEX_OK) {
            s_apply_batch(s, b, raw, len);
            persist_ack(s->persist, idb, idn, b->actor_id, b->seq);
            applied++;
            if (b->det_period_end) {
                s_det_actor_end(s, b);
            }
        }
        if (detsched_pop_insert(s->det, b)) {
            s_det_diverges(s, rc == APEX_OK ? "a batch out of its period's turn"
                                            : "a held batch that no longer decodes");
        }
        s_det_snapshot(s);
    }
    return applied;
}

static void s_apply_update(replay_server_t *s, const wire_priority_update_t *u, const void *raw,
                           size_t raw_len);
static void s_serve_watches(replay_server_t *s, int64_t now);
static void s_reply(replay_server_t *s, const uint8_t *id, size_t id_len,
                    const wire_sample_request_t *req, wire_sample_status status);

// Serves requests in their order while the inserts, the limiter and the updates due allow,
// applying inserts up to the point each is served; then answers the horizon watches.
static void s_det_progress(replay_server_t *s) {
    int applied = 0;
    for (;;) {
        applied += s_det_apply_inserts(s);
        const uint8_t *id;
        size_t id_len;
        const wire_sample_request_t *req;
        if (!detsched_next_request(s->det, &id, &id_len, &req) ||
            !s_can_sample(s, req->batch_size * req->batches) || !detsched_updates_ready(s->det)) {
            break;
        }
        const void *raw;
        size_t len;
        while (detsched_take_update(s->det, &raw, &len)) {
            wire_msg_t m;
            if (wire_decode(s->dec, raw, len, &m) == APEX_OK) {
                s_apply_update(s, &m.u.priority_update, raw, len);
            }
        }
        s_reply(s, id, id_len, req, WIRE_SAMPLE_OK);
        detsched_served(s->det);
    }
    if (applied) {
        acks_send_ready(s->acks);
    }
    s_serve_watches(s, -1); // a request served may have let the batches in that end a horizon
}

static void s_handle_insert(replay_server_t *s, const uint8_t *idb, size_t idn, const void *raw,
                            size_t raw_len, int64_t now_ms) {
    wire_msg_t m;
    int rc = wire_decode(s->dec, raw, raw_len, &m);
    const char *why = NULL;
    char buf[96];
    if (rc == APEX_OK && m.type != WIRE_MSG_TRANSITION_BATCH) {
        rc = APEX_EPROTO; // a valid message of a kind that does not belong on this socket
        why = "wrong message kind for the insert socket";
    } else if (rc == APEX_OK &&
               config_actor_shard(&s->cfg, (int)m.u.batch.actor_id) != s->cfg.replay.shard) {
        // Its exactly-once marks and acks live on its own shard: storing it here too could
        // store one batch twice across the run.
        rc = APEX_EINVAL;
        snprintf(buf, sizeof buf, "actor %u inserts into shard %d, this is shard %d",
                 m.u.batch.actor_id, config_actor_shard(&s->cfg, (int)m.u.batch.actor_id),
                 s->cfg.replay.shard);
        why = buf;
    }
    char fwhy[160];
    const wire_batch_t *b = &m.u.batch;
    int dup = rc == APEX_OK && dedupe_seen(&s->dedupe, b->actor_id, b->epoch, b->seq);
    if (rc == APEX_OK && b->frame_codec && !dup) {
        // Compressed frames: each must decompress to a frame before anything is stored (the
        // decoder checked sizes only). A duplicate was checked when it was stored.
        store_framed_t f = s_framed(b);
        if (store_check_framed(s->store, &f, fwhy, sizeof fwhy) != APEX_OK) {
            rc = APEX_EINVAL;
            why = fwhy;
        }
    }
    if (rc != APEX_OK) {
        s_count_bad(s, "insert", idb, idn, m.type, rc, why);
        return;
    }
    if (s->det && !dup) {
        s_det_hold_insert(s, b, idb, idn, raw, raw_len);
        return; // applied in its turn (s_det_progress), acknowledged then
    }
    if (s_frames_held_back(s, b, dup, now_ms)) {
        return; // not acknowledged: the actor sends it again
    }
    s_apply_batch(s, &m.u.batch, raw, raw_len);
    persist_ack(s->persist, idb, idn, m.u.batch.actor_id, m.u.batch.seq); // duplicates too
}

static void s_handle_insert_now(replay_server_t *s, const uint8_t *idb, size_t idn, const void *raw,
                                size_t raw_len) {
    s_handle_insert(s, idb, idn, raw, raw_len, clock_now_ms());
}

// Handles up to `max` [routing id][payload] messages waiting on a ROUTER, counting
// malformed framing as bad. Returns how many were taken off the socket: fewer than `max`
// means the socket is empty.
typedef void (*s_routed_fn)(replay_server_t *s, const uint8_t *id, size_t id_len,
                            const void *payload, size_t len);

static int s_drain_router(replay_server_t *s, void *sock, const char *where, s_routed_fn fn,
                          int max) {
    zmq_msg_t id, payload;
    int n = 0;
    for (; n < max; n++) {
        zmq_msg_init(&id);
        zmq_msg_init(&payload);
        int extra;
        int got = net_recv_routed(sock, &id, &payload, &extra);
        if (got == 1) {
            if (extra) {
                s_count_bad(s, where, zmq_msg_data(&id), zmq_msg_size(&id), WIRE_MSG_NONE,
                            APEX_EPROTO, "extra frames");
            } else {
                fn(s, zmq_msg_data(&id), zmq_msg_size(&id), zmq_msg_data(&payload),
                   zmq_msg_size(&payload));
            }
        }
        zmq_msg_close(&id);
        zmq_msg_close(&payload);
        if (got != 1) {
            if (got == 0 && s->loop) {
                loop_drained(s->loop, sock); // EAGAIN: the fd is a reliable signal again
            }
            break;
        }
    }
    return n;
}

static void s_handle_sample_sock(replay_server_t *s, const uint8_t *idb, size_t idn,
                                 const void *payload, size_t len);

// Scheduling (docs/architecture.md, "Replay server"): the learner's SampleRequests are
// latency-critical (it keeps only a few in flight and waits on each), while an actor has a
// window of unacknowledged batches and its own buffer, so an insert handled a few
// microseconds later costs it nothing. Hence:
//   - the sample socket is registered first, so a loop turn serves it before inserts;
//   - inserts are taken INSERT_SLICE at a time, and between two slices every message
//     waiting on the sample socket is handled (up to SAMPLE_BURST) and held requests are
//     re-checked: a request waits behind at most one slice, not behind MAX_DRAIN inserts;
//   - the sample socket is read at most SAMPLE_BURST messages at a time, after which a
//     waiting insert slice runs: a flood of requests or updates cannot starve the actors.
// tests/check_replay_server.c checks both directions over real sockets.
// Returns LOOP_DRAINED when the sample socket was left empty.
static int s_serve_sample_sock(replay_server_t *s) {
    int got = s_drain_router(s, s->sample_sock, "sample", s_handle_sample_sock, SAMPLE_BURST);
    return got < SAMPLE_BURST ? LOOP_DRAINED : 0;
}

static int s_reader_insert(loop_t *loop, void *sock, void *arg) {
    (void)loop;
    replay_server_t *s = arg;
    // At most MAX_DRAIN inserts per call, so that timers (limiter, log sync) still run.
    for (int done = 0; done < MAX_DRAIN; done += INSERT_SLICE) {
        int got = s_drain_router(s, sock, "insert", s_handle_insert_now, INSERT_SLICE);
        acks_send_ready(s->acks); // the acks of this slice, one message per peer
        s_serve_pending(s, clock_now_ms());
        s_serve_watches(s, -1);
        if (got < INSERT_SLICE) {
            return LOOP_DRAINED; // the last receive on the insert socket said EAGAIN
        }
        s_serve_sample_sock(s);
        s_used(s, s->sample_sock);
    }
    return 0;
}

// ---------------------------------------------------------------------------------------
// Sampling, the rate limiter, priority updates

static int s_can_sample(const replay_server_t *s, uint32_t n) {
    // A shard: min_size_to_sample is the run's, checked by the learner over every shard; the
    // shard only needs something to sample. A deterministic run's shards are each asked every
    // place (no learner-side check is tied to the schedule): each holds its actors' share.
    if (store_live_size(s->store) < s->min_size) {
        return 0;
    }
    return limiter_can_sample(&s->limiter, n);
}

void replay_server_stats(const replay_server_t *s, wire_replay_stats_t *o) {
    *o = (wire_replay_stats_t){
        .size = store_live_size(s->store), // in frame mode, rows whose frames are all held
        .capacity = store_capacity(s->store),
        .inserted = store_inserted(s->store),
        .sampled = s->counters.sampled_rows,
        .updated = s->counters.updated,
        .stale_updates = store_stale_updates(s->store),
        .bad_messages = s->bad_total,
        .limiter_waits = s->counters.limiter_waits,
        .duplicate_batches = s->counters.duplicate_batches,
        .total_priority = store_total_priority(s->store),
        .min_priority = store_min_priority(s->store),
        .shard = (uint32_t)s->cfg.replay.shard,
        .shards = (uint32_t)s->cfg.replay.shards,
    };
    if (s->det) {
        o->det_horizon = detsched_horizon(s->det);
        o->det_served = (uint64_t)detsched_served_at(s->det, o->det_horizon);
        o->det_env_frames = s->det_snap.det_env_frames;
        o->det_episodes = s->det_snap.det_episodes;
        o->det_return_sum = s->det_snap.det_return_sum;
        o->det_return_n = s->det_snap.det_return_n;
        o->det_version_min = s->det_snap_h ? s->det_snap.det_version_min : 0;
    }
}

// libzmq's free callback for a lent reply buffer (runs on its I/O thread, or on ours when
// the message is dropped): the release pairs with the acquire in s_send_reply.
static void s_reply_released(void *data, void *hint) {
    (void)data;
    atomic_store_explicit(&((s_reply_buf *)hint)->in_use, 0, memory_order_release);
}

// Encodes m and sends it routed to id. A SampleReply is ~28 KB at 512 rows: encoding it
// straight into a ring buffer that libzmq then owns until its I/O thread has written it
// saves zmq_send's copy (and its malloc of that size) on every reply. When every ring
// buffer is still in flight (a learner that does not read), the reply is copied instead.
static void s_send_reply(replay_server_t *s, const wire_msg_t *m, const uint8_t *id,
                         size_t id_len) {
    s_reply_buf *rb = NULL;
    for (int k = 0; k < REPLY_RING && !rb; k++) {
        s_reply_buf *c = &s->replies[(s->reply_next + k) % REPLY_RING];
        if (!atomic_load_explicit(&c->in_use, memory_order_acquire)) {
            rb = c;
            s->reply_next = (s->reply_next + k + 1) % REPLY_RING;
        }
    }
    if (s->reply_hook) {
        s->reply_hook(s->reply_hook_arg, m);
    }
    zmq_msg_t msg;
    if (rb) {
        wire_encode(m, &rb->buf);
        atomic_store_explicit(&rb->in_use, 1, memory_order_relaxed); // ours until released
        if (zmq_msg_init_data(&msg, rb->buf.data, rb->buf.len, s_reply_released, rb) != 0) {
            atomic_store_explicit(&rb->in_use, 0, memory_order_relaxed); // (out of memory)
            rb = NULL;
        }
    }
    if (!rb) {
        s->reply_copies++;
        wire_encode(m, &s->out);
        s_send_routed(s, s->sample_sock, id, id_len);
        return;
    }
    s_used(s, s->sample_sock);
    if (net_send(s->sample_sock, id, id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) != APEX_OK ||
        zmq_msg_send(&msg, s->sample_sock, ZMQ_DONTWAIT) < 0) {
        s->dropped_replies++;
        zmq_msg_close(&msg); // not sent: releases the buffer through the callback
    }
}

// Rows a request asks for (decoded: batches >= 1, and the rows within max_batch, the size of
// the buffers).
static uint32_t s_request_rows(const wire_sample_request_t *req) {
    return req->batch_size * req->batches;
}

static void s_reply(replay_server_t *s, const uint8_t *id, size_t id_len,
                    const wire_sample_request_t *req, wire_sample_status status) {
    wire_msg_t m = {.type = WIRE_MSG_SAMPLE_REPLY};
    wire_sample_reply_t *r = &m.u.sample_reply;
    r->id = req->id;
    r->status = status;
    if (status == WIRE_SAMPLE_OK) {
        // Batch after batch, each stratified over the whole priority mass on its own: the
        // same rows as `batches` requests served back to back.
        uint32_t b = req->batch_size, n = s_request_rows(req);
        size_t ob = (size_t)b * store_obs_dim(s->store) * store_obs_elem_bytes(s->store);
        int rc = APEX_OK;
        for (uint32_t k = 0; rc == APEX_OK && k * b < n; k++) {
            size_t r0 = (size_t)k * b;
            // min_priority: a sharded learner's minimum over every shard (0 = this store's).
            wire_rows_t *w = &s->rows;
            rc = store_sample_min(s->store, &s->rng, b, req->beta, req->min_priority, w->keys + r0,
                                  w->is_weights + r0, w->obs + k * ob, wire_rows_actions(w, r0),
                                  w->rewards + r0, w->discounts + r0, w->next_obs + k * ob);
        }
        if (rc != APEX_OK) {
            // The decoder and the store test the same bounds (wire.h), so this is not expected;
            // if they ever part again, the peer is refused and counted, the server goes on.
            s_count_bad(s, "sample", id, id_len, WIRE_MSG_SAMPLE_REQUEST, rc,
                        "the store refused the request");
            s_reply(s, id, id_len, req, WIRE_SAMPLE_REFUSED);
            return;
        }
        *r = (wire_sample_reply_t){.id = req->id,
                                   .status = WIRE_SAMPLE_OK,
                                   .count = n,
                                   .obs_dim = store_obs_dim(s->store),
                                   .obs_dtype = (uint32_t)s->cfg.env.obs_dtype,
                                   .keys = s->rows.keys,
                                   .is_weights = s->rows.is_weights,
                                   .obs = s->rows.obs,
                                   .actions = s->rows.actions,
                                   .action_dim = s->rows.action_dim,
                                   .cont_actions = s->rows.cont_actions,
                                   .rewards = s->rows.rewards,
                                   .discounts = s->rows.discounts,
                                   .next_obs = s->rows.next_obs};
        s->counters.sampled_rows += n;
        limiter_sampled(&s->limiter, n);
    } else if (req->stats_only) {
        s->stats_replies++; // (NOT_READY: no rows)
    } else if (status == WIRE_SAMPLE_NOT_READY) {
        s->not_ready++;
    } else {
        s->refused++;
    }
    replay_server_stats(s, &r->stats);
    if (s->det && req->det_horizon && s_watch_due(s, req)) {
        // A horizon watch: the pair for the horizon asked (it may have moved on since).
        int64_t served = detsched_served_at(s->det, req->det_horizon);
        if (served >= 0) {
            r->stats.det_horizon = req->det_horizon;
            r->stats.det_served = (uint64_t)served;
        }
    }
    s_send_reply(s, &m, id, id_len);
}

// Answers held requests in arrival order while the limiter allows, and expires those past
// their deadline with NOT_READY, so that no request is ever left unanswered.
static void s_serve_pending(replay_server_t *s, int64_t now) {
    if (s->det) {
        s_det_progress(s); // (held requests wait in detsched, never expire)
    }
    while (s->pending_len > 0) {
        s_pending *p = &s->pending[s->pending_head];
        if (s_can_sample(s, s_request_rows(&p->req))) {
            s_reply(s, p->id, p->id_len, &p->req, WIRE_SAMPLE_OK);
        } else if (now >= p->deadline_ms) {
            s_reply(s, p->id, p->id_len, &p->req, WIRE_SAMPLE_NOT_READY);
        } else {
            break; // FIFO: later requests wait behind the first
        }
        s->pending_head = (s->pending_head + 1) % PENDING_MAX;
        s->pending_len--;
    }
}

// Answers the held stats requests whose insert count has come, or whose deadline has passed
// (now < 0: only the former). Order does not matter: each is one learner's watch on this shard.
// Whether a stats request's condition holds: the inserts, or in a deterministic run the
// horizon, it waits for.
static int s_watch_due(const replay_server_t *s, const wire_sample_request_t *req) {
    if (req->det_horizon) {
        return s->det && detsched_horizon(s->det) >= req->det_horizon;
    }
    return store_inserted(s->store) >= req->stats_after;
}

static void s_serve_watches(replay_server_t *s, int64_t now) {
    for (int i = 0; i < s->n_watches;) {
        s_watch *w = &s->watches[i];
        if (!s_watch_due(s, &w->req) && (now < 0 || now < w->deadline_ms)) {
            i++;
            continue;
        }
        if (!s_watch_due(s, &w->req) && w->req.det_horizon && detsched_diverged(s->det)) {
            // A schedule that restarted keeps only liveness: the batches that would reach this
            // horizon may have died with a previous process (acknowledged to actors that wait
            // for its weights and will not send them again), so at the deadline it is jumped
            // to. One horizon per [replay] sample_timeout_ms at most: actors that do send
            // their batches get there first.
            s_det_restarts("a horizon not reached in a restarted schedule: the turn jumps there");
            detsched_fast_forward(s->det, w->req.det_horizon);
        }
        s_reply(s, w->id, w->id_len, &w->req, WIRE_SAMPLE_NOT_READY);
        *w = s->watches[--s->n_watches];
    }
}

// A sharded learner's stats request: at once, or held until the inserts it waits for arrive
// (its rate limiter needs them) or its deadline. A full table answers at once: the learner
// then asks again after its request tick, which bounds the traffic.
static void s_handle_stats_request(replay_server_t *s, const uint8_t *id, size_t id_len,
                                   const wire_sample_request_t *req) {
    // A horizon past the next one is only asked of a replay restarted under a running
    // schedule (its actors wait for that horizon's weights): the turn jumps there.
    if (s->det && req->det_horizon > detsched_horizon(s->det) + 1) {
        s_det_restarts("a horizon asked past the next one (this replay restarted): the turn "
                       "jumps there");
        detsched_fast_forward(s->det, req->det_horizon);
    }
    if (s_watch_due(s, req) || s->n_watches == WATCH_MAX || id_len > ROUTING_ID_MAX) {
        s_reply(s, id, id_len, req, WIRE_SAMPLE_NOT_READY);
        return;
    }
    s_watch *w = &s->watches[s->n_watches++];
    memcpy(w->id, id, id_len);
    w->id_len = id_len;
    w->req = *req;
    w->deadline_ms = clock_now_ms() + s->cfg.replay.sample_timeout_ms;
}

// A deterministic run's request waits for its turn. One of a learner that is not deterministic
// is refused (its samples would land anywhere); one before the schedule's next is a restarted
// learner's, whose schedule then starts again (divergence, said).
static void s_det_hold_request(replay_server_t *s, const uint8_t *id, size_t id_len,
                               const wire_sample_request_t *req) {
    if (req->det_index == 0) {
        s_det_diverges(s, "a sample request without det_index (a learner not in deterministic "
                          "mode) refused");
        s_reply(s, id, id_len, req, WIRE_SAMPLE_REFUSED);
        return;
    }
    if (req->det_index < detsched_next_index(s->det) &&
        req->det_index >= detsched_base_index(s->det) && WIRE_DET_ATTEMPT(req->id) > 0) {
        // A learner asking again for a request it timed out on, which was served meanwhile:
        // it takes that reply (learner/prefetch.c matches by place), so this one is dropped.
        // (Below where this schedule restarted, a place was never served here: a re-ask of one
        // of those restarts the schedule there, below.)
        s->det_reasks++;
        return;
    }
    if (detsched_hold_request(s->det, id, id_len, req) != 0) {
        // Before the schedule's next (a restarted learner, whose first requests are first
        // asks) or far past it (a restarted replay): the schedule follows the learner's.
        s_det_restarts(req->det_index < detsched_next_index(s->det)
                           ? "a sample request of an earlier turn: the learner's schedule "
                             "starts again"
                           : "a sample request far ahead of the schedule (this replay "
                             "restarted): it follows the learner's from here");
        detsched_restart(s->det, req->det_index);
        if (detsched_hold_request(s->det, id, id_len, req) != 0) {
            s_reply(s, id, id_len, req, WIRE_SAMPLE_REFUSED); // (a routing id too long)
            return;
        }
    }
    s_det_progress(s);
}

static void s_handle_sample_request(replay_server_t *s, const uint8_t *id, size_t id_len,
                                    const wire_sample_request_t *req) {
    if (req->stats_only) {
        s_handle_stats_request(s, id, id_len, req);
        return;
    }
    if (req->batch_size > (uint32_t)s->cfg.replay.capacity) {
        s_reply(s, id, id_len, req, WIRE_SAMPLE_REFUSED);
        return;
    }
    if (s->det) {
        s_det_hold_request(s, id, id_len, req);
        return;
    }
    if (s->pending_len == 0 && s_can_sample(s, s_request_rows(req))) {
        s_reply(s, id, id_len, req, WIRE_SAMPLE_OK);
        return;
    }
    s->counters.limiter_waits++;
    if (s->pending_len == PENDING_MAX || id_len > ROUTING_ID_MAX) {
        s_reply(s, id, id_len, req, WIRE_SAMPLE_NOT_READY);
        return;
    }
    s_pending *p = &s->pending[(s->pending_head + s->pending_len) % PENDING_MAX];
    memcpy(p->id, id, id_len);
    p->id_len = id_len;
    p->req = *req;
    p->deadline_ms = clock_now_ms() + s->cfg.replay.sample_timeout_ms;
    s->pending_len++;
}

static void s_handle_sample_sock(replay_server_t *s, const uint8_t *idb, size_t idn,
                                 const void *payload, size_t len) {
    wire_msg_t m;
    int rc = wire_decode(s->dec, payload, len, &m);
    if (rc == APEX_OK && m.type == WIRE_MSG_SAMPLE_REQUEST) {
        s_handle_sample_request(s, idb, idn, &m.u.sample_request);
    } else if (rc == APEX_OK && m.type == WIRE_MSG_PRIORITY_UPDATE && s->det &&
               m.u.priority_update.det_index) {
        // Applied in its turn, before the request lag after its own is served.
        if (detsched_hold_update(s->det, m.u.priority_update.det_index, payload, len) != 0) {
            s_det_diverges(s, "a priority update of no request in the schedule applied at once");
            s_apply_update(s, &m.u.priority_update, payload, len);
        }
        s_det_progress(s);
    } else if (rc == APEX_OK && m.type == WIRE_MSG_PRIORITY_UPDATE) {
        s_apply_update(s, &m.u.priority_update, payload, len);
    } else {
        s_count_bad(s, "sample", idb, idn, m.type, rc == APEX_OK ? APEX_EPROTO : rc,
                    rc == APEX_OK ? "wrong message kind for the sample socket" : NULL);
    }
}

static int s_reader_sample(loop_t *loop, void *sock, void *arg) {
    (void)loop;
    (void)sock;
    return s_serve_sample_sock(arg);
}

// What the loop does with one message and the timers at a given time, without sockets
// (server_int.h: the handler fuzzer and tests drive a server made with listen = 0).
void replay_server_handle(replay_server_t *s, replay_sock which, const void *id, size_t id_len,
                          const void *payload, size_t len, int64_t now_ms) {
    if (which == REPLAY_SOCK_INSERT) {
        s_handle_insert(s, id, id_len, payload, len, now_ms);
        acks_send_ready(s->acks);
        s_serve_pending(s, now_ms);
        s_serve_watches(s, -1);
    } else {
        s_handle_sample_sock(s, id, id_len, payload, len);
    }
}

void replay_server_tick(replay_server_t *s, int64_t now_ms) {
    s_serve_pending(s, now_ms);
    s_serve_watches(s, now_ms);
}

// ---------------------------------------------------------------------------------------
// Dump: the restored contents as CSV (apex-replay --dump), for operators and tests.

// <path>.marks: per actor seen, its epoch, 1 + its highest stored seq (hwm), and the seqs of
// the dedupe window below hwm that are NOT stored ("missing"; at most DUMP_MISSING_MAX
// listed). An acknowledged batch is never re-sent, so one missing here that its actor saw
// acknowledged was lost; tests/smoke/shard_kill.sh checks that against the actors.
#define DUMP_MISSING_MAX 1000
static int s_dump_marks(const replay_server_t *s, const char *path) {
    char mp[CONFIG_STR_LEN + 512];
    snprintf(mp, sizeof mp, "%s.marks", path);
    FILE *f = fopen(mp, "w");
    if (!f) {
        log_error("cannot write %s", mp);
        return -1;
    }
    fprintf(f, "actor,epoch,hwm,window_first,missing_count,missing\n");
    for (uint32_t a = 0; a < s->dedupe.n_actors; a++) {
        const dedupe_actor_t *d = &s->dedupe.actors[a];
        if (d->hwm == 0) {
            continue;
        }
        uint64_t first = d->hwm > DEDUPE_WINDOW ? d->hwm - DEDUPE_WINDOW : 0, missing = 0;
        for (uint64_t q = first; q < d->hwm; q++) {
            missing += !dedupe_seen(&s->dedupe, a, d->epoch, q);
        }
        fprintf(f, "%u,%llu,%llu,%llu,%llu,", a, (unsigned long long)d->epoch,
                (unsigned long long)d->hwm, (unsigned long long)first, (unsigned long long)missing);
        for (uint64_t q = first, n = 0; q < d->hwm && n < DUMP_MISSING_MAX; q++) {
            if (!dedupe_seen(&s->dedupe, a, d->epoch, q)) {
                fprintf(f, "%s%llu", n++ ? " " : "", (unsigned long long)q);
            }
        }
        fputc('\n', f);
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        log_error("writing %s failed", mp);
        return -1;
    }
    return 0;
}

int replay_server_dump(const replay_server_t *s, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) {
        log_error("cannot write %s", path);
        return -1;
    }
    uint32_t O = store_obs_dim(s->store), D = store_action_dim(s->store);
    // Discrete runs keep one "action" column; continuous ones get action0..action{D-1}.
    fprintf(f, "slot,generation,priority_alpha");
    if (D == 0) {
        fprintf(f, ",action");
    }
    for (uint32_t j = 0; j < D; j++) {
        fprintf(f, ",action%u", j);
    }
    fprintf(f, ",reward,discount");
    for (uint32_t j = 0; j < O; j++) {
        fprintf(f, ",obs%u", j);
    }
    for (uint32_t j = 0; j < O; j++) {
        fprintf(f, ",next_obs%u", j);
    }
    fputc('\n', f);
    // Both observations of a row, as bytes of the run's dtype; printed as numbers.
    int u8 = store_obs_elem_bytes(s->store) == 1;
    size_t ob = (size_t)O * store_obs_elem_bytes(s->store);
    unsigned char *obs = xmalloc(2 * ob), *next = obs + ob;
    float *act = xmalloc(wire_action_bytes(D));
    float r, d;
    for (uint32_t slot = 0; slot < store_size(s->store); slot++) {
        if (store_read_slot(s->store, slot, obs, act, &r, &d, next) != 0) {
            continue; // frame mode: a row whose frames are gone
        }
        fprintf(f, "%u,%u,%.9g", slot, store_slot_generation(s->store, slot),
                store_slot_priority(s->store, slot));
        if (D == 0) {
            int32_t a;
            memcpy(&a, act, sizeof a);
            fprintf(f, ",%d", a);
        }
        for (uint32_t j = 0; j < D; j++) {
            fprintf(f, ",%.9g", (double)act[j]);
        }
        fprintf(f, ",%.9g,%.9g", (double)r, (double)d);
        for (uint32_t j = 0; j < 2 * O; j++) {
            if (u8) {
                fprintf(f, ",%u", (unsigned)obs[j]);
            } else {
                float v;
                memcpy(&v, obs + (size_t)j * 4, 4);
                fprintf(f, ",%.9g", (double)v);
            }
        }
        fputc('\n', f);
    }
    free(act);
    free(obs);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        log_error("writing %s failed", path);
        return -1;
    }
    return s_dump_marks(s, path);
}

// ---------------------------------------------------------------------------------------
// Timers and the public loop API

static int s_timer_limiter(loop_t *loop, void *arg) {
    (void)loop;
    s_serve_pending(arg, clock_now_ms());
    s_serve_watches(arg, clock_now_ms());
    return 0;
}

static int s_timer_stats(loop_t *loop, void *arg) {
    (void)loop;
    replay_server_t *s = arg;
    int64_t now = clock_now_ms();
    double dt = (double)(now - s->mark.at_ms) / 1000.0;
    wire_replay_stats_t st;
    replay_server_stats(s, &st);
    if (dt > 0) {
        log_info("size %llu/%llu  inserts/s %.0f  samples/s %.0f  updates/s %.0f  total_p %.4g  "
                 "stale %llu  bad %llu  limiter_waits %llu  not_ready %llu  duplicates %llu%s",
                 (unsigned long long)st.size, (unsigned long long)st.capacity,
                 (double)(st.inserted - s->mark.inserted) / dt,
                 (double)(st.sampled - s->mark.sampled) / dt,
                 (double)(st.updated - s->mark.updated) / dt, st.total_priority,
                 (unsigned long long)st.stale_updates, (unsigned long long)st.bad_messages,
                 (unsigned long long)st.limiter_waits, (unsigned long long)s->not_ready,
                 (unsigned long long)st.duplicate_batches,
                 persist_degraded(s->persist) ? "  DURABILITY OFF (disk)" : "");
        if (store_frame_stack(s->store)) {
            log_info(
                "frames %llu inserted (ring of %u)  rows refused for missing frames %llu  "
                "rows evicted with their frames %llu  batches held back for order %llu  "
                "gaps given up on %llu",
                (unsigned long long)store_frames_inserted(s->store), store_frame_capacity(s->store),
                (unsigned long long)store_frames_missing(s->store),
                (unsigned long long)store_frame_evicted(s->store),
                (unsigned long long)s->frames_deferred, (unsigned long long)s->frame_gaps_skipped);
        }
    }
    s->mark = (s_rate_mark){now, st.inserted, st.sampled, st.updated};
    return 0;
}

static int s_timer_stop(loop_t *loop, void *arg) {
    (void)loop;
    replay_server_t *s = arg;
    return atomic_load(&s->stop_requested) ? -1 : 0;
}

int replay_server_run(replay_server_t *self) {
    int rc = loop_run(self->loop);
    persist_shutdown(self->persist);
    wire_replay_stats_t st;
    replay_server_stats(self, &st);
    char frames[200] = "";
    if (store_frame_stack(self->store)) {
        snprintf(frames, sizeof frames,
                 ", %llu frames inserted, %llu rows refused for missing frames, %llu gaps given "
                 "up on",
                 (unsigned long long)store_frames_inserted(self->store),
                 (unsigned long long)store_frames_missing(self->store),
                 (unsigned long long)self->frame_gaps_skipped);
    }
    if (self->det) {
        // The schedule's counters: how much waited for its turn, and how often a peer left it.
        detsched_stats_t d;
        detsched_stats(self->det, &d);
        log_info("deterministic schedule: horizon %llu, %llu batches held for their turn, %llu "
                 "re-sends of held ones dropped, %llu out of turn, %llu updates held, %llu "
                 "re-asks of served requests dropped",
                 (unsigned long long)detsched_horizon(self->det),
                 (unsigned long long)d.held_inserts, (unsigned long long)d.duplicates,
                 (unsigned long long)d.out_of_turn, (unsigned long long)d.held_updates,
                 (unsigned long long)self->det_reasks);
    }
    log_info("stopping: %llu transitions held, %llu inserted, %llu sampled, %llu bad messages%s%s",
             (unsigned long long)st.size, (unsigned long long)st.inserted,
             (unsigned long long)st.sampled, (unsigned long long)st.bad_messages, frames,
             persist_acks_without_durability(self->persist)
                 ? " (some inserts were acknowledged while the disk was failing)"
                 : "");
    return rc;
}

void replay_server_stop(replay_server_t *self) { atomic_store(&self->stop_requested, 1); }

const char *replay_server_insert_endpoint(const replay_server_t *self) { return self->insert_ep; }
const char *replay_server_sample_endpoint(const replay_server_t *self) { return self->sample_ep; }

uint64_t replay_server_bad_count(const replay_server_t *self, wire_msg_type kind) {
    return (unsigned)kind < WIRE_MSG_COUNT_ ? self->bad[kind] : 0;
}

uint64_t replay_server_denied(const replay_server_t *self) {
    return self->security ? security_denied(self->security) : 0;
}
