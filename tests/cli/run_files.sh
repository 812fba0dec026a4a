#!/usr/bin/env bash
# What char_lm does with its run directory, on a tiny corpus and model (seconds in all):
# bad paths and damaged checkpoints are one-line errors; a non-empty --out is refused unless
# resuming it or told --overwrite on; a full disk is an error, not empty files; a resume removes
# the temp files of a killed save and truncates metrics.csv to the checkpoint's step. Then what
# real runs meet: a second run into a running run's --out, SIGTERM (and a second one), a diverging
# run, a resume with another corpus or flags, another program's checkpoint. With VIT_FMNIST and
# Fashion-MNIST installed, vit_fmnist's SIGTERM mid-epoch too.
#   run_files.sh CHAR_LM [VIT_FMNIST]
set -u
char_lm=$(realpath "$1")
vit=${2:+$(realpath "$2")}
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
# failure) that stderr is one line holding EXPECTED_TEXT. run_with PROGRAM NAME ... runs PROGRAM.
run() { run_with "$char_lm" "$@"; }
run_with() {
  local program=$1 name=$2 want=$3 text=$4
  shift 4
  "$program" "$@" >out.txt 2>err.txt
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

# ---- one run per directory: a second run into a running run's --out is refused, naming its pid
# wait_for FILE: until FILE exists and is not empty (at most 20 s).
wait_for() { for _ in $(seq 400); do [[ -s $1 ]] && return 0; sleep 0.05; done; fail "$1 never appeared"; }
"$char_lm" "${tiny[@]}" --steps 1000000 --out busy >busy.txt 2>&1 &
busy=$!
wait_for busy/checkpoint.safetensors
run "a second run into a running run's --out" 1 "--out 'busy' is in use by another run (pid $busy" "${tiny[@]}" \
  --out busy --overwrite on
run "resuming a running run" 1 "is in use by another run (pid $busy" --resume busy/checkpoint.safetensors
[[ $(cat busy/run.lock) == "$busy" ]] || fail "run.lock holds '$(cat busy/run.lock)', not the running run's pid $busy"
# ---- SIGTERM (what timeout and batch schedulers send): the step ends, a checkpoint is saved, status 143
kill -TERM $busy
wait $busy
rc=$?
[[ $rc -eq 143 ]] || fail "SIGTERM: exit status $rc, expected 143"
stopped=$(grep -ao 'stopped by SIGTERM at step [0-9]*: resume with .*char_lm --resume busy/checkpoint.safetensors' busy.txt)
step=$(head -c 4096 busy/checkpoint.safetensors | grep -ao '"step":"[0-9]*"' | grep -o '[0-9]*')
[[ -n $stopped && $stopped == *"at step $step:"* ]] ||
  fail "SIGTERM: expected 'stopped by SIGTERM at step $step: resume with ...', got: $(tail -c 300 busy.txt)"
run "the resume command after SIGTERM" 0 "" --resume busy/checkpoint.safetensors --steps $((step + 2))
grep -q "resuming with --steps $((step + 2)) (the checkpoint's: 1000000)" out.txt ||
  fail "resuming with another --steps does not say so: $(head -c 300 out.txt)"
# Simultaneous starts into one --out: exactly one runs, the other is refused in one line.
for i in 1 2 3 4; do
  "$char_lm" "${tiny[@]}" --steps 200 --out both$i >a.txt 2>a.err &
  a=$!
  "$char_lm" "${tiny[@]}" --steps 200 --out both$i --seed 7 >b.txt 2>b.err
  rb=$?
  wait $a
  ra=$?
  [[ $((ra + rb)) -eq 1 && $(cat a.err b.err | wc -l) -eq 1 ]] ||
    fail "two runs into one --out: statuses $ra and $rb, expected one 0 and one 1: $(cat a.err b.err)"
  grep -Eq "is in use by another run \(pid [0-9]+|is not empty" a.err b.err || fail "two runs: $(cat a.err b.err)"
done

# ---- a second SIGTERM (or Ctrl-C) ends the program at once, without finishing the step
"$char_lm" --data corpus.txt --layers 4 --dim 256 --heads 4 --context 128 --batch 32 --eval-interval 1000000 \
  --threads 1 --out twice >twice.txt 2>&1 &
pid=$!
wait_for twice/run.lock
sleep 0.5
kill -TERM $pid
sleep 0.05
kill -TERM $pid
wait $pid
rc=$?
[[ $rc -eq 143 && ! -e twice/checkpoint.safetensors ]] ||
  fail "two SIGTERMs: status $rc, expected 143 at once without a checkpoint: $(tail -c 300 twice.txt)"

# ---- a diverging run (lr 1, no clipping) stops at the first NaN, keeping its last good checkpoint
diverge=(--data corpus.txt --attn softmax --layers 2 --dim 64 --heads 2 --context 32 --batch 8 --steps 40
         --eval-batches 1 --lr 1 --grad-clip 0 --warmup 0 --min-lr 1 --weight-decay 0 --beta2 0.01 --threads 1)
run "diverging" 1 "the run diverged and stops (--on-nan stop); the last good checkpoint is nan1/checkpoint.safetensors (step" \
  "${diverge[@]}" --eval-interval 1 --out nan1
grep -qi nan nan1/metrics.csv && fail "a diverged run wrote NaN rows: $(tail -2 nan1/metrics.csv)"
"$char_lm" --load nan1/checkpoint.safetensors --sample 5 >/dev/null 2>err.txt || fail "--load of the kept checkpoint: $(cat err.txt)"
if command -v python3 >/dev/null; then  # every tensor finite (float32 and float64)
  python3 - nan1/checkpoint.safetensors <<'PY' || fail "the kept checkpoint holds a NaN or an infinity"
import json, math, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
head, data = json.loads(b[8:8 + n]), b[8 + n:]
for name, t in head.items():
    if name == "__metadata__" or t["dtype"] not in ("F32", "F64"):
        continue
    lo, hi = t["data_offsets"]
    fmt = "f" if t["dtype"] == "F32" else "d"
    if not all(math.isfinite(v) for v in struct.unpack(f"<{(hi - lo) // struct.calcsize(fmt)}{fmt}", data[lo:hi])):
        sys.exit(f"{name} is not finite")
PY
fi
run "diverging before the first checkpoint" 1 "the loss is -nan and the grad norm -nan: the run diverged and stops (--on-nan stop); no checkpoint was saved yet" \
  "${diverge[@]}" --eval-interval 100 --out nan2
[[ ! -e nan2/checkpoint.safetensors ]] || fail "a run that diverged before its first checkpoint wrote one"
run "--on-nan skip-step" 1 "the run diverged and stops (--on-nan skip-step, 11 such steps in a row)" \
  "${diverge[@]}" --eval-interval 100 --on-nan skip-step --out nan3
grep -q "skipped (10 in a row, 10 in all)" out.txt || fail "--on-nan skip-step does not report its skips: $(tail -3 out.txt)"

# ---- a resume computes what the run would have: its corpus, its flags
run "resume without --data" 0 "" --resume r1/checkpoint.safetensors --out r4 --steps 6
grep -q "of $work/corpus.txt" out.txt || fail "resume without --data did not read the checkpoint's corpus: $(head -2 out.txt)"
{ cat corpus.txt; echo "and more"; } >other.txt
run "resume on another corpus" 1 "'other.txt' (" --resume r1/checkpoint.safetensors --data other.txt --out r5
grep -q "is not the corpus 'r1/checkpoint.safetensors' was trained on: '$work/corpus.txt' (" err.txt ||
  fail "resume on another corpus: $(cat err.txt)"
run "resume with another --lr" 1 "--lr 0.01: the checkpoint was trained with --lr 0.001" \
  --resume r1/checkpoint.safetensors --lr 0.01 --out r5
run "resume with another --eval-batches" 1 "--eval-batches 9: the checkpoint was trained with --eval-batches 2" \
  --resume r1/checkpoint.safetensors --eval-batches 9 --out r5
run "resume with another --eval-interval" 1 "--eval-interval 3: the checkpoint was trained with --eval-interval 2" \
  --resume r1/checkpoint.safetensors --eval-interval 3 --out r5
[[ ! -e r5 ]] || fail "a refused resume wrote $(ls r5)"

# ---- another program's checkpoint is named as such (same-length edits of the JSON header)
perl -0pe 's/"program":"char_lm"/"progrum":"char_lm"/; s/--layers 1/--patch  1/' r1/checkpoint.safetensors >vitlike.safetensors
run "a checkpoint with another program's flags" 1 "'vitlike.safetensors' is not a char_lm checkpoint" \
  --load vitlike.safetensors --sample 5
if [[ -n $vit ]]; then
  run_with "$vit" "a char_lm checkpoint to vit_fmnist" 1 "'r1/checkpoint.safetensors' is not a vit_fmnist checkpoint (it is char_lm's)" \
    --resume r1/checkpoint.safetensors
fi

# ---- vit_fmnist: SIGTERM mid-epoch saves the data position; the resumed epoch is the uninterrupted one
if [[ -n $vit && -s /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]]; then
  vtiny=(--dim 16 --depth 1 --heads 2 --mlp-ratio 1 --epochs 1 --batch 256 --warmup 10 --threads 1)
  "$vit" "${vtiny[@]}" --out v1 >v1.txt 2>&1 &
  pid=$!
  wait_for v1/run.lock
  sleep 0.3
  kill -TERM $pid
  wait $pid
  rc=$?
  grep -aq "stopped by SIGTERM at epoch 1, batch [0-9]*: resume with .*vit_fmnist --resume v1/checkpoint.safetensors" v1.txt &&
    [[ $rc -eq 143 ]] || fail "vit_fmnist SIGTERM: status $rc: $(tail -c 300 v1.txt)"
  run_with "$vit" "vit_fmnist: resume with another --lr" 1 "--lr 0.01: the checkpoint was trained with --lr 0.002" \
    --resume v1/checkpoint.safetensors --lr 0.01
  run_with "$vit" "vit_fmnist: the resume command" 0 "" --resume v1/checkpoint.safetensors --threads 1
  run_with "$vit" "vit_fmnist: the run uninterrupted" 0 "" "${vtiny[@]}" --out v2
  tensors() { local len; len=$(od -An -t u8 -N8 "$1" | tr -d ' '); tail -c +$((9 + len)) "$1"; }
  cmp -s <(tensors v1/checkpoint.safetensors) <(tensors v2/checkpoint.safetensors) ||
    fail "vit_fmnist: the run resumed mid-epoch ends with other weights than the uninterrupted one"
  run "a vit_fmnist checkpoint to char_lm" 1 "'v1/checkpoint.safetensors' is not a char_lm checkpoint (it is vit_fmnist's)" \
    --resume v1/checkpoint.safetensors
else
  echo "skipped: vit_fmnist's SIGTERM (no vit_fmnist given, or no Fashion-MNIST in /usr/share/datasets/fashion-mnist)"
fi

echo "run-directory checks: $failed failed"
((failed == 0))
