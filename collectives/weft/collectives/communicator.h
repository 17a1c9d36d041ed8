// The communicator: what training code links (docs/collectives.md).
//
//   weft::coll::CommConfig cfg;
//   cfg.rank = rank; cfg.size = size;          // or launch_info_from_env() (store.h)
//   cfg.transport = "auto";                    // shm to same-host peers, tcp to the rest
//   cfg.plan = *weft::routing::load_plan("plan.json");   // optional: planned routes
//   WEFT_ASSIGN_OR_RETURN(auto comm, weft::coll::Communicator::create(cfg, store));
//   WEFT_RETURN_IF_ERROR(comm->allreduce(in, out, n, DataType::kF32, ReduceOp::kSum));
//
// A communicator is used by one thread at a time; abort() may be called from
// any thread. Every call has a deadline (CommConfig::timeout, or the per-call
// option); a dead or stalled peer makes the call fail with a message naming
// that peer, and the failing rank tells the others so that they fail fast.
//
// Plans: a collective call picks (or is told) an algorithm, plans it for the
// (count, type) once — peers, block ranges, scratch size — and caches the
// plan; run() then only moves and reduces data.
//
// Connections: a rank is connected only to the peers its algorithms use,
// not to every rank (TCP holds two sockets per peer, so every rank to
// every rank reaches the default limit of 1024 descriptors near 500 ranks;
// shm a ring per peer). create() connects the peers of every algorithm
// kAuto may run on this communicator: AllReduce's butterfly (also
// barrier's), halving-doubling (with its fold, and the route plan's gates)
// and ring, each on its rank map; ReduceScatter's and AllGather's ring;
// one-shot and hybrid where kAuto's picks have them (AllreducePicks); the
// hierarchical AllGather on equal hosts. On P ranks of one host,
// without failed links (each algorithm's own rank map) or one-shot, that
// is at most log2(P) + 2 peers (TCP: at most 2 log2(P) + 5 sockets with
// the listening one; 17 at 128 ranks, where HD's first partner is a ring
// neighbour). Any other pair — a Broadcast's tree, an algorithm asked for
// with CollectiveOptions::algorithm — is connected by
// both its ends in the first call that needs it, before the algorithm runs,
// and stays: one-shot asked for on P ranks connects all P - 1 peers. A
// transport that cannot connect after setup (verbs) connects every peer at
// create().
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "weft/collectives/store.h"
#include "weft/collectives/transport.h"
#include "weft/collectives/tuning.h"
#include "weft/collectives/types.h"
#include "weft/common/status.h"
#include "weft/routing/plan.h"

namespace weft::coll {

enum class Algorithm : uint8_t {
  kAuto,             // chosen by size and topology (CommConfig::selection)
  kHalvingDoubling,  // allreduce: Rabenseifner, MPICH's non-power-of-two fold
  kRing,             // allreduce, reduce-scatter, allgather: chunked, pipelined
  kButterfly,        // allreduce: recursive doubling, whole vector per step
  kHybrid,           // allreduce: shm reduce-scatter, inter-host HD, shm allgather
  kHierarchical,     // allgather: inter-host ring overlapped with intra-host mesh (HCCL's pipeline)
  kBinomial,         // broadcast: binomial tree, segmented
  kOneShot,          // allreduce: every rank sends its vector to all, reduces all (one round)
};
std::string_view algorithm_name(Algorithm a);  // "auto", "hd", "ring", "butterfly", ...
std::optional<Algorithm> parse_algorithm(std::string_view s);

// Algorithm selection for kAuto's AllReduce: by default a cost model
// (docs/collectives.md "Selection"). Each transport has a latency α, a
// per-byte time β and a per-byte reduce time γ (tuning.h); the model sums
// them over every algorithm's real steps (collectives/cost_model.h) and
// kAuto runs the cheapest: butterfly, HD, ring, one-shot (where this host's
// ranks outnumber the CPUs a rank may use: every dependent round can cost
// a context switch there), and hybrid (several hosts with the same number
// > 1 of ranks each), each only where its predicted time is the smallest.
// The communicator works out at creation which algorithm is cheapest from
// which size (AllreducePicks); a call only looks its size up. The constants
// are Selection::tuning, else the file $WEFT_TUNING names, else
// built_in_tuning(); `weft bench --calibrate -o tuning.json` measures them
// on your machines.
//
// Under a route plan kAuto chooses between butterfly and the plan's
// algorithm only (only the plan's flows are routed; never hybrid, whose
// inter-host HD runs on subsets the plan does not describe). One-shot
// never runs with failed links (it talks to every peer) nor on more ranks
// than Selection::oneshot_max_ranks.
//
// Explicit rules (Selection::rules, not empty) replace the model: the first
// rule matching the communicator's transport ("tcp" when several are mixed)
// and size picks by message size: butterfly below hd_min_bytes, ring from
// ring_min_bytes, HD between; one-shot below oneshot_below_bytes where
// one-shot may run; hybrid from hybrid_min_bytes on equal hosts.
struct SelectionRule {
  std::string transport;  // the transport serving every peer ("tcp", "shm", ...); "*" = any
  int max_ranks;          // the rule covers communicators of at most this many ranks
  size_t hd_min_bytes;    // from this size on: halving-doubling (below: butterfly)
  size_t ring_min_bytes;  // from this size on: ring
  size_t oneshot_below_bytes = 0;  // ranks outnumber CPUs: below this size one-shot (0 = never)
  // HD AllReduce over this rule's transport and ranks runs on consecutive
  // pieces of at most this many bytes, one whole HD after the other (0 =
  // the whole vector at once; at least kMinHdPieceBytes otherwise). Also
  // when HD is asked for (CollectiveOptions::algorithm): it is how HD runs
  // here, not another algorithm. Not with a route plan's rounds, which
  // describe whole steps. bench/results/2026-11-24-hd-pieces.md. Under the
  // model: TransportCost::hd_piece_bytes.
  size_t hd_piece_bytes = 0;
  size_t hybrid_min_bytes = SIZE_MAX;  // equal hosts: from this size on hybrid (SIZE_MAX = never)
};
// Below a page a piece is nothing but its steps' latencies, and each piece
// is a plan of its own.
inline constexpr size_t kMinHdPieceBytes = 4096;

struct Selection {
  // The model's constants; unset: $WEFT_TUNING's file if the variable is
  // set, else built_in_tuning(). Resolved when a communicator is created.
  std::optional<Tuning> tuning;
  // Not empty: these rules instead of the model, first match wins; the
  // last must cover every transport and size ("*", INT_MAX ranks).
  std::vector<SelectionRule> rules;
  bool hybrid_when_multi_host = true;  // false: kAuto never runs hybrid
  // kAuto runs one-shot only on communicators of at most this many ranks:
  // it connects every pair (2 (P - 1) TCP sockets, a shared-memory ring to
  // every peer), and it was measured up to 8 ranks
  // (bench/results/2026-11-24-allreduce-selection.md). >= 0; one-shot
  // asked for runs at any size.
  int oneshot_max_ranks = 8;
  Status validate() const;
};

// What selection knows of a communicator (Communicator::create fills it).
struct SelectionInput {
  // The transport serving every peer; with several (transport "auto"), the
  // one between hosts.
  std::string transport = "tcp";
  std::string local_transport;  // between ranks of one host, if it differs ("" = transport)
  std::vector<int> host_of;     // by rank: its host's index (the size is the communicator's)
  int cpus = 0;                 // CPUs the ranks of a host may use (0: one per rank)
  bool oneshot = false;         // one-shot may run (ranks outnumber CPUs; no plan, no failed links)
  bool hybrid = true;           // hybrid may run (false: no order of the hosts avoids the failed links)
  // A route plan's algorithm (kHalvingDoubling, kRing or kHybrid): kAuto picks
  // between butterfly and it. kAuto: no plan.
  Algorithm planned = Algorithm::kAuto;
  // `hosts` hosts of `per_host` ranks each, in blocks of consecutive ranks.
  static SelectionInput blocks(std::string transport, int hosts, int per_host, std::string local_transport = "",
                               int cpus = 0);
};

// Which algorithm kAuto's AllReduce runs from which size on: ranges by
// ascending from_bytes, the first from 0. Fixed per communicator; at() is
// what a call does (no allocation).
struct AllreducePicks {
  struct Range {
    size_t from_bytes = 0;
    Algorithm algorithm = Algorithm::kButterfly;
  };
  static constexpr int kMaxRanges = 16;
  std::array<Range, kMaxRanges> ranges{};
  int count = 1;
  size_t hd_piece_bytes = 0;  // HD's piece on this communicator (0 = whole)
  Algorithm at(size_t bytes) const {
    int i = 0;
    while (i + 1 < count && bytes >= ranges[static_cast<size_t>(i + 1)].from_bytes) ++i;
    return ranges[static_cast<size_t>(i)].algorithm;
  }
  bool uses(Algorithm a) const;
  std::string describe() const;  // "butterfly, hd from 512 KiB"
};

// The picks for a communicator: by the model with `tuning` (which must
// validate()), or by the explicit rules if s.rules is not empty. The model
// evaluates every candidate at each power of two from 1 B to 1 TiB and
// picks the cheapest there for sizes up to the next (ties: butterfly, hd,
// ring, one-shot, hybrid, in that order).
AllreducePicks select_allreduce(const Selection& s, const Tuning& tuning, const SelectionInput& in);
// The model's predicted time of `a` for `bytes` on `in` (µs): what the
// picks compare; HUGE_VAL where `a` cannot run on it.
double predict_allreduce_us(Algorithm a, const Tuning& tuning, const SelectionInput& in, size_t bytes);

// The longest timeout a deadline is made of: one further away (as "no
// timeout" is often written: milliseconds::max(), Python's timedelta.max)
// would overflow the nanoseconds of std::chrono::steady_clock. Longer
// timeouts count as this one.
inline constexpr std::chrono::milliseconds kLongestTimeout = std::chrono::hours(24) * 365 * 100;

struct CollectiveOptions {
  Algorithm algorithm = Algorithm::kAuto;
  std::chrono::milliseconds timeout{0};  // 0: CommConfig::timeout; at most kLongestTimeout counts
  // Pipelining unit of ring-based algorithms, bytes; 0 = the default. Tests
  // set it small to force the multi-segment paths on small vectors.
  size_t segment_bytes = 0;
};

// One observable event of an algorithm: tests compare the flows that really
// moved with routing's schedule (routing/weft/routing/schedule.h).
// kEpoch: the communicator switched to plan epoch `epoch` before its
// collective call number `call` (0 = the first call;
// docs/collectives-routes.md "Plan epochs"): every rank reports the same
// call.
struct TraceEvent {
  enum Kind { kStep, kSend, kEpoch } kind = kStep;
  std::string_view phase;  // kStep: "fold", "rs", "ag", "unfold", "ring-rs", "ring-ag", ...; kEpoch: "plan-epoch"
  int distance = 0;        // kStep
  int peer = -1;           // kSend: physical rank
  size_t bytes = 0;        // kSend
  uint64_t epoch = 0;      // kEpoch
  uint64_t call = 0;       // kEpoch
};

// What a communicator did with the plan epochs file (CommConfig::
// plan_epochs): the epoch it runs, and each refusal counted once per
// version of the file (docs/collectives-routes.md "Plan epochs").
struct PlanEpochCounters {
  uint64_t epoch = 0;               // the plan epoch the communicator runs (0: CommConfig::plan)
  uint64_t switches = 0;            // plan epochs adopted
  uint64_t agreements = 0;          // agreement rounds run at call boundaries
  uint64_t in_call_switches = 0;    // of `switches`, those inside a stalled call, which was run again
  uint64_t refused_job = 0;         // "job" is another job's
  uint64_t refused_stale = 0;       // "epoch" <= the epoch run or already read
  uint64_t refused_mismatch = 0;    // ranks, collective, flows or dports differ from the plan run
  uint64_t refused_unreadable = 0;  // not JSON, not the format, not a valid route plan
  uint64_t refused() const { return refused_job + refused_stale + refused_mismatch + refused_unreadable; }
};

struct CommConfig {
  int rank = 0;
  int size = 1;
  // "tcp", "shm", "loopback" (ranks are threads of one process), "auto"
  // (shm to ranks on the same host, tcp to the others), or a name given to
  // register_transport ("verbs").
  std::string transport = "tcp";
  // This rank's host identity; ranks with equal host share memory (shm,
  // hybrid). "" = gethostname(). Tests give several "hosts" on one machine.
  std::string host;
  // Setup and every collective call; longer than kLongestTimeout counts as
  // kLongestTimeout.
  std::chrono::milliseconds timeout{60000};
  // Planned routes (weft route). Applied to the TCP transport: the
  // connection rank -> peer binds the flow's sport before connect; this
  // rank listens on the dport of the flows into it. Flows of other protocols
  // go to transports that understand them (verbs: udp).
  std::optional<routing::RoutePlan> plan;
  // Physical rank pairs whose direct link is down: allreduce remaps logical
  // ranks so that no algorithm step uses them (remap.h).
  std::vector<std::pair<int, int>> failed_links;
  // true: create() connects no pair; every pair is connected by the first
  // call that needs it ("Connections" above). For fabrics where not every
  // pair of ranks has a route: on a multi-plane fabric (planes share no
  // switch) the ring's neighbours (host a's last local rank, host a + 1's
  // first) sit on different planes, so connecting kAuto's ring at setup
  // would fail although hybrid AllReduce, which pairs only ranks of one host
  // and equal local ranks of different hosts, runs there.
  bool connect_on_demand = false;
  TcpOptions tcp;
  ShmOptions shm;
  VerbsOptions verbs;  // transport "verbs": device, queue depth, ...
  Selection selection;
  std::string store_prefix = "weft";
  // Scratch allocated (and its pages touched) by create(), so that the first
  // large call does not pay for first-touch page faults inside its time
  // (measured here: ~25 us per 4 KiB page in a VM, 0.4 s for 64 MiB). 0 = on
  // demand; a call that needs more grows it.
  size_t scratch_reserve_bytes = 0;
  std::function<void(int rank, const TraceEvent&)> trace;  // tests and debugging
  // Plan epochs (docs/collectives-routes.md "Plan epochs"): a file the
  // watcher replaces (rename(2)) with newer plans for this job; every rank
  // switches to a newer one at the same call. "" = $WEFT_PLAN_EPOCHS if set,
  // else none. Needs `plan` (the epoch 0); from the environment without a
  // plan it is ignored. Every rank must have one, or none.
  std::string plan_epochs;
  // The job the epochs must name: "" = $WEFT_JOB if set, else store_prefix.
  std::string job;
  // The file is looked at (stat(2)) at most this often, and ranks agree on
  // the epoch about this often (1 ms .. 1 min).
  std::chrono::milliseconds plan_poll{100};
  // In-call switches (docs/collectives-routes.md "Inside a stalled call"):
  // with a plan epochs file and every peer over TCP, an AllReduce whose wait
  // has moved nothing for `switch_stall` looks at the file (one stat(2)); a
  // newer epoch there makes every rank abandon the call, reconnect on the new
  // epoch and run the call again, with its result exact. Each AllReduce then
  // keeps a copy of its input (its bytes, two calls' worth of memory). false:
  // a stalled call waits for its timeout, and no copy is made.
  // $WEFT_IN_CALL_SWITCH=0/1 and $WEFT_SWITCH_STALL_MS, if set, win.
  bool in_call_switch = true;
  std::chrono::milliseconds switch_stall{200};  // 10 ms .. 60 s, below timeout
  // Where a transport pins registered pages (verbs), a call whose buffer is
  // not inside a registration (Communicator::register_buffer) of at most
  // this many bytes is copied into the communicator's own registered memory
  // and back; a larger one is registered for the call and deregistered
  // after it. Both are correct whatever the application does with the
  // buffer between calls; only a registered buffer is zero-copy. Two copies
  // of 256 KiB cost a few µs on a CPU, a registration tens of µs
  // (bench/results/2026-11-26-verbs-registration.md): re-measure on real NICs.
  size_t stage_max_bytes = 256 << 10;
  Status validate() const;
};

namespace internal {
struct Registry;
}  // namespace internal

// A buffer registered with a communicator (Communicator::register_buffer).
// Move-only; deregisters when destroyed, or earlier by
// Communicator::deregister. Used by the thread that uses its communicator;
// harmless after the communicator is gone (it then holds nothing).
class BufferRegistration {
 public:
  BufferRegistration() = default;
  BufferRegistration(BufferRegistration&& o) noexcept;
  BufferRegistration& operator=(BufferRegistration&& o) noexcept;
  BufferRegistration(const BufferRegistration&) = delete;
  BufferRegistration& operator=(const BufferRegistration&) = delete;
  ~BufferRegistration();

  void* data() const { return data_; }
  size_t size() const { return size_; }
  // False once deregistered, moved from, or its communicator is destroyed.
  bool registered() const;

 private:
  friend class Communicator;
  void release();
  std::weak_ptr<internal::Registry> registry_;
  void* data_ = nullptr;
  size_t size_ = 0;
  uint64_t id_ = 0;
};

class Communicator {
 public:
  // Connects to the peers of its algorithms through `store` ("Connections"
  // above; collective: every rank calls it).
  static Result<std::unique_ptr<Communicator>> create(const CommConfig& config, Store& store);
  // The same, set-up bounded by `deadline` instead of now + config.timeout:
  // for a caller that has spent part of the timeout already (opening the
  // store), so that the whole setup fails within the one timeout.
  static Result<std::unique_ptr<Communicator>> create(const CommConfig& config, Store& store,
                                                      std::chrono::steady_clock::time_point deadline);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int size() const;
  const std::string& host() const;
  // Ranks sharing this rank's host, ascending, and the number of hosts.
  const std::vector<int>& local_ranks() const;
  int host_count() const;
  // Transport serving `peer` (nullptr for this rank), e.g. to inspect ports.
  // Its pair(peer) is nullptr while the pair is not connected ("Connections").
  Transport* transport_for(int peer) const;

  // recv = op over ranks of send, count elements. send == recv is in place.
  Status allreduce(const void* send, void* recv, size_t count, DataType t, ReduceOp op,
                   const CollectiveOptions& o = {});
  // send holds size()*recv_count elements; rank r receives block r reduced.
  Status reduce_scatter(const void* send, void* recv, size_t recv_count, DataType t,
                        ReduceOp op, const CollectiveOptions& o = {});
  // recv holds size()*send_count elements, block r from rank r. send may be
  // recv's own block r (in place).
  Status allgather(const void* send, void* recv, size_t send_count, DataType t,
                   const CollectiveOptions& o = {});
  Status broadcast(void* buf, size_t count, DataType t, int root, const CollectiveOptions& o = {});
  Status barrier(const CollectiveOptions& o = {});

  // Registers [data, data + bytes) with every transport of this communicator
  // (verbs: ibv_reg_mr, pinning its pages; tcp, shm, loopback: nothing to
  // pin), as ncclCommRegister does: from then on a call whose buffer lies
  // inside it moves data straight from and into it, registering nothing.
  // The buffer a call works in is recv (allreduce, allgather) or buf
  // (broadcast); reduce_scatter works in a copy of its own. Until it is
  // deregistered the range must stay mapped to the same memory: free() or
  // munmap() it only after. Ranges of two registrations may not overlap.
  // Local: each rank registers its own buffers, any time between calls.
  Result<BufferRegistration> register_buffer(void* data, size_t bytes);
  // Deregisters now (an empty, moved-from or foreign registration is an
  // error); the registration's destructor does the same.
  Status deregister(BufferRegistration& registration);

  // Thread-safe: the current and every later call fails with kAborted.
  void abort(std::string_view reason = "aborted by the application");

  // The logical -> physical rank map allreduce algorithm `a` runs on
  // (identity unless failed_links forced a remap; an error if no order
  // avoids them).
  Result<std::vector<int>> allreduce_rank_map(Algorithm a) const;
  // What kAuto's AllReduce runs on this communicator, by size.
  const AllreducePicks& auto_allreduce() const;

  // The plan epoch this communicator runs (0: CommConfig::plan), and what
  // it did with the plan epochs file. Read by the thread that makes calls.
  uint64_t plan_epoch() const;
  PlanEpochCounters plan_epoch_counters() const;
  // The route plan the calls run on now: CommConfig::plan, or the epoch's.
  const std::optional<routing::RoutePlan>& route_plan() const;

  class Impl;

 private:
  explicit Communicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace weft::coll
