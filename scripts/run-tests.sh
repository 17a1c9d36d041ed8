#!/usr/bin/env bash
# Installs what weft needs, builds it twice and runs the whole test suite:
#   1. build-asan/: Debug + AddressSanitizer + UBSan, unit tests (every label
#      but perf, netns, rdma) — memory and UB bugs fail here.
#   2. build/: optimised, the tests whose point is speed or real traffic
#      (perf, netns, rdma); these skip with a reason where the machine lacks
#      root, QEMU or the kernel package.
# CI (.ci/run) runs exactly this. WEFT_JOBS overrides the build parallelism.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${WEFT_JOBS:-$(nproc)}

bash scripts/install-deps.sh
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)

echo "== unit tests under ASan+UBSan"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DWEFT_SANITIZE=ON -DWEFT_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
cmake --build build-asan -j "$jobs"
ctest --test-dir build-asan --output-on-failure -j "$jobs" -LE 'perf|netns|rdma' --timeout 600

echo "== perf and integration tests, optimised build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -L 'perf|netns|rdma' --timeout 900
