// Test helpers for strangers on a rank's listening port: a store that holds
// back one rank's address until the strangers are queued, and a stranger
// that connects and says something (or nothing).
#pragma once

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <string>

#include "tcp/socket.h"
#include "weft/collectives/store.h"

namespace weft::coll::testing {

// A MemoryStore whose `gated` key cannot be read until open() (the other
// keys can): the test decides when the peers may connect to that rank.
class GatedStore final : public Store {
 public:
  explicit GatedStore(std::string gated) : gated_(std::move(gated)) {}
  Status set(const std::string& key, const std::string& value) override { return inner.set(key, value); }
  Result<std::string> get(const std::string& key, Deadline deadline) override {
    if (key == gated_) {
      std::unique_lock<std::mutex> l(mu_);
      if (!cv_.wait_until(l, deadline, [&] { return open_; })) return deadline_exceeded("gate stayed shut");
    }
    return inner.get(key, deadline);
  }
  void open() {
    std::lock_guard<std::mutex> l(mu_);
    open_ = true;
    cv_.notify_all();
  }
  MemoryStore inner;

 private:
  std::string gated_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// Connects to `addr` ("a.b.c.d:port") and sends `says`; the connection
// stays open as long as the returned Fd.
inline tcp::Fd stranger(const std::string& addr, const std::string& says) {
  auto at = tcp::Endpoint::parse(addr);
  EXPECT_TRUE(at) << at.status().to_string();
  if (!at) return tcp::Fd();
  auto fd = tcp::connect_to(*at, "0.0.0.0", 0, 1 << 16, Clock::now() + std::chrono::seconds(5));
  EXPECT_TRUE(fd) << fd.status().to_string();
  if (!fd) return tcp::Fd();
  EXPECT_TRUE(tcp::write_all(fd->get(), says.data(), says.size(), Clock::now() + std::chrono::seconds(5)));
  return std::move(*fd);
}

}  // namespace weft::coll::testing
