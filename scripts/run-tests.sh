#!/usr/bin/env bash
# Installs what weft needs, builds it twice and runs the whole test suite:
#   1. build/: optimised; the tests whose point is speed, volume or real
#      traffic (perf, scale, netns, rdma) and the torch backend's (torch: Python, which a
#      sanitized extension cannot be loaded into without preloading libasan);
#      these skip with a reason where the machine lacks root, QEMU, the
#      kernel package or PyTorch. The rdma ones (a soft-RoCE VM) run while
#      build 2 compiles; the others after the unit tests, one at a time.
#   2. build-asan/: Debug + AddressSanitizer + UBSan, unit tests (every label
#      but perf, netns, rdma, torch, scale) — memory and UB bugs fail here.
#   3. build-fuzz/: libFuzzer on the parsers that read the network.
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
# tests while they still run (their process group, then the VM), the fuzz
# stage's scratch directory.
rdma_log=build/rdma-tests.log
rdma_pid=""
fuzz_dir=""
cleanup() {
  if [[ -n $rdma_pid ]] && jobs -rp | grep -qx "$rdma_pid"; then
    echo "stopping the soft-RoCE VM tests; their log so far:"
    tail -20 "$rdma_log" || true
    kill -- "-$rdma_pid" 2>/dev/null || true
    bash scripts/rxe-vm.sh stop build/rdma-vm >/dev/null 2>&1 || true
  fi
  [[ -z $fuzz_dir ]] || rm -rf "$fuzz_dir"
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
# of it in the VM too (7 ranks: 104 s at stride 2, 64 s at stride 4).
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
# shards, not one sanitized process per case.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DWEFT_SANITIZE=ON -DWEFT_BUILD_BENCH=OFF \
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

stage "perf, netns, torch and scale tests, optimised build, one at a time"
ctest --test-dir build --output-on-failure -L 'perf|netns|torch|scale' --timeout 900

# libFuzzer (clang) on the probe packet, control-message and sealed-frame parsers and the
# TCP store's protocol, bounded in time (WEFT_FUZZ_SECONDS per target); a
# crash fails the run.
stage "fuzz: probe packet, control-message, sealed control-frame and store protocol parsers, ${WEFT_FUZZ_SECONDS:-60} s each"
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_FUZZ=ON \
  -DWEFT_BUILD_TESTS=OFF -DWEFT_BUILD_BENCH=OFF -DWEFT_WERROR=OFF "${launcher[@]}" >/dev/null
cmake --build build-fuzz -j "$jobs" --target probe_packet_fuzz control_message_fuzz sealed_frame_fuzz store_protocol_fuzz
# libFuzzer runs on one core: $jobs targets at a time, each on a copy of its
# seed corpus; a target that fails prints its last lines and fails the run.
fuzz_dir=$(mktemp -d)
run_fuzz() {
  local t=$1
  mkdir "$fuzz_dir/$t"
  cp tests/fuzz/corpus/${t%%_*}/* "$fuzz_dir/$t/" 2>/dev/null || true
  ./build-fuzz/${t}_fuzz -max_total_time="${WEFT_FUZZ_SECONDS:-60}" -print_final_stats=1 "$fuzz_dir/$t" \
    >"$fuzz_dir/$t.log" 2>&1
}
fuzz_targets=(probe_packet control_message sealed_frame store_protocol)
failed=()
for ((i = 0; i < ${#fuzz_targets[@]}; i += jobs)); do
  batch=("${fuzz_targets[@]:i:jobs}")
  pids=()
  for t in "${batch[@]}"; do
    run_fuzz "$t" &
    pids+=($!)
  done
  for k in "${!batch[@]}"; do
    t=${batch[k]}
    if wait "${pids[k]}"; then
      echo "-- $t"; tail -4 "$fuzz_dir/$t.log"
    else
      echo "-- $t FAILED"; tail -60 "$fuzz_dir/$t.log"; failed+=("$t")
    fi
  done
done
if ((${#failed[@]})); then
  echo "fuzz: ${failed[*]} failed" >&2
  exit 1
fi
if ((rdma_rc != 0)); then
  echo "the soft-RoCE VM tests failed (ctest exit $rdma_rc; their output is after the ASan build)" >&2
  exit 1
fi
stage "done"
