# The front door:
#   make train   install what is missing (Fashion-MNIST too), build in Release, train the ViT
#                (examples/vit_fmnist --attn mhla, about 5 minutes on 2 cores) and print its test accuracy
#   make test    the same setup, build everything, run the whole test suite (ctest)
#   make lm      char-level GPT with causal MHLA on the King James Bible (prepared once), then a sample
#   make mqar    associative recall (Zoology's MQAR): softmax vs linear vs MHLA at 4, 8, 16 key-value pairs
#   make bench   the kernel benchmarks (bench/) and the examples' training-step benchmarks
#   make build   setup + configure + build everything;  make clean  removes the build dir
# BUILD_DIR (default build) and JOBS (default 2) can be overridden: make test JOBS=8

BUILD_DIR ?= build
JOBS ?= 2
MAKEFLAGS += --no-print-directory

# OpenMP threads that finish early sleep instead of spinning. With the default (spin), an idle
# thread busy-waits beside the one still working and, on these 2-vCPU machines, slows it down:
# measured, a ViT-MHLA training step took 152 ms spinning and 106 ms passive. Override to compare.
export OMP_WAIT_POLICY ?= passive

# Setup is idempotent and fast when everything is installed, so every entry point runs it.
CONFIGURE = scripts/setup.sh && cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release

.PHONY: train test build clean lm mqar bench

train:
	$(CONFIGURE)
	scripts/prepare_data.sh fmnist
	cmake --build $(BUILD_DIR) -j$(JOBS) --target vit_fmnist
	$(BUILD_DIR)/examples/vit_fmnist --attn mhla

build:
	$(CONFIGURE)
	cmake --build $(BUILD_DIR) -j$(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure

clean:
	rm -rf $(BUILD_DIR)

lm:
	$(CONFIGURE)
	scripts/prepare_data.sh kjv
	cmake --build $(BUILD_DIR) -j$(JOBS) --target char_lm
	$(BUILD_DIR)/examples/char_lm --attn mhla --sample 500

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
