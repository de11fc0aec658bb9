# fuzz/fuzz.mk: libFuzzer harnesses, included by the main Makefile (`-include fuzz/fuzz.mk`).
#   make fuzz            build, then run every harness for FUZZ_SECONDS (default 60) each
#   make fuzz-smoke      the same for 10 s each (CI)
#   make fuzz-build      only build the harnesses (build-fuzz/fuzz_<target>)
#   make fuzz-corpus     regenerate fuzz/corpus/ from wire_encode, configs/*.ini, the
#                        Python bridge's header and region layout (gen_pywire_corpus) and
#                        the handler harnesses' programs (gen_programs.py)
#   make fuzz-clean
# Everything is built by clang in $(FUZZ_BUILD), apart from the normal build: the common
# sources (and, for fuzz_pywire, envs/pywire.c and envs/pylocal.c) with
# -fsanitize=fuzzer-no-link,address,undefined (coverage plus sanitizers), each harness
# linked with -fsanitize=fuzzer,address,undefined. The corpus and regressions are
# also replayed under gcc by tests/check_fuzz_regressions.c in `make test`.
# Not instrumented: libprotobuf-c and libinih, which come from the system packages.

# Included anywhere after the main Makefile's variables, it must not steal the default goal.
FUZZ_SAVED_GOAL := $(.DEFAULT_GOAL)

FUZZ_BUILD ?= build-fuzz
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := wire config pywire replay learner

FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS = -std=c11 -D_DEFAULT_SOURCE -D_POSIX_C_SOURCE=200809L \
  -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
  -Icommon -Ienvs -I$(FUZZ_BUILD)/proto $(PKG_CFLAGS) -O1 -g $(FUZZ_SAN) -MMD -MP
FUZZ_LIBS = $(shell pkg-config --libs libprotobuf-c inih liblz4 libzstd) -lm

# Only what wire.c and config.c need, so a clang-only problem elsewhere in common/ cannot
# break the fuzz build (check the rest with `make fuzz-clang-check`).
FUZZ_COMMON_SRC := common/apex.c common/xalloc.c common/log.c common/clock.c \
  envs/envinfo.c common/parse.c common/config.c common/config_schema.c \
  common/config_check.c common/config_shard.c common/wire.c common/fcodec.c
FUZZ_COMMON_OBJ := $(patsubst %.c,$(FUZZ_BUILD)/%.o,$(FUZZ_COMMON_SRC)) \
  $(FUZZ_BUILD)/proto/apex.pb-c.o
# The Python bridge's wire and the local transport's frame table (what a worker sends).
FUZZ_PYWIRE_OBJ := $(FUZZ_BUILD)/envs/pywire.o $(FUZZ_BUILD)/envs/pylocal.o
# The handler harnesses drive a daemon's modules: the whole of common/ (sockets, loop,
# security), the replay server's modules, and the learner's that take peer input.
FUZZ_DAEMON_SRC := $(COMMON_SRC) $(REPLAY_MOD) learner/prefetch.c learner/shards.c \
  learner/metrics.c
FUZZ_DAEMON_OBJ := $(patsubst %.c,$(FUZZ_BUILD)/%.o,$(FUZZ_DAEMON_SRC)) \
  $(FUZZ_BUILD)/proto/apex.pb-c.o $(FUZZ_BUILD)/proto/tensorboard.pb-c.o
FUZZ_DAEMON_LIBS = $(shell pkg-config --libs libzmq) -lpthread
FUZZ_BINS := $(patsubst %,$(FUZZ_BUILD)/fuzz_%,$(FUZZ_TARGETS))
# Objects reached only through pattern rules; keep them for incremental rebuilds.
.SECONDARY: $(FUZZ_COMMON_OBJ) $(FUZZ_PYWIRE_OBJ) $(FUZZ_DAEMON_OBJ) \
  $(patsubst %,$(FUZZ_BUILD)/fuzz/fuzz_%.o,$(FUZZ_TARGETS))

.PHONY: fuzz fuzz-smoke fuzz-build fuzz-corpus fuzz-clean fuzz-clang-check
fuzz-build: $(FUZZ_BINS)

# clang and its libFuzzer runtime are only needed here: installed on first use.
$(FUZZ_BUILD)/.deps-ok: scripts/install-deps.sh
	@APEX_FUZZ_DEPS=1 scripts/install-deps.sh
	@mkdir -p $(@D) && touch $@

fuzz: $(FUZZ_BINS)
	FUZZ_BUILD=$(FUZZ_BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) bash fuzz/run.sh $(FUZZ_TARGETS)

fuzz-smoke: $(FUZZ_BINS)
	FUZZ_BUILD=$(FUZZ_BUILD) FUZZ_SECONDS=10 bash fuzz/run.sh $(FUZZ_TARGETS)

$(FUZZ_BUILD)/proto/apex.pb-c.c $(FUZZ_BUILD)/proto/apex.pb-c.h &: proto/apex.proto | $(DEPS_STAMP) $(FUZZ_BUILD)/.deps-ok
	@mkdir -p $(FUZZ_BUILD)/proto
	protoc-c --proto_path=proto --c_out=$(FUZZ_BUILD)/proto apex.proto

$(FUZZ_BUILD)/proto/apex.pb-c.o: $(FUZZ_BUILD)/proto/apex.pb-c.c
	$(FUZZ_CC) $(filter-out -Wmissing-prototypes -Wshadow,$(FUZZ_CFLAGS)) \
	  -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_BUILD)/common/%.o: common/%.c | $(DEPS_STAMP) $(FUZZ_BUILD)/proto/apex.pb-c.h \
  $(FUZZ_BUILD)/proto/tensorboard.pb-c.h
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_BUILD)/proto/tensorboard.pb-c.o: $(FUZZ_BUILD)/proto/tensorboard.pb-c.h
	$(FUZZ_CC) $(filter-out -Wmissing-prototypes -Wshadow,$(FUZZ_CFLAGS)) \
	  -fsanitize=fuzzer-no-link -c $(FUZZ_BUILD)/proto/tensorboard.pb-c.c -o $@

$(FUZZ_BUILD)/replay/%.o $(FUZZ_BUILD)/learner/%.o: FUZZ_CFLAGS += -Ireplay -Ilearner -Imodel
$(FUZZ_BUILD)/replay/%.o: replay/%.c | $(DEPS_STAMP) $(FUZZ_BUILD)/proto/apex.pb-c.h
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
$(FUZZ_BUILD)/learner/%.o: learner/%.c | $(DEPS_STAMP) $(FUZZ_BUILD)/proto/apex.pb-c.h \
  $(FUZZ_BUILD)/proto/tensorboard.pb-c.h
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_BUILD)/envs/%.o: envs/%.c | $(DEPS_STAMP) $(FUZZ_BUILD)/proto/apex.pb-c.h
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_BUILD)/fuzz/%.o: fuzz/%.c | $(DEPS_STAMP) $(FUZZ_BUILD)/proto/apex.pb-c.h
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_BUILD)/fuzz/fuzz_replay.o $(FUZZ_BUILD)/fuzz/fuzz_learner.o: \
  FUZZ_CFLAGS += -Ireplay -Ilearner -Imodel
$(FUZZ_BUILD)/fuzz_wire $(FUZZ_BUILD)/fuzz_config: $(FUZZ_BUILD)/fuzz_%: \
  $(FUZZ_BUILD)/fuzz/fuzz_%.o $(FUZZ_COMMON_OBJ)
	$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer $^ $(FUZZ_LIBS) -o $@
$(FUZZ_BUILD)/fuzz_pywire: $(FUZZ_BUILD)/fuzz/fuzz_pywire.o $(FUZZ_COMMON_OBJ) $(FUZZ_PYWIRE_OBJ)
	$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer $^ $(FUZZ_LIBS) -o $@
$(FUZZ_BUILD)/fuzz_replay $(FUZZ_BUILD)/fuzz_learner: $(FUZZ_BUILD)/fuzz_%: \
  $(FUZZ_BUILD)/fuzz/fuzz_%.o $(FUZZ_DAEMON_OBJ)
	$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer $^ $(FUZZ_LIBS) $(FUZZ_DAEMON_LIBS) -o $@

# Every common/ source through clang -Werror (no sanitizers, no link): the fuzz build uses
# only some of them, and a clang warning anywhere in common/ should be seen early.
# common/tbevents.c includes the second generated header.
$(FUZZ_BUILD)/proto/tensorboard.pb-c.h: proto/tensorboard.proto | $(DEPS_STAMP)
	@mkdir -p $(FUZZ_BUILD)/proto
	protoc-c --proto_path=proto --c_out=$(FUZZ_BUILD)/proto tensorboard.proto

fuzz-clang-check: | $(DEPS_STAMP) $(FUZZ_BUILD)/proto/apex.pb-c.h \
  $(FUZZ_BUILD)/proto/tensorboard.pb-c.h
	@set -e; for f in $(COMMON_SRC); do \
	  $(FUZZ_CC) $(filter-out -MMD -MP $(FUZZ_SAN),$(FUZZ_CFLAGS)) -fsyntax-only $$f; done; \
	echo "fuzz-clang-check: common/ is clean under $(FUZZ_CC)"

# ---- seed corpus ------------------------------------------------------------------------
# gen_corpus and gen_pywire_corpus are ordinary programs over the normal build's libraries.
$(BUILD)/fuzz/gen_corpus: $(BUILD)/fuzz/gen_corpus.o $(LIBCOMMON)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LIBS) -o $@
$(BUILD)/fuzz/gen_pywire_corpus: $(BUILD)/fuzz/gen_pywire_corpus.o $(LIBENV) $(LIBCOMMON)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ $(ENV_LIBS) $(LIBS) -o $@

fuzz-corpus: $(BUILD)/fuzz/gen_corpus $(BUILD)/fuzz/gen_pywire_corpus
	@mkdir -p fuzz/corpus/wire fuzz/corpus/config fuzz/replay/wire fuzz/corpus/pywire
	$(BUILD)/fuzz/gen_corpus fuzz/corpus/wire fuzz/replay/wire
	$(BUILD)/fuzz/gen_pywire_corpus fuzz/corpus/pywire
	cp configs/*.ini fuzz/corpus/config/
	python3 fuzz/gen_programs.py fuzz

fuzz-clean:
	rm -rf $(FUZZ_BUILD)
clean: fuzz-clean

-include $(wildcard $(FUZZ_BUILD)/*/*.d)
.DEFAULT_GOAL := $(FUZZ_SAVED_GOAL)
