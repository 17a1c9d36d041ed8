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

# A store port below the kernel's ephemeral range (ip_local_port_range), so
# that no outgoing connection of a test running beside this one holds it;
# another listener can still take it first, so a bind failure on rank 0
# ("Address already in use") tries the next port, a few times.
lowest_ephemeral=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
try3() {  # try3 <program> <port>: 0 ok, 2 port taken, 1 failed
  local port=$2 i
  pids=()
  for i in 0 1 2; do
    RANK=$i WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 60 "$1" > "$tmp/out.$i" 2>&1 &
    pids+=($!)
  done
  local rc0=0
  wait "${pids[0]}" || rc0=$?
  if [ "$rc0" -ne 0 ] && grep -q "Address already in use" "$tmp/out.0"; then
    for i in 1 2; do kill "${pids[$i]}" 2>/dev/null || true; wait "${pids[$i]}" 2>/dev/null || true; done
    pids=()
    return 2
  fi
  [ "$rc0" -eq 0 ] || { echo "rank 0 of $1 failed (store port $port):"; cat "$tmp/out.0"; return 1; }
  for i in 1 2; do
    wait "${pids[$i]}" || { echo "rank $i of $1 failed (store port $port):"; cat "$tmp/out.$i"; return 1; }
  done
  pids=()
  for i in 0 1 2; do
    grep -q "rank $i of 3: sum 6 (expected 6), 0 of [0-9]* elements wrong" "$tmp/out.$i" || { cat "$tmp/out.$i"; return 1; }
  done
}
run3() {  # run3 <program>: 3 ranks, each must print the right sum and exit 0
  local attempt rc
  for attempt in 1 2 3 4 5; do
    rc=0
    try3 "$1" $((10000 + RANDOM % (lowest_ephemeral - 10000))) || rc=$?
    case $rc in
      0) echo "ok: $(basename "$1") on 3 ranks"; return 0 ;;
      2) echo "store port taken, trying another (attempt $attempt)" ;;
      *) exit 1 ;;
    esac
  done
  echo "no free store port in 5 attempts"; exit 1
}
run3 "$tmp/ex/allreduce_example"
run3 "$tmp/ex/allreduce_example_c"
run3 "$tmp/ex/pkgconfig_example"
