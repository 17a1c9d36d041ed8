// What an algorithm sees (internal): a group of ranks, one pair per peer,
// the registered data and scratch memory, the deadline of the call (and the
// window in which a stall of it is resolved, stall.h), and the reduce kernel
// of the call's type and op. Algorithms address peers by group index; the
// group maps them to physical ranks (the logical -> physical remap of failed
// links, or the sub-groups of the hybrid algorithm).
#pragma once

#include <chrono>
#include <memory>
#include <string_view>
#include <vector>

#include "weft/collectives/communicator.h"
#include "weft/collectives/transport.h"
#include "weft/collectives/types.h"
#include "exchange_pair.h"
#include "idle_wait.h"

namespace weft::coll::internal {

// The communicator's links, built once at setup and shared by every call.
struct Links {
  std::vector<Pair*> pairs;            // by physical rank; nullptr for this rank
  std::vector<ExchangePair*> exchangers;  // by physical rank: the pair, if it runs whole exchanges
  std::vector<int> transport_of;       // by physical rank: index into transports; -1 for this rank
  std::vector<Transport*> transports;
  // How long a wait on several transports polls hard before it yields
  // between polls (idle_wait.h: hard_spin_for).
  std::chrono::microseconds hard_spin{5};
};

// The two memories of a call: kData holds the input and receives the output
// (the communicator copies send -> recv before an out-of-place call),
// kScratch receives the peers' partial vectors. Each is registered with every
// transport of the communicator; the context picks the peer's.
enum Buf { kData = 0, kScratch = 1 };
struct Registered {
  std::vector<Memory*> by_transport;  // index = transport index
  // Where the call's buffer starts in each Memory: the offset of a buffer
  // inside a larger registration (Communicator::register_buffer), or of a
  // buffer staged in scratch. Added to every offset handed to a pair.
  size_t base = 0;
};
struct Buffers {
  Registered mem[2];
  char* ptr[2] = {nullptr, nullptr};
};

// Built per call without allocating (a small AllReduce over shared memory
// takes a few hundred nanoseconds, a malloc tens): the group, the links and
// the per-call send tickets are borrowed from the communicator.
class Context {
 public:
  // ranks: group index -> physical rank (must outlive the context);
  // last_send: by physical rank, zeroed by the caller, shared by subgroups.
  Context(const std::vector<int>& ranks, int me, const Links* links, const Buffers* buffers,
          std::vector<Ticket>* last_send, Deadline deadline, DataType dtype, ReduceOp op,
          const std::function<void(int, const TraceEvent&)>* trace, int phys_rank,
          std::chrono::milliseconds stall_window);

  int rank() const { return me_; }
  int size() const { return size_; }
  int physical(int group_index) const { return ranks_[group_index]; }
  size_t esize() const { return esize_; }
  DataType dtype() const { return dtype_; }
  ReduceOp op() const { return op_; }
  Deadline deadline() const { return deadline_; }

  // Offsets and lengths in bytes; peers by group index.
  Result<Ticket> send(int peer, Buf b, size_t offset, size_t len);
  // Pair::send_held: the caller leaves the range unmodified until the peer
  // answered with a message it could only send after reading this one.
  Result<Ticket> send_held(int peer, Buf b, size_t offset, size_t len);
  Result<Ticket> recv(int peer, Buf b, size_t offset, size_t len);
  char* ptr(Buf b) const { return buffers_->ptr[b]; }
  Status wait_send(int peer, Ticket t);
  Status wait_recv(int peer, Ticket t);
  // Receives from and sends to one peer and waits for both: recv, send,
  // wait_recv, wait_send, or one ExchangePair call where the pair has it.
  Status sendrecv(int peer, Buf sb, size_t soff, size_t slen, Buf rb, size_t roff, size_t rlen);
  // sendrecv, then reduce(into, received, rlen / esize()): where the pair
  // runs whole exchanges and the send's range does not overlap `into` (or
  // reduces_over_send), in
  // one ExchangePair::exchange_reduce, which reduces straight from the
  // transport's buffer (shm: the ring) and leaves [roff, roff + rlen) of rb
  // unspecified; else received into rb at roff and reduced from there.
  // Its send is held (send_held): the caller's protocol must answer it.
  Status sendrecv_reduce(int peer, Buf sb, size_t soff, size_t slen, Buf rb, size_t roff, size_t rlen, char* into);
  // True if sendrecv_reduce to `peer` may reduce into the send's own range
  // (ExchangePair::reduces_over_send): one exchange, straight from the
  // transport's buffer, with no scratch.
  bool reduces_over_send(int peer, size_t slen) const;
  // Non-blocking: true once recv t from peer has completed.
  Result<bool> test_recv(int peer, Ticket t) { return pair(peer).test_recv(t); }
  // Polls every transport of the call until done(blame) returns true;
  // done sets `blame` (group index) to the peer it still waits for, which
  // the deadline's error names.
  template <typename Done>
  Status poll_until(Done done);
  // Waits for every send this call posted to the group's members so far
  // (the source memory may be reused).
  Status wait_all_sends();

  // dst (op)= src, count elements of the call's type.
  void reduce(void* dst, const void* src, size_t count) const;
  void step(std::string_view phase, int distance) const;

  // The same call on a subset of this context's ranks (group indices).
  Context subgroup(const std::vector<int>& members) const;

 private:
  Result<Ticket> post_send(int peer, Buf b, size_t offset, size_t len, bool held);
  Status timed_out(int peer) const;
  // The end of an ExchangePair call: its ticket is the last send to phys.
  Status exchanged(int peer, int phys, const Result<Ticket>& sent);
  // A wait on `peer` (group index, -1 unknown) ended with kDeadlineExceeded
  // (its deadline, or a stall notice): the stall's verdict (stall.h).
  Status stalled(int peer, const Status& why) const;
  bool stall_noticed() const;
  Pair& pair(int peer) const { return *links_->pairs[static_cast<size_t>(physical(peer))]; }
  Memory& mem(int peer, Buf b) const;
  size_t at(Buf b, size_t offset) const { return buffers_->mem[b].base + offset; }

  const int* ranks_;
  int size_, me_;
  std::shared_ptr<const std::vector<int>> owned_ranks_;  // subgroups only
  const Links* links_;
  const Buffers* buffers_;
  std::vector<Ticket>* last_send_;
  Deadline deadline_;
  DataType dtype_;
  ReduceOp op_;
  size_t esize_;
  const std::function<void(int, const TraceEvent&)>* trace_;
  int phys_rank_;
  std::chrono::milliseconds stall_window_;
};

// With one transport its own blocking wait is the cheapest; with several
// (hybrid, hierarchical) no single call can block on all of them, and a wait
// on several peers (route plan gates) none either: poll each transport in
// turn until the operation completes (polling hard, then yielding: there is
// no one doorbell to sleep on; Links::hard_spin says how long).
template <typename Done>
Status Context::poll_until(Done done) {
  IdleWait w(deadline_, links_->hard_spin, links_->hard_spin);
  int blame = -1;
  for (;;) {
    WEFT_ASSIGN_OR_RETURN(bool finished, done(blame));
    if (finished) return ok_status();
    bool moved = false;
    for (Transport* t : links_->transports) {
      WEFT_ASSIGN_OR_RETURN(bool m, t->poll());
      moved = moved || m;
    }
    if (stall_noticed()) return stalled(blame, deadline_exceeded("a peer reported a stalled call"));
    switch (w.next(moved)) {
      case IdleWait::kPoll: break;
      case IdleWait::kExpired: return timed_out(blame);
      case IdleWait::kYield:
      case IdleWait::kSleep: sched_yield(); break;
    }
  }
}

// Posts recv from `from` and send to `to` (recv first, so that a one-sided
// transport's credit leaves before the data), then waits for both.
Status exchange(Context& ctx, int to, Buf sb, size_t soff, size_t slen, int from, Buf rb,
                size_t roff, size_t rlen);

}  // namespace weft::coll::internal
