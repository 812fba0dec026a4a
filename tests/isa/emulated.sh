#!/usr/bin/env bash
# The kernel families on an emulated CPU without AVX-512 (qemu-user): a build made on any x86-64
# machine must run there, picking the widest ISA that CPU has, and pass. An instruction the
# emulated CPU lacks ends the program with SIGILL, as it would on a real one.
# Usage: emulated.sh <qemu CPU model> <expected ISA> <folder of the test programs> <family>...
# Exits 77 (skipped) without qemu-x86_64 (scripts/setup.sh installs it, Debian's qemu-user).
set -uo pipefail
model=$1 isa=$2 dir=$3
shift 3
if ! command -v qemu-x86_64 > /dev/null 2>&1; then
  echo "skipped: qemu-x86_64 is not installed (apt-get install qemu-user)"
  exit 77
fi
# GOMP_SPINCOUNT set: the programs then have no reason to start themselves again
# (tensor/cpu/process_start.cpp), which would run the new image on the host's CPU, not qemu's.
export GOMP_SPINCOUNT=1000
status=0
for family in "$@"; do
  start=$SECONDS
  out=$(qemu-x86_64 -cpu "$model" "$dir/linea_test_$family" 2>&1)
  rc=$?
  ran=$(grep -o "^CPU kernels: [a-z0-9_]*" <<< "$out" | cut -d' ' -f3)
  if [ $rc -ne 0 ] || [ "$ran" != "$isa" ]; then
    echo "FAIL $family on qemu -cpu $model: exit $rc, CPU kernels '$ran' (expected $isa)"
    grep -v "^qemu-x86_64: warning" <<< "$out" | tail -15
    status=1
  else
    echo "ok   $family on qemu -cpu $model ($isa kernels), $((SECONDS - start)) s"
  fi
done
exit $status
