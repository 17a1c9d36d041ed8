#!/usr/bin/env bash
# nccl_net_vs_ib_write_bw.sh: the NCCL net plugin's streaming bandwidth
# (bench/nccl_net_bw.cc) against perftest's ib_write_bw on the same rxe pair,
# in ONE boot of the soft-RoCE VM (scripts/rxe-vm.sh), and their ratio.
#
#   bench/nccl_net_vs_ib_write_bw.sh [BUILD_DIR]     (default: build)
#
# Both send from rxe1 (10.78.0.1) to rxe2 (10.78.0.2) over the VM's veth
# pair, path MTU 4096, one RC QP, DEPTH messages of each size in flight
# (ib_write_bw -t DEPTH), the same number of timed messages (BYTES / size),
# runs of the two interleaved so a change of the shared host's load hits
# both. ib_write_bw's numbers are its "BW average" (--report_gbits, 10^9
# bit/s); the plugin's are nccl_net_bw's. ratio = mean(plugin) / mean(ib_write_bw).
#
# Each comparison is made twice, with the CPUs free and with every process of
# both tools pinned to vCPU 0 (taskset -c 0). The VM has 2 vCPUs; RPS puts
# the receiving end's packet processing (vb: rxe2's rxe work, the copy into
# the receive buffer) on vCPU 1. ib_write_bw's server only sleeps, while a
# plugin receiver polls (NCCL drives a net plugin by polling test()), so
# with free CPUs the plugin's receiver competes with the data path for
# vCPU 1, a cost that two hosts do not have. Pinned, the user-space sides of
# both tools share vCPU 0 and vCPU 1 does the receive work for both.
# Env: SIZES ("1048576 4194304"), RUNS (3), DEPTH (8), BYTES (134217728),
# PINS ("free pinned").
# Not a ctest: it takes minutes and its numbers depend on the host's load.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
SIZES=${SIZES:-"1048576 4194304"} RUNS=${RUNS:-3} DEPTH=${DEPTH:-8} BYTES=${BYTES:-134217728}
PINS=${PINS:-"free pinned"}

# Inside the VM: the measurements.
in_vm() {
  local bw=$1 size n run ib pl gid pin on
  command -v ib_write_bw >/dev/null || { echo "ib_write_bw not installed (apt-get install perftest)" >&2; exit 1; }
  # ib_write_bw's -x: the index of rxe1's RoCE v2 GID of 10.78.0.1 (the one the plugin uses).
  for gid in /sys/class/infiniband/rxe1/ports/1/gids/*; do
    [[ $(cat "$gid") == *ffff:0a4e:0001 && $(cat "${gid/gids/gid_attrs/types}") == "RoCE v2" ]] && break
  done
  gid=${gid##*/}
  echo "| size | CPUs | run | ib_write_bw Gb/s | plugin Gb/s |"
  echo "|---|---|---|---|---|"
  for size in $SIZES; do for pin in $PINS; do
    n=$((BYTES / size)); ib=(); pl=(); on=()
    [[ $pin == pinned ]] && on=(taskset -c 0)
    for ((run = 1; run <= RUNS; run++)); do
      "${on[@]}" ib_write_bw -d rxe2 -x "$gid" -s "$size" -n "$n" -t "$DEPTH" -m 4096 -F --report_gbits -p 18515 \
        > /tmp/ib_srv.txt 2>&1 &
      local srv=$! t
      for ((t = 0; t < 100; t++)); do ss -ltn | grep -q ':18515 ' && break; sleep 0.1; done
      ib+=("$("${on[@]}" ib_write_bw -d rxe1 -x "$gid" -s "$size" -n "$n" -t "$DEPTH" -m 4096 -F --report_gbits -p 18515 10.78.0.2 |
               awk -v s="$size" '$1 == s && NF >= 5 {print $4}')")
      wait "$srv"
      pl+=("$("${on[@]}" "$bw" --send-dev rxe1 --recv-dev rxe2 --size "$size" --depth "$DEPTH" --messages "$n" 2>/dev/null |
               awk '{for (i = 1; i < NF; i++) if ($i == "gbps") print $(i + 1)}')")
      [[ -n ${ib[-1]} && -n ${pl[-1]} ]] || { echo "run $run of $size bytes failed" >&2; exit 1; }
      echo "| $size | $pin | $run | ${ib[-1]} | ${pl[-1]} |"
    done
    awk -v s="$size" -v p="$pin" -v a="${ib[*]}" -v b="${pl[*]}" 'BEGIN {
      n = split(a, x, " "); split(b, y, " "); for (i = 1; i <= n; i++) { sa += x[i]; sb += y[i] }
      printf "| %s | %s | mean | %.3f | %.3f |\n", s, p, sa / n, sb / n > "/tmp/means"
      printf "ratio %s bytes, CPUs %s: plugin / ib_write_bw = %.3f / %.3f = %.2f\n", s, p, sb / n, sa / n, sb / sa >> "/tmp/ratios" }'
    cat /tmp/means
  done; done
  cat /tmp/ratios
}

if [[ ${1:-} == --in-vm ]]; then in_vm "$2"; exit; fi
BUILD=$(realpath "${1:-$ROOT/build}")
[[ -x $BUILD/bench/nccl_net_bw ]] || { echo "no $BUILD/bench/nccl_net_bw (cmake --build $BUILD --target nccl_net_bw)" >&2; exit 1; }
LAB=$(mktemp -d /tmp/weft-ncclbw.XXXXXX)
trap 'bash "$ROOT/scripts/rxe-vm.sh" stop "$LAB" >/dev/null 2>&1 || true; rm -rf "$LAB"' EXIT
bash "$ROOT/scripts/rxe-vm.sh" start "$LAB"
echo "sizes $SIZES, depth $DEPTH, $BYTES bytes per run, $RUNS runs each, host load $(cut -d' ' -f1-3 /proc/loadavg)"
bash "$ROOT/scripts/rxe-vm.sh" exec "$LAB" -t 3000 -- env SIZES="$SIZES" RUNS="$RUNS" DEPTH="$DEPTH" BYTES="$BYTES" \
  PINS="$PINS" \
  bash "$HERE/nccl_net_vs_ib_write_bw.sh" --in-vm "$BUILD/bench/nccl_net_bw"
echo "host load after $(cut -d' ' -f1-3 /proc/loadavg)"
