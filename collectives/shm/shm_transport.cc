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

#include <fmt/format.h>

#include "shm/shm_internal.h"
#include "shm/shm_single_copy.h"

namespace weft::coll::shm::detail {


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

bool ShmTransport::waits_on_closed(ShmPair& p) {
  if (!p.recvs_q.empty() && p.in.next(0) == nullptr) return true;
  return !p.acks_q.empty() && p.seg->ctl(cfg_.rank)->acks.load(std::memory_order_acquire) < p.acks_q.back().ack;
}

// Liveness costs a system call per peer: look at most once a millisecond.
void ShmTransport::check_liveness(Clock::time_point now) {
  if (now < next_liveness_check_ || !failed_.is_ok()) return;
  next_liveness_check_ = now + std::chrono::milliseconds(1);
  // A peer's abort notice names the rank that was lost; it wins over what
  // this rank sees of the messenger (a survivor that gave up and exited).
  if (!check().is_ok()) return;
  for (ShmPair* p : active_) {
    // A peer that closed its communicator wrote everything it sent before
    // its flag (shm_setup.cc): a receive its ring cannot answer, or a
    // single-copy send it never read, waits for a call it will not make.
    if (p->seg->hdr()->closed.load(std::memory_order_acquire) != 0 && waits_on_closed(*p)) {
      failed_ = unavailable(fmt::format(
          "rank {} closed its communicator while this rank waits for it (the ranks made different calls)", p->peer()));
      return;
    }
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
  if (done()) return ok_status();
  SegmentHeader* h = own_.hdr();
  const std::atomic<int32_t>& peer_cpu = p.seg->hdr()->cpu;
  IdleWait w(d, std::chrono::microseconds(cfg_.shm.spin_us), hard_spin_);
  publish_cpu();
  for (;;) {
    const bool moved = progress();
    if (done()) return ok_status();
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

}  // namespace weft::coll::shm::detail
