#!/usr/bin/env bash
# The installed package works: install weft into a temporary prefix, build
# examples/collectives against it with find_package(weft), build the C
# example again with pkg-config alone, and run each on 3 ranks (processes
# meeting through a TCP store on loopback). Cleans up after itself.
#   install_test.sh <build dir> <source dir> <extra link flags>
set -euo pipefail
build=$1 src=$2 flags=${3:-}
tmp=$(mktemp -d /tmp/weft-install-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src/examples/collectives" -B "$tmp/ex" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCMAKE_EXE_LINKER_FLAGS="$flags" >/dev/null
cmake --build "$tmp/ex" >/dev/null
PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" cc -std=c11 -o "$tmp/ex/pkgconfig_example" \
  "$src/examples/collectives/allreduce_example.c" $flags \
  $(PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs weft-collectives)

run3() {  # run3 <program>: 3 ranks, each must print the right sum and exit 0
  local port=$((30000 + RANDOM % 20000)) i
  pids=()
  for i in 0 1 2; do
    RANK=$i WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 60 "$1" > "$tmp/out.$i" 2>&1 &
    pids+=($!)
  done
  for i in 0 1 2; do
    wait "${pids[$i]}" || { echo "rank $i of $1 failed:"; cat "$tmp/out.$i"; exit 1; }
    grep -q "rank $i of 3: sum 6 (expected 6)" "$tmp/out.$i" || { cat "$tmp/out.$i"; exit 1; }
  done
  pids=()
  echo "ok: $(basename "$1") on 3 ranks"
}
run3 "$tmp/ex/allreduce_example"
run3 "$tmp/ex/allreduce_example_c"
run3 "$tmp/ex/pkgconfig_example"
