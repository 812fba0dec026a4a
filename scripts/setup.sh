#!/usr/bin/env bash
# Make sure the tools and Debian packages linea builds with are installed. Idempotent: when
# everything is present it only checks and exits; otherwise it installs just what is missing.
#
#   scripts/setup.sh        everything: what make build / make test (and CI) need
#   scripts/setup.sh jobs   what make train, lm, mqar, lab and bench need (no MPI, no qemu)
#   scripts/setup.sh fuzz   everything, plus clang and its fuzzing runtimes
set -euo pipefail

tools=(cmake g++ make)
packages=(libopenblas-dev libopenblas0-openmp doctest-dev libfmt-dev zlib1g-dev)
# examples/data/plot.h (attention_lab, plot_metrics): gnuplot draws the heatmaps and line plots.
packages+=(gnuplot-nox)
if [ "${1:-}" != jobs ]; then
  # dist/ (data-parallel training under mpirun): Open MPI's headers and library, and mpirun itself.
  packages+=(libopenmpi-dev openmpi-bin)
  # tests/isa/emulated.sh: the kernels on emulated CPUs without AVX-512 (x86-64 only).
  if [ "$(uname -m)" = x86_64 ]; then
    packages+=(qemu-user)
  fi
fi
# Debian package that provides each tool, for when a tool is missing.
declare -A tool_package=([cmake]=cmake [g++]=g++ [make]=make)
# `setup.sh fuzz` (make fuzz): clang, its libFuzzer/sanitizer runtimes and its OpenMP too.
if [ "${1:-}" = fuzz ]; then
  tools+=(clang++)
  tool_package[clang++]=clang
  packages+=(libclang-rt-dev libomp-dev)
fi

missing=()
for t in "${tools[@]}"; do
  command -v "$t" > /dev/null 2>&1 || missing+=("${tool_package[$t]}")
done
for p in "${packages[@]}"; do
  dpkg -s "$p" > /dev/null 2>&1 || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all dependencies present (${tools[*]} ${packages[*]})"
  exit 0
fi

echo "setup: installing missing packages: ${missing[*]}"
install_cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}"
# Root runs apt-get itself; anyone else needs passwordless sudo.
if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo > /dev/null 2>&1 && sudo -n true 2> /dev/null; then
  as_root=(sudo)
else
  as_root=(none)
fi
if ! command -v apt-get > /dev/null 2>&1 || [ "${as_root[*]}" = none ]; then
  echo "setup: cannot install packages here (needs apt-get, and root or passwordless sudo)." >&2
  echo "setup: install them yourself, as root:" >&2
  echo "    $install_cmd" >&2
  exit 1
fi
if ! { "${as_root[@]}" apt-get update &&
       "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"; }; then
  echo "setup: apt-get failed; to retry by hand, as root:" >&2
  echo "    $install_cmd" >&2
  exit 1
fi
echo "setup: done"
