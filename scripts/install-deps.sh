#!/usr/bin/env bash
# Installs everything weft needs on Debian 12 (bookworm), as root. Idempotent:
# re-running it only installs what is missing.
#
#   scripts/install-deps.sh            build + test dependencies
#   scripts/install-deps.sh --extras   also the optional peers and tools:
#                                      DPDK's tools, Open MPI, Gloo
# Both also unpack Debian's generic kernel for the soft-RoCE VM into
# /var/cache/weft/rxe-vm (scripts/rxe-vm.sh fetch-kernel; skipped when present).
set -euo pipefail

core=(
  build-essential cmake ninja-build pkg-config ccache git
  libcli11-dev nlohmann-json3-dev libsimdjson-dev libspdlog-dev libfmt-dev
  libboost-dev libsqlite3-dev sqlite3 libpcap-dev libssl-dev libtoml11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev   # libFuzzer targets (tests/fuzz)
  iproute2 nftables procps
  # weft agent's metrics tests: Prometheus server and promtool (19 MB download, 96 MB installed)
  prometheus
  # verbs transport + the soft-RoCE VM that the rdma tests boot (scripts/rxe-vm.sh)
  libibverbs-dev ibverbs-providers rdma-core
  qemu-system-x86 busybox-static kmod tcpdump
  # ib_write_bw, the reference of the NCCL net plugin's bandwidth (bench/nccl_net_vs_ib_write_bw.sh)
  perftest
  # the dpdk probe backend and its netns tests (22.7 MB download, 144 MB, ~4 min on 2 busy cores)
  libdpdk-dev
  # the torch.distributed backend (torch/) and its tests: Debian's PyTorch 1.13 (CPU) for
  # /usr/bin/python3 (about 140 MB download, 630 MB installed with its dependencies, ~1 min)
  python3-torch libtorch-dev pybind11-dev
)
extras=(
  dpdk
  openmpi-bin libopenmpi-dev libgloo-dev
)

want=("${core[@]}")
[[ "${1:-}" == "--extras" ]] && want+=("${extras[@]}")

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
vm_kernel() {
  if [[ $(id -u) == 0 ]]; then bash "$(dirname "$0")/rxe-vm.sh" fetch-kernel
  else echo "install-deps: not root, not fetching the soft-RoCE VM kernel (rdma tests will skip)"; fi
}
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#want[@]} packages present"
  vm_kernel
  exit 0
fi
if [[ $(id -u) != 0 ]]; then
  echo "install-deps: missing ${missing[*]}; run as root (apt-get install)" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian's prometheus package enables its own server (port 9090, every
# address); weft's tests start their own on loopback and need only the binaries.
if [[ " ${missing[*]} " == *" prometheus "* && -d /run/systemd/system ]]; then
  systemctl disable --now prometheus >/dev/null 2>&1 || true
  echo "install-deps: disabled the prometheus service the package enabled (the tests start their own)"
fi
echo "install-deps: done"
vm_kernel
