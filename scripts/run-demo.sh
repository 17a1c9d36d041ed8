#!/usr/bin/env bash
# Installs what weft needs, builds it (optimised) and runs its main job,
# `weft demo`, on the embedded default fabric. Extra arguments go to weft demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
cmake --build build -j "${WEFT_JOBS:-$(nproc)}"
exec ./build/weft demo "$@"
