# beck - build, set-up, tests, demo and benchmarks.
#   make            build bin/beck (installs missing build packages first: vendor/install build)
#   make deps       every package the suite needs, and the pinned Apache Kafka from Maven
#   make test       the whole suite, ending with "N passed, N failed"
#   make test SAN=1 the same under AddressSanitizer + UndefinedBehaviorSanitizer
#   make demo       an example topology end to end on the embedded dev broker
#   make bench      every benchmark in scripts/bench
#   make fuzz       every fuzz target in fuzz/ for FUZZ_SECONDS each (clang, libFuzzer)
PREFIX ?= /usr/local
SAN ?= 0

ifeq ($(FUZZ),1)
  # the fuzz targets' build (make fuzz): clang, instrumented for libFuzzer
  VARIANT := fuzz
  CC := clang
  OPT := -O1
  SANFLAGS := -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
else ifeq ($(SAN),1)
  VARIANT := san
  OPT := -O1
  SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else
  VARIANT := rel
  OPT := -O2
  SANFLAGS :=
endif

B := build/$(VARIANT)
# libmicrohttpd serves queries (runtime/query), libcurl routes them between nodes.
PKGS := rdkafka luajit rocksdb libssh2 libxxhash libmicrohttpd libcurl
CFLAGS ?= $(OPT) -g
ALL_CFLAGS := $(CFLAGS) -std=gnu11 -Wall -Wextra -pthread -MMD -MP $(SANFLAGS) \
              -Iruntime -I$(B) $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
# Lua reaches the bk_ffi_* functions through FFI (dlsym on the binary): export those and
# nothing else (runtime/exports).
ALL_LDFLAGS := $(LDFLAGS) -pthread -Wl,--dynamic-list=runtime/exports $(SANFLAGS)
LDLIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lm -ldl

# Fuzz targets (fuzz/README.md): each built with a main that replays inputs (fuzz/replay.c),
# with this build's compiler and flags, for the spec that replays the corpora; and with
# libFuzzer by make fuzz.
FUZZ_TARGETS := $(sort $(patsubst fuzz/%.c,%,$(filter-out fuzz/replay.c,$(wildcard fuzz/*.c))))
REPLAYS := $(patsubst %,$(B)/replay/%,$(FUZZ_TARGETS))
FUZZ_SECONDS ?= 30

# runtime/ has a folder per layer (runtime/README.md); includes name the layer: "base/log.h".
SRCS := $(wildcard runtime/*/*.c)
OBJS := $(patsubst runtime/%.c,$(B)/%.o,$(SRCS)) $(B)/embed.o
# The FFI entry points that only beck's own specs call (runtime/base/ffi_spec.h), each in a
# file that includes it: linked into bin/beck-spec, the binary `make test` runs the suite in,
# and kept out of bin/beck, which ships.
SPEC_SRCS := $(shell grep -l '^\#include "base/ffi_spec.h"' $(SRCS))
SPEC_OBJS := $(patsubst runtime/%.c,$(B)/%.o,$(SPEC_SRCS))
BECK_OBJS := $(filter-out $(SPEC_OBJS),$(OBJS))
LUA_SRCS := $(shell find lua -name '*.lua' | sort)
# lua/beck/init.lua -> beck, lua/beck/internal/x.lua -> beck.internal.x
lua_mod = $(subst /,.,$(patsubst %/init,%,$(patsubst lua/%.lua,%,$(1))))
EMBED_ARGS := $(foreach f,$(LUA_SRCS),$(call lua_mod,$(f))=$(f)) beck.internal.cdef=$(B)/cdef.lua \
              beck.internal.cdef_spec=$(B)/cdef_spec.lua

.PHONY: all build lib deps deps-build kafka bench-run test demo bench install clean format fuzz fuzz-build

# `make` (and demo, install) installs only what building and running beck needs; the suite's
# packages and the Apache Kafka jars come with `make deps`, which `make test` runs.
all: deps-build
	@$(MAKE) --no-print-directory build

deps-build:
	@vendor/install build

deps:
	@vendor/install all

kafka: deps

build: $(B)/beck $(B)/beck-spec $(REPLAYS)
	@mkdir -p bin build/replay
	@cmp -s $(B)/beck bin/beck || { cp $(B)/beck bin/beck.tmp && mv -f bin/beck.tmp bin/beck; }
	@cmp -s $(B)/beck-spec bin/beck-spec || \
	    { cp $(B)/beck-spec bin/beck-spec.tmp && mv -f bin/beck-spec.tmp bin/beck-spec; }
	@for t in $(FUZZ_TARGETS); do cmp -s $(B)/replay/$$t build/replay/$$t || \
	    cp $(B)/replay/$$t build/replay/$$t; done

$(B)/beck: $(BECK_OBJS) runtime/exports
	$(CC) $(ALL_LDFLAGS) -o $@ $(BECK_OBJS) $(LDLIBS)

$(B)/beck-spec: $(OBJS) runtime/exports
	$(CC) $(ALL_LDFLAGS) -o $@ $(OBJS) $(LDLIBS)

# The runtime without its commands, for benchmarks that drive its modules directly
# (scripts/bench/assign, scripts/bench/settle).
lib: $(B)/libbeck.a

$(B)/libbeck.a: $(filter-out $(B)/cmd/%,$(OBJS))
	$(AR) rcs $@ $^

$(B)/replay/%: fuzz/%.c fuzz/replay.c $(B)/libbeck.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ fuzz/$*.c fuzz/replay.c $(B)/libbeck.a $(LDLIBS) -pthread

fuzz: deps
	@$(MAKE) --no-print-directory FUZZ=1 fuzz-build
	@scripts/fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

fuzz-build: $(patsubst %,$(B)/fuzzer/%,$(FUZZ_TARGETS))

$(B)/fuzzer/%: fuzz/%.c $(B)/libbeck.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fsanitize=fuzzer -o $@ fuzz/$*.c $(B)/libbeck.a $(LDLIBS) -pthread

$(B)/%.o: runtime/%.c | $(B)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(B)/embed.o: $(B)/embed.c
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

# The FFI declarations Lua uses are cut out of runtime/base/ffi.h (beck's Lua) and
# runtime/base/ffi_spec.h (specs only), never copied by hand.
$(B)/cdef.lua: runtime/base/ffi.h | $(B)
	@{ echo 'return [==['; sed -n '/BK_FFI_CDEF_BEGIN/,/BK_FFI_CDEF_END/p' $< | sed '1d;$$d'; echo ']==]'; } > $@

$(B)/cdef_spec.lua: runtime/base/ffi_spec.h | $(B)
	@{ echo 'return [==['; sed -n '/BK_FFI_CDEF_BEGIN/,/BK_FFI_CDEF_END/p' $< | sed '1d;$$d'; echo ']==]'; } > $@

$(B)/embed.c: $(B)/embed-tool $(LUA_SRCS) $(B)/cdef.lua $(B)/cdef_spec.lua Makefile
	$(B)/embed-tool $@ $(EMBED_ARGS) || { rm -f $@; exit 1; }

$(B)/embed-tool: tools/embed.c | $(B)
	$(CC) -O1 -Wall -Wextra -o $@ $<

$(B):
	@mkdir -p $(B)

test: deps
	@$(MAKE) --no-print-directory build
	@scripts/test

demo: all
	@scripts/demo

bench: deps
	@$(MAKE) --no-print-directory build
	@$(MAKE) --no-print-directory bench-run

bench-run:
	@for b in scripts/bench/* scripts/bench/*/run; do [ -x "$$b" ] && [ -f "$$b" ] && "$$b"; done; true

install: all
	install -D -m 755 bin/beck $(DESTDIR)$(PREFIX)/bin/beck

clean:
	rm -rf build bin

format:
	clang-format -i runtime/*/*.c runtime/*/*.h tools/*.c

# The status page is part of the binary (.incbin): its object follows the HTML.
$(B)/query/query_page.o: runtime/query/page.html

-include $(OBJS:.o=.d)
