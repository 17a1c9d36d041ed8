#!/usr/bin/env bash
# fuzz.sh: libFuzzer (clang, build-fuzz/) on the probe packet, control-message
# and sealed-frame parsers and the TCP store's protocol (the default list), or
# on the targets WEFT_FUZZ_TARGETS names, also plan_parse (the route plan
# reader):
#   WEFT_FUZZ_TARGETS=plan_parse WEFT_FUZZ_SECONDS=300 scripts/fuzz.sh
# Builds the targets, then runs each for WEFT_FUZZ_SECONDS (default 60) of
# wall time on a copy of its seed corpus (tests/fuzz/corpus/), WEFT_JOBS at a
# time; a target that crashes prints its last lines and the script exits 1.
# scripts/run-tests.sh runs the default list beside the timed tests: a third
# batch of two-at-a-time ran into the rail demo's timed test and halved its
# figures (tests/integration/demo_rail_netns_test.cc), so plan_parse is not
# in it.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${WEFT_JOBS:-$(nproc)}
seconds=${WEFT_FUZZ_SECONDS:-60}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)

echo "fuzz: ${seconds} s per target, ${jobs} at a time"
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_FUZZ=ON \
  -DWEFT_BUILD_TESTS=OFF -DWEFT_BUILD_BENCH=OFF -DWEFT_WERROR=OFF "${launcher[@]}" >/dev/null
read -r -a fuzz_targets <<< "${WEFT_FUZZ_TARGETS:-probe_packet control_message sealed_frame store_protocol}"
cmake --build build-fuzz -j "$jobs" --target "${fuzz_targets[@]/%/_fuzz}"
# libFuzzer runs on one core: $jobs targets at a time, each on a copy of its
# seed corpus; a target that fails prints its last lines and fails the run.
fuzz_dir=$(mktemp -d)
trap 'rm -rf "$fuzz_dir"' EXIT
trap 'exit 143' TERM INT  # so that the EXIT trap runs when run-tests.sh stops us
run_fuzz() {
  local t=$1
  mkdir "$fuzz_dir/$t"
  cp tests/fuzz/corpus/${t%%_*}/* "$fuzz_dir/$t/" 2>/dev/null || true
  ./build-fuzz/${t}_fuzz -max_total_time="$seconds" -print_final_stats=1 "$fuzz_dir/$t" \
    >"$fuzz_dir/$t.log" 2>&1
}
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
