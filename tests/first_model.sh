#!/usr/bin/env bash
# The README's "Your first model" (examples/first_model.cpp) cannot rot:
#   first_model.sh run BINARY          runs it: exit status 0, and the last loss line at most a
#                                      tenth of the first (the model learned)
#   first_model.sh readme README FILE  the code block between <!-- first_model.cpp --> and
#                                      <!-- end first_model.cpp --> in README is FILE, verbatim
set -euo pipefail
case "${1:-}" in
  run)
    rc=0; out=$("$2") || rc=$?
    echo "$out"
    [[ $rc == 0 ]] || { echo "FAIL: first_model exited with status $rc"; exit 1; }
    losses=$(grep -oE 'loss [0-9.]+' <<<"$out" | awk '{print $2}')
    first=$(head -n1 <<<"$losses"); last=$(tail -n1 <<<"$losses")
    [[ -n "$first" && -n "$last" ]] || { echo "FAIL: no 'loss' lines in the output"; exit 1; }
    awk -v f="$first" -v l="$last" 'BEGIN { exit !(l <= f / 10) }' ||
      { echo "FAIL: the loss went from $first to $last, not down by 10x"; exit 1; }
    echo "ok: loss $first -> $last" ;;
  readme)
    block=$(awk '/<!-- end first_model.cpp -->/ { on = 0 } on { print } /<!-- first_model.cpp -->/ { on = 1 }' "$2" |
            sed -e '/^```/d')
    [[ -n "$block" ]] || { echo "FAIL: $2 has no <!-- first_model.cpp --> ... <!-- end first_model.cpp --> block"; exit 1; }
    diff -u "$3" <(printf '%s\n' "$block") ||
      { echo "FAIL: the README's code block differs from $3 (diff above: - file, + README)"; exit 1; }
    echo "ok: the README shows $3 verbatim" ;;
  *) echo "usage: $0 run BINARY | readme README FILE" >&2; exit 2 ;;
esac
