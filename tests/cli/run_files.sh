#!/usr/bin/env bash
# What char_lm does with its run directory, on a tiny corpus and model (a few seconds in all):
# bad paths and damaged checkpoints are one-line errors; a non-empty --out is refused unless
# resuming it or told --overwrite on; a full disk is an error, not empty files; a resume removes
# the temp files of a killed save and truncates metrics.csv to the checkpoint's step.
#   run_files.sh CHAR_LM
set -u
char_lm=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
for i in $(seq 300); do echo "to be or not to be, that is the question $i"; done >corpus.txt
# 4 steps of a small model, an evaluation (metrics row + checkpoint) every 2.
tiny=(--data corpus.txt --layers 1 --dim 32 --heads 2 --context 16 --batch 4 --eval-batches 2 --warmup 1
      --eval-interval 2 --steps 4 --threads 1)

failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
# run NAME EXPECTED_STATUS EXPECTED_TEXT ARGS...: runs char_lm, checks its status and (for a
# failure) that stderr is one line holding EXPECTED_TEXT.
run() {
  local name=$1 want=$2 text=$3
  shift 3
  "$char_lm" "$@" >out.txt 2>err.txt
  local rc=$?
  [[ $rc -eq $want ]] || fail "$name: exit status $rc, expected $want ($(head -c 300 err.txt))"
  if [[ $want -ne 0 ]]; then
    [[ $(wc -l <err.txt) -eq 1 ]] || fail "$name: expected one line on stderr, got: $(head -c 300 err.txt)"
    [[ $(cat err.txt) == *"$text"* ]] || fail "$name: the error lacks '$text': $(head -c 300 err.txt)"
  fi
}

# ---- errors that used to abort (exit 134) or write before failing
run "--data a directory" 1 "is not a regular file" "${tiny[@]}" --data . --out r0
touch afile
run "--out a file" 1 "exists and is not a directory" "${tiny[@]}" --out afile
run "--out below a file" 1 "is not a directory" "${tiny[@]}" --out afile/run
[[ ! -e r0 && ! -e runs ]] || fail "a failed start wrote a run directory: $(ls)"

# ---- a run, then a second one into the same --out
run "first run" 0 "" "${tiny[@]}" --out r1
[[ -s r1/checkpoint.safetensors && -s r1/vocab.json && -s r1/config.txt ]] || fail "first run: files missing: $(ls r1)"
[[ $(wc -l <r1/metrics.csv) -eq 3 ]] || fail "first run: metrics.csv should hold a header and 2 rows: $(cat r1/metrics.csv)"
cp -r r1 r1.before
run "a new run into a non-empty --out" 1 "is not empty" "${tiny[@]}" --out r1 --seed 7
diff -r r1 r1.before >/dev/null || fail "the refused run changed r1"
run "--overwrite on" 0 "" "${tiny[@]}" --out r1 --seed 7 --overwrite on
cmp -s r1/checkpoint.safetensors r1.before/checkpoint.safetensors && fail "--overwrite on kept the old checkpoint"
[[ $(wc -l <r1/metrics.csv) -eq 3 ]] || fail "--overwrite on: metrics.csv should hold 2 rows: $(cat r1/metrics.csv)"
rm -rf r1 && mv r1.before r1

# ---- a killed run: a temp file of a dead save, metrics rows written after the last checkpoint
run "run to step 2" 0 "" "${tiny[@]}" --out r2 --steps 2
cp r2/checkpoint.safetensors step2.safetensors
run "resume to step 4" 0 "" --resume r2/checkpoint.safetensors --steps 4 --data corpus.txt
cp r2/metrics.csv metrics4.csv
cp step2.safetensors r2/checkpoint.safetensors  # as if killed after the step-4 row, before its checkpoint
sh -c 'exit 0' & dead=$!
wait $dead
echo "half a checkpoint" >"r2/checkpoint.safetensors.tmp.$dead.AbCdEf"
echo "a live writer's" >"r2/checkpoint.safetensors.tmp.$$.GhIjKl"
run "resume again from step 2" 0 "" --resume r2/checkpoint.safetensors --steps 4 --data corpus.txt
[[ ! -e r2/checkpoint.safetensors.tmp.$dead.AbCdEf ]] || fail "the dead writer's temp file is still there"
[[ -e r2/checkpoint.safetensors.tmp.$$.GhIjKl ]] || fail "the live writer's temp file was removed"
# The same rows (the seconds column aside: timings differ), each step once.
cut -d, -f1-5 r2/metrics.csv >a.csv && cut -d, -f1-5 metrics4.csv >b.csv
cmp -s a.csv b.csv || fail "metrics.csv after the second resume: $(cat r2/metrics.csv), expected the rows of $(cat metrics4.csv)"
rm r2/checkpoint.safetensors.tmp.$$.GhIjKl

# ---- resuming somewhere else: an empty --out is fine, a non-empty one is refused
run "resume into a new --out" 0 "" --resume r1/checkpoint.safetensors --out r3 --steps 6 --data corpus.txt
[[ -s r3/vocab.json && $(wc -l <r3/metrics.csv) -ge 2 ]] || fail "resume into r3: $(ls r3)"
run "resume into another run's --out" 1 "is not empty" --resume r1/checkpoint.safetensors --out r2 --data corpus.txt

# ---- damaged checkpoints (same-length edits of the JSON header, so the file stays valid)
perl -0pe 's/"step":"(\d)"/"step":"x"/' r1/checkpoint.safetensors >bad_step.safetensors
perl -0pe 's/"loss_sum"/"loss_sux"/' r1/checkpoint.safetensors >no_loss_sum.safetensors
for f in bad_step no_loss_sum; do mkdir -p "$f" && mv "$f.safetensors" "$f/checkpoint.safetensors" && cp r1/vocab.json "$f/"; done
cmp -s bad_step/checkpoint.safetensors r1/checkpoint.safetensors && fail "the test's edit of the step entry did nothing"
run "non-numeric step" 1 "entry \"step\" is 'x', not a finite number" --resume bad_step/checkpoint.safetensors --data corpus.txt
run "missing loss_sum" 1 "has no \"loss_sum\" entry" --resume no_loss_sum/checkpoint.safetensors --data corpus.txt
[[ ! -e bad_step/metrics.csv && ! -e no_loss_sum/metrics.csv ]] || fail "a refused resume wrote metrics.csv"

# ---- a full disk (a file-size limit; stderr goes through a pipe, which the limit does not touch)
full() {  # full LIMIT_KB OUT
  (trap '' XFSZ; ulimit -f "$1"; exec "$char_lm" "${tiny[@]}" --out "$2") 2>&1 >/dev/null | cat >err.txt
  rc=${PIPESTATUS[0]}
}
# clang's OpenMP runtime (libomp 14) sizes a 1 KiB file in /dev/shm at startup and aborts when it
# cannot, so under a 0 limit it dies before char_lm's main; a 1 KiB limit still leaves it room.
if ldd "$char_lm" | grep -q 'libomp\.so'; then
  echo "skipped: disk full at the first file (ulimit -f 0 aborts libomp at startup)"
else
  full 0 full0
  [[ $rc -eq 1 && $(cat err.txt) == *"cannot write the lock file 'full0/run.lock'"* ]] ||
    fail "disk full at the first file: status $rc: $(cat err.txt)"
  [[ -z $(find full0 -type f 2>/dev/null) ]] || fail "disk full at the first file left: $(find full0 -type f)"
fi
full 1 full1
[[ $rc -eq 1 && $(cat err.txt) == *"[save_safetensors]"*"'full1/checkpoint.safetensors' was not created"* ]] ||
  fail "disk full at the checkpoint: status $rc: $(cat err.txt)"
[[ -z $(find full1 -type f -empty) ]] || fail "disk full left empty files: $(find full1 -type f -empty)"

echo "run-directory checks: $failed failed"
((failed == 0))
