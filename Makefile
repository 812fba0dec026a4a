# The front door:
#   make train   install what is missing, build in Release, run the demo (examples/mlp_demo)
#   make test    the same setup, build everything, run the whole test suite (ctest)
#   make build   setup + configure + build everything;  make clean  removes the build dir
# BUILD_DIR (default build) and JOBS (default 2) can be overridden: make test JOBS=8

BUILD_DIR ?= build
JOBS ?= 2
MAKEFLAGS += --no-print-directory

# Setup is idempotent and fast when everything is installed, so every entry point runs it.
CONFIGURE = scripts/setup.sh && cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release

.PHONY: train test build clean

train:
	$(CONFIGURE)
	cmake --build $(BUILD_DIR) -j$(JOBS) --target mlp_demo
	$(BUILD_DIR)/examples/mlp_demo

build:
	$(CONFIGURE)
	cmake --build $(BUILD_DIR) -j$(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure

clean:
	rm -rf $(BUILD_DIR)
