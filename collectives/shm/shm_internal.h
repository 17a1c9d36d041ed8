// The shared-memory transport's classes (internal), shared by
// shm_transport.cc (moving messages, waits, aborts) and shm_setup.cc
// (segments, pairs, teardown).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "completion.h"
#include "exchange_pair.h"
#include "idle_wait.h"
#include "shm/shm_ring.h"
#include "shm/shm_segment.h"
#include "shm/shm_transport.h"

namespace weft::coll::shm::detail {

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
    if (failed_.is_ok() && !own_.hdr()->aborted.load(std::memory_order_acquire)) return ok_status();
    return check_failed();
  }
  Status check_failed();
  Status activate(ShmPair& p);
  void tell_stall(Segment& seg, int origin, int32_t v);
  void check_liveness(Clock::time_point now);
  bool waits_on_closed(ShmPair& p);  // a receive or a single-copy send the closed peer cannot answer
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

}  // namespace weft::coll::shm::detail
