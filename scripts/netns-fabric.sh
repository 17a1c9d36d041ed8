#!/usr/bin/env bash
# netns-fabric.sh — a two-tier Clos (spine-leaf) fabric, or a rail-optimised
# multi-plane one, built from Linux network namespaces, for weft's integration
# tests, `weft demo` and by-hand experiments.
# Needs root, iproute2 and nftables. Every namespace, process and file it makes
# carries $WEFT_FABRIC_PREFIX, so several fabrics coexist on one machine.
#
# Commands (the stable interface; tests/integration/netns_fabric.h wraps it):
#   up S L H            build S spines, L leaves, H hosts per leaf
#   up-rail P G H S [R] a rail fabric as `weft topo gen rail --hosts H --nics G
#                       --spines S --planes P --rail-leaves R` describes it: P
#                       planes that share no switch, each with S spines and R
#                       leaves per rail (default 1); NIC g's port k of every
#                       host on a leaf of rail g in plane k
#   down                kill every process inside the fabric's namespaces,
#                       delete the namespaces and the state dir (idempotent)
#   hosts               "namespace ip leaf index" per host, leaves in order;
#                       a rail fabric: "namespace ip leaf index nic" per NIC,
#                       hosts in order, a host's NICs plane by plane
#   spines              "namespace loopback-ip" per spine
#   leaves              "namespace gateway-ip plane rail" per leaf (-1: none,
#                       as in a topology file: one plane has no plane number)
#   exec HOST CMD...    run CMD inside host HOST (a name such as h2-3, h2 or the
#                       full namespace name); stdin/stdout pass through
#   fail N M            fail link spine N <-> leaf M (spine end admin-down, leaf
#                       end loses carrier; every leaf withdraws spine N as next
#                       hop toward leaf M, as a routing protocol would)
#   restore N M         undo `fail N M`
#   failed              "N M" per failed link
#   cut N M             a gray failure of link spine N <-> leaf M: spine N drops
#                       every packet it would forward into or out of its port to
#                       leaf M, while both ends stay up and no route changes (a
#                       dying optic that keeps carrier; no routing protocol
#                       notices, so ECMP keeps hashing flows onto it)
#   mend N M            undo `cut N M`
#   cuts                "N M" per cut link
#   route SRC_IP DST_IP PROTO SPORT DPORT
#                       ground truth: the spine the fabric forwards this 5-tuple
#                       through (0 = same leaf, never leaves it; -1 = unreachable)
#   routes [FILE]       the same for many 5-tuples: one "SRC_IP DST_IP PROTO
#                       SPORT DPORT" per line of FILE (default stdin) -> one
#                       spine per stdout line
#   counters            per link and direction: "spine leaf up|down bytes packets"
#                       (up = leaf -> spine, read from the spine's interface
#                       counters), "spine probes PKTS" (DSCP-X packets the
#                       spine rewrote, from its nft counter), and per host link
#                       "host h<leaf>-<k> up|down bytes packets" (up = host ->
#                       leaf, read from the leaf's port counters; a rail
#                       host's port is "h<K>:<nic>")
#   seed N              set every switch's fib_multipath_hash_seed to N (a new
#                       ECMP hash for every flow from the next packet on)
#
# Environment (all optional):
#   WEFT_FABRIC_PREFIX=wf-   namespace prefix; use a unique one (e.g. with $$)
#   WEFT_FABRIC_STATE=/tmp/weft-fabric/$PREFIX  remembers S L H and failed links
#   PROBE_DSCP=8             spine N rewrites DSCP X -> X+N (weft probe's default X=8;
#                            X+S must be <= 63, DSCP is 6 bits)
#   HASH_SEED=12345          net.ipv4.fib_multipath_hash_seed (kernel >= 6.11):
#                            fixed so that runs and ground truth are reproducible
#   HASH_POLICY=3 HASH_FIELDS=0x0037  see below
#   LINK_RATE=               e.g. 100mbit: tbf on both ends of every spine-leaf veth
#   HOST_RATE=               tbf on both ends of every host-leaf veth
#   TBF_BURST=64kb
#   FABRIC_MTU=1500          MTU of every veth (9000: jumbo frames, as AI fabrics run;
#                            a tenth of the packets to forward and 99% payload)
#
# Naming and addressing (S <= 63-X, L <= 127, H <= 253; S, L in all planes):
#   namespaces            ${P}s<N>  ${P}l<M>  ${P}h<M>-<K>
#   spine N loopback      10.254.0.N/32 (ICMP time-exceeded from spine N has it
#                         as source: the TTL method reads the spine from it)
#   spine N <-> leaf M    spine dev dn<M> 172.16.N.(2M-2)/31, leaf dev up<N> 172.16.N.(2M-1)/31
#   leaf M                bridge br0 10.0.M.254/24; port h<K> -> host K's eth0 10.0.M.K/24
#
# A rail fabric (up-rail P G H S [R]) numbers spines and leaves plane by plane and
# names them as `weft topo gen rail` does (topology/builders.cc):
#   spine N (1..P*S)      ${P}pl<k>-s<i>, N = (k-1)*S + i: the topology's spine id,
#                         so its DSCP rewrite X -> X+N names it to the probe
#   leaf M (1..P*G*R)     ${P}pl<k>-r<g>-l<j>, M = ((k-1)*G + g-1)*R + j; the
#                         hosts in contiguous blocks over a rail's leaves
#   host K (1..H)         ${P}h<K>; NIC g's plane-k port eth<g>p<k> (0-based;
#                         eth<g> with one plane, and no pl<k>- prefix) is port
#                         h<K> of leaf M, address 10.0.M.K/24
#   host routing          one table per NIC (100 + M, `ip rule from 10.0.M.K`):
#                         what a NIC's address sends leaves on that NIC, to its
#                         own leaf; the main table's default is via the first NIC.
#                         Traffic between two NICs of one host stays inside it.
#   links                 spine N <-> leaf M only within a plane, addressed as above
#
# Pitfalls this script avoids (each cost someone an afternoon):
#   * fib_multipath_hash_policy 1 takes skb->hash when set, and veth carries the
#     sender socket's txhash for TCP and connected UDP: each connection would get
#     a random spine. Policy 3 with fields 0x37 (src/dst IP, proto, sport, dport;
#     Documentation/networking/ip-sysctl.rst) hashes the packet's own 5-tuple.
#   * the hash seed is random per namespace unless fixed: ground truth taken now
#     must hold for the probe run a second later, and runs must be reproducible.
#   * switches rate-limit ICMP errors (icmp_ratelimit, 1 per second per peer by
#     default): the TTL method would lose most answers. Switches get 0.
#   * IPv6 router solicitations and DAD add stray packets to every counter:
#     IPv6 is disabled in every namespace before any interface exists.
#   * a planned TCP connection binds the same source port to the same listener
#     run after run; a TIME_WAIT left by the last run refuses that 4-tuple
#     (EADDRNOTAVAIL) unless the host may reuse it: hosts get tcp_tw_reuse=1
#     (2, the default, allows it on loopback only; RFC 7323 timestamps make
#     the reuse safe).
#   * planned source ports come from 49152-65535 (weft route's default), inside
#     Linux's ephemeral range (32768-60999): an ephemeral connect (the TCP
#     store, an agent) could take a planned port first and make the planned
#     bind fail with EADDRINUSE. Hosts reserve the range
#     (ip_local_reserved_ports: autobind skips it, explicit bind still works).
#   * a collective's connection idles between the steps that use it; after an
#     RTO of idleness Linux restarts it from the initial window (RFC 2861, on
#     by default), so every step would begin in slow start: hosts get
#     tcp_slow_start_after_idle=0, as training clusters commonly set.
#   * a leaf keeps a next hop whose link is down unless
#     ignore_routes_with_linkdown=1; we also withdraw it explicitly (fail).
set -euo pipefail

P=${WEFT_FABRIC_PREFIX:-wf-}
STATE=${WEFT_FABRIC_STATE:-/tmp/weft-fabric/${P}}
X=${PROBE_DSCP:-8}
SEED=${HASH_SEED-12345}
RATE=${LINK_RATE:-}
HRATE=${HOST_RATE:-}
BURST=${TBF_BURST:-64kb}
MTU=${FABRIC_MTU:-1500}

die() { echo "netns-fabric: $*" >&2; exit 1; }
nsx() { local ns=$1; shift; nsenter --net=/run/netns/"$ns" "$@"; }
# The layout, from the state dir: S spines and L leaves in all, H hosts (per
# leaf for a Clos, in all for a rail fabric), PL planes, G rails (0 = Clos).
size() {
  [[ -f "$STATE/size" ]] || die "no fabric with prefix '$P' (run: up S L H)"
  read -r S L H PL G < "$STATE/size"; PL=${PL:-1}; G=${G:-0}
}
# Plane (0-based) of spine N and of leaf M: planes number their spines and
# leaves in consecutive blocks.
spine_plane() { echo $((($1 - 1) / (S / PL))); }
leaf_plane() { echo $((($1 - 1) / (L / PL))); }
# Switches and NICs are named as `weft topo gen` names them (builders.cc):
# a plane prefix pl<k>- when there are planes, rail leaves r<g>-l1, NIC g's
# plane-k port eth<g>p<k> (eth<g> with one plane).
plane_prefix() { ((PL > 1)) && echo "pl$(($1 + 1))-" || true; }
spine_ns() {
  if ((G == 0)); then echo "${P}s$1"; return; fi
  local k; k=$(spine_plane "$1"); echo "${P}$(plane_prefix "$k")s$(($1 - k * (S / PL)))"
}
leaf_ns() {
  if ((G == 0)); then echo "${P}l$1"; return; fi
  local k r=$((L / (PL * G))); k=$(leaf_plane "$1")
  echo "${P}$(plane_prefix "$k")r$(($(leaf_rail "$1") + 1))-l$((($1 - 1) % r + 1))"
}
# Rail (0-based) of a rail fabric's leaf M: a plane's leaves go rail by rail.
leaf_rail() { echo $(((($1 - 1) % (L / PL)) / (L / (PL * G)))); }
nic_name() { ((PL > 1)) && echo "eth$1p$2" || echo "eth$1"; }  # RAIL PLANE (0-based)
# Every host port: "host-namespace device leaf port-index address", hosts in
# order, a host's NICs plane by plane (the topology's NIC index k*G + g).
ports() {
  local l h i k g m
  if ((G == 0)); then
    for ((l=1;l<=L;l++)); do for ((h=1;h<=H;h++)); do echo "${P}h$l-$h eth0 $l $h 10.0.$l.$h"; done; done
    return
  fi
  # R leaves per rail hold the hosts in contiguous blocks, the first H mod R
  # blocks one host larger (as builders.cc splits them).
  local r=$((L / (PL * G))) j=0 left
  left=$((H / r + (H % r > 0)))
  for ((i=1;i<=H;i++)); do
    ((left > 0)) || { j=$((j + 1)); left=$((H / r + (j < H % r))); }
    left=$((left - 1))
    for ((k=0;k<PL;k++)); do for ((g=0;g<G;g++)); do
      m=$(((k * G + g) * r + j + 1)); echo "${P}h$i $(nic_name "$g" "$k") $m $i 10.0.$m.$i"
    done; done
  done
}
# Spine-leaf links: "spine leaf", the pairs of one plane.
links() {
  local s l
  for ((s=1;s<=S;s++)); do for ((l=1;l<=L;l++)); do
    (($(spine_plane "$s") == $(leaf_plane "$l"))) && echo "$s $l"
  done; done
  true
}

check_sizes() {  # SPINES-IN-ALL LEAVES-IN-ALL HOSTS-PER-LEAF
  ((X + $1 <= 63)) || die "PROBE_DSCP $X + $1 spines > 63: DSCP is 6 bits; use fewer spines or the TTL method"
  (($2 <= 127 && $3 <= 253)) || die "at most 127 leaves and 253 hosts per leaf (addressing plan)"
  [[ "$MTU" =~ ^[0-9]+$ ]] && ((MTU >= 576 && MTU <= 65535)) || die "FABRIC_MTU must be 576..65535: '$MTU'"
  [[ ! -e "$STATE/size" ]] || die "a fabric with prefix '$P' exists (run: down)"
}

up() {
  (($# == 3)) || die "usage: up SPINES LEAVES HOSTS_PER_LEAF"
  [[ "$1$2$3" =~ ^[0-9]+$ ]] || die "sizes must be positive integers: '$1' '$2' '$3'"
  (($1 >= 1 && $2 >= 1 && $3 >= 1)) || die "sizes must be >= 1"
  check_sizes "$1" "$2" "$3"
  mkdir -p "$STATE"; echo "$1 $2 $3" > "$STATE/size"
  build
}

up_rail() {
  (($# == 4 || $# == 5)) || die "usage: up-rail PLANES RAILS HOSTS SPINES_PER_PLANE [LEAVES_PER_RAIL]"
  local r=${5:-1}
  [[ "$1$2$3$4$r" =~ ^[0-9]+$ ]] || die "sizes must be positive integers: '$1' '$2' '$3' '$4' '$r'"
  (($1 >= 1 && $2 >= 1 && $3 >= 1 && $4 >= 1 && r >= 1)) || die "sizes must be >= 1"
  ((r <= $3)) || die "leaves per rail ($r) must be <= hosts ($3): every rail leaf needs a host"
  check_sizes $(($1 * $4)) $(($1 * $2 * r)) "$3"
  mkdir -p "$STATE"; echo "$(($1 * $4)) $(($1 * $2 * r)) $3 $1 $2" > "$STATE/size"
  build
}

build() {
  local S L H PL G s l h ns dev m k ip gw t
  size; : > "$STATE/failed"
  local spines=() leaves=() hosts=() port=()
  for ((s=1;s<=S;s++)); do spines+=("$(spine_ns "$s")"); done
  for ((l=1;l<=L;l++)); do leaves+=("$(leaf_ns "$l")"); done
  mapfile -t port < <(ports)
  mapfile -t hosts < <(printf '%s\n' "${port[@]}" | awk '!seen[$1]++ {print $1}')
  local link=(); mapfile -t link < <(links)

  # 1. namespaces
  for ns in "${spines[@]}" "${leaves[@]}" "${hosts[@]}"; do echo "netns add $ns"; done | ip -batch -

  # 2. sysctls BEFORE any interface exists, so the 'default' values apply to new links
  local common=(net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0)
  local sw=("${common[@]}" net.ipv4.ip_forward=1
    net.ipv4.fib_multipath_hash_policy="${HASH_POLICY:-3}"
    net.ipv4.fib_multipath_hash_fields="${HASH_FIELDS:-0x0037}"
    net.ipv4.conf.all.ignore_routes_with_linkdown=1
    net.ipv4.conf.default.ignore_routes_with_linkdown=1
    net.ipv4.icmp_ratelimit=0 net.ipv4.icmp_ratemask=0)
  [[ -n "$SEED" ]] && sw+=(net.ipv4.fib_multipath_hash_seed="$SEED")
  # A multi-NIC host answers ARP only on the NIC that holds the address and
  # asks from the address of the NIC it asks on (arp_ignore=1, arp_announce=2;
  # ip-sysctl.rst): each leaf learns only its own subnet's hosts.
  local hs=("${common[@]}" net.ipv4.ip_forward=0 net.ipv4.tcp_tw_reuse=1
    net.ipv4.tcp_slow_start_after_idle=0 net.ipv4.ip_local_reserved_ports=49152-65535)
  ((G > 0)) && hs+=(net.ipv4.conf.all.arp_ignore=1 net.ipv4.conf.all.arp_announce=2)
  for ns in "${spines[@]}" "${leaves[@]}"; do nsx "$ns" sysctl -q -w "${sw[@]}"; done
  for ns in "${hosts[@]}"; do nsx "$ns" sysctl -q -w "${hs[@]}"; done

  # 3. veth pairs, created directly inside their namespaces
  {
    for t in "${link[@]}"; do read -r s l <<< "$t"
      echo "link add dn$l netns ${spines[s-1]} mtu $MTU type veth peer name up$s netns ${leaves[l-1]} mtu $MTU"
    done
    for t in "${port[@]}"; do read -r ns dev m k ip <<< "$t"
      echo "link add h$k netns ${leaves[m-1]} mtu $MTU type veth peer name $dev netns $ns mtu $MTU"
    done
  } | ip -batch -

  # 4. addresses and static routes
  for ((s=1;s<=S;s++)); do
    {
      echo "link set lo up"; echo "addr add 10.254.0.$s/32 dev lo"
      for t in "${link[@]}"; do read -r h l <<< "$t"; ((h == s)) || continue
        echo "addr add 172.16.$s.$((2*l-2))/31 dev dn$l"; echo "link set dn$l up"
        echo "route add 10.0.$l.0/24 via 172.16.$s.$((2*l-1)) dev dn$l src 10.254.0.$s"
      done
    } | ip -n "${spines[s-1]}" -batch -
  done
  for ((l=1;l<=L;l++)); do
    {
      echo "link set lo up"
      echo "link add br0 type bridge"; echo "addr add 10.0.$l.254/24 dev br0"; echo "link set br0 up"
      for t in "${port[@]}"; do read -r ns dev m h ip <<< "$t"; ((m == l)) || continue
        echo "link set h$h master br0"; echo "link set h$h up"
      done
      for t in "${link[@]}"; do read -r s h <<< "$t"; ((h == l)) || continue
        echo "addr add 172.16.$s.$((2*l-1))/31 dev up$s"; echo "link set up$s up"
        echo "route add 10.254.0.$s/32 via 172.16.$s.$((2*l-2)) dev up$s"
      done
    } | ip -n "${leaves[l-1]}" -batch -
  done
  leaf_routes
  for ns in "${hosts[@]}"; do
    gw=""
    {
      for t in "${port[@]}"; do read -r h dev m k ip <<< "$t"; [[ "$h" == "$ns" ]] || continue
        [[ -n "$gw" ]] || { echo "link set lo up"; gw=10.0.$m.254; }
        printf 'addr add %s/24 dev %s\nlink set %s up\n' "$ip" "$dev" "$dev"
        # Source-address routing (one table per NIC, 100 + its leaf): what
        # NIC g's address sends leaves on NIC g, to its own leaf, as on a rail host.
        ((G == 0)) || printf 'rule add from %s table %d\nroute add 10.0.%d.0/24 dev %s src %s table %d\nroute add default via 10.0.%d.254 dev %s table %d\n' \
          "$ip" $((100 + m)) "$m" "$dev" "$ip" $((100 + m)) "$m" "$dev" $((100 + m))
      done
      echo "route add default via $gw"
    } | ip -n "$ns" -batch -
  done

  # 5. spine N rewrites DSCP X -> X+N on forwarded packets (RFC 2474 DSCP, 6 bits),
  #    counting all forwarded packets and the rewritten probes.
  for ((s=1;s<=S;s++)); do
    nsx "${spines[s-1]}" nft -f - <<EOF
table ip weft {
  counter transit_pkts {}
  counter probes {}
  chain transit {
    type filter hook forward priority mangle; policy accept;
    counter name "transit_pkts"
    ip dscp $X counter name "probes" ip dscp set $((X+s))
  }
}
EOF
  done

  # 6. optional shaping: tbf on BOTH ends of a veth = a rate-limited full-duplex link
  if [[ -n "$RATE" ]]; then
    for t in "${link[@]}"; do read -r s l <<< "$t"
      tc -n "${spines[s-1]}" qdisc add dev "dn$l" root tbf rate "$RATE" burst "$BURST" latency 50ms
      tc -n "${leaves[l-1]}" qdisc add dev "up$s" root tbf rate "$RATE" burst "$BURST" latency 50ms
    done
  fi
  if [[ -n "$HRATE" ]]; then
    for t in "${port[@]}"; do read -r ns dev m k ip <<< "$t"
      tc -n "${leaves[m-1]}" qdisc add dev "h$k" root tbf rate "$HRATE" burst "$BURST" latency 50ms
      tc -n "$ns" qdisc add dev "$dev" root tbf rate "$HRATE" burst "$BURST" latency 50ms
    done
  fi
}

# (Re)program every leaf: one ECMP route per remote leaf m whose next hops are the
# spines with both links (to l and to m) up. A failed link is withdrawn everywhere,
# as BGP would, so no flow is hashed onto a spine that cannot reach the target.
leaf_routes() {
  local S L H PL G l m s mp n f1 f2 k; local -A F=()
  size
  while read -r f1 f2; do [[ -n "$f1" ]] && F["$f1 $f2"]=1; done < "$STATE/failed"
  for ((l=1;l<=L;l++)); do
    k=$(leaf_plane "$l")
    for ((m=1;m<=L;m++)); do
      ((m == l)) && continue
      (($(leaf_plane "$m") == k)) || continue  # planes share no switch: no route between them
      mp="route replace 10.0.$m.0/24 proto static"; n=0
      for ((s=k*S/PL+1;s<=(k+1)*S/PL;s++)); do
        [[ -n "${F["$s $l"]:-}" || -n "${F["$s $m"]:-}" ]] && continue
        mp="$mp nexthop via 172.16.$s.$((2*l-2)) dev up$s weight 1"; n=$((n+1))
      done
      ((n == 0)) && mp="route replace unreachable 10.0.$m.0/24"
      echo "$mp"
    done | ip -n "$(leaf_ns "$l")" -batch -
  done
}

# Checks that spine $1 - leaf $2 is a link and sets SNS, LNS to their namespaces.
check_link() {
  local S L H PL G; size
  [[ "$1$2" =~ ^[0-9]+$ ]] && (($1 >= 1 && $1 <= S && $2 >= 1 && $2 <= L)) ||
    die "no link spine '$1' - leaf '$2' (spines 1..$S, leaves 1..$L)"
  (($(spine_plane "$1") == $(leaf_plane "$2"))) || die "no link spine '$1' - leaf '$2': they are on different planes"
  SNS=$(spine_ns "$1"); LNS=$(leaf_ns "$2")
}

fail() {
  check_link "$1" "$2"
  grep -qxF "$1 $2" "$STATE/failed" || echo "$1 $2" >> "$STATE/failed"
  ip -n "$SNS" link set "dn$2" down   # IPv4 drops the spine's routes via dn$2
  leaf_routes
}

restore() {
  check_link "$1" "$2"
  grep -vxF "$1 $2" "$STATE/failed" > "$STATE/failed.tmp" || true
  mv "$STATE/failed.tmp" "$STATE/failed"
  ip -n "$SNS" link set "dn$2" up
  ip -n "$SNS" route replace "10.0.$2.0/24" via "172.16.$1.$((2*$2-1))" dev "dn$2" src "10.254.0.$1"
  leaf_routes
}

# A cut is one nft table per spine (`ip weftcut`), a drop rule per cut port,
# at the forward hook after the DSCP rewrite (priority filter > mangle), so the
# spine's own counters still see what arrived.
cut() {
  check_link "$1" "$2"
  grep -qxF "$1 $2" "$STATE/cuts" 2>/dev/null && return 0
  nsx "$SNS" nft -f - <<EOF
table ip weftcut {
  chain drop_cut {
    type filter hook forward priority filter; policy accept;
  }
}
add rule ip weftcut drop_cut iifname "dn$2" counter drop comment "cut $1 $2"
add rule ip weftcut drop_cut oifname "dn$2" counter drop comment "cut $1 $2"
EOF
  echo "$1 $2" >> "$STATE/cuts"
}

mend() {
  check_link "$1" "$2"
  local h
  for h in $(nsx "$SNS" nft -a list chain ip weftcut drop_cut 2>/dev/null |
             awk -v c="\"cut $1 $2\"" 'index($0, c) {print $NF}'); do
    nsx "$SNS" nft delete rule ip weftcut drop_cut handle "$h"
  done
  grep -vxF "$1 $2" "$STATE/cuts" > "$STATE/cuts.tmp" 2>/dev/null || true
  mv "$STATE/cuts.tmp" "$STATE/cuts"
}

down() {
  local ns pid
  for ns in $(ip netns list | awk '{print $1}' | grep -F -- "$P" | grep "^${P}" || true); do
    # Processes left in the namespace (agents of a killed test) are ours: end them by PID.
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "$STATE"
}

hosts() {
  local S L H PL G ns dev m k ip; size
  ports | while read -r ns dev m k ip; do
    if ((G == 0)); then echo "$ns $ip $m $k"; else echo "$ns $ip $m $k $dev"; fi
  done
}

spines() {
  local S L H PL G s; size
  for ((s=1;s<=S;s++)); do echo "$(spine_ns "$s") 10.254.0.$s"; done
}

leaves() {
  local S L H PL G l; size
  for ((l=1;l<=L;l++)); do
    echo "$(leaf_ns "$l") 10.0.$l.254 $( ((PL > 1)) && leaf_plane "$l" || echo -1) $( ((G == 0)) && echo -1 || leaf_rail "$l")"
  done
}

host_ns() {
  case "$1" in "${P}"*) echo "$1" ;; h*) echo "${P}$1" ;; *) die "bad host '$1' (h<leaf>-<k>)" ;; esac
}

# routes: ask each source leaf's FIB what it would do with the 5-tuple
# (`ip route get DST from SRC iif br0 ipproto P sport S dport D` builds a real
# packet and hashes it like a forwarded one). Output order = input order.
routes() {
  local S L H PL G; size
  local tmp; tmp=$(mktemp -d); trap 'rm -rf "$tmp"' RETURN
  awk -v dir="$tmp" '
    NF == 0 { next }
    NF != 5 { print "bad line " NR ": want SRC_IP DST_IP PROTO SPORT DPORT" > "/dev/stderr"; exit 2 }
    {
      split($1, a, "."); split($2, b, ".")
      if (a[1] != 10 || a[2] != 0 || b[1] != 10 || b[2] != 0) { print "not a fabric host: " $0 > "/dev/stderr"; exit 2 }
      n++
      if (a[3] == b[3]) { kind[n] = "same"; next }
      kind[n] = a[3]; idx[a[3]] = idx[a[3]] + 1; pos[n] = idx[a[3]]
      printf "route get %s from %s iif br0 ipproto %s sport %s dport %s\n", $2, $1, $3, $4, $5 > (dir "/q." a[3])
    }
    END { for (i = 1; i <= n; i++) print kind[i], pos[i] > (dir "/order") }' || die "routes: bad input"
  local f l
  for f in "$tmp"/q.*; do
    [[ -e "$f" ]] || continue
    l=${f##*.}
    # -force: a destination on another plane answers an error line (and a
    # "Command failed" line), and the batch goes on.
    { ip -o -force -n "$(leaf_ns "$l")" -batch "$f" 2>&1 || true; } | awk '
      /^Command failed/ { next }
      / via 172\.16\./ { split($0, w, " via 172.16."); split(w[2], o, "."); print o[1]; next }
      { print -1 }' > "$tmp/a.$l"
  done
  awk -v dir="$tmp" '
    $1 == "same" { print 0; next }
    { f = dir "/a." $1; getline v < f; print v }' "$tmp/order"
}

route() { (($# == 5)) || die "usage: route SRC_IP DST_IP PROTO SPORT DPORT"; echo "$*" | routes; }

# Interface statistics over netlink (`ip -s -o link`, one line per device,
# fields split by '\': RX header, RX values, TX header, TX values) — not
# `ip netns exec ... cat /sys/...`, whose sysfs remount per namespace made a
# reading take seconds on a busy host.
link_stats() {  # NAMESPACE DEVICE-REGEX -> "dev rx_bytes rx_packets tx_bytes tx_packets"
  ip -o -s -n "$1" link show | awk -F'\\\\' -v re="$2" '
    { split($1, a, ": "); dev = a[2]; sub(/@.*/, "", dev); if (dev !~ re) next
      split($4, rx, " "); split($6, tx, " "); print dev, rx[1], rx[2], tx[1], tx[2] }'
}

counters() {
  local S L H PL G s l dev rxb rxp txb txp name; size
  for ((s=1;s<=S;s++)); do
    link_stats "$(spine_ns "$s")" '^dn[0-9]+$' | sort -V | while read -r dev rxb rxp txb txp; do
      echo "$s ${dev#dn} up $rxb $rxp"; echo "$s ${dev#dn} down $txb $txp"
    done
    echo "$s probes $(nsx "$(spine_ns "$s")" nft list counter ip weft probes | awk '/packets/ {print $2}')"
  done
  for ((l=1;l<=L;l++)); do
    link_stats "$(leaf_ns "$l")" '^h[0-9]+$' | sort -V | while read -r dev rxb rxp txb txp; do
      # A rail host's port names the NIC: h<K>:eth<g>p<k>.
      if ((G == 0)); then name="h$l-${dev#h}"; else name="h${dev#h}:$(nic_name "$(leaf_rail "$l")" "$(leaf_plane "$l")")"; fi
      echo "host $name up $rxb $rxp"; echo "host $name down $txb $txp"
    done
  done
}

# The kernel hashes with the seed at forwarding time (no per-flow state in the
# FIB), so a new seed moves flows at once, established connections included.
seed() {
  local S L H PL G n; size
  [[ "$1" =~ ^[0-9]+$ ]] || die "seed must be a non-negative integer: '$1'"
  for ((n=1;n<=S;n++)); do nsx "$(spine_ns "$n")" sysctl -q -w net.ipv4.fib_multipath_hash_seed="$1"; done
  for ((n=1;n<=L;n++)); do nsx "$(leaf_ns "$n")" sysctl -q -w net.ipv4.fib_multipath_hash_seed="$1"; done
}

cmd=${1:-}; (($#)) && shift
case "$cmd" in
  up) up "$@" ;;
  up-rail) up_rail "$@" ;;
  down) down ;;
  hosts) hosts ;;
  spines) spines ;;
  leaves) leaves ;;
  exec) (($# >= 2)) || die "usage: exec HOST CMD..."; ns=$(host_ns "$1"); shift; exec ip netns exec "$ns" "$@" ;;
  fail) (($# == 2)) || die "usage: fail SPINE LEAF"; fail "$1" "$2" ;;
  restore) (($# == 2)) || die "usage: restore SPINE LEAF"; restore "$1" "$2" ;;
  failed) size; cat "$STATE/failed" ;;
  cut) (($# == 2)) || die "usage: cut SPINE LEAF"; cut "$1" "$2" ;;
  mend) (($# == 2)) || die "usage: mend SPINE LEAF"; mend "$1" "$2" ;;
  cuts) size; cat "$STATE/cuts" 2>/dev/null || true ;;
  route) route "$@" ;;
  routes) if (($# == 1)); then routes < "$1"; else routes; fi ;;
  counters) counters ;;
  seed) (($# == 1)) || die "usage: seed N"; seed "$1" ;;
  *) echo "usage: $0 up S L H | up-rail P G H S [R] | down | hosts | spines | exec HOST CMD... | fail N M | restore N M | failed | cut N M | mend N M | cuts | route SRC DST PROTO SPORT DPORT | routes | counters | seed N" >&2; exit 2 ;;
esac
