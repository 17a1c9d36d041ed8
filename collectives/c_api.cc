// The C API (c_api.h) over the C++ communicator: every entry point catches
// everything, so no exception crosses into C, and checks its arguments
// before it hands them on (the C++ calls check theirs again: a C caller
// can pass any number as an enum).
#include "weft/collectives/c_api.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "bootstrap/config_env.h"
#include "bootstrap/listen_address.h"
#include "weft/collectives/communicator.h"

struct weft_comm {
  std::unique_ptr<weft::coll::Store> store;
  std::string store_spec;  // as given: "tcp://host:port" or "file:/dir"
  bool serves = false;     // rank 0 of a tcp:// store on a port of its own choosing
  std::unique_ptr<weft::coll::Communicator> comm;
  // Registrations by handle: a handle is an id, never an address, so a stale
  // or foreign handle is found missing instead of being dereferenced.
  // Destroyed before the communicator (declared after it).
  std::map<uintptr_t, weft::coll::BufferRegistration> regs;
};

static_assert(WEFT_IO == static_cast<int>(weft::StatusCode::kIo) &&
                  WEFT_DEADLINE_EXCEEDED == static_cast<int>(weft::StatusCode::kDeadlineExceeded),
              "weft_status_t mirrors weft::StatusCode");
static_assert(WEFT_U8 == static_cast<int>(weft::coll::DataType::kU8) &&
                  WEFT_BF16 == static_cast<int>(weft::coll::DataType::kBF16),
              "weft_dtype_t mirrors weft::coll::DataType");
static_assert(WEFT_MAX == static_cast<int>(weft::coll::ReduceOp::kMax), "weft_op_t mirrors weft::coll::ReduceOp");
static_assert(sizeof(weft_dtype_t) == sizeof(int) && sizeof(weft_op_t) == sizeof(int) &&
                  sizeof(weft_status_t) == sizeof(int),
              "the C enums are int-sized in C and C++ alike");

namespace {

using weft::Status;
using weft::ok_status;
using weft::invalid_argument;

thread_local std::string g_last_error;

weft_status_t report(const Status& s) {
  if (s.is_ok()) return WEFT_OK;
  g_last_error = s.message();
  return static_cast<weft_status_t>(s.code());
}

template <typename F>
weft_status_t guarded(F&& f) {
  try {
    return report(f());
  } catch (const std::exception& e) {
    return report(weft::internal_error(std::string("unexpected exception: ") + e.what()));
  } catch (...) {
    return report(weft::internal_error("unexpected exception"));
  }
}

Status need_comm(const char* fn, const weft_comm_t* c) {
  return c != nullptr ? ok_status() : invalid_argument(fmt::format("{}: comm is NULL", fn));
}

Status check_type(const char* fn, weft_dtype_t t) {
  if (t >= WEFT_F32 && t <= WEFT_U8) return ok_status();
  return invalid_argument(fmt::format("{}: type {} is not a weft_dtype_t (WEFT_F32 .. WEFT_U8: 0-6)", fn, static_cast<int>(t)));
}

Status check_op(const char* fn, weft_op_t op) {
  if (op >= WEFT_SUM && op <= WEFT_MAX) return ok_status();
  return invalid_argument(fmt::format("{}: op {} is not a weft_op_t (WEFT_SUM .. WEFT_MAX: 0-3)", fn, static_cast<int>(op)));
}

// The store prefix of a communicator: the caller's prefix the first time
// this process asks for it on one store for one rank, then "<prefix>.1",
// "<prefix>.2", ... (PyTorch's distributed_c10d numbers its process groups
// the same way), never a name an earlier create took, whoever asked for it
// ("weft.1" asked for by the caller, then "weft" twice: "weft.1", "weft",
// "weft.2"). Two communicators on one store would otherwise read each
// other's keys: the second one's ranks connect to the first one's shared
// memory and ports. Every create that gets this far takes a name, whatever
// becomes of it: ranks that make the same calls in the same order (as
// collective creation requires) agree on every name even where a create
// failed on some ranks and not on others, and a failed create tried again
// gets a fresh name on every rank.
using StoreRank = std::pair<std::string, int>;
std::mutex g_taken_mu;
std::map<StoreRank, std::set<std::string>> g_taken;

std::string take_prefix(const std::string& store, int rank, const std::string& prefix) {
  std::lock_guard<std::mutex> lock(g_taken_mu);
  std::set<std::string>& taken = g_taken[{store, rank}];
  std::string name = prefix;
  for (int n = 1; taken.count(name); ++n) name = fmt::format("{}.{}", prefix, n);
  taken.insert(name);
  return name;
}

// Checks the whole config before anything is opened: a bad rank must not
// make rank 0's store listen, nor a bad transport leave a store directory.
Status create(const weft_comm_config_t* config, weft_comm_t** out) {
  using namespace weft::coll;
  if (!config) return invalid_argument("weft_comm_create: config is NULL");
  if (!out) return invalid_argument("weft_comm_create: out is NULL");
  const weft_comm_config_t& c = *config;
  if (!c.store) return invalid_argument("weft_comm_create: config.store is NULL (tcp://host:port or file:/dir)");
  const std::string prefix = c.store_prefix ? c.store_prefix : "weft";
  if (prefix.empty() || prefix.find('/') != std::string::npos) {
    return invalid_argument(fmt::format("weft_comm_create: config.store_prefix '{}' must be a non-empty name without '/'",
                                        prefix));
  }
  // Before any check whose outcome may differ between ranks (a plan file,
  // an interface name): take_prefix says why.
  CommConfig cfg;
  cfg.store_prefix = take_prefix(c.store, c.rank, prefix);
  if (c.timeout_ms < 0) {
    return invalid_argument(fmt::format("weft_comm_create: config.timeout_ms {} is negative (0 = 60000)", c.timeout_ms));
  }
  cfg.tcp.listen_address = c.listen_address ? c.listen_address : "";
  cfg.tcp.socket_ifname = c.socket_ifname ? c.socket_ifname : "";
  cfg.rank = c.rank;
  cfg.size = c.size;
  cfg.transport = c.transport ? c.transport : "auto";
  cfg.host = c.host ? c.host : "";
  cfg.timeout = std::chrono::milliseconds(c.timeout_ms > 0 ? c.timeout_ms : 60000);
  if (c.plan_path) {
    auto plan = weft::routing::load_plan(c.plan_path);
    if (!plan) return plan.status().with_context("weft_comm_create: config.plan_path");
    cfg.plan = std::move(*plan);
  }
  cfg.plan_epochs = c.plan_epochs ? c.plan_epochs : "";
  cfg.job = c.job ? c.job : "";
  cfg.in_call_switch = c.in_call_switch_off == 0;
  if (c.switch_stall_ms < 0) {
    return invalid_argument(fmt::format("weft_comm_create: config.switch_stall_ms {} is negative (0 = 200)", c.switch_stall_ms));
  }
  if (c.switch_stall_ms > 0) cfg.switch_stall = std::chrono::milliseconds(c.switch_stall_ms);
  // The job the epochs name stays the caller's prefix, not the numbered one.
  if (const char* env = std::getenv("WEFT_JOB"); cfg.job.empty() && !(env && *env)) cfg.job = prefix;
  // A bad variable fails here, before rank 0 serves a store its peers would
  // then lose without a word.
  if (Status s = internal::apply_environment(cfg); !s) return s.with_context(fmt::format("rank {}", c.rank));
  if (Status s = cfg.validate(); !s) return s.with_context("weft_comm_create: config");
  // Before the store is opened (bootstrap/listen_address.h says why).
  WEFT_RETURN_IF_ERROR(internal::check_listen_overrides(cfg.tcp).with_context(fmt::format("rank {}", c.rank)));
  auto h = std::make_unique<weft_comm>();
  // One deadline for both: a store reached late leaves less for the peers.
  const Deadline deadline = Clock::now() + cfg.timeout;
  WEFT_ASSIGN_OR_RETURN(h->store, open_store(c.store, c.rank, deadline));
  h->store_spec = c.store;
  h->serves = c.rank == 0 && h->store_spec.rfind("tcp://", 0) == 0 && !h->store_spec.ends_with(":0");
  WEFT_ASSIGN_OR_RETURN(h->comm, Communicator::create(cfg, *h->store, deadline));
  *out = h.release();
  return ok_status();
}

std::atomic<uintptr_t> g_last_reg{0};  // handles are unique in the process, across communicators

// Rank 0's TCP store outlives its communicator, for the life of the process
// (one per store, the last): the other ranks make their next communicator
// on the same store as soon as their own is done, which may be before this
// rank destroys its own, and a server closed under their new client would
// fail their create. Never destroyed (a process that exits leaves its
// server thread with it), so no static destructor runs one at exit.
void keep_serving(weft_comm& c) {
  static std::mutex mu;
  static auto* kept = new std::map<std::string, std::unique_ptr<weft::coll::Store>>;
  std::lock_guard<std::mutex> lock(mu);
  (*kept)[c.store_spec] = std::move(c.store);
}

}  // namespace

extern "C" {

weft_status_t weft_comm_config_init(weft_comm_config_t* c) {
  if (!c) return report(invalid_argument("weft_comm_config_init: config is NULL"));
  *c = weft_comm_config_t{0, 1, nullptr, nullptr, nullptr, nullptr, 0, nullptr, nullptr, nullptr, nullptr, 0, 0, nullptr};
  return WEFT_OK;
}

weft_status_t weft_comm_create(const weft_comm_config_t* config, weft_comm_t** out) {
  return guarded([&] { return create(config, out); });
}

weft_status_t weft_comm_create_from_env(weft_comm_t** out) {
  return guarded([&]() -> Status {
    if (!out) return invalid_argument("weft_comm_create_from_env: out is NULL");
    WEFT_ASSIGN_OR_RETURN(auto info, weft::coll::launch_info_from_env());
    weft_comm_config_t c;
    weft_comm_config_init(&c);
    c.rank = info.rank;
    c.size = info.size;
    c.store = info.store.c_str();
    return create(&c, out);
  });
}

weft_status_t weft_comm_destroy(weft_comm_t* c) {
  return guarded([&] {
    WEFT_RETURN_IF_ERROR(need_comm("weft_comm_destroy", c));
    // The communicator first: it may still tell its peers goodbye.
    c->regs.clear();
    c->comm.reset();
    if (c->serves) keep_serving(*c);
    delete c;
    return ok_status();
  });
}

int weft_comm_rank(const weft_comm_t* c) {
  if (c) return c->comm->rank();
  report(need_comm("weft_comm_rank", c));
  return -1;
}

int weft_comm_size(const weft_comm_t* c) {
  if (c) return c->comm->size();
  report(need_comm("weft_comm_size", c));
  return -1;
}

weft_status_t weft_comm_register(weft_comm_t* c, void* buf, size_t bytes, weft_reg_t** handle) {
  return guarded([&]() -> Status {
    WEFT_RETURN_IF_ERROR(need_comm("weft_comm_register", c));
    if (!handle) return invalid_argument("weft_comm_register: handle is NULL");
    if (!buf) return invalid_argument("weft_comm_register: buf is NULL");
    if (bytes == 0) return invalid_argument("weft_comm_register: bytes is 0");
    auto r = c->comm->register_buffer(buf, bytes);
    if (!r) return r.status().with_context("weft_comm_register");
    const uintptr_t id = ++g_last_reg;
    c->regs.emplace(id, std::move(*r));
    *handle = reinterpret_cast<weft_reg_t*>(id);
    return ok_status();
  });
}

weft_status_t weft_comm_deregister(weft_comm_t* c, weft_reg_t* handle) {
  return guarded([&]() -> Status {
    WEFT_RETURN_IF_ERROR(need_comm("weft_comm_deregister", c));
    if (!handle) return invalid_argument("weft_comm_deregister: handle is NULL");
    auto it = c->regs.find(reinterpret_cast<uintptr_t>(handle));
    if (it == c->regs.end()) {
      return invalid_argument("weft_comm_deregister: handle is not a registration of this communicator "
                              "(already deregistered, or another communicator's)");
    }
    Status s = c->comm->deregister(it->second);
    c->regs.erase(it);
    return s;
  });
}

weft_status_t weft_allreduce(weft_comm_t* c, const void* send, void* recv, size_t count, weft_dtype_t t, weft_op_t op) {
  return guarded([&]() -> Status {
    WEFT_RETURN_IF_ERROR(need_comm("weft_allreduce", c));
    WEFT_RETURN_IF_ERROR(check_type("weft_allreduce", t));
    WEFT_RETURN_IF_ERROR(check_op("weft_allreduce", op));
    return c->comm->allreduce(send, recv, count, static_cast<weft::coll::DataType>(t),
                              static_cast<weft::coll::ReduceOp>(op));
  });
}

weft_status_t weft_reduce_scatter(weft_comm_t* c, const void* send, void* recv, size_t recv_count, weft_dtype_t t,
                                  weft_op_t op) {
  return guarded([&]() -> Status {
    WEFT_RETURN_IF_ERROR(need_comm("weft_reduce_scatter", c));
    WEFT_RETURN_IF_ERROR(check_type("weft_reduce_scatter", t));
    WEFT_RETURN_IF_ERROR(check_op("weft_reduce_scatter", op));
    return c->comm->reduce_scatter(send, recv, recv_count, static_cast<weft::coll::DataType>(t),
                                   static_cast<weft::coll::ReduceOp>(op));
  });
}

weft_status_t weft_allgather(weft_comm_t* c, const void* send, void* recv, size_t send_count, weft_dtype_t t) {
  return guarded([&]() -> Status {
    WEFT_RETURN_IF_ERROR(need_comm("weft_allgather", c));
    WEFT_RETURN_IF_ERROR(check_type("weft_allgather", t));
    return c->comm->allgather(send, recv, send_count, static_cast<weft::coll::DataType>(t));
  });
}

weft_status_t weft_broadcast(weft_comm_t* c, void* buf, size_t count, weft_dtype_t t, int root) {
  return guarded([&]() -> Status {
    WEFT_RETURN_IF_ERROR(need_comm("weft_broadcast", c));
    WEFT_RETURN_IF_ERROR(check_type("weft_broadcast", t));
    return c->comm->broadcast(buf, count, static_cast<weft::coll::DataType>(t), root);
  });
}

weft_status_t weft_barrier(weft_comm_t* c) {
  return guarded([&]() -> Status {
    WEFT_RETURN_IF_ERROR(need_comm("weft_barrier", c));
    return c->comm->barrier();
  });
}

weft_status_t weft_comm_abort(weft_comm_t* c, const char* reason) {
  return guarded([&]() -> Status {
    WEFT_RETURN_IF_ERROR(need_comm("weft_comm_abort", c));
    c->comm->abort(reason ? reason : "aborted through the C API");
    return ok_status();
  });
}

const char* weft_last_error(void) { return g_last_error.c_str(); }

// status_code_name returns views of string literals, NUL-terminated, and
// "unknown" for a value outside the enum (StatusCode is based on int).
const char* weft_status_name(weft_status_t s) { return weft::status_code_name(static_cast<weft::StatusCode>(s)).data(); }

}  // extern "C"
