#!/usr/bin/env bash
# Where each AllReduce algorithm wins on this machine: the measurement behind
# weft's algorithm selection (collectives/selection.cc, docs/collectives.md
# "Selection", bench/results/2026-11-24-allreduce-selection.md).
#
#   bench/allreduce_sweep.sh [--transports "tcp shm"] [--ranks "2 3 4 8"] [--max-bytes 67108864]
#                            [--reps 2] [--batches 5] [--weft build/weft]
#
# For every transport x rank count x algorithm (butterfly, hd, ring) runs
# `weft bench allreduce` (verified: a wrong result fails the sweep) over sizes
# 4 B .. --max-bytes, x4, --reps passes interleaved, keeping the best time per
# size. Prints
#   1. the table: transport, ranks, size, time of each algorithm (us), and
#      the fastest;
#   2. the crossovers derived from it, per transport and rank count: the
#      smallest size from which HD (resp. ring) is at least as fast as every
#      algorithm meant for smaller sizes at that size and every larger one —
#      the thresholds of a SelectionRule.
# The table goes into bench/results/ between the selection-table markers
# (tests/collectives/selection_test.cc reads
# bench/results/2026-11-24-allreduce-selection.md); the test
# Selection.BuiltInRulesAreTheBestFitOfTheMeasuredTable checks that the
# built-in rules are its best fit: per transport and rank count, no other
# thresholds among the measured sizes bring the geometric mean of
# picked/fastest more than 1% closer to 1.
set -euo pipefail
cd "$(dirname "$0")/.."
transports="tcp shm"
ranks="2 3 4 8"
max=$((64 << 20))
reps=2
batches=5
weft=build/weft
while (($#)); do
  case "$1" in
    --transports) transports="$2"; shift 2 ;;
    --ranks) ranks="$2"; shift 2 ;;
    --max-bytes) max="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --batches) batches="$2"; shift 2 ;;
    --weft) weft="$2"; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "allreduce_sweep.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -x "$weft" ]] || { echo "allreduce_sweep.sh: $weft not built (cmake --build build --target weft)" >&2; exit 2; }
out=$(mktemp -d /tmp/weft-sweep-XXXXXX)
trap 'rm -rf "$out"' EXIT
algos="butterfly hd ring"

for ((rep = 1; rep <= reps; rep++)); do
  for t in $transports; do
    for n in $ranks; do
      for a in $algos; do
        echo "== pass $rep: $t, $n ranks, $a" >&2
        "$weft" bench allreduce -n "$n" --transport "$t" --algo "$a" -b 4 -e "$max" -f 4 --batches "$batches" |
          awk -v t="$t" -v n="$n" -v a="$a" \
            '!/^#/ && NF >= 8 { if ($8 != 0) { print "WRONG " $0 > "/dev/stderr"; exit 3 } print t, n, a, $1, $5 }' \
          >> "$out/rows"
      done
    done
  done
done

echo "<!-- selection-table: bench/allreduce_sweep.sh, $(date -u +%F), $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg) -->"
echo "| transport | ranks | size (B) | butterfly (us) | hd (us) | ring (us) | fastest |"
echo "|---|---|---|---|---|---|---|"
# best[t n a s] = min over passes; rows sorted by transport, ranks, size.
awk '{ k = $1 " " $2 " " $3 " " $4; if (!(k in b) || $5 < b[k]) b[k] = $5; key[$1 " " $2 " " $4] = 1 }
     END {
       for (k in key) {
         split(k, f, " ")
         bf = b[f[1] " " f[2] " butterfly " f[3]]; hd = b[f[1] " " f[2] " hd " f[3]]; rg = b[f[1] " " f[2] " ring " f[3]]
         best = "butterfly"; m = bf
         if (hd < m) { best = "hd"; m = hd }
         if (rg < m) { best = "ring"; m = rg }
         printf "%s %d %d %.2f %.2f %.2f %s\n", f[1], f[2], f[3], bf, hd, rg, best
       }
     }' "$out/rows" | sort -k1,1 -k2,2n -k3,3n > "$out/table"
awk '{ printf "| %s | %d | %d | %.2f | %.2f | %.2f | %s |\n", $1, $2, $3, $4, $5, $6, $7 }' "$out/table"
echo "<!-- /selection-table -->"
echo
echo "Crossovers (bytes; 'never' = the larger algorithm never wins up to $max B):"
echo "| transport | ranks | hd from | ring from |"
echo "|---|---|---|---|"
# hd from: smallest s such that for every size >= s, min(hd, ring) <= butterfly;
# ring from: smallest s such that for every size >= s, ring <= hd.
awk '{ k = $1 " " $2; n[k]++; s[k, n[k]] = $3; bf[k, n[k]] = $4; hd[k, n[k]] = $5; rg[k, n[k]] = $6 }
     END {
       for (k in n) {
         h = "never"; r = "never"
         for (i = n[k]; i >= 1; i--) {
           big = hd[k, i] < rg[k, i] ? hd[k, i] : rg[k, i]
           if (big <= bf[k, i]) h = s[k, i]; else break
         }
         for (i = n[k]; i >= 1; i--) { if (rg[k, i] <= hd[k, i]) r = s[k, i]; else break }
         split(k, f, " ")
         printf "| %s | %d | %s | %s |\n", f[1], f[2], h, r
       }
     }' "$out/table" | sort -t'|' -k2,2 -k3,3n
