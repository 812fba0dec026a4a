#!/usr/bin/env bash
# Prepare the examples' datasets once, the way nanoGPT has a prepare step. Idempotent: what is
# already there is only checked.
#
#   scripts/prepare_data.sh [fmnist|kjv|shakespeare|all]     (default: fmnist and kjv)
#
#   fmnist  Fashion-MNIST from Debian's dataset-fashion-mnist (IDX files under
#           /usr/share/datasets/fashion-mnist; the examples read them in place).
#   kjv     the King James Bible as plain text, $LINEA_DATA_DIR/kjv.txt (default: data/kjv.txt in
#           the repository): Debian's bible-kjv stores it in a private compressed format, so its own
#           `bible` program prints every verse and we strip the verse numbers, one verse per line.
#   shakespeare  tiny-shakespeare (Karpathy's char-rnn corpus, 1,115,394 bytes), the corpus
#           nanoGPT's figures are on, as $LINEA_DATA_DIR/tinyshakespeare.txt: downloaded, or
#           copied from LINEA_SHAKESPEARE_SRC=<file> on a machine without network; either way
#           checked against its SHA-256.
set -euo pipefail

what=${1:-all}
root=$(cd "$(dirname "$0")/.." && pwd)
data_dir=${LINEA_DATA_DIR:-$root/data}

# Installs the Debian packages given that are missing (as root, or through passwordless sudo).
need_packages() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" > /dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "prepare_data: installing ${missing[*]}"
  local as_root=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo > /dev/null 2>&1 && sudo -n true 2> /dev/null; then
      as_root=(sudo)
    else
      echo "prepare_data: cannot install packages (needs root or passwordless sudo); as root run:" >&2
      echo "    apt-get install -y ${missing[*]}" >&2
      exit 1
    fi
  fi
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" ||
    { "${as_root[@]}" apt-get update && "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y --no-install-recommends "${missing[@]}"; }
}

prepare_fmnist() {
  need_packages dataset-fashion-mnist
  local dir=/usr/share/datasets/fashion-mnist
  for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    [ -s "$dir/$f.gz" ] || { echo "prepare_data: $dir/$f.gz is missing" >&2; exit 1; }
  done
  echo "prepare_data: Fashion-MNIST ready in $dir"
}

prepare_kjv() {
  local out=$data_dir/kjv.txt
  if [ -s "$out" ]; then
    echo "prepare_data: $out ready ($(wc -c < "$out") bytes)"
    return 0
  fi
  need_packages bible-kjv bible-kjv-text
  mkdir -p "$data_dir"
  # -l with a huge width: one verse per line, "  <verse> <text>", under "<Book> <chapter>" headings.
  # Keep the verse lines without their numbers; write beside the target, then rename, so an
  # interrupted run never leaves a half file that looks prepared.
  bible -l1000000 gen1:1-rev22:21 | sed -n 's/^  [0-9][0-9]* //p' > "$out.tmp"
  local verses
  verses=$(wc -l < "$out.tmp")
  if [ "$verses" -ne 31102 ]; then
    echo "prepare_data: expected the 31102 verses of the KJV, got $verses; bible's output format changed?" >&2
    rm -f "$out.tmp"
    exit 1
  fi
  mv "$out.tmp" "$out"
  echo "prepare_data: wrote $out ($(wc -c < "$out") bytes, $verses verses)"
}

shakespeare_url=https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt
shakespeare_sha256=86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed

prepare_shakespeare() {
  local out=$data_dir/tinyshakespeare.txt
  if [ -s "$out" ] && echo "$shakespeare_sha256  $out" | sha256sum -c --status; then
    echo "prepare_data: $out ready ($(wc -c < "$out") bytes)"
    return 0
  fi
  mkdir -p "$data_dir"
  if [ -n "${LINEA_SHAKESPEARE_SRC:-}" ]; then
    cp "$LINEA_SHAKESPEARE_SRC" "$out.tmp"
  elif ! curl -fsSL --retry 2 -o "$out.tmp" "$shakespeare_url"; then
    rm -f "$out.tmp"
    echo "prepare_data: could not download $shakespeare_url; on a machine without network, give a copy:" >&2
    echo "    LINEA_SHAKESPEARE_SRC=/path/to/input.txt $0 shakespeare" >&2
    exit 1
  fi
  if ! echo "$shakespeare_sha256  $out.tmp" | sha256sum -c --status; then
    rm -f "$out.tmp"
    echo "prepare_data: tiny-shakespeare's SHA-256 is not $shakespeare_sha256: not the 1,115,394-byte corpus" >&2
    exit 1
  fi
  mv "$out.tmp" "$out"
  echo "prepare_data: wrote $out ($(wc -c < "$out") bytes)"
}

case $what in
  fmnist) prepare_fmnist ;;
  kjv) prepare_kjv ;;
  shakespeare) prepare_shakespeare ;;
  all) prepare_fmnist && prepare_kjv ;;
  *) echo "usage: $0 [fmnist|kjv|shakespeare|all]" >&2; exit 2 ;;
esac
