#!/usr/bin/env bash
# rxe-vm.sh: run weft's verbs programs on real soft-RoCE (rdma_rxe) inside a
# throwaway QEMU VM. This machine's kernel has no RDMA and KVM is not usable,
# so the VM runs Debian's generic kernel (which ships rdma_rxe) under QEMU's
# software emulation (TCG). The guest's root is the host's / shared read-only
# over 9p, so binaries built on the host run unchanged inside it.
#
#   rxe-vm.sh fetch-kernel           (root) download + unpack Debian's kernel package
#                                    into the cache; idempotent (install-deps.sh runs it)
#   rxe-vm.sh start LAB              boot the VM; LAB is a writable directory (jobs,
#                                    logs). Exits 77 with the reason when the machine
#                                    cannot run it (no QEMU, no kernel package).
#   rxe-vm.sh exec LAB [-t S] -- CMD...
#                                    run CMD as root inside the running VM (cwd kept),
#                                    print its output, exit with its exit code; the host's
#                                    WEFT_TEST_* variables are passed along. With no
#                                    VM running, run CMD on the host with
#                                    WEFT_RDMA_VM_UNAVAILABLE=<reason> so tests skip.
#   rxe-vm.sh stop LAB               power the VM off, print the veth counters
#   rxe-vm.sh run CMD...             start + exec + stop in a temporary LAB (by hand)
#
# Inside the VM: rxe1 on veth end va (10.78.0.1) and rxe2 on vb (10.78.0.2),
# traffic between them really crosses the veth; WEFT_VERBS_DEVICES=rxe1,rxe2.
# Env: WEFT_VM_CACHE (/var/cache/weft/rxe-vm), WEFT_VM_MEM (MiB, 2048),
# WEFT_VM_SMP (2), WEFT_VM_LIFETIME (s, 3600: hard cap on a VM's life),
# WEFT_VM_IDLE (s, 600: the guest powers off without jobs that long),
# WEFT_VM_KEEP (host dirs under /tmp the guest must see; see keep_dirs).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${WEFT_VM_CACHE:-/var/cache/weft/rxe-vm}
SKIP=77

die() { echo "rxe-vm: $*" >&2; exit 1; }

fetch_kernel() {
  # Debian's generic kernel (not -cloud-, which lacks rdma_rxe); unpacked, never
  # installed on the host.
  if [[ -f $CACHE/kver && -f $CACHE/kernel/boot/vmlinuz-$(cat "$CACHE/kver") ]]; then
    echo "rxe-vm: kernel $(cat "$CACHE/kver") already in $CACHE"; return
  fi
  [[ $(id -u) == 0 ]] || die "fetch-kernel needs root (it writes $CACHE)"
  local kpkg
  kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
  if [[ -z $kpkg ]]; then apt-get update -qq
    kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}'); fi
  [[ -n $kpkg ]] || die "apt-cache knows no linux-image-amd64 kernel package"
  local kv=${kpkg#linux-image-} tmp
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' RETURN
  (cd "$tmp" && apt-get download -qq "$kpkg" >/dev/null 2>&1 && dpkg-deb -x "$kpkg"_*.deb kernel) ||
    die "cannot download $kpkg"
  depmod -b "$tmp/kernel" "$kv"
  mkdir -p "$CACHE"; rm -rf "$CACHE/kernel"; mv "$tmp/kernel" "$CACHE/kernel"
  echo "$kv" > "$CACHE/kver"
  echo "rxe-vm: kernel $kv unpacked in $CACHE"
}

# Why the VM cannot run here, or nothing.
unavailable_reason() {
  command -v qemu-system-x86_64 >/dev/null || { echo "qemu-system-x86_64 not installed (scripts/install-deps.sh installs it)"; return; }
  [[ -x /bin/busybox ]] && /bin/busybox --list 2>/dev/null | grep -qx switch_root ||
    { echo "static busybox not installed (apt-get install busybox-static)"; return; }
  [[ -f $CACHE/kver ]] || { echo "no VM kernel in $CACHE (run: scripts/rxe-vm.sh fetch-kernel as root)"; return; }
  command -v rdma >/dev/null || { echo "iproute2's rdma tool not installed"; return; }
  return 0
}

build_initramfs() {  # $1 = LAB, $2 = kernel version
  local lab=$1 kv=$2 ir=$1/initramfs m
  rm -rf "$ir"; mkdir -p "$ir/bin" "$ir/mods"
  cp /bin/busybox "$ir/bin/"; cp "$HERE/rxe-vm/init" "$ir/init"; chmod +x "$ir/init"
  # 9p over virtio-pci, with dependencies in load order.
  for m in $(for x in virtio_pci 9pnet_virtio 9p; do
               modprobe -d "$CACHE/kernel" -S "$kv" --show-depends $x; done | awk '$1=="insmod"{print $2}' | awk '!s[$0]++'); do
    cp "$m" "$ir/mods/"; basename "$m" .ko >> "$ir/mods/order"
  done
  (cd "$ir" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1) > "$lab/initramfs.gz"
}

# The host directories under /tmp that the guest must still see through its
# own /tmp (a tmpfs): the checkout these scripts are in and the build tree
# holding LAB, when they live under /tmp (a CI clone often does), plus
# WEFT_VM_KEEP (colon-separated). Without this the guest finds neither
# guest.sh nor the test binaries and its init exits. Nested ones are dropped:
# the outer bind shows them.
keep_dirs() {  # LAB
  local d out=() k inner
  for d in "$(dirname "$HERE")" "$(dirname "$1")" $(tr : " " <<< "${WEFT_VM_KEEP:-}"); do
    d=$(realpath -m "$d")
    [[ $d == /tmp/* ]] || continue
    inner=0
    for k in "${out[@]}"; do [[ $d == "$k" || $d == "$k"/* ]] && inner=1; done
    ((inner)) && continue
    for k in "${!out[@]}"; do [[ ${out[k]} == "$d"/* ]] && unset 'out[k]'; done
    out+=("$d")
  done
  local IFS=:; echo "${out[*]}"
}

qemu_alive() { [[ -f $1/qemu.pid ]] && kill -0 "$(cat "$1/qemu.pid")" 2>/dev/null; }

start() {
  local lab=$1 reason kv t0 keep
  mkdir -p "$lab"; lab=$(realpath "$lab")
  rm -rf "$lab/unavailable" "$lab/ready" "$lab/failed" "$lab/stop" "$lab/jobs" "$lab/netstats" "$lab/guest.log"
  if qemu_alive "$lab"; then die "a VM is already running for $lab (pid $(cat "$lab/qemu.pid"))"; fi
  reason=$(unavailable_reason)
  if [[ -n $reason ]]; then
    echo "$reason" > "$lab/unavailable"
    echo "rxe-vm: not started: $reason; the rdma tests will skip"; exit $SKIP
  fi
  kv=$(cat "$CACHE/kver")
  keep=$(keep_dirs "$lab")
  build_initramfs "$lab" "$kv"
  mkdir -p "$lab/jobs"
  t0=$(date +%s.%N)
  # TCG (no KVM here). The hard lifetime cap and the guest's idle power-off make
  # sure an interrupted test run never leaves a VM burning the shared cores.
  setsid timeout "${WEFT_VM_LIFETIME:-3600}" qemu-system-x86_64 -accel tcg,thread=multi -cpu "${WEFT_VM_CPU:-max}" \
    -smp "${WEFT_VM_SMP:-2}" -m "${WEFT_VM_MEM:-2048}" -nographic -no-reboot -nic none \
    -kernel "$CACHE/kernel/boot/vmlinuz-$kv" -initrd "$lab/initramfs.gz" \
    -append "console=ttyS0 quiet panic=-1 weftlab=$lab weftguest=$HERE/rxe-vm/guest.sh weftkdir=$CACHE/kernel weftidle=${WEFT_VM_IDLE:-600} weftkeep=$keep" \
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
    -virtfs "local,path=$lab,mount_tag=lab,security_model=none,multidevs=remap" \
    > "$lab/console.log" 2>&1 < /dev/null &
  echo $! > "$lab/qemu.pid"
  while [[ ! -f $lab/ready ]]; do
    if [[ -f $lab/failed ]] || ! qemu_alive "$lab"; then
      echo "rxe-vm: VM did not come up: $(cat "$lab/failed" 2>/dev/null || echo "qemu exited")" >&2
      tail -25 "$lab/console.log" >&2; stop "$lab" >/dev/null 2>&1 || true; exit 1
    fi
    if (( $(date +%s) - ${t0%.*} > 300 )); then
      echo "rxe-vm: VM not ready after 300 s" >&2; tail -25 "$lab/console.log" >&2; stop "$lab" >/dev/null 2>&1 || true; exit 1
    fi
    sleep 0.2
  done
  printf 'rxe-vm: VM ready in %.1f s (kernel %s, guest uptime %s s, devices %s)\n' \
    "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')" "$kv" "$(cut -d' ' -f1 "$lab/ready")" "$(cut -d' ' -f2- "$lab/ready")"
}

exec_job() {  # LAB [-t S] -- CMD...
  local lab=$1 timeout=600 d n rc t0; shift
  [[ ${1:-} == -t ]] && { timeout=$2; shift 2; }
  [[ ${1:-} == -- ]] && shift
  (( $# > 0 )) || die "exec: no command"
  # gtest_discover_tests lists a binary's tests at build time: no VM needed.
  for a in "$@"; do [[ $a == --gtest_list_tests ]] && exec "$@"; done
  lab=$(realpath -m "$lab")
  if [[ ! -f $lab/ready ]] || ! qemu_alive "$lab"; then
    local why="the soft-RoCE VM is not running (ctest -L rdma boots it)"
    [[ -f $lab/unavailable ]] && why="the soft-RoCE VM cannot run here: $(cat "$lab/unavailable")"
    WEFT_RDMA_VM_UNAVAILABLE=$why exec "$@"
  fi
  d=$(mktemp -d "$lab/jobs/XXXXXX")
  # The host's WEFT_TEST_* settings go along (the guest's environment is its
  # own), e.g. WEFT_TEST_BIG_COUNT_STRIDE=3 ctest -L rdma.
  { while IFS='=' read -r k v; do [[ $k == WEFT_TEST_* ]] && printf 'export %s=%q\n' "$k" "$v"; done < <(env)
    printf '%q ' "$@"; } > "$d/cmd"
  pwd > "$d/cwd"; echo "$timeout" > "$d/timeout"; : > "$d/go"
  t0=$(date +%s)
  while [[ ! -f $d/rc ]]; do
    if ! qemu_alive "$lab"; then
      cat "$d/out" 2>/dev/null || true
      echo "rxe-vm: the VM died while running: $*" >&2; tail -25 "$lab/console.log" >&2; exit 1
    fi
    # The guest enforces the timeout itself; this is the backstop for a hung guest.
    if (( $(date +%s) - t0 > timeout + 60 )); then echo "rxe-vm: no result after $((timeout + 60)) s: $*" >&2; exit 1; fi
    sleep 0.1
  done
  cat "$d/out"; rc=$(cat "$d/rc"); rm -rf "$d"
  (( rc == 124 )) && echo "rxe-vm: timed out after ${timeout} s inside the VM: $*" >&2
  exit "$rc"
}

stop() {
  local lab=$1 pid i
  lab=$(realpath -m "$lab")
  if [[ -f $lab/unavailable ]]; then echo "rxe-vm: no VM was started: $(cat "$lab/unavailable")"; exit $SKIP; fi
  qemu_alive "$lab" || { echo "rxe-vm: no VM running for $lab"; rm -f "$lab/qemu.pid"; return 0; }
  pid=$(cat "$lab/qemu.pid"); : > "$lab/stop"
  for ((i = 0; i < 300; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "rxe-vm: guest did not power off within 30 s; killing qemu (pid $pid)" >&2; kill -- "-$pid" 2>/dev/null || kill "$pid"
  fi
  rm -f "$lab/qemu.pid"
  [[ -f $lab/netstats ]] && cat "$lab/netstats"
  echo "rxe-vm: stopped"
}

case "${1:-}" in
  fetch-kernel) fetch_kernel ;;
  start) start "${2:?LAB}" ;;
  exec) shift; exec_job "$@" ;;
  stop) stop "${2:?LAB}" ;;
  run) shift; lab=$(mktemp -d /tmp/weft-rxe-vm.XXXXXX)
       trap 'stop "$lab" >/dev/null 2>&1 || true; rm -rf "$lab"' EXIT
       start "$lab" >&2; (exec_job "$lab" -- "$@"); exit $? ;;
  *) sed -n '2,27p' "$0"; exit 2 ;;
esac
