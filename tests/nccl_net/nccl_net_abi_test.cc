// The plugin as NCCL finds it, on any host: the library loads, exports
// exactly the tables NCCL looks up, and their layouts are the published
// ones (nccl_net/weft/nccl_net/abi.h lists the sources). Without an RDMA
// device init must fail with an error code, not crash.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>

#include "weft/nccl_net/driver.h"

namespace weft::nccl_net::testing {
namespace {

class PluginTables : public ::testing::TestWithParam<int> {};

TEST_P(PluginTables, AreExportedUnderNcclsNamesWithEveryCallFilled) {
  auto d = Driver::load(GetParam());
  ASSERT_TRUE(d) << d.status().message();
  EXPECT_STREQ(d->name(), "weft");
  void* dl = dlopen(plugin_path(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(dl, nullptr);
  const std::string sym = "ncclNetPlugin_v" + std::to_string(GetParam());
  const auto* table = static_cast<const unsigned char*>(dlsym(dl, sym.c_str()));
  ASSERT_NE(table, nullptr);
  // Every slot after the name is a function NCCL may call: none may be NULL.
  const std::size_t sizes[] = {0, 0, 0, 0, 0, 0, 0, 0, sizeof(ncclNet_v8_t), sizeof(ncclNet_v9_t),
                               sizeof(ncclNet_v10_t), sizeof(ncclNet_v11_t)};
  for (std::size_t off = sizeof(void*); off < sizes[GetParam()]; off += sizeof(void*)) {
    void* fn = nullptr;
    std::memcpy(&fn, table + off, sizeof(fn));
    EXPECT_NE(fn, nullptr) << sym << " slot at byte " << off;
  }
  dlclose(dl);
}

TEST_P(PluginTables, InitEitherFindsADeviceOrFailsCleanly) {
  auto d = Driver::load(GetParam());
  ASSERT_TRUE(d) << d.status().message();
  ncclResult_t r = d->init(nullptr);
  int n = -1;
  ASSERT_EQ(d->devices(&n), ncclSuccess);
  if (r == ncclSuccess) {
    EXPECT_GE(n, 1);
    EXPECT_EQ(d->finalize(), ncclSuccess);
  } else {
    // No RoCE v2 device here (this host has no RDMA): an error code NCCL
    // understands, so it falls back to its own transports, and no devices.
    EXPECT_EQ(r, ncclSystemError);
    EXPECT_EQ(n, 0);
    Props p;
    EXPECT_EQ(d->properties(0, &p), ncclInvalidArgument);
  }
}

// NCCL's proxy calls irecvConsumed after every completed receive whenever
// the slot is filled, with the request test() already freed: it must
// succeed without touching anything (an error there failed every NCCL
// receive), and count nothing.
TEST_P(PluginTables, IrecvConsumedSucceedsAndCountsNoError) {
  auto d = Driver::load(GetParam());
  ASSERT_TRUE(d) << d.status().message();
  const auto before = d->counters();
  int freed = 0;  // what NCCL passes: a request the plugin already released
  EXPECT_EQ(d->irecv_consumed(nullptr, 1, &freed), ncclSuccess);
  EXPECT_EQ(d->irecv_consumed(nullptr, 8, nullptr), ncclSuccess);
  EXPECT_EQ(d->counters().errors, before.errors);
}

INSTANTIATE_TEST_SUITE_P(V, PluginTables, ::testing::Values(8, 9, 10, 11),
                         [](const auto& p) { return "v" + std::to_string(p.param); });

TEST(PluginLibrary, ExportsOnlyTheTablesAndTheCounters) {
  void* dl = dlopen(plugin_path(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(dl, nullptr) << dlerror();
  for (const char* s : {"ncclNetPlugin_v8", "ncclNetPlugin_v9", "ncclNetPlugin_v10", "ncclNetPlugin_v11",
                        "weft_nccl_net_counters"}) {
    EXPECT_NE(dlsym(dl, s), nullptr) << s;
  }
  // Versions this plugin does not speak must be absent, or NCCL would call them.
  for (const char* s : {"ncclNetPlugin_v7", "ncclNetPlugin_v12", "ncclCollNetPlugin_v8"}) {
    EXPECT_EQ(dlsym(dl, s), nullptr) << s;
  }
  dlclose(dl);
}

// The published sizes (abi.h static_asserts them too; this says them in a test report).
TEST(PluginAbi, StructSizesAreThePublishedOnes) {
  EXPECT_EQ(sizeof(ncclNetProperties_v8_t), 64u);
  EXPECT_EQ(sizeof(ncclNetProperties_v9_t), 104u);
  EXPECT_EQ(sizeof(ncclNetProperties_v10_t), 104u);
  EXPECT_EQ(sizeof(ncclNetProperties_v11_t), 112u);
  EXPECT_EQ(sizeof(ncclNetDeviceHandle_v8_t), 32u);
  EXPECT_EQ(sizeof(ncclNet_v8_t), 152u);
  EXPECT_EQ(sizeof(ncclNet_v9_t), 160u);
  EXPECT_EQ(sizeof(ncclNet_v10_t), 160u);
  EXPECT_EQ(sizeof(ncclNet_v11_t), 176u);
  EXPECT_EQ(NCCL_NET_HANDLE_MAXSIZE, 128);
  EXPECT_EQ(NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF, 7);
}

}  // namespace
}  // namespace weft::nccl_net::testing
