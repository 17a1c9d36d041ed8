#!/usr/bin/env bash
# weft vs Gloo vs Open MPI, AllReduce f32 sum on this host, in one run.
#
#   bench/peers/compare.sh [--ranks "2 4"] [--max-bytes 268435456] [--reps 2] [--weft build/weft]
#
# Builds the peer drivers (bench/peers/CMakeLists.txt: Gloo from libgloo-dev,
# Open MPI from libopenmpi-dev/openmpi-bin), then for every rank count runs,
# interleaved and --reps times each (the best busbw per size is kept, for
# every library alike, because the host is shared):
#   - the loopback TCP limit (tcp_limit: bidirectional stream, 2 processes)
#   - weft bench over TCP and over shared memory
#   - Gloo ring and halving-doubling over TCP
#   - Open MPI over the TCP BTL and over shared memory (vader)
# and prints busbw per size with the ratios the acceptance criteria name:
# weft-TCP / max(Gloo, MPI-TCP), weft-TCP / loopback limit, weft-shm / vader.
# Every driver verifies its results (#wrong must be 0; a wrong row fails).
set -euo pipefail
cd "$(dirname "$0")/../.."
ranks="2 4"
max=$((256 << 20))
reps=2
weft=build/weft
while (($#)); do
  case "$1" in
    --ranks) ranks="$2"; shift 2 ;;
    --max-bytes) max="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --weft) weft="$2"; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "compare.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -x "$weft" ]] || { echo "compare.sh: $weft not built (cmake --build build --target weft)" >&2; exit 2; }
for p in libgloo-dev libopenmpi-dev openmpi-bin; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    { echo "compare.sh: $p missing: bash scripts/install-deps.sh --extras" >&2; exit 2; }
done
peers=build/peers
cmake -S bench/peers -B "$peers" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$peers" >/dev/null
out=$(mktemp -d /tmp/weft-compare-XXXXXX)
trap 'rm -rf "$out"' EXIT
mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1)
f=4

# Keeps "size busbw" rows of a run; fails on a wrong result.
rows() { awk '!/^#/ && NF >= 8 { if ($8 != 0) { print "WRONG " $0 > "/dev/stderr"; exit 3 } print $1, $7 }'; }

for n in $ranks; do
  for ((rep = 1; rep <= reps; rep++)); do
    echo "== $n ranks, pass $rep" >&2
    "$peers/tcp_limit" 2 | awk '{ for (i = 1; i < NF; i++) if ($i == "direction:") print $(i + 1) }' >> "$out/limit"
    "$weft" bench allreduce -n "$n" --transport tcp -b 4 -e "$max" -f $f | rows >> "$out/weft-tcp-$n"
    "$peers/gloo_allreduce" ring "$n" 4 "$max" $f | rows >> "$out/gloo-ring-$n"
    "$peers/gloo_allreduce" hd "$n" 4 "$max" $f | rows >> "$out/gloo-hd-$n"
    "${mpi[@]}" -np "$n" --mca btl tcp,self --mca btl_tcp_if_include lo "$peers/mpi_allreduce" 4 "$max" $f | rows >> "$out/mpi-tcp-$n"
    "$weft" bench allreduce -n "$n" --transport shm -b 4 -e "$max" -f $f | rows >> "$out/weft-shm-$n"
    "${mpi[@]}" -np "$n" --mca btl vader,self "$peers/mpi_allreduce" 4 "$max" $f | rows >> "$out/mpi-shm-$n"
  done
done

limit=$(sort -g "$out/limit" | tail -1)
echo
echo "loopback TCP limit (best of $(wc -l < "$out/limit") runs): $limit GB/s per direction"
# best[size] over the passes, per library, joined into one table per rank count.
for n in $ranks; do
  echo
  echo "AllReduce f32 sum, $n ranks, busbw GB/s (best of $reps)"
  printf "%12s %9s %9s %9s %9s %8s %8s | %9s %9s %8s\n" "size(B)" weft-tcp gloo-ring gloo-hd mpi-tcp \
    "w/peer" "w/limit" weft-shm mpi-shm "w/vader"
  # mawk has no sort: print rows in any order, then sort by size.
  awk -v limit="$limit" -v n="$n" -v d="$out" '
    { k = FILENAME SUBSEP $1; if (!(k in best) || $2 > best[k]) best[k] = $2; sizes[$1] = 1 }
    END {
      for (s in sizes) {
        wt = best[d "/weft-tcp-" n, s]; gr = best[d "/gloo-ring-" n, s]; gh = best[d "/gloo-hd-" n, s]
        mt = best[d "/mpi-tcp-" n, s]; ws = best[d "/weft-shm-" n, s]; ms = best[d "/mpi-shm-" n, s]
        peer = gr; if (gh > peer) peer = gh; if (mt > peer) peer = mt
        printf "%12d %9.3f %9.3f %9.3f %9.3f %8s %8s | %9.3f %9.3f %8s\n", s, wt, gr, gh, mt,
               (peer > 0 ? sprintf("%.2f", wt / peer) : "-"), sprintf("%.2f", wt / limit),
               ws, ms, (ms > 0 ? sprintf("%.2f", ws / ms) : "-")
      }
    }' "$out"/weft-tcp-"$n" "$out"/gloo-ring-"$n" "$out"/gloo-hd-"$n" "$out"/mpi-tcp-"$n" \
       "$out"/weft-shm-"$n" "$out"/mpi-shm-"$n" | sort -n
done
