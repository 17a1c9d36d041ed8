// The TCP store's server (internal; tcp_store_server.cc): an event loop on
// its own thread, from start() until destruction.
#pragma once

#include <memory>
#include <thread>

#include "bootstrap/store_core.h"
#include "weft/collectives/store.h"

namespace weft::coll {

class TcpStore::Server {
 public:
  explicit Server(const TcpStoreOptions& options);
  ~Server();
  // Listens on address:port (port 0: a free one) and starts serving.
  Status start(const std::string& address, uint16_t port);
  uint16_t port() const { return port_; }
  TcpStoreCounters counters() const;

 private:
  struct Session;
  struct Loop;
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
  uint16_t port_ = 0;
};

}  // namespace weft::coll
