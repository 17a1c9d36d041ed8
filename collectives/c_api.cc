// The C API (c_api.h) over the C++ communicator: every entry point catches
// everything, so no exception crosses into C.
#include "weft/collectives/c_api.h"

#include <string>

#include <fmt/format.h>

#include "bootstrap/listen_address.h"
#include "weft/collectives/communicator.h"

struct weft_comm {
  std::unique_ptr<weft::coll::Store> store;
  std::unique_ptr<weft::coll::Communicator> comm;
};

static_assert(WEFT_IO == static_cast<int>(weft::StatusCode::kIo) &&
                  WEFT_DEADLINE_EXCEEDED == static_cast<int>(weft::StatusCode::kDeadlineExceeded),
              "weft_status_t mirrors weft::StatusCode");
static_assert(WEFT_U8 == static_cast<int>(weft::coll::DataType::kU8) &&
                  WEFT_BF16 == static_cast<int>(weft::coll::DataType::kBF16),
              "weft_dtype_t mirrors weft::coll::DataType");
static_assert(WEFT_MAX == static_cast<int>(weft::coll::ReduceOp::kMax), "weft_op_t mirrors weft::coll::ReduceOp");

namespace {

thread_local std::string g_last_error;

weft_status_t report(const weft::Status& s) {
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

weft::Status create(const weft_comm_config_t& c, weft_comm_t** out) {
  using namespace weft::coll;
  if (!out) return weft::invalid_argument("weft_comm_create: out is NULL");
  if (!c.store) return weft::invalid_argument("weft_comm_create: config.store is NULL (tcp://host:port or file:/dir)");
  const auto timeout = std::chrono::milliseconds(c.timeout_ms > 0 ? c.timeout_ms : 60000);
  CommConfig cfg;
  cfg.tcp.listen_address = c.listen_address ? c.listen_address : "";
  cfg.tcp.socket_ifname = c.socket_ifname ? c.socket_ifname : "";
  // Before the store is opened (bootstrap/listen_address.h says why).
  WEFT_RETURN_IF_ERROR(internal::check_listen_overrides(cfg.tcp).with_context(fmt::format("rank {}", c.rank)));
  auto h = std::make_unique<weft_comm>();
  WEFT_ASSIGN_OR_RETURN(h->store, open_store(c.store, c.rank, Clock::now() + timeout));
  cfg.rank = c.rank;
  cfg.size = c.size;
  cfg.transport = c.transport ? c.transport : "auto";
  cfg.host = c.host ? c.host : "";
  cfg.timeout = timeout;
  if (c.plan_path) {
    WEFT_ASSIGN_OR_RETURN(auto plan, weft::routing::load_plan(c.plan_path));
    cfg.plan = std::move(plan);
  }
  WEFT_ASSIGN_OR_RETURN(h->comm, Communicator::create(cfg, *h->store));
  *out = h.release();
  return weft::Status::ok();
}

}  // namespace

extern "C" {

void weft_comm_config_init(weft_comm_config_t* c) {
  if (c) *c = weft_comm_config_t{0, 1, nullptr, nullptr, nullptr, nullptr, 0, nullptr, nullptr};
}

weft_status_t weft_comm_create(const weft_comm_config_t* config, weft_comm_t** out) {
  return guarded([&] { return config ? create(*config, out) : weft::invalid_argument("weft_comm_create: config is NULL"); });
}

weft_status_t weft_comm_create_from_env(weft_comm_t** out) {
  return guarded([&]() -> weft::Status {
    WEFT_ASSIGN_OR_RETURN(auto info, weft::coll::launch_info_from_env());
    weft_comm_config_t c;
    weft_comm_config_init(&c);
    c.rank = info.rank;
    c.size = info.size;
    c.store = info.store.c_str();
    return create(c, out);
  });
}

void weft_comm_destroy(weft_comm_t* comm) {
  try {
    delete comm;
  } catch (...) {
  }
}

int weft_comm_rank(const weft_comm_t* comm) { return comm ? comm->comm->rank() : -1; }
int weft_comm_size(const weft_comm_t* comm) { return comm ? comm->comm->size() : -1; }

#define WEFT_NEED_COMM(c) \
  if (!(c)) return report(weft::invalid_argument("communicator is NULL"))

weft_status_t weft_allreduce(weft_comm_t* c, const void* send, void* recv, size_t count, weft_dtype_t t, weft_op_t op) {
  WEFT_NEED_COMM(c);
  return guarded([&] {
    return c->comm->allreduce(send, recv, count, static_cast<weft::coll::DataType>(t), static_cast<weft::coll::ReduceOp>(op));
  });
}

weft_status_t weft_reduce_scatter(weft_comm_t* c, const void* send, void* recv, size_t n, weft_dtype_t t, weft_op_t op) {
  WEFT_NEED_COMM(c);
  return guarded([&] {
    return c->comm->reduce_scatter(send, recv, n, static_cast<weft::coll::DataType>(t), static_cast<weft::coll::ReduceOp>(op));
  });
}

weft_status_t weft_allgather(weft_comm_t* c, const void* send, void* recv, size_t n, weft_dtype_t t) {
  WEFT_NEED_COMM(c);
  return guarded([&] { return c->comm->allgather(send, recv, n, static_cast<weft::coll::DataType>(t)); });
}

weft_status_t weft_broadcast(weft_comm_t* c, void* buf, size_t n, weft_dtype_t t, int root) {
  WEFT_NEED_COMM(c);
  return guarded([&] { return c->comm->broadcast(buf, n, static_cast<weft::coll::DataType>(t), root); });
}

weft_status_t weft_barrier(weft_comm_t* c) {
  WEFT_NEED_COMM(c);
  return guarded([&] { return c->comm->barrier(); });
}

void weft_comm_abort(weft_comm_t* c, const char* reason) {
  if (!c) return;
  try {
    c->comm->abort(reason ? reason : "aborted through the C API");
  } catch (...) {
  }
}

const char* weft_last_error(void) { return g_last_error.c_str(); }

// status_code_name returns views of string literals: NUL-terminated.
const char* weft_status_name(weft_status_t s) { return weft::status_code_name(static_cast<weft::StatusCode>(s)).data(); }

}  // extern "C"
