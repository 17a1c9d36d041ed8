#!/usr/bin/env bash
# Installs what weft needs, builds it three ways and runs the whole test suite:
#   1. build/: optimised; the tests whose point is speed, volume or real
#      traffic (perf, scale, netns, rdma) and the torch backend's (torch: Python, which a
#      sanitized extension cannot be loaded into without preloading libasan);
#      these skip with a reason where the machine lacks root, QEMU, the
#      kernel package or PyTorch. The rdma ones (a soft-RoCE VM) run while
#      build 2 compiles; the others after the unit tests, one at a time.
#   2. build-asan/: Debug + AddressSanitizer + UBSan, unit tests (every label
#      but perf, netns, rdma, torch, scale) — memory and UB bugs fail here.
#   3. build-fuzz/: libFuzzer on the parsers that read the network
#      (scripts/fuzz.sh), beside the torch and scale tests at idle
#      priority (the perf tests run before it, alone); the netns tests run
#      after it, alone.
#   Each build compiles only the test programs its pass runs (WEFT_TEST_SET).
# CI (.ci/run) runs exactly this. WEFT_JOBS overrides the build parallelism.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${WEFT_JOBS:-$(nproc)}

bash scripts/install-deps.sh
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)

# Each stage's header says how far into the run it starts (the budget is time).
stage() { echo "== $* (at ${SECONDS} s)"; }

# What the EXIT trap undoes, also when a stage fails: the background VM
# tests and fuzzers while they still run (their process groups; the VM).
rdma_log=build/rdma-tests.log
fuzz_log=build/fuzz.log
rdma_pid=""
fuzz_pid=""
running() { [[ -n $1 ]] && jobs -rp | grep -qx "$1"; }
cleanup() {
  if running "$rdma_pid"; then
    echo "stopping the soft-RoCE VM tests; their log so far:"
    tail -20 "$rdma_log" || true
    kill -- "-$rdma_pid" 2>/dev/null || true
    bash scripts/rxe-vm.sh stop build/rdma-vm >/dev/null 2>&1 || true
  fi
  if running "$fuzz_pid"; then
    echo "stopping the fuzzers"
    kill -- "-$fuzz_pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT

stage "optimised build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_TEST_SET=integration "${launcher[@]}" >/dev/null
cmake --build build -j "$jobs"

# The soft-RoCE tests (label rdma) spend their time in a QEMU VM under
# software emulation, which leaves part of the host's cores idle and checks
# correctness only, not speed: they run in the background while the ASan
# build compiles, and the run waits for them before any test that times
# itself. Their output follows the build's.
# The verbs matrix there gives its largest count to every 4th (type, op) of a
# test, rotating with the rank count; the rank counts 2-5 take every residue
# mod 4, so every combination still moves it over the wire with every
# algorithm (tests/collectives/harness.h); the unit pass runs the whole
# matrix over the loopback transports. WEFT_TEST_BIG_COUNT_STRIDE=1 runs all
# of it in the VM too (stage times: bench/results/2026-11-27-ci-time.md).
stage "soft-RoCE VM tests, in the background"
# setsid: its own process group, which the EXIT trap can end as a whole.
WEFT_TEST_BIG_COUNT_STRIDE=${WEFT_TEST_BIG_COUNT_STRIDE:-4} \
  setsid ctest --test-dir build --output-on-failure -L rdma --timeout 900 >"$rdma_log" 2>&1 &
rdma_pid=$!

stage "ASan+UBSan build (unity batches)"
# No torch backend here: this pass runs no torch test (a sanitized Python
# extension would need libasan preloaded into the interpreter). Unity batches
# of 8 sources cut its compile time by a third (two sources of one target
# then may not both define a file-local name: the batch fails to compile).
# The optimised build compiles the libraries and tools one source at a time,
# so a missing #include there still fails CI; the unit tests' own sources
# are compiled only in batches. Each test program runs as 4 GoogleTest
# shards, not one sanitized process per case. Debug info is line tables
# only (-g1): file and line in every frame are all a sanitizer report uses,
# and it compiles faster than full debug info.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DCMAKE_C_FLAGS_DEBUG=-g1 \
  -DWEFT_SANITIZE=ON -DWEFT_BUILD_BENCH=OFF \
  -DWEFT_TEST_SET=unit -DWEFT_WITH_TORCH=OFF -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=8 \
  -DWEFT_TEST_SHARDS=4 "${launcher[@]}" >/dev/null
cmake --build build-asan -j "$jobs"

stage "soft-RoCE VM tests: waiting for them"
# A failure here is reported now and fails the run at the end: the other
# stages still run and report.
rdma_rc=0
wait "$rdma_pid" || rdma_rc=$?
rdma_pid=""
cat "$rdma_log"

stage "unit tests under ASan+UBSan"
ctest --test-dir build-asan --output-on-failure -j "$jobs" -LE 'perf|netns|rdma|torch|scale' --timeout 600
# A shard passes whole, so name the cases that skipped and why (the log of
# every test's output).
awk '/: Skipped$/ { getline reason } /^\[  SKIPPED \] .* \([0-9]+ ms\)$/ { print "skipped: " $4 ": " reason; reason = "" }' \
  build-asan/Testing/Temporary/LastTest.log | sort -u

# The perf tests first, with nothing beside them: they measure CPU time
# (bench/rail_bench.cc: planning against the link-load check of the same
# flows), which a process on the other vCPU inflates even in the idle class
# (they share a core's caches, or the core itself), and not evenly.
stage "perf tests, optimised build, one at a time, nothing beside them"
ctest --test-dir build --output-on-failure -L perf -LE netns --timeout 900

# The fuzz stage checks for crashes, not speed: it runs beside the torch
# and scale tests in the idle scheduling class (sched(7) SCHED_IDLE: only
# on cycles nothing else wants; those tests leave about one of two cores
# idle), and its own process group. Two targets at a time then share about
# one core, so each runs 120 s instead of 60 for about as many executions.
# Not beside the netns tests: their figures are of real traffic on shaped
# links, and two idle-class fuzzers beside the rail demo's timed test took
# it below its floor (tests/integration/demo_rail_netns_test.cc).
stage "fuzz, in the background at idle priority"
WEFT_FUZZ_SECONDS=${WEFT_FUZZ_SECONDS:-120} setsid chrt --idle 0 bash scripts/fuzz.sh >"$fuzz_log" 2>&1 &
fuzz_pid=$!

stage "torch and scale tests, optimised build, one at a time"
ctest --test-dir build --output-on-failure -L 'torch|scale' -LE 'netns|perf' --timeout 900

stage "fuzz: waiting for it"
fuzz_rc=0
wait "$fuzz_pid" || fuzz_rc=$?
fuzz_pid=""
cat "$fuzz_log"

stage "netns tests, optimised build, one at a time, nothing beside them"
ctest --test-dir build --output-on-failure -L netns --timeout 900

failed=0
if ((fuzz_rc != 0)); then
  echo "fuzz: failed (exit $fuzz_rc; its output is above)" >&2
  failed=1
fi
if ((rdma_rc != 0)); then
  echo "the soft-RoCE VM tests failed (ctest exit $rdma_rc; their output is after the ASan build)" >&2
  failed=1
fi
((failed == 0)) || exit 1
stage "done"
