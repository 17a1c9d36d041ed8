#!/bin/bash
# PID 1 of weft's soft-RoCE VM (after the initramfs switched to the host's
# read-only root). Sets up two rdma_rxe devices on a veth pair and then serves
# jobs that scripts/rxe-vm.sh drops into $LAB/jobs until told to stop or idle.
#
# Why a veth pair in the initial namespace with policy routing: rdma_rxe (6.1)
# binds its UDP socket in init_net only, and a packet to a local address would
# be looped back by the IP stack instead of crossing the veth. Rules at pref
# 10/11 deliver what arrives on va/vb locally; table 100 (pref 20) sends
# 10.78.0.1 <-> 10.78.0.2 out of the other end, ahead of the local table.
LAB=$1
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp LC_ALL=C
arg() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
KDIR=$(arg weftkdir); IDLE=$(arg weftidle)
log() { echo "weft-vm: $*" >> "$LAB/guest.log"; }
fail() { log "setup failed: $*"; echo "$*" > "$LAB/failed"; sync; busybox poweroff -f; }

mkdir -p /dev/shm /dev/pts; mount -t tmpfs shm /dev/shm; mount -t devpts devpts /dev/pts
# Module autoloading (rdma_rxe pulls crc32 through the crypto API) must look in
# the unpacked kernel, not the host's /lib/modules.
printf '#!/bin/sh\nexec /sbin/modprobe -d %s "$@"\n' "$KDIR" > /run/modprobe && chmod +x /run/modprobe
echo /run/modprobe > /proc/sys/kernel/modprobe
ip link set lo up
for m in crc32_generic rdma_rxe rdma_ucm veth; do modprobe -d "$KDIR" $m || fail "modprobe $m"; done
ip link add va type veth peer name vb || fail "veth"
# MTU 9000: rxe takes its port MTU from the netdev (rxe_set_mtu), so the path
# MTU becomes 4096 instead of 1024 and a message needs a quarter of the
# packets; under TCG the per-packet work (skb, softirq, ICRC) is what costs
# (hd_5ranks matrix over verbs: 30.7/34.2 s at 1024, 23.3/27.1 s at 4096).
ip link set va mtu 9000; ip link set vb mtu 9000
# RPS: each end's receive processing on one vCPU. Without it veth hands a
# packet to the backlog of whichever vCPU sent it, rxe's requester runs on
# either, and a QP's packets arrive out of order: ib_write_bw saw ~1300
# duplicate requests and ~40 requester retries per 100 MB, with RPS 0-18 and
# 0-1 (a retry waits for the NAK or the ACK timeout).
echo 1 > /sys/class/net/va/queues/rx-0/rps_cpus; echo 2 > /sys/class/net/vb/queues/rx-0/rps_cpus
# A lossless link, as RoCE assumes (PFC): veth hands every packet to the
# receiving vCPU's backlog, which drops beyond net.core.netdev_max_backlog
# (1000). 13 ranks' 156 QPs with up to 64 packets each in flight (rxe's
# RXE_INFLIGHT_SKBS_PER_QP_HIGH) plus their ACKs overflowed it: 108137 drops
# (/proc/net/softnet_stat) in three 13-rank runs, each one an rxe send_err.
# rxe 6.1 resends a locally dropped packet by a racy path that upstream later
# removed ("RDMA/rxe: Get rid of pkt resend on err", linux-rdma, 2024-03: "a
# deadlock in the send path for that qp"). Twice (CI at 0c6680b and its
# rerun) a one-shot 13-rank QP went to the error state with only flushes on
# its side in such a run; 7 later runs, with and without drops, passed, so
# the link is kept lossless and the counters are printed at shutdown. 65536
# holds every packet that can be in flight.
sysctl -qw net.core.netdev_max_backlog=65536
ip addr add 10.78.0.1/24 dev va; ip addr add 10.78.0.2/24 dev vb; ip link set va up; ip link set vb up
for i in all default va vb; do sysctl -qw net.ipv4.conf.$i.rp_filter=0 net.ipv4.conf.$i.accept_local=1; done
ip rule add pref 10 iif va lookup local; ip rule add pref 11 iif vb lookup local
ip rule add pref 20 lookup 100; ip rule add pref 100 lookup local; ip rule del pref 0
ip route add 10.78.0.2 dev va src 10.78.0.1 table 100; ip route add 10.78.0.1 dev vb src 10.78.0.2 table 100
rdma link add rxe1 type rxe netdev va || fail "rdma link add rxe1"
rdma link add rxe2 type rxe netdev vb || fail "rdma link add rxe2"
ulimit -l unlimited
# What the verbs tests use (tests/verbs/verbs_env.h reads it).
export WEFT_VERBS_DEVICES=rxe1,rxe2
echo "$(cut -d' ' -f1 /proc/uptime) $(ls /sys/class/infiniband | tr '\n' ' ')" > "$LAB/ready.tmp"
mv "$LAB/ready.tmp" "$LAB/ready"
log "ready: $(cat "$LAB/ready")"

# A job is $LAB/jobs/N/{cmd,cwd,timeout} plus a 'go' file written last; the
# guest runs it in the background and publishes rc atomically (rc.tmp -> rc)
# after its output is complete.
#
# The loop below forks nothing while it waits: under TCG a fork+exec costs
# tens to hundreds of milliseconds of guest CPU, and a `sleep`/`date` per
# tick once took ~45% of the VM's CPU away from the tests. Builtins only:
# read -t on a FIFO nobody writes is the sleep, $SECONDS the clock, a bash
# array remembers the jobs already started.
run_job() {
  local d=$1 rc cwd limit
  read -r cwd < "$d/cwd"; read -r limit < "$d/timeout"
  cd "$cwd" 2>/dev/null || cd /
  timeout -k 5 "$limit" bash "$d/cmd" > "$d/out" 2>&1 < /dev/null
  rc=$?
  echo "$rc" > "$d/rc.tmp"; mv "$d/rc.tmp" "$d/rc"
}
mkfifo /run/tick; exec {tick}<> /run/tick
declare -A started
last=$SECONDS
while [ ! -e "$LAB/stop" ]; do
  for go in "$LAB"/jobs/*/go; do
    [ -e "$go" ] || continue
    d=${go%/go}
    [ -n "${started[$d]:-}" ] && continue
    started[$d]=1
    run_job "$d" &
  done
  # A ctest run that was killed never sends 'stop': power off when idle
  # (idle counts from the end of the last job, not its start).
  jobs -r > /run/running
  if [ -s /run/running ]; then last=$SECONDS
  elif (( SECONDS - last > ${IDLE:-600} )); then log "idle, powering off"; break; fi
  read -rt 0.1 -u "$tick" _ || true
done
wait
# Drops and retries are what a failed verbs test needs explained first: the
# backlog drops (2nd column of softnet_stat, per vCPU, hex) and rxe's counters.
{ echo "== interface counters at shutdown"; ip -s link show va; ip -s link show vb
  echo "== softnet_stat (processed dropped squeezed ..., hex, one row per vCPU)"; cat /proc/net/softnet_stat
  echo "== rxe counters"; rdma statistic show; } > "$LAB/netstats" 2>&1
log "stopping at $(cut -d' ' -f1 /proc/uptime)s"
sync
busybox poweroff -f
