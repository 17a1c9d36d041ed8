// Context: one rank's verbs state — the device, one completion queue shared by
// all its connections, and the memory registrar — and the progress engine.
//
// Every wait progresses every connection of the context: collectives send to
// one peer while waiting on another, and a send stalled for credits must
// advance while its owner sleeps in a receive, or ranks deadlock in a cycle.
//
//   ContextConfig cfg{.device = {.name = "rxe1"}};
//   WEFT_ASSIGN_OR_RETURN(auto ctx, Context::open(cfg));
//   WEFT_ASSIGN_OR_RETURN(auto conn, ctx->create_connection({.peer_name = "rank 1"}));
//   // swap conn->local_info() with the peer out of band, then
//   WEFT_RETURN_IF_ERROR(conn->connect(remote));
//   WEFT_ASSIGN_OR_RETURN(auto mr, ctx->register_buffer(buf, n));
//   WEFT_ASSIGN_OR_RETURN(Ticket t, conn->isend(buf, n, mr));
//   WEFT_RETURN_IF_ERROR(ctx->wait_sends(*conn));
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "weft/common/status.h"
#include "weft/verbs/completion_queue.h"
#include "weft/verbs/connection.h"
#include "weft/verbs/device.h"
#include "weft/verbs/memory_region.h"

namespace weft::verbs {

struct ContextConfig {
  DeviceConfig device;
  CqConfig cq;
  std::chrono::milliseconds timeout{30000};  // every blocking wait
};

class Context {
 public:
  static Result<std::unique_ptr<Context>> open(const ContextConfig& config);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // The CQ grows (ibv_resize_cq) when the connections' queues would not fit.
  Result<std::unique_ptr<Connection>> create_connection(const ConnectionConfig& config);

  // Registers memory for sending from and receiving into (by default local
  // and remote write access): a new region every call, deregistered when the
  // last reference goes (memory_region.h says why nothing is cached).
  static constexpr int kSendRecvAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  Result<RegionRef> register_buffer(const void* data, std::size_t len, int access = kSendRecvAccess);
  // How many regions register_buffer made so far (tests: a call on a
  // registered buffer makes none).
  std::uint64_t registrations() const { return registrations_; }

  // One round of progress for every connection: dispatches completions, or
  // sleeps until a completion, a readable `watch` fd (its index is in the
  // result) or `deadline`. Connections' errors are in their error().
  Result<CompletionQueue::Wake> progress(std::span<const int> watch, Clock::time_point deadline);
  // Dispatches the completions there are now; returns how many. Never sleeps.
  Result<int> poll();
  // The device's asynchronous events (ibv_get_async_event(3)), which say why
  // a QP entered the error state when no completion does: a QP's fatal or
  // access error fails its connection naming the event, a CQ or device error
  // fails every connection. progress() watches the event fd itself.
  void read_async_events();

  // Progress until `conn` has no pending sends / receives, or fail with the
  // connection's error, a dead peer (its liveness fd), or config.timeout —
  // each naming the peer.
  Status wait_sends(Connection& conn);
  Status wait_recvs(Connection& conn);
  Status wait_all(Connection& conn);

  const Device& device() const { return *device_; }
  const CompletionQueue& cq() const { return *cq_; }
  std::chrono::milliseconds timeout() const { return config_.timeout; }

 private:
  friend class Connection;
  Context() = default;
  Status progress_until(Connection& conn, const std::function<bool()>& done, const char* what);
  void dispatch(std::span<ibv_wc> wcs);
  void check_liveness(Connection& conn);
  void forget(Connection& conn, std::uint32_t qpn);  // after its QP is destroyed

  ContextConfig config_;
  // Destroyed in reverse: connections first (they hold QPs and regions), then
  // the registrar, the CQ, and the device (PD, context) last.
  std::unique_ptr<Device> device_;
  std::unique_ptr<CompletionQueue> cq_;
  std::unique_ptr<PdRegistrar> registrar_;
  std::map<std::uint32_t, Connection*> by_qpn_;
  std::vector<ibv_wc> wcs_;
  std::vector<int> watch_;  // progress(): the caller's fds, then the async event fd
  std::uint64_t registrations_ = 0;
  int cq_wrs_ = 0;  // send + receive WRs of every connection: what the CQ must hold
};

}  // namespace weft::verbs
