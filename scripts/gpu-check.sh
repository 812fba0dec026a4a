#!/usr/bin/env bash
# The GPU check of linea, in one call on a machine with a Hopper GPU (sm_90: H100, H200; see
# docs/cuda.md): build with CUDA, run the whole test suite (the gpu_* tests must RUN there, not
# skip), then the benchmarks, and print a short table last. Full logs go to /tmp/gpu-check, and as
# one gpu-check-logs.tgz into $OUT when $OUT is set. Meant to finish in ~8 minutes: the optional
# steps after the benchmarks (the GPU-vs-CPU training trace, bf16 steps, PyTorch on the same GPU,
# compute-sanitizer) start only before DEADLINE seconds (default 450), and no step runs past HARD
# (560), so the summary always prints within 600 s (a ten-minute job limit).
#
#   scripts/gpu-check.sh --fetch-deps   first, on a machine with network access: downloads the
#                                       Debian packages linea builds with (fmt, doctest, OpenBLAS,
#                                       zlib headers) into .deps/, for a GPU machine that can reach
#                                       no package registry, and the char-GPT's corpus
#                                       (scripts/prepare_data.sh shakespeare) into .deps/
#   scripts/gpu-check.sh                on the GPU machine, with .deps/ copied along with the
#                                       checkout; through a job runner that copies git-ignored
#                                       paths on request, for example:
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
  LINEA_DATA_DIR=$PWD/.deps scripts/prepare_data.sh shakespeare || exit 1
  du -sh .deps
  exit 0
fi

LOG=/tmp/gpu-check
BUILD=${BUILD:-/tmp/linea-gpu-build}
DEADLINE=${DEADLINE:-450}  # optional steps start only before this
HARD=${HARD:-560}          # no step runs past this, so the summary prints inside a 600 s call
mkdir -p "$LOG"
declare -a SUMMARY=()
status=0
note() { SUMMARY+=("$1"); }
fail() { note "FAIL  $1"; status=1; }

# Runs a step with a time limit (cut to what is left before HARD), its output into
# $LOG/<name>.log; records pass/fail.
step() {
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  if [ $((HARD - SECONDS)) -lt "$limit" ]; then limit=$((HARD - SECONDS)); fi
  if [ "$limit" -lt 5 ]; then
    fail "$name (not run: past the ${HARD} s limit)"
    return
  fi
  echo "== $name: $*"
  if timeout "$limit" "$@" > "$LOG/$name.log" 2>&1; then
    note "ok    $name ($((SECONDS - t0)) s)"
  else
    fail "$name (exit $?, $((SECONDS - t0)) s; see $name.log)"
  fi
  tail -n 15 "$LOG/$name.log"
}
# The same for a step that may be dropped when time runs short.
optional() {
  if [ $SECONDS -gt "$DEADLINE" ]; then
    note "skip  $1 (past the ${DEADLINE} s deadline)"
  else
    step "$@"
  fi
}

# ---- the device
nvidia-smi -L | tee "$LOG/nvidia-smi.log" || fail "nvidia-smi"
note "gpu   $(nvidia-smi -L 2> /dev/null | head -n 1)"
note "host  $(nproc) cores, nvcc $(nvcc --version 2> /dev/null | grep -o 'release [0-9.]*'), $(c++ --version | head -n 1)"

# ---- dependencies brought as .deb files (for an image with nvcc and CMake but not fmt/OpenBLAS)
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

# ---- build: Hopper machine code only (no sm_80, no PTX: a third of the compile time). A target
# that fails to build does not stop the others (-k): what did build still runs below.
generator=() keep_going=(-k)
command -v ninja > /dev/null && generator=(-G Ninja) keep_going=(-k 0)
step configure 120 cmake -S . -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DLINEA_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90-real "${CMAKE_DEPS[@]}"
step build 300 cmake --build "$BUILD" -j "$(nproc)" -- "${keep_going[@]}"
have() { [ -x "$BUILD/$1" ]; }

# ---- tests: all of them; a gpu_* test that reports Skipped on this machine is a failure
export OMP_NUM_THREADS=2
step ctest 240 ctest --test-dir "$BUILD" --output-on-failure -j 8 --timeout 200
if grep -E 'gpu_[a-z_]+ .*(Skipped|Not Run)' "$LOG/ctest.log"; then
  fail "a gpu_* test was SKIPPED or NOT RUN on a machine with a GPU (see above)"
fi
note "tests $(grep -E 'tests passed|tests failed' "$LOG/ctest.log" | tail -n 1)"
grep -E '^ *[0-9]+/[0-9]+ Test +#[0-9]+: gpu_' "$LOG/ctest.log" > "$LOG/gpu-tests.txt"

# ---- benchmarks
unset OMP_NUM_THREADS
have bench/bench_ceilings && step bench_ceilings 90 "$BUILD/bench/bench_ceilings"
have bench/bench_attention && step bench_attention 150 "$BUILD/bench/bench_attention" --device cuda --max-seconds 8
have examples/vit_fmnist && step vit_bench 90 "$BUILD/examples/vit_fmnist" --device cuda --bench 20 --attn all
have examples/char_lm && step char_lm_bench 90 "$BUILD/examples/char_lm" --device cuda --bench 20 --attn all

# ---- optional: the same 100 training steps of the char-GPT on the GPU and on the CPU (same seed,
# windows and initial weights), compared step by step: GPU float32 must follow the CPU's losses.
if have examples/char_lm && [ -f .deps/tinyshakespeare.txt ]; then
  for attn in softmax mhla; do
    for dev in cuda cpu; do
      optional "trace_${attn}_$dev" 90 "$BUILD/examples/char_lm" --attn "$attn" --steps 100 --device "$dev" \
        --data .deps/tinyshakespeare.txt --trace "$LOG/$attn-$dev.trace" --out "/tmp/run-$attn-$dev"
    done
    if [ -f "$LOG/$attn-cuda.trace" ] && [ -f "$LOG/$attn-cpu.trace" ]; then
      python3 - "$LOG/$attn-cuda.trace" "$LOG/$attn-cpu.trace" "$attn" > "$LOG/trace-$attn.txt" << 'PY'
import sys
def steps(path):  # step i lr loss grad_norm offsets...
    return [[float(x) for x in l.split()[3:5]] for l in open(path) if l.startswith("step ")]
g, c = steps(sys.argv[1]), steps(sys.argv[2])
n = min(len(g), len(c))
rl = max(abs(a[0] - b[0]) / abs(b[0]) for a, b in zip(g, c))
rg = max(abs(a[1] - b[1]) / abs(b[1]) for a, b in zip(g, c))
print(f"trace {sys.argv[3]}: {n} steps, GPU vs CPU max rel. diff: loss {rl:.2e}, grad norm {rg:.2e}; "
      f"last loss GPU {g[n-1][0]:.6f} CPU {c[n-1][0]:.6f}; {'ok' if n == 100 and rl < 1e-3 else 'FAIL'}")
PY
      cat "$LOG/trace-$attn.txt"
      if grep -q ' ok$' "$LOG/trace-$attn.txt"; then note "ok    $(cat "$LOG/trace-$attn.txt")"
      else fail "$(cat "$LOG/trace-$attn.txt")"; fi
    fi
  done
fi

# ---- optional: bf16 dot products (tensor cores), then PyTorch on the same GPU and models
have examples/vit_fmnist && optional vit_bench_bf16 90 "$BUILD/examples/vit_fmnist" --device cuda --bench 20 --attn all --precision bf16
have examples/char_lm && optional char_lm_bench_bf16 90 "$BUILD/examples/char_lm" --device cuda --bench 20 --attn all --precision bf16
if have examples/char_lm && have examples/vit_fmnist; then
  optional peer 150 python3 bench/peer/run.py --build "$BUILD" --device cuda --rounds 1 --steps 20
fi

# ---- optional: compute-sanitizer's memcheck over the MHLA and attention GPU tests
if have tests/linea_test_gpu_mhla && command -v compute-sanitizer > /dev/null; then
  optional memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 1 "$BUILD/tests/linea_test_gpu_mhla"
fi

# ---- the short table, last
[ -n "${OUT:-}" ] && tar czf "$OUT/gpu-check-logs.tgz" -C "$LOG" .
printf '\n---- gpu-check summary (%d s; logs in %s%s)\n' "$SECONDS" "$LOG" "${OUT:+ and \$OUT/gpu-check-logs.tgz}"
printf '%s\n' "${SUMMARY[@]}"
printf '\nGPU tests:\n'
cat "$LOG/gpu-tests.txt" 2> /dev/null
printf '\nceilings:\n'
grep -E 'GB/s|TFLOP/s' "$LOG/bench_ceilings.log" 2> /dev/null || echo "  (none)"
printf '\nattention fwd+bwd (kind, N, ms, TFLOP/s, GB/s):\n'
grep -E '^(mhla|softmax)' "$LOG/bench_attention.log" 2> /dev/null || echo "  (none)"
grep -A 2 'speed-up' "$LOG/bench_attention.log" 2> /dev/null
for f in vit_bench char_lm_bench vit_bench_bf16 char_lm_bench_bf16; do
  printf '\n%s:\n' "$f"
  grep -E '^(attn|softmax|linear|mhla) ' "$LOG/$f.log" 2> /dev/null || echo "  (none)"
done
printf '\npeer (PyTorch on the same GPU):\n'
grep -E '^\|' "$LOG/peer.log" 2> /dev/null || echo "  (none)"
exit $status
