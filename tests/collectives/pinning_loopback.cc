#include "pinning_loopback.h"

#include <atomic>
#include <memory>

#include "weft/collectives/transport.h"

namespace weft::coll::testing {
namespace {

std::atomic<uint64_t> g_registrations{0};

class PinningLoopback final : public Transport {
 public:
  explicit PinningLoopback(std::unique_ptr<Transport> inner) : inner_(std::move(inner)) {}
  std::string_view name() const override { return "pinning-loopback"; }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  Pair* pair(int peer) override { return inner_->pair(peer); }
  Status connect_peers(const std::vector<int>& peers, Deadline deadline) override {
    return inner_->connect_peers(peers, deadline);
  }
  Result<std::unique_ptr<Memory>> register_memory(void* data, size_t size) override {
    ++g_registrations;
    return inner_->register_memory(data, size);
  }
  bool registration_pins() const override { return true; }
  Result<bool> poll() override { return inner_->poll(); }
  void abort(const Status& reason) override { inner_->abort(reason); }
  bool has_stall_notices() const override { return inner_->has_stall_notices(); }
  void post_stall_notice(int waits_on) override { inner_->post_stall_notice(waits_on); }
  int stall_notice(int peer) override { return inner_->stall_notice(peer); }
  bool stall_noticed() const override { return inner_->stall_noticed(); }
  void relay_stall_notice(int origin, int waits_on) override { inner_->relay_stall_notice(origin, waits_on); }

 private:
  std::unique_ptr<Transport> inner_;
};

const bool kRegistered = register_transport(
    "pinning-loopback", [](const TransportConfig& c, Store& store, Deadline d) -> Result<std::unique_ptr<Transport>> {
      TransportConfig inner = c;
      inner.name = "loopback";
      WEFT_ASSIGN_OR_RETURN(auto t, make_transport(inner, store, d));
      return std::unique_ptr<Transport>(std::make_unique<PinningLoopback>(std::move(t)));
    });

}  // namespace

bool pinning_loopback_registered() { return kRegistered; }
uint64_t pinning_loopback_registrations() { return g_registrations.load(); }

}  // namespace weft::coll::testing
