// The TCP transport's classes (internal), shared by tcp_transport.cc (setup,
// pairs, waits, abort, teardown) and tcp_progress.cc (moving bytes).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "completion.h"
#include "idle_wait.h"
#include "tcp/address_choice.h"
#include "tcp/peer_cpu.h"
#include "tcp/socket.h"
#include "tcp/tcp_transport.h"

namespace weft::coll::tcp {

// Wire format (tcp_transport.h).
struct Header {
  uint32_t magic;
  uint16_t type;
  uint16_t arg;  // kStall: the rank the sender waits on + 1 (0: no one known); kSwitch: origin + 1; else 0
  uint64_t len;  // kSwitch: the plan epoch
};
static_assert(sizeof(Header) == 16, "wire header is 16 bytes without padding");
constexpr uint32_t kMagic = 0x31544657;  // "WFT1"
enum : uint16_t { kData = 1, kAbort = 2, kBye = 3, kStall = 4, kSwitch = 5 };

struct Hello {
  uint32_t magic;
  int32_t rank;
  int32_t conn;
  int32_t tid;  // the sender's thread that connected (peer_cpu.h); 0: not said
  // Connections made after the n-th in-call plan switch carry n
  // (tcp_rebuild.cc): one of an earlier generation is refused.
  uint32_t generation;
  uint32_t reserved;
};
static_assert(sizeof(Hello) == 24, "handshake is 24 bytes without padding");

// A peer's kAbort reason is shown up to this many bytes, then cut with a
// marker (abort_reason_shown): this rank sends at most 400, a longer one is
// a bug or hostile and must not grow without limit.
constexpr size_t kMaxAbortReason = 1024;
std::string abort_reason_shown(std::string_view got, uint64_t sent);
constexpr size_t kStripeMin = 256 << 10;  // messages this long are striped over the connections
constexpr uint64_t kWakeTag = ~uint64_t{0};
// Incoming bytes are read into a per-connection staging buffer, many small
// messages per recv(2), and copied out; a message whose recv is posted and
// that still needs at least kDirectMin bytes is read straight into the
// caller's memory instead (no extra copy where the copy would cost more
// than the system calls it saves). A message that arrives before its recv
// was posted waits in the staging buffer (as MPI's eager protocol keeps an
// unexpected message); only when the buffer is full does the connection
// stop reading, leaving the rest in the kernel.
constexpr size_t kStageBytes = 256 << 10;
constexpr size_t kDirectMin = 16 << 10;

struct Part {
  char* ptr;
  size_t len;
  Ticket op;
  bool held = false;  // Pair::send_held: may go out from ptr's pages (tcp_splice.cc)
};

// This rank -> peer: carries this rank's data (its 5-tuple is the plan's).
struct OutConn {
  Fd fd;
  std::deque<Part> q;
  Header hdr{};
  size_t hdr_done = 0, data_done = 0;
  uint32_t events = 0;  // current epoll interest
  bool closed = false;
  // The front part goes out through `pipe` (tcp_splice.cc): `fed` bytes of
  // its frame (header, then payload) were put into the pipe so far;
  // hdr_done + data_done of them have left it for the socket.
  bool splicing = false;
  size_t fed = 0;
  Fd pipe_r, pipe_w;     // made at the first spliced part
  bool no_pipe = false;  // none of a useful size could be made: copy
  bool set_up = false;   // non-blocking and watched (make_ready)
  bool silent = false;   // TcpOptions::test_silent_sports: its data is never written
  // The reverse direction carries only the peer's stall notices (kStall
  // headers, tcp_transport.h): the part of one read so far.
  Header ctl{};
  size_t ctl_have = 0;
};

// Peer -> this rank.
struct InConn {
  Fd fd;
  std::deque<Part> q;  // posted receives, in order
  uint32_t events = 0;
  bool stalled = false;  // not watched for input until a receive is posted (stage full, or parked)
  bool parked = false;   // a large data frame nobody asked for yet: its payload stays in the kernel
  bool bye = false, closed = false;
  bool eof = false;  // the peer hung up behind a staged message nobody asked for yet
  std::string abort_msg;
  // The frame being consumed: its header has been read.
  Header hdr{};
  bool in_frame = false;
  size_t data_done = 0;
  // Staged bytes [lo, hi) of stage.
  std::unique_ptr<char[]> stage;
  size_t lo = 0, hi = 0;
  bool silent = false;  // TcpOptions::test_silent_sports: never read
  // The peer's connection that replaces this one after a new plan epoch
  // (tcp_reroute.cc), when it arrived before this rank switched.
  Fd next;
};

class TcpTransport;

class TcpPair final : public Pair {
 public:
  TcpPair(TcpTransport* t, int peer) : t_(t), peer_(peer) {}
  int peer() const override { return peer_; }
  Result<Ticket> send(const Memory& mem, size_t offset, size_t len) override { return post(mem, offset, len, false); }
  Result<Ticket> send_held(const Memory& mem, size_t offset, size_t len) override { return post(mem, offset, len, true); }
  Result<Ticket> recv(Memory& mem, size_t offset, size_t len) override;
  Status wait_send(Ticket t, Deadline d) override;
  Status wait_recv(Ticket t, Deadline d) override;
  Result<bool> test_send(Ticket t) override;
  Result<bool> test_recv(Ticket t) override;

  std::vector<OutConn> out;
  std::vector<InConn> in;
  // Every connection of the pair is up and watched: Transport::pair shows
  // it. Before that, a pair may hold connections the peer opened early
  // (tcp_connect.cc).
  bool ready = false;
  internal::Completion sends, recvs;
  PeerCpu cpu;              // known for a peer on this host
  bool shares_cpu = false;  // it ran on this rank's CPU at the last look (TcpTransport::yield_to)

 private:
  Result<Ticket> post(const Memory& mem, size_t offset, size_t len, bool held);
  TcpTransport* t_;
  int peer_;
};

// Holds a TcpTransport's io_mu_. abort() from another thread only tries the
// lock; when a call holds it, the abort is told to the peers by whoever
// releases the lock next: the call may end without polling again (a wait
// that completes in its first poll), and a rank that then makes no more
// calls would leave its peers waiting out their timeout. The release
// checks after unlocking, so an abort that failed to take the lock at any
// moment before is seen.
class IoLock {
 public:
  explicit IoLock(TcpTransport& t);
  IoLock(const IoLock&) = delete;
  IoLock& operator=(const IoLock&) = delete;
  ~IoLock();

 private:
  TcpTransport& t_;
};

class TcpTransport final : public Transport, public TcpTransportInfo {
 public:
  explicit TcpTransport(const TransportConfig& c)
      : cfg_(c),
        hard_spin_(internal::hard_spin_for(c.ranks_on_host, c.size, std::chrono::microseconds(c.tcp.spin_us))),
        fits_cpus_(hard_spin_.get() > internal::IdleWait::kHardSpin) {}
  ~TcpTransport() override;
  Status connect(Store& store, Deadline deadline);

  std::string_view name() const override { return "tcp"; }
  int rank() const override { return cfg_.rank; }
  int size() const override { return cfg_.size; }
  Pair* pair(int peer) override {
    if (peer < 0 || peer >= cfg_.size) return nullptr;
    TcpPair* p = pairs_[static_cast<size_t>(peer)].get();
    return p != nullptr && p->ready ? p : nullptr;
  }
  Status connect_peers(const std::vector<int>& peers, Deadline deadline) override;
  Status reroute(const std::vector<PeerRoute>& routes, const std::vector<int>& inbound, Deadline deadline) override;
  Result<std::unique_ptr<Memory>> register_memory(void* data, size_t size) override;
  Result<bool> poll() override;
  void abort(const Status& reason) override;
  bool has_stall_notices() const override { return true; }
  void post_stall_notice(int waits_on) override;
  void relay_stall_notice(int origin, int waits_on) override;
  int stall_notice(int peer) override;
  bool stall_noticed() const override { return stall_noticed_.load(std::memory_order_relaxed); }
  std::vector<ConnectionPorts> connection_ports(int peer) const override;
  uint16_t listen_port() const override { return listen_port_; }
  uint64_t spliced_bytes() const override { return spliced_bytes_.load(std::memory_order_relaxed); }
  int socket_count() const override;
  uint64_t dropped_connections() const override { return dropped_connections_; }
  // tcp_rebuild.cc: in-call plan switches (Transport).
  bool can_rebuild() const override { return true; }
  void set_switch_probe(std::chrono::milliseconds after, std::chrono::milliseconds grace,
                        std::function<uint64_t()> probe) override;
  uint64_t switch_requested() const override { return switch_to_.load(std::memory_order_relaxed); }
  int switch_origin() const override { return switch_origin_.load(std::memory_order_relaxed); }
  Status rebuild(const std::vector<PeerRoute>& routes, uint32_t generation, Deadline deadline) override;

  // Called by pairs, with io_mu_ held.
  IoLock lock() { return IoLock(*this); }
  Status check() const { return has_failed_ ? failed_ : ok_status(); }
  void kick_out(TcpPair& p, size_t c) { progress_out(p, c); }
  // A receive was posted on connection c: deliver what is staged (no
  // system call), and resume reading if the connection had stalled.
  void kick_in(TcpPair& p, size_t c);
  template <typename Pred>
  Status wait(TcpPair& p, Pred done, bool in, Deadline d, const char* what, Ticket t);
  int parts(size_t len) const { return len >= kStripeMin ? cfg_.tcp.connections_per_peer : 1; }

 private:
  enum class Staged { kNeedBytes, kBlocked, kFailed };
  // tcp_connect.cc: connecting pairs, at setup and on demand.
  Status establish(const std::vector<int>& peers, Deadline deadline, bool at_setup);
  TcpPair& slot(int peer);
  Status accept_ready();
  Status read_hellos();
  // Takes a peer's connection into its pair; otherwise says why it is none.
  std::string attach(const Hello& h, Fd fd);
  Status make_ready(TcpPair& p);
  Status wait_for_connections(const std::vector<int>& missing, Deadline deadline);
  void send_notice_locked(int origin, int waits_on);
  // tcp_rebuild.cc. In waits and polls (io_mu_ held): kAborted once a
  // switch is requested; probes the plan epochs after a stall; fails the
  // transport for a connection lost longer than the grace ago.
  Status switch_check_locked(bool moved);
  void request_switch_locked(uint64_t epoch, int origin, int from);
  Status abandoned() const;
  Status choose_congestion_control(int fd) const;
  void watch_out(TcpPair& p, size_t c, uint32_t events);
  void watch_in(TcpPair& p, size_t c, uint32_t events);
  void progress_out(TcpPair& p, size_t c);
  // tcp_splice.cc: whether the front part goes out through the pipe, and
  // moving it.
  bool start_splice(OutConn& conn, const Part& part);
  enum class Moved { kDone, kBlocked, kFailed };
  Moved splice_out(TcpPair& p, OutConn& conn);
  Moved give_up_splicing(OutConn& conn);
  void progress_in(TcpPair& p, size_t c);
  ssize_t read_header_and_payload(InConn& conn, size_t* want);
  bool poke(TcpPair& p, bool in);
  Staged consume_staged(TcpPair& p, InConn& conn);
  void complete_in(TcpPair& p, InConn& conn);
  std::string salvage_abort(TcpPair& p);
  void lost(TcpPair& p, std::string what);
  void out_closed(TcpPair& p, OutConn& conn, int err);
  void in_closed(TcpPair& p, InConn& conn, int err);
  void read_notices(TcpPair& p, OutConn& conn);
  void fail(Status s);
  bool run_once(int timeout_ms);
  void yield_to(TcpPair& p);
  void notify_peers_locked();
  // An abort() that could not take io_mu_ (held): fails the transport and
  // tells the peers. With io_mu_ held.
  void flush_abort_locked();
  friend class IoLock;

  TransportConfig cfg_;
  internal::SpinBudget hard_spin_;  // of the waits (idle_wait.h)
  bool fits_cpus_;                  // the host's ranks fit its CPUs (idle_wait.h: hard_spin_for)
  unsigned shared_yields_ = 0;      // yields in a row to a peer on this rank's CPU
  std::vector<std::unique_ptr<TcpPair>> pairs_;
  std::vector<bool> served_;      // by rank: a peer of this transport
  // By rank: where a served peer listens (read at setup), one endpoint per
  // address (TcpOptions::listen_address), and this rank's own addresses.
  std::vector<std::vector<Endpoint>> addrs_;
  std::vector<LocalAddress> locals_;
  // Accepted connections whose Hello has not fully arrived: they are read
  // as they come, so that one slow peer delays no other.
  struct Pending {
    Fd fd;
    Clock::time_point since;
    Hello hello{};
    size_t have = 0;
  };
  std::vector<Pending> pending_;
  std::vector<Fd> listen_fds_;  // one per address of locals_
  Fd epoll_fd_, wake_fd_;
  uint16_t listen_port_ = 0;
  // Connections to the listening port that were no peer's (a bad hello,
  // none in kHelloTimeout, closed first, too many waiting): closed, counted.
  uint64_t dropped_connections_ = 0;
  std::mutex io_mu_;
  Status failed_;
  std::atomic<bool> has_failed_{false};
  std::mutex abort_mu_;
  Status abort_reason_;
  std::atomic<bool> abort_requested_{false};
  bool peers_notified_ = false;
  std::vector<int> stall_from_;  // by rank: whom it said it waits on, itself or relayed (kNoStallNotice)
  std::atomic<bool> stall_noticed_{false};
  // Outgoing connections of an earlier plan epoch (tcp_reroute.cc): left
  // open, unwatched, until the next reroute, so that the peer reads their
  // last bytes before it sees them close.
  std::vector<Fd> retired_;
  // In-call plan switches (tcp_rebuild.cc).
  std::function<uint64_t()> probe_;
  std::chrono::milliseconds probe_after_{0}, lost_grace_{0};
  Clock::time_point last_moved_{}, next_probe_{};
  std::atomic<uint64_t> switch_to_{0};
  std::atomic<int> switch_origin_{-1};
  uint32_t generation_ = 0;
  std::vector<std::pair<Hello, Fd>> early_;  // connections of a later generation than this rank's
  std::string lost_pending_;                 // a connection lost while a probe is set, not yet failed
  Clock::time_point lost_at_{};
  bool splice_broken_ = false;  // vmsplice/splice refused once (seccomp, old kernel): copy from then on
  std::atomic<uint64_t> spliced_bytes_{0};
};

}  // namespace weft::coll::tcp
