// What an algorithm sees (internal): a group of ranks, one pair per peer,
// the registered data and scratch memory, the deadline of the call, and the
// reduce kernel of the call's type and op. Algorithms address peers by group
// index; the group maps them to physical ranks (the logical -> physical remap
// of failed links, or the sub-groups of the hybrid algorithm).
#pragma once

#include <string_view>
#include <vector>

#include "weft/collectives/communicator.h"
#include "weft/collectives/transport.h"
#include "weft/collectives/types.h"

namespace weft::coll::internal {

struct Group {
  std::vector<int> ranks;  // group index -> physical rank
  int me = 0;              // this rank's group index
  int size() const { return static_cast<int>(ranks.size()); }
};

// The two memories of a call: kData holds the input and receives the output
// (the communicator copies send -> recv before an out-of-place call),
// kScratch receives the peers' partial vectors. Each is registered with every
// transport of the communicator; the context picks the peer's.
enum Buf { kData = 0, kScratch = 1 };
struct Registered {
  std::vector<Memory*> by_transport;  // index = transport index
};
struct Buffers {
  Registered mem[2];
  char* ptr[2] = {nullptr, nullptr};
};

class Context {
 public:
  // transport_of[r]: index into transports of the transport serving rank r.
  Context(Group group, std::vector<Pair*> pairs_by_rank, std::vector<int> transport_of,
          std::vector<Transport*> transports, const Buffers* buffers, Deadline deadline,
          DataType dtype, ReduceOp op,
          const std::function<void(int, const TraceEvent&)>* trace, int phys_rank);

  int rank() const { return group_.me; }
  int size() const { return group_.size(); }
  int physical(int group_index) const { return group_.ranks[static_cast<size_t>(group_index)]; }
  const Group& group() const { return group_; }
  size_t esize() const { return esize_; }
  DataType dtype() const { return dtype_; }
  ReduceOp op() const { return op_; }
  Deadline deadline() const { return deadline_; }

  // Offsets and lengths in bytes; peers by group index.
  Result<Ticket> send(int peer, Buf b, size_t offset, size_t len);
  Result<Ticket> recv(int peer, Buf b, size_t offset, size_t len);
  char* ptr(Buf b) const { return buffers_->ptr[b]; }
  Status wait_send(int peer, Ticket t);
  Status wait_recv(int peer, Ticket t);
  // Waits for every send posted so far (the source memory may be reused).
  Status wait_all_sends();

  // dst (op)= src, count elements of the call's type.
  void reduce(void* dst, const void* src, size_t count) const;
  void step(std::string_view phase, int distance) const;

  // The same call on a subset of this context's ranks (group indices).
  Context subgroup(const std::vector<int>& members) const;

 private:
  Pair& pair(int peer);
  template <typename Test>
  Status wait_polling(int peer, Test test);

  Group group_;
  Memory& mem(int peer, Buf b) const;
  std::vector<Pair*> pairs_;  // by physical rank
  std::vector<int> transport_of_;
  std::vector<Transport*> transports_;
  const Buffers* buffers_;
  std::vector<Ticket> last_send_;  // by physical rank
  Deadline deadline_;
  DataType dtype_;
  ReduceOp op_;
  size_t esize_;
  const std::function<void(int, const TraceEvent&)>* trace_;
  int phys_rank_;
};

// Posts recv from `from` and send to `to` (recv first, so that a one-sided
// transport's credit leaves before the data), then waits for both.
Status exchange(Context& ctx, int to, Buf sb, size_t soff, size_t slen, int from, Buf rb,
                size_t roff, size_t rlen);

}  // namespace weft::coll::internal
