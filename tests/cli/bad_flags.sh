#!/usr/bin/env bash
# Runs every row of a bad-flag table (tests/cli/bad_flags.txt) against the built examples and
# checks what a user must see: exit status 1 (not a crash), exactly one line on stderr that names
# the row's first flag and holds the expected text, nothing on stdout, and nothing written.
#   bad_flags.sh TABLE BIN_DIR      (BIN_DIR holds char_lm, vit_fmnist, mqar, mlp_demo, attention_lab, mnist_cnn, second_order)
# A program gets CLI_TIMEOUT seconds (default 60) before it counts as having accepted the flag.
set -u
table=$1 bin=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A tiny corpus, so that a char_lm that wrongly accepted a flag would get as far as writing its run.
mkdir "$work/data"
for i in $(seq 200); do echo "to be or not to be, that is the question $i"; done >"$work/data/corpus.txt"

rows=0 failed=0
while IFS='|' read -r program args expect; do
  program=$(echo "$program" | xargs) expect=$(echo "$expect" | sed 's/^ *//; s/ *$//')
  [[ -z $program || $program == \#* ]] && continue
  eval "argv=($args)"
  case $program in  # run files go to ./run, so "nothing written" means the folder stays empty
    char_lm) pre=(--data "$work/data/corpus.txt" --out run) ;;
    vit_fmnist) pre=(--data-dir "$work/data" --out run) ;;
    *) pre=() ;;
  esac
  first=""
  for a in "${argv[@]}"; do [[ $a == -* ]] && { first=$a; break; }; done
  cwd="$work/case$rows"
  mkdir "$cwd"
  (cd "$cwd" && timeout "${CLI_TIMEOUT:-60}" "$bin/$program" "${pre[@]}" "${argv[@]}" >"$work/out" 2>"$work/err")
  rc=$?
  rows=$((rows + 1))
  err=$(cat "$work/err") lines=$(wc -l <"$work/err")
  problems=()
  [[ $rc -eq 1 ]] || problems+=("exit status $rc, expected 1")
  [[ $lines -eq 1 ]] || problems+=("$lines lines on stderr, expected 1")
  [[ -s $work/out ]] && problems+=("printed on stdout: $(head -c 200 "$work/out")")
  [[ $err == *"$expect"* ]] || problems+=("the error lacks '$expect'")
  [[ -z $first || $err == *"$first"* ]] || problems+=("the error does not name $first")
  [[ -z $(ls -A "$cwd") ]] && rmdir "$cwd" || problems+=("wrote: $(cd "$cwd" && find . -mindepth 1 | head -5 | xargs)")
  if ((${#problems[@]})); then
    failed=$((failed + 1))
    echo "FAIL: $program ${argv[*]}"
    printf '  %s\n' "${problems[@]}"
    echo "  stderr: $(head -c 400 "$work/err")"
  fi
done <"$table"

echo "$rows bad command lines, $failed failed"
((rows > 0 && failed == 0))
