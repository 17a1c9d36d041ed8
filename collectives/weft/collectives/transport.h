// The transport interface under every collective algorithm (after Gloo's
// Context -> Pair -> Buffer, reshaped so that an RDMA transport that writes
// one-sided into registered memory fits without emulation).
//
//   Transport   one per communicator and kind (tcp, shm, loopback, verbs):
//               connects this rank to its peers through the rendezvous Store,
//               registers memory, and makes progress (poll / wait).
//   Memory      a registered region (ibv_reg_mr for verbs; a no-op wrapper for
//               TCP, shm, loopback). Registration happens up front, before the
//               data moves. Where it pins pages (registration_pins), a Memory
//               stands for the pages, not the address: the communicator keeps
//               one only of memory it owns or that the application registered
//               (Communicator::register_buffer), never by address alone.
//   Pair        this rank's link to one peer. Two ordered queues:
//                 send(mem, offset, len) -> ticket
//                 recv(mem, offset, len) -> ticket
//               The i-th send posted on pair (a -> b) is delivered into the
//               i-th recv that b posted on pair (b <- a); lengths must match
//               (a mismatch is an error naming both). Messages of one pair
//               and direction complete in the order they were posted, so one
//               ticket stands for itself and every earlier post.
//               wait_send(t) returns when the source of send t may be reused;
//               wait_recv(t) when the data of recv t is in place.
//
// Why receiver-driven matching: a one-sided transport needs to know where to
// write before it writes. A verbs pair turns recv() into a small credit
// message to the peer (address, rkey, length) and send() into an RDMA WRITE
// WITH IMMEDIATE once the matching credit has arrived; the immediate data
// completes the receiver's recv (completion by notification, no polling of
// memory). TCP and shm implement the same contract with a header per message
// and copy-out on arrival. Algorithms post their recvs before their sends
// where they can, so the credit is on the wire before the data is ready.
//
// Progress: a transport moves data only inside its own calls (post, poll,
// wait); there is no hidden thread unless a backend documents one. Every
// blocking call takes a deadline and returns kDeadlineExceeded naming the
// peer it waited for; abort() from any thread makes every current and future
// blocking call return kAborted. A peer that dies (connection reset, process
// gone) turns the waits on it into kUnavailable naming it.
//
// Routes: TransportConfig carries per-peer routes (PeerRoute): the source
// port that this rank's connection (TCP) or queue pair (RoCEv2 UDP source
// port via the GRH flow label) towards the peer must use, and this rank's
// listen port (TCP dport of every flow into it). Zero means "any".
//
// Choosing a transport by name: make_transport("tcp" | "shm" | "loopback" |
// any name registered with register_transport, e.g. "verbs"). Tests read the
// name from the environment variable WEFT_TEST_TRANSPORT so that one
// correctness matrix runs over every backend (see tests/collectives/).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "weft/collectives/store.h"
#include "weft/common/status.h"

namespace weft::coll {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;
using Ticket = uint64_t;  // 1, 2, 3, ... per pair and direction; 0 = nothing posted

// A registered region of local memory. Valid until destroyed; a message
// still in flight from or into it may keep the registration a little longer.
class Memory {
 public:
  virtual ~Memory() = default;
  void* data() const { return data_; }
  size_t size() const { return size_; }

 protected:
  Memory(void* data, size_t size) : data_(data), size_(size) {}

 private:
  void* data_;
  size_t size_;
};

// Memory that needs no registration (TCP, shared memory, loopback): the
// address and length are all a transport keeps.
class HostMemory final : public Memory {
 public:
  HostMemory(void* data, size_t size) : Memory(data, size) {}
};

class Pair {
 public:
  virtual ~Pair() = default;
  virtual int peer() const = 0;

  // Posts a message of bytes [offset, offset+len) of `mem`; returns its
  // ticket. The memory must stay untouched until wait_send(ticket) returns.
  virtual Result<Ticket> send(const Memory& mem, size_t offset, size_t len) = 0;
  // A send whose source the caller leaves unmodified until the peer has
  // shown that it read the message: it answered with a message that it could
  // only send after (HD's allgather partner sends back the block it reduced
  // from this one). wait_send(ticket) then says only that the transport needs
  // no more calls for it; the transport may still read the source until the
  // peer has the bytes. Why: a transport can then send from the caller's
  // pages instead of copying them (TCP: vmsplice(2) + splice(2), one of the
  // two copies of every loopback byte; tcp/tcp_splice.cc). Default: send().
  virtual Result<Ticket> send_held(const Memory& mem, size_t offset, size_t len) { return send(mem, offset, len); }
  // Posts room for the next message from the peer at [offset, offset+len).
  virtual Result<Ticket> recv(Memory& mem, size_t offset, size_t len) = 0;

  virtual Status wait_send(Ticket t, Deadline deadline) = 0;
  virtual Status wait_recv(Ticket t, Deadline deadline) = 0;
  // Non-blocking: true once the operation has completed (error -> Status).
  virtual Result<bool> test_send(Ticket t) = 0;
  virtual Result<bool> test_recv(Ticket t) = 0;
};

// The route of one peer, from this rank's point of view.
struct PeerRoute {
  uint16_t sport = 0;  // source port of this rank's connection/QP to the peer; 0 = ephemeral
  // TCP with connections_per_peer > 1 under a plan that has as many
  // connections per pair (PlanFlow::conn): connection c's source port.
  // Empty: `sport` for connection 0, ephemeral for the others.
  std::vector<uint16_t> sports;
  uint16_t sport_of(size_t conn) const { return conn < sports.size() ? sports[conn] : conn == 0 ? sport : 0; }
  // TCP: the plan's flow's src_addr (one of this rank's listen addresses)
  // and dst_addr (one of the peer's); "" = chosen by the transport
  // (TcpOptions::listen_address: several addresses).
  std::string src_addr, dst_addr;
  friend bool operator==(const PeerRoute&, const PeerRoute&) = default;
};

struct TcpOptions {
  // The IPv4 address peers connect to; this rank's own connections leave
  // from it too (Gloo's and NCCL's choice, collectives/bootstrap/
  // listen_address.h). A comma list ("10.0.1.1,10.0.3.1", also in
  // WEFT_LISTEN_ADDR): the rank listens on each and publishes them all — a
  // NIC with a port on every plane of a multi-plane fabric, listed plane by
  // plane; a connection leaves from and goes to the addresses of its plan
  // flow (PeerRoute::src_addr/dst_addr), else to a peer address on one
  // subnet with one of this rank's, else at the same position in both
  // lists (docs/collectives-setup.md "Several addresses, several planes").
  // "" = the communicator chooses, first match wins:
  //   1. socket_ifname (below), if set;
  //   2. the environment: WEFT_LISTEN_ADDR (an address), or
  //      WEFT_SOCKET_IFNAME (interfaces, NCCL_SOCKET_IFNAME's syntax:
  //      "eth1", prefixes "eth,ib", exact "=eth1", all but "^docker,lo");
  //   3. 127.0.0.1 when every rank is on this host (CommConfig::host);
  //   4. this host's address on the route to the rendezvous (the TCP
  //      store's connection: MASTER_ADDR, WEFT_STORE; Store::local_address),
  //      unknown when the store's host is a name other than localhost that
  //      this host maps to loopback (Debian's and Ubuntu's 127.0.1.1);
  //   5. (a store of files knows no route) the first interface that is up
  //      and neither loopback nor docker*, as NCCL; else 127.0.0.1.
  // Of several interfaces that match a list, the one of 4, else the first
  // that is not loopback. An address set here or in WEFT_LISTEN_ADDR that
  // is not this host's (each one of a list), or a list that matches no interface that is up,
  // fails create() with one message naming it and where it was set, before
  // the rank writes anything to the store. A transport
  // made without a communicator (make_transport) listens on 127.0.0.1 for "".
  std::string listen_address;
  std::string socket_ifname;                 // interfaces to take listen_address from (as in 2.)
  uint16_t listen_port = 0;                  // 0 = ephemeral (no plan); a plan sets the dport
  // >1 stripes large messages (>= 256 KiB) over the connections; with a
  // route plan it must equal the plan's connections per directed pair
  // (`weft route --qps-per-connection`), connection c leaving from the
  // port of the pair's flow with conn = c. Left at 1, a communicator takes
  // the plan's.
  int connections_per_peer = 1;
  int socket_buffer_bytes = 4 << 20;         // SO_SNDBUF / SO_RCVBUF
  // Congestion control of the connections that carry this rank's data
  // (TCP_CONGESTION, tcp(7)). "auto": Reno where the peer is on this host
  // (loopback or this host's own address; no network to be congested, and
  // BBR, a common host default, paced loopback flows at the few GB/s it
  // measured while the receiver was off the CPU and halved large AllReduces
  // here: bench/results/2026-11-24-tcp-loopback.md), the host's default
  // (net.ipv4.tcp_congestion_control) elsewhere. "": the host's default
  // everywhere. A name (reno, cubic, dctcp, ...): that on every connection;
  // it must be in tcp_available_congestion_control and, without
  // CAP_NET_ADMIN, in tcp_allowed_congestion_control.
  std::string congestion_control = "auto";
  // A wait polls (yielding the CPU between polls) this long before it sleeps
  // in epoll_wait: a sleeping rank on a busy host wakes late.
  int spin_us = 2000;
  // Where this host's ranks outnumber the CPUs they may use and every peer
  // is over TCP, each rank moves once, at setup, to the CPU of its block of
  // consecutive ranks (ranks 0,1 | 2,3 for 4 ranks on 2 CPUs), so that the
  // partners that exchange the most copy through one cache
  // (collectives/cpu_placement.h has the figures). false: stay where the
  // scheduler or the launcher put the rank.
  bool group_on_cpus = true;
  // A held send (Pair::send_held) at least this long goes out from the
  // caller's pages: vmsplice(2) into a pipe of the connection, splice(2) to
  // the socket, no copy by the sender (the receiver still copies). Measured
  // on loopback (bench/results/2026-11-24-tcp-loopback.md).
  // 0: every send is copied by sendmsg(2).
  size_t splice_min_bytes = 256 << 10;
  // Tests only: data on a connection that leaves from one of these source
  // ports is never written by this rank (its sender) nor read by this rank
  // (its receiver, which leaves it in the kernel), as if the link its path
  // crosses dropped every packet (a gray failure). Empty: none.
  std::vector<uint16_t> test_silent_sports;
};

struct ShmOptions {
  size_t slot_bytes = 256 << 10;  // ring capacity = slots x slot_bytes per sender
  int slots = 8;
  // Messages at least this long are copied once, straight from the sender's
  // memory (process_vm_readv); 0 = always through the ring. Measured on this
  // VM (2 ranks, HD, quiet): 128 KiB messages took 22 us through the ring
  // and 108 us single-copy, 512 KiB ones 88-190 us against 295-325 us, 2
  // MiB ones 2.4 ms through the ring against 0.46-0.83 ms single-copy (the
  // pinning of the sender's pages costs more than a copy that stays in the
  // cache, until the two copies no longer fit in it).
  size_t single_copy_min_bytes = 1 << 20;
  // Single copy needs ptrace access to the sender. Each rank probes it per
  // peer at setup; a peer it may not read sends it everything through the
  // ring, and the rank logs one line. Where Yama's ptrace_scope is 1 (the
  // default on Ubuntu: only ancestors may), each rank first names its parent
  // as its ptracer (prctl PR_SET_PTRACER), which lets the ranks its launcher
  // started read it; this replaces a ptracer the application named itself.
  // false: name none.
  bool ptracer_parent = true;
  int spin_us = 5000;  // a wait polls (yielding between polls) this long, then sleeps on the futex
  // A sleeping wait looks again after this long even if no one woke it: how
  // late a peer that died without a word is noticed. 1..600000.
  int sleep_ms = 10;
};

// The verbs transport (collectives/verbs, built with rdma-core; see
// collectives/verbs/weft/verbs/verbs_transport.h). Plain data here so that
// configs can be written without verbs headers.
struct VerbsOptions {
  // This rank's RDMA device: `device` if set, else devices[i % size] if the
  // list is non-empty (several NICs on one host), where i is the rank's
  // index among the ranks of its host (its local rank, as NCCL pairs a
  // host's GPUs with its NICs), else the first device with an active RoCE v2
  // port. A communicator given neither reads the list from
  // WEFT_VERBS_DEVICES (comma-separated names).
  std::string device;
  std::vector<std::string> devices;
  uint8_t port = 1;
  int gid_index = -1;  // -1: scan the GID table for the RoCE v2 IPv4-mapped GID
  // Receive (and send) work requests per QP; half of it bounds the messages
  // in flight per direction and peer (credits).
  uint32_t queue_depth = 64;
  // CQ polls before a wait sleeps on the completion channel. Lower it when
  // ranks outnumber cores: a spinning rank steals the CPU that the rank it
  // waits for (or, on soft-RoCE, the kernel's packet processing) needs.
  int spin_polls = 4096;
  // RC local ACK timeout exponent: 4.096 us * 2^n (ibv_modify_qp(3)); 20 =
  // 4.3 s, NCCL_IB_TIMEOUT's default. A dead peer is found through its
  // bootstrap socket long before the retries run out.
  uint8_t ack_timeout = 20;
  // Where this rank's bootstrap socket listens (IPv4); "" = the GID's address.
  std::string bootstrap_address;

  // The device the rank with this local index opens, by the rule above; ""
  // = the first device with an active RoCE v2 port.
  std::string device_for(int local_index) const;
};

struct TransportConfig {
  std::string name = "tcp";
  int rank = 0;
  int size = 1;
  std::vector<int> peers;         // ranks this transport serves; empty = every other rank
  // The peers connected at setup (a subset of peer_ranks(); nullopt: all of
  // them). The others are connected when a call first needs them
  // (Transport::connect_peers). A backend that cannot connect after setup
  // (verbs) connects every peer at setup.
  std::optional<std::vector<int>> connect_at_setup;
  std::vector<PeerRoute> routes;  // indexed by peer rank; empty = no plan
  std::string store_prefix = "weft";  // keys of this transport: <prefix>/<name>/...
  TcpOptions tcp;
  ShmOptions shm;
  VerbsOptions verbs;
  // Ranks of the communicator that run on this host; 0 = unknown (every
  // rank is taken to be local, as in a loopback test). It decides how a
  // wait spends its spin_us: with no more local ranks than the CPUs this
  // process may run on, it polls hard (the rank it waits for has a CPU of
  // its own, and a yield or sleep costs tens of microseconds per message on
  // a loaded host); with more, it yields the CPU between polls after a few
  // microseconds, so that the rank it waits for can run (collectives/idle_wait.h).
  int ranks_on_host = 0;
  // This rank's index among the ranks of its host, in rank order; -1 =
  // unknown, taken to be `rank` (every rank local). It picks the rank's NIC
  // (VerbsOptions::device_for): with ranks placed on hosts in any order (a
  // rank file), `rank % NICs` can put two ranks of one host on one NIC.
  int local_index = -1;
  // Rejects values no backend can use (ranks out of range, routes of the
  // wrong length, non-positive sizes), with a message.
  Status validate() const;
  // `peers`, or every other rank when it is empty.
  std::vector<int> peer_ranks() const;
  // connect_at_setup, or peer_ranks() when it is not given.
  std::vector<int> setup_peer_ranks() const;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string_view name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // The pair to `peer`, or nullptr if the peer is not connected by this
  // transport (another transport serves it, it is this rank, or it is not
  // connected yet: connect_peers).
  virtual Pair* pair(int peer) = 0;

  // Connects the pairs to `peers` (ranks this transport serves) that are
  // not connected yet, and returns once each is usable or the deadline
  // passes (kDeadlineExceeded naming the ranks still missing). Collective
  // between the two ends of each pair: both call it for each other, in the
  // same collective call (the communicator connects the peers of a plan
  // before it first runs, and every plan's peers are symmetric). Data of
  // the pairs already connected keeps moving meanwhile. Default: every
  // peer was connected at setup; a peer that was not is an error.
  virtual Status connect_peers(const std::vector<int>& peers, Deadline deadline);

  // A new plan epoch (docs/collectives-routes.md "Plan epochs"): `routes` (by
  // rank, as TransportConfig::routes) replace this rank's routes, and
  // `inbound` are the connected peers whose route towards this rank
  // changed. Each connected pair whose route changed in either direction
  // is connected again on the new one; pairs not connected yet use it when
  // they are. Collective between the two ends of each such pair, at a call
  // boundary both have reached after every message of the earlier calls
  // was received (the communicator's epoch agreement). Default: a
  // transport whose routes are fixed once made (shm, loopback, verbs,
  // whose queue pairs keep their source port) takes nothing.
  virtual Status reroute(const std::vector<PeerRoute>& routes, const std::vector<int>& inbound, Deadline deadline) {
    (void)routes;
    (void)inbound;
    (void)deadline;
    return ok_status();
  }

  virtual Result<std::unique_ptr<Memory>> register_memory(void* data, size_t size) = 0;
  // True when register_memory pins the pages under the range (verbs): the
  // Memory then goes stale if the range is unmapped and mapped again while
  // it lives. False: a Memory is only the address, and keeping one is free.
  virtual bool registration_pins() const { return false; }

  // Makes whatever progress is possible now without blocking; returns true
  // if anything moved. Used when an algorithm waits on several transports.
  virtual Result<bool> poll() = 0;

  // Thread-safe. Every blocking call of this transport returns kAborted
  // with `reason` from now on; peers are told (best effort) so that they
  // fail fast naming this rank instead of waiting for their deadline.
  virtual void abort(const Status& reason) = 0;

  // Stall notices (docs/collectives.md "Faults"): when a call stalls on a
  // rank that is alive but not progressing, the ranks tell each other whom
  // they wait for, so that each can follow the chain to the stalled rank
  // (collectives/stall.h). Out of band of the data: a notice never waits
  // behind a message.
  //   post_stall_notice(r)  tells every peer of this transport "this rank
  //                         stopped in a stalled call, waiting on rank r"
  //                         (-1: on no one known); non-blocking, best effort.
  //   stall_notice(r)       what rank r posted, heard from r itself or
  //                         relayed (kNoStallNotice: nothing yet); any
  //                         rank of the communicator; poll() takes in news.
  //   stall_noticed()       a notice from some peer has arrived. From then
  //                         on every blocking wait of this transport returns
  //                         kDeadlineExceeded at once: the call is lost, and
  //                         the caller resolves the stall.
  // A backend without notices (these defaults; verbs) keeps the plain
  // behaviour: a wait that expires names the rank it waited for.
  virtual bool has_stall_notices() const { return false; }
  virtual void post_stall_notice(int waits_on) { (void)waits_on; }
  virtual int stall_notice(int peer) {
    (void)peer;
    return kNoStallNotice;
  }
  virtual bool stall_noticed() const { return false; }
  // Passes on a notice this rank heard from `origin` (through a peer of
  // this or another transport) to every peer of this transport, so that a
  // notice reaches the ranks that are not connected to its origin
  // (communicator.h: connections on demand). Non-blocking, best effort;
  // after it, stall_notice(origin) here reports it. A peer that already
  // knows the notice ignores it.
  virtual void relay_stall_notice(int origin, int waits_on) {
    (void)origin;
    (void)waits_on;
  }
  static constexpr int kNoStallNotice = -2;

  // In-call plan switches (docs/collectives-routes.md "Inside a stalled
  // call", collectives/in_call_switch.cc): a call stalled on a cut link is
  // abandoned by every rank and run again on a newer plan epoch.
  //   set_switch_probe(after, grace, probe)  a wait of this transport that
  //       moved nothing for `after` calls probe() (at most once per
  //       `after`); a nonzero epoch it returns is posted to every peer
  //       (relayed, as stall notices are) and the wait returns kAborted.
  //       Every wait that learns of a posted epoch does the same. While a
  //       probe is set, a connection a peer closes mid-call fails the
  //       transport only if no switch is heard of within `grace` (the peer
  //       may be rebuilding its connections for the switch).
  //   switch_requested()   the newest epoch posted or heard of (0: none);
  //   switch_origin()      the rank that posted it first.
  //   rebuild(routes, generation, deadline)  closes every connection and
  //       connects the same peers again on `routes`; connections of an
  //       earlier generation are refused, so no byte of the abandoned call
  //       reaches the new ones. Collective between every pair of ranks
  //       connected before it. Clears the switch request.
  // Default (shm, loopback, verbs): no in-call switches; a call stalls and
  // fails as before.
  virtual bool can_rebuild() const { return false; }
  virtual void set_switch_probe(std::chrono::milliseconds after, std::chrono::milliseconds grace,
                                std::function<uint64_t()> probe) {
    (void)after;
    (void)grace;
    (void)probe;
  }
  virtual uint64_t switch_requested() const { return 0; }
  virtual int switch_origin() const { return -1; }
  virtual Status rebuild(const std::vector<PeerRoute>& routes, uint32_t generation, Deadline deadline) {
    (void)routes;
    (void)generation;
    (void)deadline;
    return unimplemented(std::string(name()) + " transport: connections cannot be rebuilt");
  }
};

// Creates and connects a transport: publishes this rank's address in the
// store, reads the peers' addresses, connects, and returns when every pair
// of connect_at_setup is up (or the deadline passes, naming the peers still
// missing).
using TransportFactory =
    std::function<Result<std::unique_ptr<Transport>>(const TransportConfig&, Store&, Deadline)>;

Result<std::unique_ptr<Transport>> make_transport(const TransportConfig& config, Store& store,
                                                  Deadline deadline);
// Registers a backend built outside this library (e.g. collectives/verbs).
// Returns false if the name is taken.
bool register_transport(const std::string& name, TransportFactory factory);
std::vector<std::string> transport_names();

}  // namespace weft::coll
