#!/usr/bin/env bash
# The CPU kernels' AVX-512 and AVX2 copies (tensor/cpu/isa_begin.h) may hold wide instructions only
# in functions of their own namespace (linea::cpu::avx512::..., linea::cpu::avx2::..., and what is
# instantiated from them, which carries that name). A function of any other name is one the linker
# may keep for the whole program, so it must be the baseline's: no ymm or zmm register in it.
# Usage: shared_symbols.sh <the linea target's object folder>
set -euo pipefail
objdir=$1
status=0
checked=0
for isa in avx512 avx2; do
  for o in "$objdir"/isa/"$isa"/*.o; do
    checked=$((checked + 1))
    bad=$(objdump -d --no-show-raw-insn -C "$o" | awk -v ns="::$isa::" '
      /^[0-9a-f]+ <.*>:$/ { fn = substr($0, index($0, "<") + 1); fn = substr(fn, 1, length(fn) - 2); next }
      /[yz]mm[0-9]/ && index(fn, ns) == 0 && !(fn in seen) { seen[fn] = 1; print fn }')
    if [ -n "$bad" ]; then
      echo "FAIL $o: wide registers in functions outside linea::cpu::$isa:"
      echo "$bad" | head -5 | sed 's/^/  /'
      status=1
    fi
  done
done
[ "$checked" -gt 0 ] || { echo "no ISA objects under $objdir/isa"; exit 1; }
echo "$checked ISA objects checked"
exit $status
