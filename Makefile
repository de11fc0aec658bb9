# apex: one non-recursive Makefile (STYLE S24). All output goes under $(BUILD) and $(BIN).
#   make            build bin/apex-actor, bin/apex-replay, bin/apex-learner, bin/apex-eval
#   make test       unit tests (Check) then smoke tests of the real daemons
#   make asan       full rebuild in build-asan/ with ASan+UBSan, then the whole test suite
#   make bench      benchmarks side by side with ../shared/peers (prints BENCH lines)
#   make run        a local cluster learning configs/cartpole.ini
#   make clean
# Dependencies (Debian packages) are installed by scripts/install-deps.sh on first use.

CC ?= cc
CFLAGS ?= -O2 -g
LDFLAGS ?=
BUILD ?= build
BIN ?= bin
CONFIG ?= configs/cartpole.ini

PKGS := libzmq libprotobuf-c openblas check inih liblz4 libzstd
# Recursive (=) so that pkg-config runs only after the deps stamp has installed it.
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS))
PKG_LIBS = $(shell pkg-config --libs $(PKGS))

# Project flags are appended, so a user's CFLAGS never removes warnings (Redis REDIS_CFLAGS).
APEX_CFLAGS = -std=c11 -D_DEFAULT_SOURCE -D_POSIX_C_SOURCE=200809L \
  -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
  -Icommon -Imodel -Ienvs -I$(BUILD)/proto -I$(BUILD)/gen $(PKG_CFLAGS) -MMD -MP
ALL_CFLAGS = $(APEX_CFLAGS) $(CFLAGS)
LIBS = $(PKG_LIBS) -lpthread -lm
# MuJoCo (Debian's libmujoco-dev: <mujoco/mujoco.h> in the default include path, no
# pkg-config file) for the MuJoCo tasks of the env library: only what links libapexenv
# (apex-actor, apex-eval, the tests and benches) links it; apex-replay and apex-learner never
# step an environment and stay free of it.
MUJOCO_LIBS ?= -lmujoco
ENV_LIBS = $(MUJOCO_LIBS)
# MPI (OpenMPI's C bindings) for the learner group only: learner/group.c is the one file that
# includes mpi.h, and only what links the learner modules links libmpi; the actor, replay
# server and evaluator stay free of it.
MPI_CFLAGS = $(shell pkg-config --cflags ompi-c)
MPI_LIBS = $(shell pkg-config --libs ompi-c)

# ---- sources ---------------------------------------------------------------------------
PROTOS := apex tensorboard
PROTO_C := $(PROTOS:%=$(BUILD)/proto/%.pb-c.c)
PROTO_H := $(PROTOS:%=$(BUILD)/proto/%.pb-c.h)
# envs/envinfo.c is the table of env ids and their dimensions, data only: it goes into
# libapexcommon (config.c checks [env] against it), so that the replay server and the learner
# know an id's dimensions without linking any environment. The rest of envs/ (the envs, the
# Python bridge) is libapexenv, which only apex-actor, apex-eval, the tests and benches link.
ENVINFO_SRC := envs/envinfo.c
COMMON_SRC := $(wildcard common/*.c) $(ENVINFO_SRC)
MODEL_SRC := $(wildcard model/*.c)
ENV_SRC := $(filter-out $(ENVINFO_SRC),$(wildcard envs/*.c))
ACTOR_MOD := $(filter-out %main.c,$(wildcard actor/*.c))
REPLAY_MOD := $(filter-out %main.c,$(wildcard replay/*.c))
LEARNER_MOD := $(filter-out %main.c,$(wildcard learner/*.c))
TEST_SRC := $(wildcard tests/check_*.c)
# bench/bench_common.c is what the benchmarks share: linked into each, no binary of its own.
BENCH_LIB := bench/bench_common.c
BENCH_SRC := $(filter-out $(BENCH_LIB),$(wildcard bench/*.c))

obj = $(patsubst %.c,$(BUILD)/%.o,$(1))
COMMON_OBJ := $(call obj,$(COMMON_SRC)) $(PROTO_C:.c=.o)
MODEL_OBJ := $(call obj,$(MODEL_SRC))
ENV_OBJ := $(call obj,$(ENV_SRC))
ACTOR_OBJ := $(call obj,$(ACTOR_MOD))
REPLAY_OBJ := $(call obj,$(REPLAY_MOD))
LEARNER_OBJ := $(call obj,$(LEARNER_MOD))
LIBCOMMON := $(BUILD)/libapexcommon.a
# The network (layers, optimizers, checkpoints, BLAS glue): actor, learner and evaluator
# link it; the replay server never does.
LIBMODEL := $(BUILD)/libapexmodel.a
# The environments (classic control, MinAtar, MuJoCo, the Python bridge): actor, evaluator,
# tests and benches link it (with $(ENV_LIBS)); the replay server and the learner never do.
LIBENV := $(BUILD)/libapexenv.a

# A binary is built when its main file exists (so every commit builds, daemon by daemon).
MAIN_SRC := $(wildcard actor/main.c actor/eval_main.c actor/keygen_main.c actor/relay_main.c \
  replay/main.c learner/main.c)
BINARIES := $(patsubst actor/main,$(BIN)/apex-actor,$(patsubst actor/eval_main,$(BIN)/apex-eval,\
  $(patsubst replay/main,$(BIN)/apex-replay,$(patsubst learner/main,$(BIN)/apex-learner,\
  $(patsubst actor/keygen_main,$(BIN)/apex-keygen,$(patsubst actor/relay_main,$(BIN)/apex-relay,\
  $(MAIN_SRC:.c=)))))))
CHECK_BIN := $(BUILD)/check_apex
BENCH_BINS := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC))
DEPS_STAMP := $(BUILD)/.deps-ok

.PHONY: test-build all test unit smoke asan bench learn-bench learn-minatar chaos run clean deps format format-check
all: $(BINARIES)

# ---- dependencies ----------------------------------------------------------------------
$(DEPS_STAMP): scripts/install-deps.sh
	@scripts/install-deps.sh
	@mkdir -p $(@D) && touch $@
deps: $(DEPS_STAMP)

# ---- protobuf-c: generated at build time, never committed -------------------------------
# A pattern rule with two targets makes both from one protoc-c run; .SECONDARY keeps make
# from deleting them as intermediate files of that pattern.
.SECONDARY: $(PROTO_C) $(PROTO_H)
$(BUILD)/proto/%.pb-c.c $(BUILD)/proto/%.pb-c.h: proto/%.proto | $(DEPS_STAMP)
	@mkdir -p $(BUILD)/proto
	protoc-c --proto_path=proto --c_out=$(BUILD)/proto $*.proto

$(BUILD)/proto/%.pb-c.o: $(BUILD)/proto/%.pb-c.c
	@mkdir -p $(@D)
	$(CC) $(filter-out -Wmissing-prototypes -Wshadow,$(ALL_CFLAGS)) -c $< -o $@

# ---- objects ---------------------------------------------------------------------------
# Every object waits for the generated header, so the first build needs no manual step.
$(BUILD)/%.o: %.c | $(DEPS_STAMP) $(PROTO_H) $(BUILD)/gen/suites.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/learner/group.o: ALL_CFLAGS += $(MPI_CFLAGS)
$(BUILD)/tests/%.o: ALL_CFLAGS += -Iactor -Ireplay -Ilearner
$(BUILD)/bench/%.o: ALL_CFLAGS += -Iactor -Ireplay -Ilearner

$(LIBCOMMON): $(COMMON_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^
$(LIBMODEL): $(MODEL_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^
$(LIBENV): $(ENV_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

# ---- binaries --------------------------------------------------------------------------
$(BIN)/apex-actor: $(BUILD)/actor/main.o $(ACTOR_OBJ) $(LIBENV) $(LIBMODEL) $(LIBCOMMON)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ $(ENV_LIBS) $(LIBS) -o $@
$(BIN)/apex-eval: $(BUILD)/actor/eval_main.o $(ACTOR_OBJ) $(LIBENV) $(LIBMODEL) $(LIBCOMMON)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ $(ENV_LIBS) $(LIBS) -o $@
# The relay needs only the weights' size from the model library (nn_run_weights_params).
$(BIN)/apex-relay: $(BUILD)/actor/relay_main.o $(BUILD)/actor/relay.o $(LIBMODEL) $(LIBCOMMON)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LIBS) -o $@
$(BIN)/apex-keygen: $(BUILD)/actor/keygen_main.o $(LIBCOMMON)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LIBS) -o $@
$(BIN)/apex-replay: $(BUILD)/replay/main.o $(REPLAY_OBJ) $(LIBCOMMON)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LIBS) -o $@
$(BIN)/apex-learner: $(BUILD)/learner/main.o $(LEARNER_OBJ) $(LIBMODEL) $(LIBCOMMON)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LIBS) $(MPI_LIBS) -o $@

# ---- tests -----------------------------------------------------------------------------
# The suite list is generated from the "Suite *name_suite(void)" definitions in
# tests/check_*.c, so adding a test file needs no edit anywhere else.
$(BUILD)/gen/suites.h: $(TEST_SRC)
	@mkdir -p $(@D)
	@{ echo '#define APEX_SUITES(X) \'; \
	   sed -n 's/^Suite \*\([a-z0-9_]*_suite\)(void).*/    X(\1) \\/p' $(sort $(TEST_SRC)); \
	   echo; } > $@.tmp && mv $@.tmp $@

$(CHECK_BIN): $(call obj,$(TEST_SRC)) $(ACTOR_OBJ) $(REPLAY_OBJ) $(LEARNER_OBJ) $(LIBENV) $(LIBMODEL) \
  $(LIBCOMMON)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ $(ENV_LIBS) $(LIBS) $(MPI_LIBS) -o $@

# One rank of a learner group on fixed batches: check_group runs it under mpirun.
ZERO_RANKS := $(BUILD)/tests/zero_ranks
$(ZERO_RANKS): $(BUILD)/tests/zero_ranks.o $(LEARNER_OBJ) $(LIBMODEL) $(LIBCOMMON)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LIBS) $(MPI_LIBS) -o $@

# The suites run in UNIT_JOBS shards side by side (APEX_CHECK_SHARD, tests/check_main.c),
# one per core by default, each taking the next suite as it finishes one (APEX_CHECK_QUEUE);
# each shard's output is printed whole once all have finished.
UNIT_JOBS ?= $(shell nproc 2>/dev/null || echo 1)
unit: $(CHECK_BIN) $(BINARIES) $(ZERO_RANKS)
	@set -e; n=$(UNIT_JOBS); rc=0; pids=""; q=$(abspath $(BUILD))/unit.queue; rm -f $$q; \
	for i in $$(seq 0 $$((n - 1))); do \
	  CK_DEFAULT_TIMEOUT=$${CK_DEFAULT_TIMEOUT:-60} APEX_BIN=$(abspath $(BIN)) \
	    APEX_ZERO_RANKS=$(abspath $(ZERO_RANKS)) APEX_CHECK_SHARD=$$i/$$n APEX_CHECK_QUEUE=$$q \
	    $(CHECK_BIN) >$(BUILD)/unit.$$i.log 2>&1 & pids="$$pids $$!"; \
	done; \
	for p in $$pids; do wait $$p || rc=1; done; \
	for i in $$(seq 0 $$((n - 1))); do cat $(BUILD)/unit.$$i.log; done; \
	for i in $$(seq 0 $$((n - 1))); do grep -h '^all suites' $(BUILD)/unit.$$i.log || true; done; \
	exit $$rc

# Scripts marked "# smoke: slow" (long learning runs, namespaces, floods) are skipped when
# SMOKE_FAST=1, which the sanitizer run sets: they exercise timing, not new code paths.
smoke: $(BINARIES)
	@set -e; for t in $(filter-out tests/smoke/lib.sh,$(wildcard tests/smoke/*.sh)); do \
	  if [ "$${SMOKE_FAST:-0}" = 1 ] && grep -q '^# smoke: slow' $$t; then \
	    echo "== $$t: skipped (SMOKE_FAST)"; continue; fi; \
	  echo "== $$t"; t0=$$(date +%s); APEX_BIN=$(abspath $(BIN)) bash $$t; \
	  echo "== $$t: $$(( $$(date +%s) - t0 )) s"; done; \
	echo "smoke: all passed"

# The benchmarks are built (not run) too, so that a change of an interface they use cannot
# leave `make bench` broken unnoticed (bench_actor.c once was). Everything is built first,
# with one job per core (CI's budget is 30 minutes on 2 cores; the ASan tree alone is ~200
# compilations), then the unit tests and the smoke tests run one after the other.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
test-build: $(CHECK_BIN) $(BINARIES) $(ZERO_RANKS) $(BENCH_BINS)

test: format-check
	@$(MAKE) --no-print-directory -j$(JOBS) test-build
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory smoke

# ASan + UBSan: a separate tree so the normal build stays untouched (Redis SANITIZER=).
SAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
asan: $(DEPS_STAMP)
	# Under ASan freed memory sits in quarantine (a smaller one keeps the smoke tests' memory
	# bounds meaningful) and everything runs several times slower: the hostile test's memory
	# bound and the weights flood's are scaled for that.
	# tests/lsan.supp: leaks that are not apex's (ASan's own thread set-up), before the
	# user's own LSAN_OPTIONS; the MPI tests append tests/lsan-mpi.supp, OpenMPI's too.
	SMOKE_FAST=1 HOSTILE_MEM_MB=1024 WEIGHTS_FLOOD_EXTRA_KB=262144 \
	ASAN_OPTIONS=$${ASAN_OPTIONS:-quarantine_size_mb=64} \
	LSAN_OPTIONS="suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0$${LSAN_OPTIONS:+:$$LSAN_OPTIONS}" \
	$(MAKE) --no-print-directory BUILD=build-asan BIN=build-asan/bin \
	  CFLAGS="$(SAN_FLAGS)" LDFLAGS="-fsanitize=address,undefined" test

# ---- benchmarks ------------------------------------------------------------------------
$(BUILD)/bench/%: $(BUILD)/bench/%.o $(call obj,$(BENCH_LIB)) $(ACTOR_OBJ) $(REPLAY_OBJ) $(LEARNER_OBJ) \
  $(LIBENV) $(LIBMODEL) $(LIBCOMMON)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ $(ENV_LIBS) $(LIBS) $(MPI_LIBS) -o $@

bench: $(BENCH_BINS) $(BINARIES)
	BUILD=$(BUILD) BIN=$(BIN) bash bench/run.sh

# Wall-clock seconds and frames to solve each environment, 5 seeds, with the PyTorch peer.
learn-bench: $(BINARIES)
	BIN=$(BIN) bash bench/learn_bench.sh

# Issue #14's MinAtar learning table: each game for 30 min (returns at 10/20/30 min), and the
# PyTorch peer on Breakout when MINATAR_SRC names a MinAtar checkout. ~3 h with the peer.
learn-minatar: $(BINARIES)
	BIN=$(BIN) bash bench/learn_minatar.sh

# CartPole learning while replay, learner and actors are SIGKILLed (scripts/chaos), ~2 min.
# (The greedy median >= 400 across a replay kill is asserted by make test's
# tests/smoke/replay_kill_learning.sh.)
chaos: $(BINARIES)
	CHAOS_MODE=full APEX_BIN=$(abspath $(BIN)) bash tests/smoke/chaos.sh

# ---- run -------------------------------------------------------------------------------
run: $(BINARIES)
	scripts/apex-local $(CONFIG)

# ---- formatting ------------------------------------------------------------------------
# Pinned to Debian's clang-format-14: another version formats some constructs differently,
# and the check must mean the same thing on every machine. Generated fixtures are exempt.
CLANG_FORMAT ?= clang-format-14
FORMAT_SRC = $(filter-out tests/fixtures/%,$(shell git ls-files --cached --others --exclude-standard '*.c' '*.h' 2>/dev/null))
format: $(DEPS_STAMP)
	$(CLANG_FORMAT) -i $(FORMAT_SRC)
format-check: $(DEPS_STAMP)
	@bad=$$(for f in $(FORMAT_SRC); do $(CLANG_FORMAT) "$$f" | cmp -s - "$$f" || echo "$$f"; done); \
	if [ -n "$$bad" ]; then echo "format-check: not formatted (run make format):"; \
	  echo "$$bad" | sed 's/^/  /'; exit 1; fi; echo "format-check: $(words $(FORMAT_SRC)) files ok"

# libFuzzer harnesses: make fuzz, make fuzz-smoke (fuzz/README.md).
-include fuzz/fuzz.mk

clean: fuzz-clean
	rm -rf build build-asan bin

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
