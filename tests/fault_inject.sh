#!/usr/bin/env bash
# Fault injection: a small char_lm run (tiny model, one CPU thread, seconds) interrupted N times
# each by kill -9, SIGTERM and SIGINT at random moments (while it starts, trains, evaluates or
# saves), resumed after each, must end with the weights and metrics rows of the same run left
# alone. Prints what each interruption hit and the counts.
#   fault_inject.sh CHAR_LM [N [SEED]]     (N interruptions of each kind, default 10; SEED: $RANDOM's)
# `make fault-inject` runs it with N=10. Exit status 0 only when every check holds.
set -u
set -m  # job control: background runs get SIGINT (without it a script's background jobs ignore it)
char_lm=$(realpath "$1")
n=${2:-10} seed=${3:-$$}
RANDOM=$seed
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
for i in $(seq 300); do echo "to be or not to be, that is the question $i"; done >corpus.txt
# A checkpoint (and a metrics row) every 20 steps: kill -9 loses at most 19 steps, redone on resume.
run=(--data corpus.txt --layers 1 --dim 32 --heads 2 --context 16 --batch 4 --eval-batches 2 --warmup 1
     --eval-interval 20 --threads 1)
# Enough steps that no run segment (at most 0.5 s) can finish the run: the training time per step,
# measured, with room to spare.
"$char_lm" "${run[@]}" --steps 300 --out calibrate >calibrate.txt 2>&1 || { echo "FAIL: $(tail -2 calibrate.txt)"; exit 1; }
ms=$(grep -ao '[0-9.]* ms/step' calibrate.txt | cut -d' ' -f1)
steps=$(awk -v ms="$ms" -v n="$n" 'BEGIN { if (ms < 0.1) ms = 0.1; printf "%d", 3 * n * 1.5 * 500 / ms }')
run+=(--steps "$steps")

failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
# The tensors of a safetensors file: the bytes after its header (whose metadata holds timings).
tensors() { local len; len=$(od -An -t u8 -N8 "$1" | tr -d ' '); tail -c +$((9 + len)) "$1"; }
# A checkpoint's step, from its header's metadata.
step_of() { head -c 100000 "$1" | grep -ao '"step":"[0-9]*"' | grep -o '[0-9]*'; }

"$char_lm" "${run[@]}" --out ref >ref.txt 2>&1 || { echo "FAIL: the uninterrupted run: $(tail -3 ref.txt)"; exit 1; }

# The interruptions in a random order; each run segment gets one after a random delay (0-0.5 s,
# from the start of the program: its start-up, before the handlers exist, is hit too).
kinds=()
for k in KILL TERM INT; do for _ in $(seq "$n"); do kinds+=("$k"); done; done
for ((i = ${#kinds[@]} - 1; i > 0; i--)); do
  j=$((RANDOM % (i + 1)))
  t=${kinds[i]} kinds[i]=${kinds[j]} kinds[j]=$t
done
declare -A sent=() graceful=()
segments=0
start() {  # the next segment: a fresh run until a checkpoint exists, then a resume (exec: $! is char_lm)
  if [[ -s run/checkpoint.safetensors ]]; then
    exec "$char_lm" --resume run/checkpoint.safetensors --threads 1
  else
    exec "$char_lm" "${run[@]}" --out run --overwrite on
  fi
}
for k in "${kinds[@]}"; do
  before=$(step_of run/checkpoint.safetensors 2>/dev/null || echo 0)
  start >seg.txt 2>&1 &
  pid=$!
  sleep "0.$(printf '%03d' $((RANDOM % 500)))"
  kill -"$k" "$pid" 2>/dev/null
  { wait "$pid"; } 2>/dev/null  # the shell's "Killed" notice is expected
  rc=$?
  segments=$((segments + 1))
  sent[$k]=$((${sent[$k]:-0} + 1))
  case $k in KILL) want=137 ;; TERM) want=143 ;; INT) want=130 ;; esac
  if [[ $rc -eq 0 ]]; then
    fail "segment $segments: the run finished before the $k (a longer run is needed)"
    break
  fi
  [[ $rc -eq $want ]] || fail "segment $segments: $k ended it with status $rc, expected $want: $(grep -av "^train " seg.txt | tail -3)"
  after=$(step_of run/checkpoint.safetensors 2>/dev/null || echo 0)
  if grep -aq "^stopped by SIG$k at step $after: resume with" seg.txt; then
    graceful[$k]=$((${graceful[$k]:-0} + 1))  # finished its step, saved, said how to resume
  elif [[ $k != KILL ]] && grep -aq "stopped by" seg.txt; then
    fail "segment $segments: the $k stop message names another step than the checkpoint's ($after): $(tail -1 seg.txt)"
  fi
  ((after < before)) && fail "segment $segments: the checkpoint went back from step $before to $after"
done
# The last segment runs to the end.
(start) >seg.txt 2>&1 || fail "the final resume: status $?: $(tail -2 seg.txt)"

same_weights=no same_rows=no
cmp -s <(tensors ref/checkpoint.safetensors) <(tensors run/checkpoint.safetensors) && same_weights=yes
# Every row once and equal (the seconds column aside: timings differ).
cmp -s <(cut -d, -f1-5 ref/metrics.csv) <(cut -d, -f1-5 run/metrics.csv) && same_rows=yes
[[ $same_weights == yes ]] || fail "the final weights differ from the uninterrupted run's"
[[ $same_rows == yes ]] || fail "metrics.csv differs from the uninterrupted run's: $(diff <(cut -d, -f1-5 ref/metrics.csv) <(cut -d, -f1-5 run/metrics.csv) | head -4 | xargs)"

echo "fault injection (seed $seed): $steps steps, $segments interruptions, $((segments + 1)) run segments"
printf '  SIGKILL  %2d sent; the checkpoint never went back a step, every one resumed\n' "${sent[KILL]:-0}"
for k in TERM INT; do
  printf '  SIG%-5s %2d sent: %2d stopped after their step with a checkpoint and the resume command, %2d hit the\n' \
    "$k" "${sent[$k]:-0}" "${graceful[$k]:-0}" $((${sent[$k]:-0} - ${graceful[$k]:-0}))
  printf '           start-up (before the handlers are installed: nothing trained yet, nothing to save)\n'
done
echo "  final weights bit-identical to the uninterrupted run: $same_weights; metrics rows identical: $same_rows"
echo "fault injection: $failed failed"
((failed == 0))
