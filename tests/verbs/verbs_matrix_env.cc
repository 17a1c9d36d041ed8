// The collective library's correctness matrix (tests/collectives/*_matrix_test.cc,
// compiled again into this binary) over the verbs transport, inside the
// soft-RoCE VM: rank r uses device r % 2 (rxe1 on veth end va, rxe2 on vb),
// so every message between ranks of different parity crosses the veth.
//
// Per test (one run_ranks), the hooks check that it really did: the tx bytes
// of va and vb must have risen by at least the payload the ranks wrote over
// their cross-device QPs (the transport counts it per QP; the wire adds
// Ethernet, IP, UDP and BTH headers on top). Without the VM every test skips
// with the reason.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "../collectives/harness.h"
#include "verbs_env.h"
#include "weft/verbs/verbs_transport.h"

namespace weft::verbs::testing {
namespace {

std::uint64_t tx_bytes(const std::string& netdev) {
  std::ifstream in("/sys/class/net/" + netdev + "/statistics/tx_bytes");
  std::uint64_t v = 0;
  in >> v;
  return v;
}

class VerbsMatrixEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    std::string why;
    auto env = verbs_env(&why);
    coll::testing::RunHooks& h = coll::testing::run_hooks();
    if (!env) {  // every test skips, saying why (a skip here would pass them silently)
      h.before = [why](int) { GTEST_SKIP() << "weft-rdma: skipped: " << why; };
      return;
    }
    for (const std::string& name : {env->dev_a, env->dev_b}) {
      auto dev = Device::open(device_named(name));
      ASSERT_TRUE(dev.is_ok()) << dev.status().message();
      netdevs_.push_back(dev->gid().netdev);
    }
    ::setenv("WEFT_TEST_TRANSPORT", "verbs", 1);
    // By default the whole matrix, the largest count (262147) included for
    // every cell; WEFT_TEST_BIG_COUNT_STRIDE=N (CI: 4, scripts/run-tests.sh)
    // gives the largest count to every N-th (type, op) per test, rotating with
    // the rank count (harness.h), and rxe-vm.sh passes it in (docs/verbs.md).
    h.configure = [devs = std::vector<std::string>{env->dev_a, env->dev_b}](coll::CommConfig& c) {
      c.transport = "verbs";
      // By rank, not by the rank's index on its pretend host (the library's
      // rule, VerbsOptions::device_for): with one rank per pretend host that
      // would put every rank on rxe1 and no message on the veth.
      c.verbs.device = devs[static_cast<std::size_t>(c.rank) % devs.size()];
      // Up to 13 ranks share the VM's 2 vCPUs with the kernel's rxe work: a
      // rank that spins long steals the CPU the one it waits for needs.
      c.verbs.spin_polls = 64;
    };
    h.before = [this](int) {
      cross_bytes_ = 0;
      before_ = wire_bytes();
    };
    h.finished = [this](coll::Communicator& comm) {
      std::uint64_t mine = 0;
      for (int p = 0; p < comm.size(); ++p) {
        auto* info = dynamic_cast<VerbsTransportInfo*>(comm.transport_for(p));
        if (info == nullptr) continue;
        for (const QpRoute& r : info->qp_routes()) {
          if (r.peer == p && r.local_ip != r.remote_ip) mine += r.bytes_sent;
        }
      }
      cross_bytes_ += mine;
    };
    h.after = [this](int ranks) {
      const std::uint64_t rose = wire_bytes() - before_;
      if (ranks < 2) return;
      EXPECT_GE(rose, cross_bytes_) << "tx bytes of " << netdevs_[0] << " + " << netdevs_[1];
      EXPECT_GT(rose, 0u) << "no traffic crossed the veth";
      std::printf("veth %s+%s tx rose by %llu bytes; payload written across devices %llu bytes\n",
                  netdevs_[0].c_str(), netdevs_[1].c_str(), static_cast<unsigned long long>(rose),
                  static_cast<unsigned long long>(cross_bytes_.load()));
    };
  }

 private:
  std::uint64_t wire_bytes() const { return tx_bytes(netdevs_[0]) + tx_bytes(netdevs_[1]); }
  std::vector<std::string> netdevs_;
  std::uint64_t before_ = 0;
  std::atomic<std::uint64_t> cross_bytes_{0};
};

const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new VerbsMatrixEnvironment);

}  // namespace
}  // namespace weft::verbs::testing
