// What the rdma-labelled verbs tests run on, and helpers shared by them.
//
// The devices come from WEFT_VERBS_DEVICES="devA,devB" (the soft-RoCE VM sets
// "rxe1,rxe2": two rxe devices on the two ends of a veth pair). Without it a
// test skips, quoting WEFT_RDMA_VM_UNAVAILABLE (set by scripts/rxe-vm.sh when
// the VM cannot run) so the reason reaches the ctest log.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "weft/verbs/context.h"

namespace weft::verbs::testing {

struct VerbsEnv {
  std::string dev_a, dev_b;
};

// The devices, or nullopt with *why set.
std::optional<VerbsEnv> verbs_env(std::string* why);

#define WEFT_REQUIRE_VERBS_ENV(env)                        \
  std::string weft_skip_why_;                              \
  auto env##_opt = ::weft::verbs::testing::verbs_env(&weft_skip_why_); \
  if (!env##_opt) GTEST_SKIP() << weft_skip_why_;          \
  const ::weft::verbs::testing::VerbsEnv& env = *env##_opt

// The net device under a verbs device's port 1 GID ("va"), or "".
std::string netdev_of(const Device& dev);

// tx_bytes + rx_bytes of a net device, from sysfs.
std::uint64_t netdev_bytes(const std::string& netdev);

// Configs without designated initializers (GCC warns on the skipped fields).
DeviceConfig device_named(const std::string& name);
ContextConfig context_on(const std::string& device, std::chrono::milliseconds timeout = std::chrono::milliseconds(20000));
ConnectionConfig connection_to(const std::string& peer_name);

// Two contexts (one per device) and `n` connected connection pairs between
// them, connected in-process (no OOB needed); sports[i] is planned on both
// sides of pair i when non-empty (a: sports[i], b: sports[i] + 1).
struct ConnectedPair {
  std::unique_ptr<Context> a, b;
  std::vector<std::unique_ptr<Connection>> ca, cb;
};
Result<ConnectedPair> connect_pair(const VerbsEnv& env, const std::vector<std::uint32_t>& sports_a,
                                   const std::vector<std::uint32_t>& sports_b, const ConnectionConfig& base = {},
                                   const CqConfig& cq = {});

// Deterministic bytes for message m of length n.
std::vector<std::uint8_t> pattern(std::size_t n, std::uint32_t m);

}  // namespace weft::verbs::testing
