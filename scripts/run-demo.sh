#!/usr/bin/env bash
# Installs what weft needs, builds it (optimised) and runs its main job,
# `weft demo`: probe, rank, route and AllReduce on an emulated 4x4x4 fabric of
# network namespaces (root; without it, the simulator on the same fabric).
# Extra arguments go to weft demo (docs/demo.md), e.g. --fail 2:3.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
# Only the CLI: the demo needs nothing else (netns-fabric.sh is embedded), and
# tests and benchmarks would add 59 compile steps to its 109 on a fresh machine.
cmake --build build -j "${WEFT_JOBS:-$(nproc)}" --target weft
exec ./build/weft demo "$@"
