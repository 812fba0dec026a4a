# The front door:
#   make train   install what is missing (Fashion-MNIST too), build in Release, train the ViT
#                (examples/vit_fmnist --attn mhla: 7 epochs, or fewer where 7 do not fit in 5 minutes)
#                and print its test accuracy
#   make test    the same setup, build everything, run the whole test suite (ctest)
#   make lm      char-level GPT with causal MHLA on the King James Bible (prepared once), then a sample
#   make mqar    associative recall (Zoology's MQAR): softmax vs linear vs MHLA at 4, 8, 16 key-value pairs
#   make bench   the kernel benchmarks (bench/) and the examples' training-step benchmarks
#   make bench-peer  the examples' training steps next to PyTorch's on the same models, eager and under
#                torch.compile, compile seconds apart (bench/peer/; needs `pip install torch`, says so
#                and stops cleanly without it; PEER_ARGS="--precision bf16" times linea with bf16 dot
#                products, PEER_ARGS=--no-compile skips torch.compile for a quick run)
#   make lab     attention_lab: rank and entropy of softmax / linear / MHLA maps, heatmaps and plots
#                in runs/lab/ (docs/attention.md), each kind's from a ViT and a char-GPT of its own
#                (runs/vit_fmnist_<attn>, runs/char_lm_<attn> if present, else trained briefly)
#   make build   setup + configure + build everything;  make clean  removes the build dir
#   make train-dist NP=2   make train's ViT, data-parallel over NP processes (mpirun, THREADS each)
#   make sanitize  the whole test suite built with ASan + UBSan (g++, CUDA off) in build-sanitize/;
#                make sanitize-core only the file-reading and shape families (what .ci/run runs)
#   make fuzz    clang + libFuzzer: each file parser's fuzzer (tests/fuzz) for FUZZ_RUNS executions
#                (default 1000000) in build-fuzz/; crashes land in build-fuzz/tests/fuzz/<parser>-*
#   make fuzz-short  the same fuzzers for 20 s each (ctest -L fuzz), as .ci/run does
#   make clang   build everything with clang++ (CUDA off) in build-clang/
#   make fault-inject  a small char_lm run interrupted 10 times each by kill -9, SIGTERM and SIGINT,
#                resumed after each, checked bit-identical to the run left alone (tests/fault_inject.sh;
#                FAULTS=n sets the count)
# BUILD_DIR (default build) and JOBS (default 2) can be overridden: make test JOBS=8
# LINEA_CPU_ISA=avx2 (or generic) runs any target on that instruction set's kernels (tensor/cpu_isa.h)
# make train SEED=n picks the seed (default 1); TRAIN_ARGS adds vit_fmnist flags, for example
#   make train TIME_BUDGET=0 TRAIN_ARGS="--patch 4 --block 4 --epochs 60 --augment on --dim 96"   the long recipe (92.28%, 1h17m)
# make train TIME_BUDGET=s trains the most whole epochs (at most --epochs, 7 by default) that fit in
# s seconds, timed on this machine first (default 300; 0 trains every epoch, however long it takes)

BUILD_DIR ?= build
JOBS ?= 2
SEED ?= 1
TIME_BUDGET ?= 300
FAULTS ?= 10
MAKEFLAGS += --no-print-directory

# train and lm start a fresh run each time: --overwrite on replaces the previous run's files in
# runs/<program>_<attn>/ (the programs refuse a non-empty --out without it).

# Setup is idempotent and fast when everything is installed, so every entry point runs it.
# make build and make test (and CI) install everything and compile the CUDA backend wherever nvcc
# is found. The jobs (train, lm, mqar, lab, bench) install only what they need (no MPI, no qemu)
# and compile the CUDA backend only where it can run: a GPU is visible, or the build directory has
# it already, or LINEA_CUDA=ON is given. A fresh CPU machine then compiles no CUDA before make train.
NVCC := $(shell command -v nvcc || ls /usr/local/cuda/bin/nvcc 2> /dev/null)
GPU := $(shell nvidia-smi -L > /dev/null 2>&1 && echo ON)
CACHED_CUDA := $(shell sed -n 's/^LINEA_CUDA:BOOL=//p' $(BUILD_DIR)/CMakeCache.txt 2> /dev/null)
LINEA_CUDA ?= $(if $(NVCC),$(or $(GPU),$(CACHED_CUDA),OFF),OFF)
CONFIGURE = scripts/setup.sh jobs && cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release -DLINEA_CUDA=$(LINEA_CUDA)
CONFIGURE_ALL = scripts/setup.sh && cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release \
  -DLINEA_CUDA=$(if $(NVCC),ON,OFF) -DLINEA_DIST=ON

.PHONY: train test build clean lm mqar bench bench-peer train-dist sanitize sanitize-core fuzz fuzz-short fuzz-build clang \
        fault-inject

train:
	$(CONFIGURE)
	scripts/prepare_data.sh fmnist
	cmake --build $(BUILD_DIR) -j$(JOBS) --target vit_fmnist
	$(BUILD_DIR)/examples/vit_fmnist --attn mhla --overwrite on --seed $(SEED) --time-budget $(TIME_BUDGET) $(TRAIN_ARGS)

build:
	$(CONFIGURE_ALL)
	cmake --build $(BUILD_DIR) -j$(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure

clean:
	rm -rf $(BUILD_DIR)

lm:
	$(CONFIGURE)
	scripts/prepare_data.sh kjv
	cmake --build $(BUILD_DIR) -j$(JOBS) --target char_lm
	$(BUILD_DIR)/examples/char_lm --attn mhla --sample 500 --overwrite on

mqar:
	$(CONFIGURE)
	cmake --build $(BUILD_DIR) -j$(JOBS) --target mqar
	$(BUILD_DIR)/examples/mqar --sweep on

bench:
	$(CONFIGURE)
	cmake --build $(BUILD_DIR) -j$(JOBS) --target bench_matmul bench_elementwise bench_attention vit_fmnist char_lm
	$(BUILD_DIR)/bench/bench_matmul
	$(BUILD_DIR)/bench/bench_elementwise
	$(BUILD_DIR)/bench/bench_attention
	$(BUILD_DIR)/examples/vit_fmnist --bench 20 --attn all
	$(BUILD_DIR)/examples/char_lm --bench 20 --attn all

# PyTorch is optional: without it bench/peer/run.py --check says how to install it, and nothing is built.
bench-peer:
	@if python3 bench/peer/run.py --check; then \
	  $(CONFIGURE) && cmake --build $(BUILD_DIR) -j$(JOBS) --target vit_fmnist char_lm && \
	  python3 bench/peer/run.py --build $(BUILD_DIR) $(PEER_ARGS); fi

# attention_lab reads one ViT and one char-GPT per kind, runs/vit_fmnist_<attn> and runs/char_lm_<attn>
# (softmax, linear, mhla: make train and make lm write the mhla ones) when they exist; it trains each
# one absent briefly itself (1 epoch, 300 steps) into runs/lab/ and says so.
# LAB_ARGS adds flags: make lab LAB_ARGS="--runs DIR --out DIR" (attention_lab --help lists them).
.PHONY: lab
lab:
	$(CONFIGURE)
	scripts/prepare_data.sh fmnist
	scripts/prepare_data.sh kjv
	cmake --build $(BUILD_DIR) -j$(JOBS) --target attention_lab vit_fmnist char_lm
	$(BUILD_DIR)/examples/attention_lab $(LAB_ARGS)

# Data-parallel make train: NP processes (default 2) of THREADS OpenMP threads (default 1), each
# training on its NP-th of every batch; rank 0 prints and writes runs/vit_fmnist_mhla. The
# OMPI_ALLOW_RUN_AS_ROOT pair lets it run as root (containers, CI).
NP ?= 2
THREADS ?= 1
train-dist:
	$(CONFIGURE_ALL)
	scripts/prepare_data.sh fmnist
	cmake --build $(BUILD_DIR) -j$(JOBS) --target vit_fmnist
	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np $(NP) --oversubscribe --bind-to none \
	  $(BUILD_DIR)/examples/vit_fmnist --attn mhla --threads $(THREADS)
# ---- sanitizers, fuzzing, clang (tests/fuzz/CMakeLists.txt has the fuzz tests)
SANITIZE_DIR ?= build-sanitize
FUZZ_DIR ?= build-fuzz
CLANG_DIR ?= build-clang
FUZZ_RUNS ?= 1000000
FUZZ_PARSERS = npy safetensors idx idx_gz vocab corpus
NO_CUDA = -DLINEA_CUDA=OFF -DLINEA_BUILD_BENCH=OFF

SANITIZE_TARGETS ?= all
sanitize:
	scripts/setup.sh
	cmake -S . -B $(SANITIZE_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(NO_CUDA) -DLINEA_SANITIZE=ON
	cmake --build $(SANITIZE_DIR) -j$(JOBS) --target $(SANITIZE_TARGETS)
	cd $(SANITIZE_DIR) && ctest --output-on-failure $(CTEST_ARGS)

# What .ci/run sanitizes, to keep CI short: the families that read files or
# check shapes and sizes, and the fuzz replays.
SANITIZE_CORE = sizes io checkpoint json data creation view
sanitize-core:
	$(MAKE) sanitize SANITIZE_TARGETS="$(SANITIZE_CORE:%=linea_test_%) linea_fuzz_seeds \
	  $(FUZZ_PARSERS:%=linea_fuzz_replay_%)" CTEST_ARGS="-R '^($(subst $(eval) ,|,$(SANITIZE_CORE))|fuzz_)'"

fault-inject:
	$(CONFIGURE)
	cmake --build $(BUILD_DIR) -j$(JOBS) --target char_lm
	tests/fault_inject.sh $(BUILD_DIR)/examples/char_lm $(FAULTS)

clang:
	scripts/setup.sh fuzz
	cmake -S . -B $(CLANG_DIR) -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ $(NO_CUDA)
	cmake --build $(CLANG_DIR) -j$(JOBS)

fuzz-build:
	scripts/setup.sh fuzz
	cmake -S . -B $(FUZZ_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ $(NO_CUDA) \
	  -DLINEA_FUZZ=ON -DLINEA_BUILD_EXAMPLES=OFF
	cmake --build $(FUZZ_DIR) -j$(JOBS) --target linea_fuzz_seeds $(FUZZ_PARSERS:%=linea_fuzz_%)

fuzz-short: fuzz-build
	cd $(FUZZ_DIR) && ctest --output-on-failure -L '^fuzz$$'

fuzz: fuzz-build
	$(FUZZ_DIR)/tests/fuzz/linea_fuzz_seeds $(FUZZ_DIR)/tests/fuzz/seeds
	set -e; cd $(FUZZ_DIR)/tests/fuzz; for p in $(FUZZ_PARSERS); do \
	  echo "== fuzz $$p: $(FUZZ_RUNS) runs (log: $(FUZZ_DIR)/tests/fuzz/$$p.log)"; \
	  regressions=$(CURDIR)/tests/fuzz/regressions/$$p; [ -d $$regressions ] || regressions=; \
	  ./linea_fuzz_$$p -runs=$(FUZZ_RUNS) -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	    -artifact_prefix=$$p- corpus/$$p seeds/$$p $$regressions > $$p.log 2>&1 || { tail -40 $$p.log; exit 1; }; \
	  grep -E "^Done|number_of_executed_units|peak_rss_mb" $$p.log; \
	done
