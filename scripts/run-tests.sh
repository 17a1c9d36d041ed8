#!/usr/bin/env bash
# Installs what weft needs, builds it twice and runs the whole test suite:
#   1. build-asan/: Debug + AddressSanitizer + UBSan, unit tests (every label
#      but perf, netns, rdma, torch, scale) — memory and UB bugs fail here.
#   2. build/: optimised, the tests whose point is speed, volume or real
#      traffic (perf, scale, netns, rdma) and the torch backend's (torch: Python, which a
#      sanitized extension cannot be loaded into without preloading libasan);
#      these skip with a reason where the machine lacks root, QEMU, the
#      kernel package or PyTorch.
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

stage "unit tests under ASan+UBSan"
# No torch backend here: this pass runs no torch test (a sanitized Python
# extension would need libasan preloaded into the interpreter).
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DWEFT_SANITIZE=ON -DWEFT_BUILD_BENCH=OFF \
  -DWEFT_TEST_SET=unit -DWEFT_WITH_TORCH=OFF "${launcher[@]}" >/dev/null
cmake --build build-asan -j "$jobs"
ctest --test-dir build-asan --output-on-failure -j "$jobs" -LE 'perf|netns|rdma|torch|scale' --timeout 600

stage "perf and integration tests, optimised build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_TEST_SET=integration "${launcher[@]}" >/dev/null
cmake --build build -j "$jobs"
# The verbs matrix in the emulated VM gives its largest count to every 2nd
# (type, op) of a test, rotating with the rank count, so every combination
# still moves it over the wire at some rank count (tests/collectives/harness.h);
# WEFT_TEST_BIG_COUNT_STRIDE=1 runs all of them (13 ranks: 174 s instead of 107 s).
WEFT_TEST_BIG_COUNT_STRIDE=${WEFT_TEST_BIG_COUNT_STRIDE:-2} \
  ctest --test-dir build --output-on-failure -L 'perf|netns|rdma|torch|scale' --timeout 900

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
trap 'rm -rf "$fuzz_dir"' EXIT
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
stage "done"
