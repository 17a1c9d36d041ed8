#include "shm/shm_transport.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>

#include <fmt/format.h>

#include "completion.h"
#include "exchange_pair.h"
#include "idle_wait.h"
#include "shm/shm_ring.h"
#include "shm/shm_segment.h"
#include "shm/shm_single_copy.h"

namespace weft::coll::shm {
namespace {

using internal::Completion;
using internal::IdleWait;

struct Op {
  char* ptr;
  size_t len;
  Ticket t;
  size_t done = 0;
  uint64_t ack = 0;     // single-copy send: the ack count that completes it
  // A receive that reduces (ExchangePair::exchange_reduce): into[i] op=
  // received[i]; inline frames straight from the ring, a single-copy
  // message after it landed at ptr. nullptr: the bytes go to ptr.
  char* into = nullptr;
  DataType dtype = DataType::kU8;
  ReduceOp rop = ReduceOp::kSum;
};

class ShmTransport;

class ShmPair final : public Pair, public internal::ExchangePair {
 public:
  ShmPair(ShmTransport* t, int peer) : t_(t), peer_(peer) {}
  int peer() const override { return peer_; }
  Result<Ticket> send(const Memory& mem, size_t offset, size_t len) override;
  Result<Ticket> recv(Memory& mem, size_t offset, size_t len) override;
  Status wait_send(Ticket t, Deadline d) override;
  Status wait_recv(Ticket t, Deadline d) override;
  Result<bool> test_send(Ticket t) override;
  Result<bool> test_recv(Ticket t) override;
  // The four calls under one lock (exchange_pair.h).
  Result<Ticket> exchange(const Memory& smem, size_t soff, size_t slen, Memory& rmem, size_t roff, size_t rlen,
                          Deadline deadline) override {
    return exchange_with(smem, soff, slen, rmem, roff, rlen, nullptr, deadline);
  }
  Result<Ticket> exchange_reduce(const Memory& smem, size_t soff, size_t slen, Memory& rmem, size_t roff,
                                 size_t rlen, const Reduction& red, Deadline deadline) override {
    return exchange_with(smem, soff, slen, rmem, roff, rlen, &red, deadline);
  }
  bool reduces_over_send(size_t slen) const override;

  std::unique_ptr<Segment> seg;  // the peer's segment (its ring from us lives there)
  // The rings are set up and the peer is watched (ShmTransport::activate):
  // Transport::pair shows it. Every peer's segment is mapped at setup;
  // only active pairs cost memory (their rings) and liveness checks.
  bool active = false;
  int pidfd = -1;
  int pid = 0;
  std::deque<Op> sends_q, recvs_q;
  std::deque<Op> acks_q;  // single-copy sends waiting for the peer's ack
  Completion sends, recvs;
  uint64_t single_sent = 0;
  RingWriter out;  // this rank's ring in the peer's segment
  RingReader in;   // the peer's ring in this rank's segment
  // How this rank rings the peer's bell on the hot path: without a fence
  // when both ends use membarrier (shm_segment.h, ring_bell).
  BellFence bell = BellFence::kFull;
  // Set when process_vm_readv of this peer's payload failed with EFAULT or
  // ESRCH (ShmTransport::read_single): receiving from it stops, and
  // check_liveness turns it into the real cause.
  int cma_errno = 0;
  Clock::time_point cma_failed{};
  // Decided at setup (shm_single_copy.h): this rank reads the peer's large
  // messages from its memory; the peer reads this rank's.
  bool recv_single = false;
  bool send_single = false;

 private:
  Result<Ticket> exchange_with(const Memory& smem, size_t soff, size_t slen, Memory& rmem, size_t roff,
                               size_t rlen, const Reduction* red, Deadline deadline);
  Result<Ticket> queued_exchange(Op send, Op recv, const Reduction* red, Deadline deadline);

  ShmTransport* t_;
  int peer_;
};

class ShmTransport final : public Transport, public ShmTransportInfo {
 public:
  explicit ShmTransport(const TransportConfig& c)
      : cfg_(c),
        ring_bytes_(c.shm.slot_bytes * static_cast<size_t>(c.shm.slots)),
        hard_spin_(internal::hard_spin_for(c.ranks_on_host, c.size, std::chrono::microseconds(c.shm.spin_us))),
        oversubscribed_((c.ranks_on_host > 0 ? c.ranks_on_host : c.size) > internal::usable_cpus()) {}
  ~ShmTransport() override;
  Status connect(Store& store, Deadline deadline);
  Status connect_peers(const std::vector<int>& peers, Deadline deadline) override;

  std::string_view name() const override { return "shm"; }
  int rank() const override { return cfg_.rank; }
  int size() const override { return cfg_.size; }
  Pair* pair(int peer) override {
    if (peer < 0 || peer >= cfg_.size) return nullptr;
    ShmPair* p = pairs_[static_cast<size_t>(peer)].get();
    return p != nullptr && p->active ? p : nullptr;
  }
  Result<std::unique_ptr<Memory>> register_memory(void* data, size_t size) override {
    return std::unique_ptr<Memory>(std::make_unique<HostMemory>(data, size));
  }
  Result<bool> poll() override {
    std::lock_guard<std::mutex> l(mu_);
    bool moved = progress();
    if (++polls_ % IdleWait::kPollsPerTick == 0) check_liveness(Clock::now());
    WEFT_RETURN_IF_ERROR(check());
    return moved;
  }
  void abort(const Status& reason) override;
  bool has_stall_notices() const override { return true; }
  void post_stall_notice(int waits_on) override;
  void relay_stall_notice(int origin, int waits_on) override;
  int stall_notice(int peer) override {
    const int32_t v = own_.ctl(peer)->stall.load(std::memory_order_acquire);
    return v == 0 ? kNoStallNotice : v - 2;
  }
  bool stall_noticed() const override {
    return (own_.hdr()->aborted.load(std::memory_order_relaxed) & kStallFlag) != 0;
  }
  bool reads_single_copy(int peer) const override {
    const ShmPair* p = peer >= 0 && peer < cfg_.size ? pairs_[static_cast<size_t>(peer)].get() : nullptr;
    return p != nullptr && p->recv_single;
  }
  uint64_t single_copy_bytes() const override { return single_copy_bytes_.load(std::memory_order_relaxed); }

  std::mutex mu_;
  // OK, or why this transport gave up. Cheap enough for every poll: one
  // load of this rank's abort word, and no copy of a Status while all is
  // well (a copy constructs its message string).
  Status check() {
    if (failed_.is_ok() && !own_.hdr()->aborted.load(std::memory_order_acquire)) return Status::ok();
    return check_failed();
  }
  Status check_failed();
  void activate(ShmPair& p);
  void tell_stall(Segment& seg, int origin, int32_t v);
  void check_liveness(Clock::time_point now);
  void publish_cpu();
  void yield_cpu();
  void spread_over_cpus();
  bool progress();
  bool progress_send(ShmPair& p);
  bool progress_recv(ShmPair& p);
  // Takes the next frame of receive `op` if it has arrived: kTook (op.done
  // moved), kNone (not yet), kStop (failed_ is set, or a single-copy read
  // must wait for check_liveness). `acked`: a single-copy message was acked.
  enum Take { kNone, kTook, kStop };
  Take take_frame(ShmPair& p, Op& op, bool& acked);
  bool read_single(ShmPair& p, Op& op, uint64_t addr);
  template <typename Pred>
  Status wait(ShmPair& p, Pred done, Deadline d, const char* what, Ticket t);
  // A message of `len` bytes goes as one line naming the sender's buffer,
  // where the receiver may read the sender's memory (`allowed`).
  bool single_copy(size_t len, bool allowed) const {
    return allowed && cfg_.shm.single_copy_min_bytes > 0 && len >= cfg_.shm.single_copy_min_bytes;
  }
  // Whether a waiting rank may poll before it yields: not where the host's
  // ranks outnumber its CPUs (ShmTransport::wait says why).
  bool oversubscribed() const { return oversubscribed_; }

 private:
  TransportConfig cfg_;
  size_t ring_bytes_;
  std::chrono::microseconds hard_spin_;  // of a wait (idle_wait.h)
  bool oversubscribed_;                  // this host's ranks outnumber the CPUs this process may use
  unsigned oversubscribed_yields_ = 0;
  int cpu_ = -1;                         // where this rank polls, as published in its header
  bool sleep_fence_ = false;             // registered for membarrier: the sleeper's half of the fence
  std::string name_;
  Segment own_;
  std::vector<std::unique_ptr<ShmPair>> pairs_;
  std::vector<ShmPair*> mapped_;  // every peer: aborts and stall notices reach them all directly
  std::vector<ShmPair*> active_;  // the connected ones (ShmPair::active): moved, watched
  Status failed_;
  Clock::time_point next_liveness_check_{};
  unsigned polls_ = 0;
  unsigned shared_yields_ = 0;
  std::atomic<uint64_t> single_copy_bytes_{0};  // read by tests from another thread
};

// Where the host's ranks outnumber its CPUs, how they are spread decides the
// time of a small collective: 4 ranks on this 2-CPU VM ran a 4 B one-shot
// AllReduce at 7-9 us per call two to a CPU, and at 17-19 us in whole runs
// where the kernel left three on one CPU (each call then takes three turns
// there); the load balancer leaves them so because each just ran
// (idle_wait.h, migrate_now). So every 16th yield a rank looks where the
// others last polled: if its CPU has more than its share (ranks / CPUs,
// rounded up) and it is the highest rank there (one of them moves, and the
// same one in every rank's view), it moves to the allowed CPU with the
// fewest (migrate_now). Measured (8 alternating runs, 03:41 UTC, load
// 2.5-2.9): 8.0-9.2 us in all eight, against 7.4-7.7 in five and 17-18 in
// three without it.
void ShmTransport::spread_over_cpus() {
  if (cpu_ < 0 || cpu_ >= CPU_SETSIZE) return;
  cpu_set_t all;
  if (::sched_getaffinity(0, sizeof all, &all) != 0 || CPU_COUNT(&all) < 2) return;
  const int share = (static_cast<int>(mapped_.size()) + CPU_COUNT(&all)) / CPU_COUNT(&all);  // ceil(ranks / cpus)
  std::array<uint16_t, CPU_SETSIZE> on{};
  ++on[static_cast<size_t>(cpu_)];
  for (const ShmPair* p : mapped_) {
    const int c = p->seg->hdr()->cpu.load(std::memory_order_relaxed);
    if (c == cpu_ && p->peer() > cfg_.rank) return;  // a higher rank here moves
    if (c >= 0 && c < CPU_SETSIZE) ++on[static_cast<size_t>(c)];
  }
  if (on[static_cast<size_t>(cpu_)] <= share) return;
  int to = -1;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &all) && on[static_cast<size_t>(c)] < share &&
        (to < 0 || on[static_cast<size_t>(c)] < on[static_cast<size_t>(to)])) {
      to = c;
    }
  }
  if (to < 0) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(to, &one);
  internal::migrate_now(one, all);
}

// sched_yield(2), advertised in off_cpu for the ranks that wait for this one.
void ShmTransport::yield_cpu() {
  SegmentHeader* h = own_.hdr();
  if (oversubscribed_ && ++oversubscribed_yields_ % 16 == 0) spread_over_cpus();
  h->off_cpu.store(1, std::memory_order_relaxed);
  sched_yield();
  h->off_cpu.store(0, std::memory_order_relaxed);
}

Status ShmTransport::check_failed() {
  if (!failed_.is_ok()) return failed_;
  SegmentHeader* h = own_.hdr();
  if (h->aborted.load(std::memory_order_acquire) & kAbortFlag) {
    failed_ = aborted(fmt::format("rank {} gave up: {}", h->abort_rank,
                                  std::string(h->abort_msg, strnlen(h->abort_msg, sizeof h->abort_msg))));
  }
  return failed_;
}

// True once the peer's process has exited: its pidfd is readable
// (pidfd_open(2)); without a pidfd (kernel < 5.3), kill(pid, 0) fails with
// ESRCH once it is reaped.
bool peer_exited(const ShmPair& p) {
  if (p.pidfd < 0) return ::kill(p.pid, 0) != 0 && errno == ESRCH;
  pollfd pf{p.pidfd, POLLIN, 0};
  return ::poll(&pf, 1, 0) == 1;
}

// How long a peer whose payload could not be read may stay alive without
// having given up before that read counts as the error: exit_mm(), where
// its memory goes, runs well before the exit that makes the pidfd readable,
// and a rank that gave up posts its abort notice before it frees anything.
constexpr auto kUnreadableGrace = std::chrono::seconds(1);

// Liveness costs a system call per peer: look at most once a millisecond.
void ShmTransport::check_liveness(Clock::time_point now) {
  if (now < next_liveness_check_ || !failed_.is_ok()) return;
  next_liveness_check_ = now + std::chrono::milliseconds(1);
  // A peer's abort notice names the rank that was lost; it wins over what
  // this rank sees of the messenger (a survivor that gave up and exited).
  if (!check().is_ok()) return;
  for (ShmPair* p : active_) {
    const bool exited = peer_exited(*p);
    if (exited && (!p->seg->hdr()->closed.load() || p->cma_errno != 0)) {
      failed_ = unavailable(fmt::format("rank {} (pid {}) died", p->peer(), p->pid));
      return;
    }
    if (p->cma_errno != 0 && now - p->cma_failed > kUnreadableGrace) {
      failed_ = io_error(fmt::format("process_vm_readv from rank {} (pid {}), which is alive and did not give up",
                                     p->peer(), p->pid),
                         p->cma_errno);
      return;
    }
  }
}

// Writes as much of the front sends as the ring has room for.
bool ShmTransport::progress_send(ShmPair& p) {
  bool moved = false;
  RingCtl* c = p.seg->ctl(cfg_.rank);
  while (!p.acks_q.empty() && c->acks.load(std::memory_order_acquire) >= p.acks_q.front().ack) {
    p.sends.part_done(p.acks_q.front().t);
    p.acks_q.pop_front();
    moved = true;
  }
  const uint64_t head0 = p.out.head();
  while (!p.sends_q.empty()) {
    Op& op = p.sends_q.front();
    if (single_copy(op.len, p.send_single)) {
      if (!p.out.put_single(op.len, op.ptr)) break;
      op.ack = ++p.single_sent;
      p.acks_q.push_back(op);
    } else {
      if (!p.out.put(op.ptr, op.len, op.done)) break;
      p.sends.part_done(op.t);
    }
    p.sends_q.pop_front();
  }
  if (p.out.head() != head0) {
    ring_bell(p.seg->hdr(), p.bell);
    moved = true;
  }
  return moved;
}

// Copies what has arrived into the front receives.
bool ShmTransport::progress_recv(ShmPair& p) {
  if (p.cma_errno != 0) return false;  // its sender's memory is gone: check_liveness decides
  bool acked = false;
  while (!p.recvs_q.empty() && failed_.is_ok()) {
    Op& op = p.recvs_q.front();
    if (take_frame(p, op, acked) != kTook) break;
    if (op.done < op.len) continue;  // more frames of this message to come
    p.recvs.part_done(op.t);
    p.recvs_q.pop_front();
  }
  const bool freed = p.in.publish();
  if (freed || acked) ring_bell(p.seg->hdr(), p.bell);  // the sender may wait for room or an ack
  return freed || acked;
}

ShmTransport::Take ShmTransport::take_frame(ShmPair& p, Op& op, bool& acked) {
  const Frame* f = p.in.next(single_copy(op.len, p.recv_single) ? 0 : op.len - op.done);
  if (!f) return kNone;
  const uint64_t len = f->len & ~kSingleCopy;
  if (len != op.len) {
    failed_ = invalid_argument(fmt::format(
        "message from rank {} has {} bytes where this rank posted a receive of {} bytes", p.peer(), len, op.len));
    return kStop;
  }
  if (f->len & kSingleCopy) {
    if (!read_single(p, op, f->arg)) return kStop;
    own_.ctl(p.peer())->acks.fetch_add(1, std::memory_order_release);
    acked = true;
    if (op.into != nullptr) reduce_into(op.into, op.ptr, op.len / dtype_size(op.dtype), op.dtype, op.rop);
    op.done = op.len;
  } else {
    if (f->arg > op.len - op.done) {
      failed_ = data_loss(fmt::format("frame from rank {} overruns its {}-byte message", p.peer(), op.len));
      return kStop;
    }
    if (op.into == nullptr) {
      if (f->arg > 0) std::memcpy(op.ptr + op.done, RingReader::payload(f), f->arg);
    } else {
      // Whole elements in every frame: a cut frame's payload is a
      // multiple of 8 bytes (RingWriter::put), a message of elements; so
      // op.done, the sum of the frames before, is whole elements too.
      const size_t es = dtype_size(op.dtype);
      if (f->arg % es != 0) {
        failed_ = data_loss(fmt::format("frame from rank {} cuts a {}-byte element", p.peer(), es));
        return kStop;
      }
      reduce_into(op.into + op.done, RingReader::payload(f), f->arg / es, op.dtype, op.rop);
    }
    op.done += f->arg;
  }
  p.in.consume(f);
  return kTook;
}

// Copies a single-copy payload straight out of the sender's buffer
// (process_vm_readv(2), one copy). EFAULT or ESRCH say only that the
// sender's buffer or process is gone, not why: it died (exit_mm() unmaps
// before the pidfd turns readable), or it gave up after another rank was
// lost, told everyone, and freed its buffer or exited. Failing here would
// name the messenger ("Bad address" from a survivor); instead the receive
// stays pending and check_liveness reports the cause: the abort notice,
// the sender's death, or after kUnreadableGrace this error.
bool ShmTransport::read_single(ShmPair& p, Op& op, uint64_t addr) {
  for (size_t off = 0; off < op.len;) {
    iovec local{op.ptr + off, op.len - off};
    iovec remote{reinterpret_cast<void*>(addr + off), op.len - off};
    const ssize_t n = ::process_vm_readv(p.pid, &local, 1, &remote, 1, 0);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    const int e = n < 0 ? errno : EFAULT;  // 0 bytes: the first page was not readable
    if (e == EFAULT || e == ESRCH) {
      p.cma_errno = e;
      p.cma_failed = Clock::now();
    } else {
      failed_ = io_error(fmt::format("process_vm_readv from rank {} (pid {})", p.peer(), p.pid), e);
    }
    return false;
  }
  single_copy_bytes_.fetch_add(op.len, std::memory_order_relaxed);
  return true;
}

bool ShmTransport::progress() {
  bool moved = false;
  for (ShmPair* p : active_) {
    moved |= progress_send(*p);
    moved |= progress_recv(*p);
  }
  return moved;
}

// Publishes the CPU this rank runs on (sched_getcpu(3): glibc reads it
// from rseq, no system call), writing the shared line only on a change.
void ShmTransport::publish_cpu() {
  cpu_ = ::sched_getcpu();
  if (own_.hdr()->cpu.load(std::memory_order_relaxed) != cpu_) own_.hdr()->cpu.store(cpu_, std::memory_order_relaxed);
}

// Polls hard while the peer runs elsewhere, else yields between polls
// (idle_wait.h: two ranks on one CPU take turns, and polling only delays
// the turn of the one waited for), then sleeps on this rank's bell. Where
// the host's ranks fit its CPUs, a rank that yields to the peer on its own
// CPU 32 times in a row (64 on odd ranks) moves off that CPU instead
// (internal::leave_cpu). Where they outnumber its CPUs, a rank whose peer last
// polled on its CPU, or is itself yielding or asleep (off_cpu), yields after
// every empty poll: the peer answers only once some rank gives up a CPU, and
// polling even the idle wait's kHardSpin (5 us) first only delays that. 4
// ranks, 2 CPUs, 4 B butterfly pinned two to a CPU: 13-16 us per call with
// the 5 us polls, 6.3-7.8 us without them where the pairs of a round shared
// a CPU; with the off_cpu test also where they did not (one-shot, every
// placement: 7.3-8.8 us against 10.4-15.0).
template <typename Pred>
Status ShmTransport::wait(ShmPair& p, Pred done, Deadline d, const char* what, Ticket t) {
  // A send that went into the ring at once (every small one) is done
  // before its wait: return without a round of polling.
  if (done()) return Status::ok();
  SegmentHeader* h = own_.hdr();
  const std::atomic<int32_t>& peer_cpu = p.seg->hdr()->cpu;
  IdleWait w(d, std::chrono::microseconds(cfg_.shm.spin_us), hard_spin_);
  publish_cpu();
  for (;;) {
    const bool moved = progress();
    if (done()) return Status::ok();
    // One load of the flags word while nothing is wrong.
    if (!failed_.is_ok() || h->aborted.load(std::memory_order_relaxed) != 0) [[unlikely]] {
      WEFT_RETURN_IF_ERROR(check());
      if (stall_noticed()) {
        return deadline_exceeded(fmt::format("a peer reported a stalled call (waiting for rank {})", p.peer()));
      }
    }
    const bool shares = peer_cpu.load(std::memory_order_relaxed) == cpu_;
    const IdleWait::Action act = w.next(moved, shares);
    if (w.ticked()) {
      check_liveness(w.now());
      WEFT_RETURN_IF_ERROR(check());
      publish_cpu();
    }
    switch (act) {
      case IdleWait::kPoll:
        if (oversubscribed_ && !moved && (shares || p.seg->hdr()->off_cpu.load(std::memory_order_relaxed) != 0)) {
          yield_cpu();
          publish_cpu();
          w.yielded();
        }
        continue;
      case IdleWait::kYield:
        if (!shares) shared_yields_ = 0;
        if (shares && hard_spin_ > IdleWait::kHardSpin && ++shared_yields_ >= internal::yields_before_leaving(cfg_.rank)) {
          shared_yields_ = 0;
          internal::leave_cpu(cpu_);
        } else {
          yield_cpu();
        }
        publish_cpu();
        continue;
      case IdleWait::kExpired:
        return deadline_exceeded(fmt::format("timed out waiting for rank {} ({} of message {})", p.peer(), what, t));
      case IdleWait::kSleep: break;
    }
    // Sleep until someone rings (see ring_bell), at most sleep_ms so that a
    // dead peer is noticed. Peers ring without a fence when this rank
    // advertised sleep_fence: then the membarrier below orders the bump of
    // `sleepers` before the look for news, in their program order too; if it
    // fails, this rank yields instead of sleeping.
    h->sleepers.fetch_add(1);
    h->off_cpu.store(1, std::memory_order_relaxed);
    const uint32_t v = h->bell.load();
    const bool fenced = !sleep_fence_ || sleep_fence();
    if (!fenced) sched_yield();
    if (fenced && !progress() && !done() && !h->aborted.load()) {
      const auto ms = w.sleep_budget(std::chrono::milliseconds(cfg_.shm.sleep_ms));
      timespec ts{static_cast<time_t>(ms.count() / 1000), static_cast<long>(ms.count() % 1000) * 1'000'000};
      futex(&h->bell, FUTEX_WAIT, v, &ts);
    }
    h->off_cpu.store(0, std::memory_order_relaxed);
    h->sleepers.fetch_sub(1);
    publish_cpu();
  }
}

void ShmTransport::abort(const Status& reason) {
  const std::string msg = reason.message().substr(0, 240);
  auto tell = [&](SegmentHeader* h) {
    if (h->aborted.load() & kAbortFlag) return;
    h->abort_rank = cfg_.rank;
    std::snprintf(h->abort_msg, sizeof h->abort_msg, "%s", msg.c_str());
    h->aborted.fetch_or(kAbortFlag, std::memory_order_release);
    ring_bell(h, BellFence::kFull);
  };
  for (ShmPair* p : mapped_) tell(p->seg->hdr());
  tell(own_.hdr());
}

// The notice goes into this rank's control line of each peer's segment,
// then the flag that makes the peer's waits look, then the doorbell.
void ShmTransport::post_stall_notice(int waits_on) {
  const int32_t v = waits_on >= 0 ? waits_on + 2 : 1;
  for (ShmPair* p : mapped_) tell_stall(*p->seg, cfg_.rank, v);
}

// A notice of another rank, heard through another transport (a rank on
// another host): into its line of every peer's segment. The lines of one
// origin only ever hold its one notice, so a relay and the origin's own
// write store the same value.
void ShmTransport::relay_stall_notice(int origin, int waits_on) {
  if (origin < 0 || origin >= cfg_.size || origin == cfg_.rank) return;
  const int32_t v = waits_on >= 0 ? waits_on + 2 : 1;
  int32_t none = 0;
  own_.ctl(origin)->stall.compare_exchange_strong(none, v, std::memory_order_release);
  for (ShmPair* p : mapped_) {
    if (p->peer() != origin && p->seg->ctl(origin)->stall.load(std::memory_order_acquire) == 0) tell_stall(*p->seg, origin, v);
  }
}

void ShmTransport::tell_stall(Segment& seg, int origin, int32_t v) {
  seg.ctl(origin)->stall.store(v, std::memory_order_release);
  seg.hdr()->aborted.fetch_or(kStallFlag, std::memory_order_release);
  ring_bell(seg.hdr(), BellFence::kFull);
}

Result<Ticket> ShmPair::send(const Memory& mem, size_t offset, size_t len) {
  if (offset + len > mem.size()) return out_of_range(fmt::format("send to rank {}: range outside the buffer", peer_));
  std::lock_guard<std::mutex> l(t_->mu_);
  WEFT_RETURN_IF_ERROR(t_->check());
  Ticket tk = sends.post(1);
  sends_q.push_back(Op{static_cast<char*>(mem.data()) + offset, len, tk});
  t_->progress_send(*this);
  return tk;
}

// No look at the ring when a receive is posted: it is taken in a wait or
// poll. The line a look reads is the one the peer writes its next frame
// to, so it is a cache miss (the line comes from the peer) right before this
// rank's send in an exchange (recv, send, wait), on the critical path of a
// small AllReduce; in the wait the miss overlaps the peer's own send.
Result<Ticket> ShmPair::recv(Memory& mem, size_t offset, size_t len) {
  if (offset + len > mem.size()) return out_of_range(fmt::format("recv from rank {}: range outside the buffer", peer_));
  std::lock_guard<std::mutex> l(t_->mu_);
  WEFT_RETURN_IF_ERROR(t_->check());
  Ticket tk = recvs.post(1);
  recvs_q.push_back(Op{static_cast<char*>(mem.data()) + offset, len, tk});
  return tk;
}

// How many looks at the ring a small exchange takes for the peer's message
// before it waits as any receive does (ShmTransport::wait): about a
// microsecond, what a peer on another CPU needs when it is in the same step.
constexpr unsigned kQuickPolls = 256;

// A small exchange with nothing else in flight to or from the peer (every
// step of a small AllReduce) skips the queues: the send is copied into the
// ring, then the receive looks at the ring itself and takes the message
// into place (or reduces it from the ring) as it arrives. Everything else
// goes through the queues (queued_exchange). Why: at a few hundred bytes
// the time of a call is this path, not the bytes; on this VM a 2-rank 4 B
// AllReduce took 0.17 us through the queues, 0.145 us this way and 0.128
// with the butterfly lane (butterfly_lane.cc), Open MPI's vader 0.144 in the
// same minutes (bench/results/2026-11-26-shm-small.md).
Result<Ticket> ShmPair::exchange_with(const Memory& smem, size_t soff, size_t slen, Memory& rmem, size_t roff,
                                      size_t rlen, const Reduction* red, Deadline deadline) {
  if (roff + rlen > rmem.size()) return out_of_range(fmt::format("recv from rank {}: range outside the buffer", peer_));
  if (soff + slen > smem.size()) return out_of_range(fmt::format("send to rank {}: range outside the buffer", peer_));
  std::lock_guard<std::mutex> l(t_->mu_);
  // Not WEFT_RETURN_IF_ERROR: it copies the OK Status (a string) of each
  // call, and this is the per-call path of every small AllReduce step.
  if (Status s = t_->check(); !s) return s;
  Op send{static_cast<char*>(smem.data()) + soff, slen, 0};
  Op recv{static_cast<char*>(rmem.data()) + roff, rlen, 0};
  if (red != nullptr) recv.into = red->into, recv.dtype = red->t, recv.rop = red->op;
  const bool quiet = sends_q.empty() && acks_q.empty() && recvs_q.empty() && sends.idle() && recvs.idle();
  if (!quiet || t_->single_copy(slen, send_single) || t_->single_copy(rlen, recv_single)) {
    return queued_exchange(send, recv, red, deadline);
  }
  const uint64_t head0 = out.head();
  const bool sent = out.put(send.ptr, slen, send.done);
  if (out.head() != head0) ring_bell(seg->hdr(), bell);
  if (!sent) return queued_exchange(send, recv, red, deadline);  // the ring is full: the rest as room comes
  const Ticket st = sends.post_done();
  if (!t_->oversubscribed()) {
    bool acked = false;  // inline frames only: stays false
    for (unsigned i = 0; i < kQuickPolls; ++i) {
      const ShmTransport::Take took = t_->take_frame(*this, recv, acked);
      if (took == ShmTransport::kStop) break;  // failed_ is set: the wait below reports it
      if (took == ShmTransport::kNone || recv.done < recv.len) continue;  // a 0-byte message is a frame too
      recvs.post_done();
      if (in.publish()) ring_bell(seg->hdr(), bell);  // the sender may wait for room
      return st;
    }
  }
  const Ticket rt = recv.t = recvs.post(1);
  recvs_q.push_back(recv);
  if (Status s = t_->wait(*this, [&] { return recvs.done >= rt; }, deadline, "receive", rt); !s) return s;
  return st;
}

// The exchange through the queues: the receive is posted, then the send (of
// which send.done bytes may be in the ring already), and both are waited
// for. A reduce into the send's own range (reduces_over_send) is done only
// once the send has left: until then the message lands at recv.ptr.
Result<Ticket> ShmPair::queued_exchange(Op send, Op recv, const Reduction* red, Deadline deadline) {
  const auto s0 = reinterpret_cast<uintptr_t>(send.ptr), r0 = reinterpret_cast<uintptr_t>(recv.into);
  const bool after = red != nullptr && s0 < r0 + recv.len && r0 < s0 + send.len;
  if (after) recv.into = nullptr;
  const Ticket rt = recv.t = recvs.post(1);
  recvs_q.push_back(recv);
  const Ticket st = send.t = sends.post(1);
  sends_q.push_back(send);
  t_->progress_send(*this);
  if (Status s = t_->wait(*this, [&] { return recvs.done >= rt; }, deadline, "receive", rt); !s) return s;
  if (Status s = t_->wait(*this, [&] { return sends.done >= st; }, deadline, "send", st); !s) return s;
  if (after) reduce_into(red->into, recv.ptr, recv.len / dtype_size(red->t), red->t, red->op);
  return st;
}

bool ShmPair::reduces_over_send(size_t slen) const { return !t_->single_copy(slen, send_single); }

Status ShmPair::wait_send(Ticket t, Deadline d) {
  std::lock_guard<std::mutex> l(t_->mu_);
  return t_->wait(*this, [&] { return sends.done >= t; }, d, "send", t);
}
Status ShmPair::wait_recv(Ticket t, Deadline d) {
  std::lock_guard<std::mutex> l(t_->mu_);
  return t_->wait(*this, [&] { return recvs.done >= t; }, d, "receive", t);
}
Result<bool> ShmPair::test_send(Ticket t) {
  std::lock_guard<std::mutex> l(t_->mu_);
  if (sends.done >= t) return true;
  WEFT_RETURN_IF_ERROR(t_->check());
  return false;
}
Result<bool> ShmPair::test_recv(Ticket t) {
  std::lock_guard<std::mutex> l(t_->mu_);
  if (recvs.done >= t) return true;
  WEFT_RETURN_IF_ERROR(t_->check());
  return false;
}

ShmTransport::~ShmTransport() {
  if (own_.hdr()) {
    own_.hdr()->closed.store(1);
    for (ShmPair* p : active_) ring_bell(p->seg->hdr(), BellFence::kFull);
  }
  for (ShmPair* p : active_) {
    if (p->pidfd >= 0) ::close(p->pidfd);
  }
  if (!name_.empty()) ::shm_unlink(name_.c_str());  // normally gone already
}


// Every peer's segment is mapped (address space, no memory: a page is
// allocated when first touched), so that a pair can be connected after the
// names are gone; the rings of the pairs connected now are faulted in.
Status ShmTransport::connect(Store& store, Deadline deadline) {
  const int me = cfg_.rank;
  const std::vector<int> peers = cfg_.peer_ranks();
  const size_t bytes = Segment::bytes_for(cfg_.size, ring_bytes_);
  name_ = fmt::format("/weft-{}-{}-{:x}", ::getpid(), me, std::random_device{}());
  WEFT_ASSIGN_OR_RETURN(int fd, open_segment(name_, true, bytes));
  Status s = own_.map(fd, bytes);
  ::close(fd);
  WEFT_RETURN_IF_ERROR(s);
  // The rings of this segment are written by the peers and read here: fault
  // them in now, not during the first collectives (Segment::populate).
  own_.populate(0, Segment::control_bytes(cfg_.size));
  SegmentHeader* h = own_.hdr();
  h->magic = kMagic;
  h->rank = me;
  h->size = cfg_.size;
  h->pid = ::getpid();
  sleep_fence_ = register_sleep_fence();
  h->sleep_fence = sleep_fence_ ? 1 : 0;
  h->ring_bytes = ring_bytes_;
  h->probe_addr = reinterpret_cast<uint64_t>(&h->magic);
  h->cpu.store(-1);
  // Before the peers can find this segment, so before any of them probes.
  const bool single = cfg_.shm.single_copy_min_bytes > 0;
  if (single && cfg_.shm.ptracer_parent) grant_ptrace_to_parent();
  const std::string key = cfg_.store_prefix + "/shm/";
  WEFT_RETURN_IF_ERROR(store.set(key + std::to_string(me), name_));
  std::vector<std::pair<int, int>> refused;  // peers this rank may not read: (rank, errno)

  pairs_.resize(static_cast<size_t>(cfg_.size));
  for (int p : peers) {
    auto pair = std::make_unique<ShmPair>(this, p);
    WEFT_ASSIGN_OR_RETURN(std::string name, store.get(key + std::to_string(p), deadline));
    WEFT_ASSIGN_OR_RETURN(int pfd, open_segment(name, false, bytes));
    pair->seg = std::make_unique<Segment>();
    Status ms = pair->seg->map(pfd, bytes);
    ::close(pfd);
    WEFT_RETURN_IF_ERROR(ms);
    SegmentHeader* ph = pair->seg->hdr();
    if (ph->magic != kMagic || ph->rank != p || ph->size != cfg_.size || ph->ring_bytes != ring_bytes_) {
      return failed_precondition(fmt::format("shared segment {} of rank {} does not match this rank's shm options", name, p));
    }
    pair->pid = ph->pid;
    if (sleep_fence_ && ph->sleep_fence == 1) pair->bell = BellFence::kCompiler;
    // Decided once, here: each large message then takes its path without a
    // failed system call first.
    if (single) {
      const int err = probe_single_copy(pair->pid, ph->probe_addr, kMagic);
      pair->recv_single = err == 0;
      if (err != 0) refused.emplace_back(p, err);
    }
    own_.ctl(p)->single_copy.store(pair->recv_single ? kSingleCopyAllowed : kSingleCopyRefused,
                                   std::memory_order_release);
    mapped_.push_back(pair.get());
    pairs_[static_cast<size_t>(p)] = std::move(pair);
  }
  for (int p : cfg_.setup_peer_ranks()) activate(*pairs_[static_cast<size_t>(p)]);
  // Once every peer has mapped this segment its name can go: the mapping
  // lives on, and no crash can leak it.
  WEFT_RETURN_IF_ERROR(store.set(key + "mapped/" + std::to_string(me), "1"));
  for (int p : peers) WEFT_RETURN_IF_ERROR(store.get(key + "mapped/" + std::to_string(p), deadline).status());
  // Every peer's verdict on this rank was stored before its "mapped" key
  // (for every pair: one connected later reads it here too).
  for (ShmPair* pr : mapped_) {
    pr->send_single = pr->seg->ctl(me)->single_copy.load(std::memory_order_acquire) == kSingleCopyAllowed;
  }
  if (!refused.empty()) log_single_copy_refused(me, refused, cfg_.shm.single_copy_min_bytes);
  ::shm_unlink(name_.c_str());
  name_.clear();
  return Status::ok();
}

// Both rings of the pair (the peer's in this segment, this rank's in the
// peer's) start empty in zeroed memory, so each end sets up its side alone,
// whenever it first needs the pair: no handshake.
void ShmTransport::activate(ShmPair& p) {
  const int me = cfg_.rank;
  own_.populate(own_.ring_offset(p.peer()), ring_bytes_);
  p.seg->populate(0, Segment::control_bytes(cfg_.size));
  p.seg->populate(p.seg->ring_offset(me), ring_bytes_);
  p.out = RingWriter(p.seg->ring(me), ring_bytes_, p.seg->ctl(me));
  p.in = RingReader(own_.ring(p.peer()), ring_bytes_, own_.ctl(p.peer()));
  p.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, p.pid, 0));
  p.active = true;
  active_.push_back(&p);
}

Status ShmTransport::connect_peers(const std::vector<int>& peers, Deadline deadline) {
  (void)deadline;
  std::lock_guard<std::mutex> l(mu_);
  WEFT_RETURN_IF_ERROR(check());
  for (int p : peers) {
    if (p < 0 || p >= cfg_.size || !pairs_[static_cast<size_t>(p)]) {
      return invalid_argument(fmt::format("shm transport: rank {} is not a peer of this transport", p));
    }
    if (!pairs_[static_cast<size_t>(p)]->active) activate(*pairs_[static_cast<size_t>(p)]);
  }
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<Transport>> make_shm_transport(const TransportConfig& config, Store& store,
                                                      Deadline deadline) {
  auto t = std::make_unique<ShmTransport>(config);
  WEFT_RETURN_IF_ERROR(t->connect(store, deadline));
  return std::unique_ptr<Transport>(std::move(t));
}

}  // namespace weft::coll::shm
