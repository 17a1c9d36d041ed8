// A minimal HTTP/1.1 server (Boost.Beast) for the metrics endpoint: GET or
// HEAD of /metrics answers the body `render()` returns; / answers a pointer to
// it; anything else 404 (or 405 for other methods). It is exposed to whoever
// can reach its address, so it bounds what a client can hold: requests are
// header-only and at most 8 KiB, a client that sends nothing for
// idle_timeout_ms is closed, and at most max_connections are served at once
// (one more closes the oldest, so idle clients cannot lock a scrape out).
//
//   auto srv = MetricsServer::start({.ip = "127.0.0.1", .port = 9740},
//                                   [&] { return render_metrics(agent.snapshot()); });
//   if (!srv) ...;            // the address is taken or invalid
//   ...                       // serves on its own thread until destroyed
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "weft/common/status.h"

namespace weft::agent {

struct MetricsServerConfig {
  std::string ip = "127.0.0.1";
  uint16_t port = 9740;  // 0 = any (tests)
  int idle_timeout_ms = 10000;
  int max_connections = 16;
};

class MetricsServer {
 public:
  using Render = std::function<std::string()>;
  static Result<std::unique_ptr<MetricsServer>> start(const MetricsServerConfig& cfg, Render render);
  ~MetricsServer();  // stops serving and joins the thread
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  uint16_t port() const;

 private:
  MetricsServer();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace weft::agent
