#!/usr/bin/env bash
# The GPU check of linea, in one call on a lent H200 (see docs/cuda.md): build with CUDA, run the
# whole test suite (the gpu_* tests must RUN there, not skip), then the benchmarks, and print a
# short table last. Full logs go to ${OUT:-/tmp/gpu-check}. Meant to finish in ~6-8 minutes.
#
#   scripts/gpu-check.sh --fetch-deps   HERE, first: downloads the Debian packages linea builds
#                                       with (fmt, doctest, OpenBLAS, zlib headers) into .deps/,
#                                       since the device machine can reach no package registry
#   scripts/gpu-check.sh                THERE, through the device tool, carrying .deps:
#       run(command="scripts/gpu-check.sh", carry=[".deps"], timeout_s=600)
#
# Exit status: 0 when everything passed; 1 when a step failed or a gpu_* test was skipped.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

DEPS_PACKAGES=(libfmt-dev libfmt9 doctest-dev libopenblas0-openmp libopenblas-openmp-dev libgfortran5 zlib1g zlib1g-dev)

if [ "${1:-}" = "--fetch-deps" ]; then
  mkdir -p .deps
  grep -qx '/.deps/' .git/info/exclude 2> /dev/null || echo '/.deps/' >> .git/info/exclude
  (cd .deps && apt-get download "${DEPS_PACKAGES[@]}") || { echo "gpu-check: apt-get download failed" >&2; exit 1; }
  du -sh .deps
  exit 0
fi

LOG=${OUT:-/tmp/gpu-check}
BUILD=${BUILD:-/tmp/linea-gpu-build}
mkdir -p "$LOG"
declare -a SUMMARY=()
status=0
note() { SUMMARY+=("$1"); }
fail() { note "FAIL  $1"; status=1; }

# Runs a step with a time limit, its output into $LOG/<name>.log; records pass/fail.
step() {
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  echo "== $name: $*"
  if timeout "$limit" "$@" > "$LOG/$name.log" 2>&1; then
    note "ok    $name ($((SECONDS - t0)) s)"
  else
    fail "$name (exit $?, $((SECONDS - t0)) s; see $LOG/$name.log)"
  fi
  tail -n 25 "$LOG/$name.log"
}

# ---- the device
nvidia-smi -L | tee "$LOG/nvidia-smi.log" || fail "nvidia-smi"
note "gpu   $(nvidia-smi -L 2> /dev/null | head -n 1)"

# ---- dependencies carried as .deb files (the device image has nvcc and CMake, not fmt/OpenBLAS)
CMAKE_DEPS=()
if ls .deps/*.deb > /dev/null 2>&1; then
  DEPS=/tmp/linea-deps
  for f in .deps/*.deb; do dpkg -x "$f" "$DEPS"; done
  cblas=$(find "$DEPS" -name cblas.h -path '*openmp*' | head -n 1)
  blas=$(find "$DEPS" -name 'libopenblas.so.0' -path '*openmp*' | head -n 1)
  CMAKE_DEPS=(-DCMAKE_PREFIX_PATH="$DEPS/usr" -DLINEA_OPENBLAS="$blas" -DLINEA_CBLAS_INCLUDE="$(dirname "$cblas")")
  LD_LIBRARY_PATH="$DEPS/usr/lib/x86_64-linux-gnu:$(dirname "$blas")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  CPATH="$DEPS/usr/include${CPATH:+:$CPATH}"
  export LD_LIBRARY_PATH CPATH
fi

# ---- build: Hopper machine code only (no sm_80, no PTX: a third of the compile time)
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
step configure 120 cmake -S . -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DLINEA_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90-real "${CMAKE_DEPS[@]}"
step build 360 cmake --build "$BUILD" -j16
if [ $status -ne 0 ]; then
  printf '\n---- gpu-check summary (stopped: the build failed)\n'
  printf '%s\n' "${SUMMARY[@]}"
  exit 1
fi

# ---- tests: all of them; a gpu_* test that reports Skipped on this machine is a failure
export OMP_NUM_THREADS=4
step ctest 300 ctest --test-dir "$BUILD" --output-on-failure -j 4 --timeout 240
if grep -E 'gpu_[a-z_]+ .*(Skipped|Not Run)' "$LOG/ctest.log"; then
  fail "a gpu_* test was SKIPPED on a machine with a GPU (see above): the GPU tests did not run"
fi
note "tests $(grep -E 'tests passed|tests failed' "$LOG/ctest.log" | tail -n 1)"

# ---- benchmarks
unset OMP_NUM_THREADS
step bench_ceilings 120 "$BUILD/bench/bench_ceilings"
step bench_attention 240 "$BUILD/bench/bench_attention" --device cuda --max-seconds 10
step vit_bench 120 "$BUILD/examples/vit_fmnist" --device cuda --bench 20 --attn all
step char_lm_bench 120 "$BUILD/examples/char_lm" --device cuda --bench 20 --attn all

# ---- the short table, last
printf '\n---- gpu-check summary (logs in %s)\n' "$LOG"
printf '%s\n' "${SUMMARY[@]}"
printf '\nceilings:\n'
grep -E 'GB/s|TFLOP/s' "$LOG/bench_ceilings.log" || echo "  (none)"
printf '\nattention fwd+bwd (kind, N, ms, TFLOP/s, GB/s):\n'
grep -E '^(mhla|softmax)' "$LOG/bench_attention.log" || echo "  (none)"
grep -A 2 'speed-up' "$LOG/bench_attention.log"
printf '\nvit_fmnist --bench 20 (img/s):\n'
grep -E '^(attn|softmax|linear|mhla) ' "$LOG/vit_bench.log" || echo "  (none)"
printf '\nchar_lm --bench 20 (tok/s):\n'
grep -E '^(attn|softmax|linear|mhla) ' "$LOG/char_lm_bench.log" || echo "  (none)"
exit $status
