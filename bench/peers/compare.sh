#!/usr/bin/env bash
# weft vs Gloo vs Open MPI, AllReduce f32 sum on this host, in one run, with
# a verdict on the performance criteria below.
#
#   bench/peers/compare.sh [--ranks "2 4"] [--min-bytes 4] [--max-bytes 268435456] [--reps 3] [--batches 5]
#                          [--weft build/weft] [--out DIR]
#   bench/peers/compare.sh --report DIR [--ranks "2 4"]   # the tables again, from a kept --out DIR
#
# Builds the peer drivers (bench/peers/CMakeLists.txt: Gloo from libgloo-dev,
# Open MPI from libopenmpi-dev/openmpi-bin), then --reps passes, each running
# for every rank count, one after the other:
#   - the loopback TCP limit (tcp_limit: bidirectional stream, 2 processes, Reno,
#     best 50 ms window, with 256 KiB, 1 MiB and 4 MiB writes; the best of all
#     is the limit)
#   - weft bench over TCP and over shared memory
#   - Gloo ring and halving-doubling over TCP
#   - Open MPI over the TCP BTL and over shared memory (vader)
# every library with Reno, the congestion control weft picks between ranks of
# one host (the host's default is Reno while the script runs, as root).
# Sizes --min-bytes (4 B) .. --max-bytes, x4. Every driver verifies each size before
# timing it (#wrong must be 0; a wrong row fails the script) and times it
# the same way (timing.h: --batches batches, the best batch's mean of the
# slowest rank); the best pass is kept per size, for every library alike,
# because the host is shared. Then per rank count a table of busbw (GB/s)
# and the ratios the criteria name, each marked ok or MISS:
#   tcp: weft-TCP >= min(1.25 x max(Gloo ring, Gloo HD, MPI-TCP), 0.9 x the
#        loopback limit) at >= 1 MiB (a copy-bound AllReduce cannot pass the
#        stream limit of two processes that only copy);
#        >= 1.0 from 4 KiB to 256 KiB
#   shm: weft-shm / MPI vader >= 1.0 at every size
# Exit status: 0 when every criterion holds, 1 when one misses, 2/3 when the
# run itself failed (setup, wrong results). --out keeps the raw rows.
set -euo pipefail
cd "$(dirname "$0")/../.."
ranks="2 4"
min=4
max=$((256 << 20))
reps=3
batches=5
weft=build/weft
out=""
report=0
while (($#)); do
  case "$1" in
    --ranks) ranks="$2"; shift 2 ;;
    --min-bytes) min="$2"; shift 2 ;;
    --max-bytes) max="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --batches) batches="$2"; shift 2 ;;
    --weft) weft="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --report) out="$2"; report=1; shift 2 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "compare.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
# Runs every driver --reps times into $out.
measure() {
  [[ -x "$weft" ]] || { echo "compare.sh: $weft not built (cmake --build build --target weft)" >&2; exit 2; }
  for p in libgloo-dev libopenmpi-dev openmpi-bin; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      { echo "compare.sh: $p missing: bash scripts/install-deps.sh --extras" >&2; exit 2; }
  done
  peers=build/peers
  cmake -S bench/peers -B "$peers" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$peers" >/dev/null
  cleanup=()
  trap 'for c in "${cleanup[@]}"; do eval "$c"; done' EXIT
  if [[ -z "$out" ]]; then
    out=$(mktemp -d /tmp/weft-compare-XXXXXX)
    cleanup+=('rm -rf "$out"')
  fi
  mkdir -p "$out"
  # One congestion control for every library: weft uses Reno to ranks on its
  # own host (--congestion-control auto), the peers the host's default, so
  # the default is Reno while this runs (root) and put back at the end;
  # without root, weft runs with the host's default as the peers do.
  cc_was=$(sysctl -n net.ipv4.tcp_congestion_control)
  weft_cc=()
  if [[ $cc_was != reno ]]; then
    if sysctl -qw net.ipv4.tcp_congestion_control=reno 2>/dev/null; then
      cleanup+=("sysctl -qw net.ipv4.tcp_congestion_control=$cc_was")
    else
      echo "compare.sh: cannot make Reno the default (not root?): every library runs with $cc_was" >&2
      weft_cc=(--congestion-control "")
    fi
  fi
  mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1)
  f=4
  echo "# $(date -u +%FT%TZ) $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg); ranks \"$ranks\", $min B..$max B x$f," \
       "$reps passes, $batches batches per size; congestion control $(sysctl -n net.ipv4.tcp_congestion_control) for all"

  # Keeps "size time(us)" rows of a run; fails on a wrong result.
  rows() { awk '!/^#/ && NF >= 8 { if ($8 != 0) { print "WRONG " $0 > "/dev/stderr"; exit 3 } print $1, $5 }'; }

  for ((rep = 1; rep <= reps; rep++)); do
    for n in $ranks; do
      echo "== pass $rep, $n ranks" >&2
      for chunk in 262144 1048576 4194304; do
        "$peers/tcp_limit" 1 "$chunk" | awk '{ for (i = 1; i < NF; i++) if ($i == "direction:") print $(i + 1) }' >> "$out/limit"
      done
      "$weft" bench allreduce -n "$n" --transport tcp -b "$min" -e "$max" -f $f --batches "$batches" "${weft_cc[@]}" |
        rows >> "$out/weft-tcp-$n"
      "$peers/gloo_allreduce" ring "$n" "$min" "$max" $f "$batches" | rows >> "$out/gloo-ring-$n"
      "$peers/gloo_allreduce" hd "$n" "$min" "$max" $f "$batches" | rows >> "$out/gloo-hd-$n"
      "${mpi[@]}" -np "$n" --mca btl tcp,self --mca btl_tcp_if_include lo "$peers/mpi_allreduce" "$min" "$max" $f "$batches" |
        rows >> "$out/mpi-tcp-$n"
      "$weft" bench allreduce -n "$n" --transport shm -b "$min" -e "$max" -f $f --batches "$batches" | rows >> "$out/weft-shm-$n"
      "${mpi[@]}" -np "$n" --mca btl vader,self "$peers/mpi_allreduce" "$min" "$max" $f "$batches" | rows >> "$out/mpi-shm-$n"
    done
  done
}

if ((report)); then
  [[ -s "$out/limit" ]] || { echo "compare.sh: $out holds no run" >&2; exit 2; }
else
  measure
fi

limit=$(sort -g "$out/limit" | tail -1)
echo
echo "loopback TCP limit (best of $(wc -l < "$out/limit") runs): $limit GB/s per direction"
misses=0
for n in $ranks; do
  echo
  echo "AllReduce f32 sum, $n ranks: busbw GB/s (best over the passes); ratios of busbw"
  printf "%10s %9s %9s %9s %9s %7s %7s %4s | %9s %9s %7s %4s\n" "size(B)" weft-tcp gloo-ring gloo-hd mpi-tcp \
    "w/peer" "w/lim" "tcp" weft-shm mpi-shm "w/vadr" "shm"
  # best[file, size] = the smallest time over the passes; busbw from it.
  # mawk has no sort: print rows in any order, then sort by size.
  table=$(awk -v limit="$limit" -v n="$n" -v d="$out" '
    { k = FILENAME SUBSEP $1; if (!(k in best) || $2 < best[k]) best[k] = $2; sizes[$1] = 1 }
    function bw(file, s,  k) { k = d "/" file "-" n SUBSEP s; return (k in best) ? s / best[k] / 1e3 * 2 * (n - 1) / n : 0 }
    END {
      for (key in sizes) {
        s = key + 0  # a number: keys are strings, and "4" > "1048576" as strings
        wt = bw("weft-tcp", s); gr = bw("gloo-ring", s); gh = bw("gloo-hd", s); mt = bw("mpi-tcp", s)
        ws = bw("weft-shm", s); ms = bw("mpi-shm", s)
        peer = gr; if (gh > peer) peer = gh; if (mt > peer) peer = mt
        tv = "-"
        if (s >= 1048576) {
          tv = (wt >= 1.25 * peer || wt >= 0.9 * limit) ? "ok" : "MISS"
        } else if (s >= 4096 && s <= 262144) {
          tv = wt >= peer ? "ok" : "MISS"
        }
        sv = ws >= ms ? "ok" : "MISS"
        printf "%10d %9.4g %9.4g %9.4g %9.4g %7.2f %7.2f %4s | %9.4g %9.4g %7.2f %4s\n", s, wt, gr, gh, mt,
               (peer > 0 ? wt / peer : 0), wt / limit, tv, ws, ms, (ms > 0 ? ws / ms : 0), sv
      }
    }' "$out"/weft-tcp-"$n" "$out"/gloo-ring-"$n" "$out"/gloo-hd-"$n" "$out"/mpi-tcp-"$n" \
       "$out"/weft-shm-"$n" "$out"/mpi-shm-"$n" | sort -n)
  echo "$table"
  misses=$((misses + $(grep -o MISS <<< "$table" | wc -l || true)))  # grep finds none: status 1 (pipefail)
done
echo
if ((misses)); then
  echo "criteria: $misses cells MISS"
  exit 1
fi
echo "criteria: every cell ok"
