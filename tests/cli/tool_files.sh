#!/usr/bin/env bash
# Where plot_metrics, attention_lab and mqar write, checked before they work: an output path that
# cannot be written is a one-line error at once (not an abort, not after the computation), a
# failed plot leaves no empty PNG, a long metrics.csv plots quickly, and a bad LINEA_DATA_DIR is
# an error naming it. A few seconds in all.
#   tool_files.sh BIN_DIR      (BIN_DIR holds plot_metrics, attention_lab, mqar)
set -u
bin=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
# run NAME EXPECTED_STATUS EXPECTED_TEXT PROGRAM ARGS...: runs BIN_DIR/PROGRAM within 60 s, checks
# its status and (for a failure) that stderr is one line holding EXPECTED_TEXT.
run() {
  local name=$1 want=$2 text=$3 program=$4
  shift 4
  timeout 60 "$bin/$program" "$@" >out.txt 2>err.txt
  local rc=$?
  [[ $rc -eq $want ]] || fail "$name: exit status $rc, expected $want ($(head -c 300 err.txt))"
  if [[ $want -ne 0 ]]; then
    [[ $(wc -l <err.txt) -eq 1 ]] || fail "$name: expected one line on stderr, got: $(head -c 300 err.txt)"
    [[ $(cat err.txt) == *"$text"* ]] || fail "$name: the error lacks '$text': $(head -c 300 err.txt)"
  fi
}

printf 'step,train_loss,val_loss\n1,2.5,2.6\n2,2.1,2.3\n' >metrics.csv
touch afile

# ---- plot_metrics: output folders that cannot be made
run "plot_metrics into a file" 1 "output folder 'afile': 'afile' exists and is not a directory" \
  plot_metrics metrics.csv afile
run "plot_metrics below a file" 1 "output folder 'afile/plots': cannot create" plot_metrics metrics.csv afile/plots
run "plot_metrics into /proc" 1 "output folder '/proc/nope': cannot create" plot_metrics metrics.csv /proc/nope
run "plot_metrics into a new folder" 0 "" plot_metrics metrics.csv plots/a
[[ -s plots/a/loss.png ]] || fail "plot_metrics wrote no plots/a/loss.png: $(ls -R plots)"

# ---- plot_metrics: a failed drawing leaves nothing; 400k rows are drawn (each series thinned to the width)
printf 'step,train_loss\n1,nan\n2,nan\n' >nan.csv
run "plot_metrics of a column without numbers" 1 "gnuplot failed" plot_metrics nan.csv nanplots
[[ -z $(ls -A nanplots) ]] || fail "a failed plot left: $(ls -A nanplots)"
# Noisy losses, as a real run's: drawing every point of such a zigzag takes gnuplot minutes.
awk 'BEGIN { srand(1); print "step,lr,train_loss,val_loss"
             for (i = 1; i <= 400000; i++) printf "%d,0.001,%.6f,%.6f\n", i, 2 + rand(), 2.1 + rand() }' >big.csv
run "plot_metrics of 400k rows" 0 "" plot_metrics big.csv bigplots
[[ $(ls -A bigplots) == loss.png && -s bigplots/loss.png ]] || fail "400k rows: $(ls -lA bigplots)"

# ---- attention_lab: --out and LINEA_DATA_DIR are checked before anything is trained or measured
run "attention_lab --out a file" 1 "--out 'afile': 'afile' exists and is not a directory" attention_lab --out afile
run "attention_lab --out in /proc" 1 "--out '/proc/nope': cannot create" attention_lab --out /proc/nope
LINEA_DATA_DIR=afile run "LINEA_DATA_DIR a file" 1 "[LINEA_DATA_DIR] 'afile' is not a directory" attention_lab --out lab
LINEA_DATA_DIR=/nonexistent run "LINEA_DATA_DIR missing" 1 "[LINEA_DATA_DIR] '/nonexistent' is not a directory" \
  attention_lab --out lab
[[ ! -e lab ]] || fail "a bad LINEA_DATA_DIR still created --out: $(ls -A lab)"

# ---- attention_lab: a checkpoint is described by what its metadata says (files without tensors:
# the lab prints the description, then refuses the missing weights)
safetensors_meta() {  # safetensors_meta FILE METADATA_JSON
  local header="{\"__metadata__\":$2}"
  local n=${#header}
  printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x\\x00\\x00\\x00\\x00' $((n & 255)) $((n >> 8 & 255)) \
    $((n >> 16 & 255)) $((n >> 24 & 255)))" >"$1"
  printf '%s' "$header" >>"$1"
}
for i in $(seq 300); do echo "to be or not to be, that is the question $i"; done >corpus.txt
# fake_runs DIR VIT_METADATA: the six runs the lab reads (a ViT and a char_lm per kind), the ViTs'
# metadata VIT_METADATA with ATTN replaced by the kind.
fake_runs() {
  for a in softmax linear mhla; do
    mkdir -p "$1/vit_fmnist_$a" "$1/char_lm_$a"
    safetensors_meta "$1/vit_fmnist_$a/checkpoint.safetensors" "${2//ATTN/$a}"
    safetensors_meta "$1/char_lm_$a/checkpoint.safetensors" "{\"config\":\"--attn $a\",\"step\":\"4000\"}"
  done
}
fake_runs r7 '{"config":"--attn ATTN","epoch":"7","batch":"0","step":"3283"}'
run "attention_lab, 7-epoch ViTs" 1 "missing key" attention_lab --runs r7 --text corpus.txt --out lab7
grep -q "^ViT-FMNIST: r7/vit_fmnist_softmax/checkpoint.safetensors (7 epochs of training)$" out.txt ||
  fail "7 epochs: $(cat out.txt)"
fake_runs r3 '{"config":"--attn ATTN","epoch":"3","batch":"120","step":"1527"}'
run "attention_lab, ViTs stopped mid-epoch" 1 "missing key" attention_lab --runs r3 --text corpus.txt --out lab3
grep -q "(3 epochs and 120 batches of training)" out.txt || fail "3 epochs and 120 batches: $(cat out.txt)"
cp r3/char_lm_softmax/checkpoint.safetensors r3/vit_fmnist_softmax/
run "attention_lab, a char_lm checkpoint as a ViT" 1 "has no \"epoch\" entry: not a vit_fmnist" \
  attention_lab --runs r3 --text corpus.txt --out lab_lm
# Each kind's pictures come from its own model: an MHLA ViT in the softmax run is refused.
cp r7/vit_fmnist_mhla/checkpoint.safetensors r7/vit_fmnist_softmax/
run "attention_lab, an MHLA ViT as the softmax one" 1 "was trained with --attn mhla; the lab reads it as the softmax ViT" \
  attention_lab --runs r7 --text corpus.txt --out lab_kind

# ---- mqar --sweep: the CSV and the PNG beside it are checked before the sweep trains
mkdir -p sweep/results.png
run "mqar --csv beside a directory named like its plot" 1 "'sweep/results.png' is a directory" \
  mqar --sweep on --quick on --csv sweep/results.csv
run "mqar --csv a directory" 1 "--csv 'sweep' is a directory" mqar --sweep on --quick on --csv sweep
[[ $(ls -A sweep) == results.png ]] || fail "a refused sweep left files: $(ls -A sweep)"

echo "tool output checks: $failed failed"
((failed == 0))
