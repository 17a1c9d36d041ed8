// The communicator's state (internal), shared by communicator.cc (setup,
// plans, running a plan) and collectives.cc (the collective calls).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "algorithms/algorithms.h"
#include "context.h"
#include "weft/collectives/communicator.h"
#include "weft/common/huge_buffer.h"

namespace weft::coll {

class Communicator::Impl {
 public:
  CommConfig cfg;
  std::vector<std::string> hosts;  // by rank
  std::vector<int> local;          // ranks on this host
  int host_count = 1;
  std::vector<std::unique_ptr<Transport>> transports;
  internal::Links links;          // pairs and transports by rank
  std::map<Algorithm, std::vector<int>> rank_maps;  // allreduce: logical -> physical
  std::vector<int> identity_group;  // 0, 1, ..., size-1
  std::string link_kind = "tcp";    // the transport of every peer, for selection; "tcp" when mixed
  bool equal_multi_host = false;    // several hosts, the same number (> 1) of ranks on each
  std::vector<int> host_of;       // by rank: host index in order of first appearance
  std::map<std::tuple<int, int, size_t, size_t, size_t, int>, std::unique_ptr<internal::Plan>> plans;
  std::vector<char> work;         // reduce_scatter's in-place copy of the input
  HugeBuffer scratch;
  std::vector<std::unique_ptr<Memory>> scratch_mem;  // by transport
  // Per call, kept between calls so that a call allocates nothing of its own.
  internal::Buffers buffers;
  std::vector<std::unique_ptr<Memory>> data_mem;  // by transport: the last call's buffer
  std::vector<Ticket> last_send;                  // by rank
  std::mutex abort_mu;
  Status failed;  // first failure; the communicator is unusable after it
  std::atomic<bool> has_failed{false};

  Status setup(Store& store);
  Status fail(Status s);
  using MakePlanFn = std::unique_ptr<internal::Plan> (*)(const internal::Shape&);
  Result<internal::Plan*> plan(int coll, Algorithm a, const internal::Shape& s, MakePlanFn make);
  Status execute(int coll, Algorithm a, MakePlanFn make, const std::vector<int>& group, size_t count, int root,
                 void* data, size_t bytes, DataType t, ReduceOp op, const CollectiveOptions& o);
  Status usable();
  bool hosts_equal() const;
  Result<const std::vector<int>*> rank_map(Algorithm a);
  Status ensure_scratch(size_t bytes);
  Status run(internal::Plan& p, const std::vector<int>& group_ranks, int me, void* data, size_t bytes,
             DataType t, ReduceOp op, Deadline deadline);
};

namespace internal {
enum Coll { kAllreduce = 0, kReduceScatter = 1, kAllgather = 2, kBroadcast = 3 };
}  // namespace internal

}  // namespace weft::coll
