// The communicator's state (internal), shared by communicator.cc (setup,
// plans, running a plan) and collectives.cc (the collective calls).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "algorithms/algorithms.h"
#include "context.h"
#include "plan_epochs.h"
#include "registry.h"
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
  // The per-call hot path of a small collective costs about as much as the
  // shared-memory transfer itself (bench/results/2026-11-24-shm.md: 2 ranks,
  // 4-256 B), so what does not change between calls is resolved once:
  // kAuto's AllReduce by size (setup), the rank maps by algorithm, and the
  // last plan used (training loops repeat the same call).
  AllreducePicks auto_picks;
  std::array<const std::vector<int>*, 8> rank_map_of{};  // by Algorithm: rank_maps' entries
  std::vector<int> identity_group;  // 0, 1, ..., size-1
  std::string link_kind = "tcp";    // the transport of every peer, for selection; "tcp" when mixed
  bool equal_multi_host = false;    // several hosts, the same number (> 1) of ranks on each
  std::vector<int> host_of;       // by rank: host index in order of first appearance
  // The route plan's gates (routing/gates.h), computed at setup; empty
  // without a plan or when no flow of it has a nonzero round. The plan's
  // algorithm, `gated` (HD, ring or hybrid: planned_algorithm), enforces
  // them on AllReduce in plan rank order (hd_gates.cc, ring_gates.cc,
  // allreduce_hybrid.cc).
  std::vector<routing::Gate> gates;
  Algorithm gated = Algorithm::kAuto;
  using PlanKey = std::tuple<int, int, size_t, size_t, size_t, int>;
  std::map<PlanKey, std::unique_ptr<internal::Plan>> plans;
  PlanKey last_plan_key{};
  internal::Plan* last_plan = nullptr;  // plans' entry of last_plan_key
  // Memory and its registrations. Members are destroyed in reverse order:
  // every registration (data_mem, registry, scratch_mem) before the memory
  // it covers and before the transports that made it.
  bool pins = false;  // a transport pins registered pages (Transport::registration_pins)
  HugeBuffer scratch;
  std::vector<std::unique_ptr<Memory>> scratch_mem;  // by transport
  HugeBuffer work;            // reduce_scatter's in-place copy of the input
  uint64_t work_id = 0;       // its entry in `registry` (where pins)
  std::shared_ptr<internal::Registry> registry = std::make_shared<internal::Registry>();
  // Per call, kept between calls so that a call allocates nothing of its own.
  internal::Buffers buffers;
  // By transport: the call's buffer. Where nothing pins, the last call's,
  // reused while the address and size stay; else this call's registration,
  // if any (place_buffers).
  std::vector<std::unique_ptr<Memory>> data_mem;
  char* staged_to = nullptr;  // the caller's buffer, when the call runs on a copy in scratch
  std::vector<Ticket> last_send;                  // by rank
  std::mutex abort_mu;
  Status failed;  // first failure; the communicator is unusable after it
  std::atomic<bool> has_failed{false};

  // Plan epochs (epoch_switch.cc; docs/collectives-routes.md "Plan
  // epochs"); null without a plan epochs file, and then a call never looks.
  struct Epochs {
    explicit Epochs(internal::PlanEpochFile f) : file(std::move(f)) {}
    internal::PlanEpochFile file;
    uint64_t epoch = 0;            // the epoch run
    uint64_t calls = 0;            // collective calls begun
    uint64_t countdown = 1;        // calls until the next agreement (the first call agrees)
    uint64_t since = 0;            // calls since the last agreement
    Clock::time_point last{};      // when the last agreement ended
    uint64_t waited_for = 0;       // the newest epoch this rank waited to read (once per epoch)
  };
  std::unique_ptr<Epochs> epochs;
  // At the start of every collective call that moves data: every rank
  // counts the same calls, and agrees on the epoch at the same ones.
  Status epoch_boundary() {
    ++epochs->calls;
    ++epochs->since;
    if (--epochs->countdown > 0) return ok_status();
    return agree_on_epoch();
  }
  Status setup_epochs(Store& store, Deadline deadline);
  Status agree_on_epoch();
  Status agree(int64_t (&v)[3]);
  Status adopt(internal::PlanEpoch e);
  // The plan, gates and counters of a new epoch, from call `call`
  // (epoch_switch.cc); after the transports moved to its routes.
  void install_epoch(internal::PlanEpoch next, std::vector<routing::Gate> next_gates, uint64_t call, bool inside);
  // The routes of this rank's flows of `proto` in `plan`, by peer.
  std::vector<PeerRoute> routes_of(const routing::RoutePlan& plan, const std::string& proto) const;

  // Butterfly AllReduce run straight on the pairs (butterfly_lane.cc), or
  // nullopt where that does not apply and execute runs the plan.
  std::optional<Status> butterfly_lane(const std::vector<int>& group, void* data, size_t count, size_t bytes,
                                       DataType t, ReduceOp op, const CollectiveOptions& o);
  // fail() with the call named: "rank R: allreduce (hd, N x f32, sum)".
  Status fail_call(const Status& s, int coll, Algorithm a, size_t count, DataType t, ReduceOp op);
  // A call's own timeout, else the communicator's; at most kLongestTimeout.
  std::chrono::milliseconds call_timeout(const CollectiveOptions& o) const {
    return o.timeout.count() > 0 ? std::min(o.timeout, kLongestTimeout) : cfg.timeout;
  }
  Status setup(Store& store, Deadline deadline);
  Status agree_on_picks(Store& store, Deadline deadline);
  Status choose_auto();
  Status fail(Status s);
  using MakePlanFn = std::unique_ptr<internal::Plan> (*)(const internal::Shape&);
  // The cached plan, or a new one whose peers are then connected
  // (connect_plan_peers) within `deadline`.
  Result<internal::Plan*> plan(int coll, Algorithm a, const internal::Shape& s, MakePlanFn make, Deadline deadline,
                               std::chrono::milliseconds timeout);
  // connections.cc (communicator.h "Connections"): the peers connected at
  // setup, by rank; the pairs of a plan that are not connected yet,
  // connected by both ends in the call that first runs it; a pair's links
  // entries from its transport.
  std::vector<bool> setup_peers();
  Status connect_plan_peers(const internal::Plan& p, const std::vector<int>& group, Deadline deadline,
                            std::chrono::milliseconds timeout);
  void link(int peer);
  // In-call plan switches (in_call_switch.cc; docs/collectives-routes.md
  // "Inside a stalled call"): null unless plan epochs,
  // CommConfig::in_call_switch and every peer over TCP. Each collective call
  // that execute runs is recorded (the last two), an AllReduce with a copy of
  // its input.
  struct CallRecord {
    int coll = -1;
    Algorithm a = Algorithm::kAuto;
    MakePlanFn make = nullptr;
    const std::vector<int>* group = nullptr;
    size_t count = 0;
    int root = 0;
    DataType t = DataType::kF32;
    ReduceOp op = ReduceOp::kSum;
    CollectiveOptions o;
    size_t bytes = 0;
    Deadline deadline{};
    uint64_t seq = 0;
    Clock::time_point started{};
    std::vector<char> input;  // AllReduce: the data before the call
  };
  struct InCall {
    CallRecord calls[2];   // by seq % 2
    uint64_t seq = 0;      // calls recorded (the current one's number)
    uint32_t generation = 0;  // in-call switches so far (tcp_rebuild.cc's Hello)
    bool recovering = false;  // re-running: not recorded, no switch inside
    bool quiet = false;       // no switch inside (epoch_switch.cc's second agreement round)
    std::chrono::milliseconds grace{0};
  };
  std::unique_ptr<InCall> in_call;
  void setup_in_call();
  uint64_t probe_epoch();
  Status record_call(CallRecord r, const void* data);
  Status switch_inside(const Status& why, void* data);
  Status execute(int coll, Algorithm a, MakePlanFn make, const std::vector<int>& group, size_t count, int root,
                 void* data, size_t bytes, DataType t, ReduceOp op, const CollectiveOptions& o);
  Status usable();
  bool hosts_equal() const;
  Algorithm select_auto_allreduce(size_t bytes) const;
  Result<const std::vector<int>*> rank_map(Algorithm a);
  Status ensure_scratch(size_t bytes);
  Status ensure_work(size_t bytes);
  // HugeBuffer(bytes), where running out of memory (std::bad_alloc, as
  // std::vector throws) is a Status naming what the bytes were for: no
  // exception leaves the library's calls.
  Result<HugeBuffer> allocate(size_t bytes, std::string_view what) const;
  // Where a staged buffer goes in scratch: behind the plan's part, aligned.
  static size_t stage_offset(size_t scratch_bytes) { return (scratch_bytes + 63) & ~size_t{63}; }
  Status place_buffers(size_t scratch_bytes, void* data, size_t bytes);
  void finish_buffers(const Status& s, size_t bytes);
  Status run(internal::Plan& p, const std::vector<int>& group_ranks, int me, void* data, size_t bytes,
             DataType t, ReduceOp op, Deadline deadline, std::chrono::milliseconds timeout);
};

// The AllReduce algorithm whose flows `plan` routes: ring for
// allreduce-ring, hybrid for allreduce-hybrid, else HD.
Algorithm planned_algorithm(const routing::RoutePlan& plan);

namespace internal {
enum Coll { kAllreduce = 0, kReduceScatter = 1, kAllgather = 2, kBroadcast = 3 };
}  // namespace internal

}  // namespace weft::coll
