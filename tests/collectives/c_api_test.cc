// The C API's argument checks (collectives/weft/collectives/c_api.h): every
// entry point called with each kind of bad argument — a NULL handle, config,
// output or buffer, a type, op or status outside its enum, a rank, size or
// root out of range, a count whose bytes overflow size_t, a negative
// timeout, an unknown transport, a stale or foreign registration handle —
// returns WEFT_INVALID_ARGUMENT, weft_last_error() names the argument, and
// nothing was written (outputs, buffers, the store directory). Runs under
// ASan + UBSan in CI: an out-of-range enum that reached the reduce kernel
// table, or an overflowing size, would be reported there.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "epoch_files.h"
#include "scoped_env.h"
#include "weft/collectives/c_api.h"

namespace {

using weft::coll::testing::ScopedEnv;

// A directory of its own, removed afterwards.
struct TempDir {
  std::string dir;
  TempDir() {
    char tmpl[] = "/tmp/weft-capi-XXXXXX";
    if (::mkdtemp(tmpl) != nullptr) dir = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
  }
};

// A 1-rank communicator over the loopback transport.
struct CApi {
  TempDir tmp;
  weft_comm_t* comm = nullptr;
  CApi() {
    weft_comm_config_t c;
    weft_comm_config_init(&c);
    c.transport = "loopback";
    const std::string store = "file:" + tmp.dir + "/store";
    c.store = store.c_str();
    c.timeout_ms = 10000;
    if (weft_comm_create(&c, &comm) != WEFT_OK) comm = nullptr;
  }
  ~CApi() {
    if (comm != nullptr) weft_comm_destroy(comm);
  }
};

CApi& api() {
  static CApi a;
  return a;
}

// One bad call: what it returns, and the words weft_last_error() must hold.
struct BadCall {
  std::string name;
  std::function<weft_status_t(weft_comm_t*)> call;
  std::string says;
};
void PrintTo(const BadCall& b, std::ostream* os) { *os << b.name; }

template <typename E>
E bad(int v) {
  return static_cast<E>(v);  // the C enums are based on int in C++ (c_api.h): any int is a value
}

weft_comm_config_t config(int rank, int size, const char* store) {
  weft_comm_config_t c;
  weft_comm_config_init(&c);
  c.rank = rank;
  c.size = size;
  c.transport = "loopback";
  c.store = store;
  return c;
}

// weft_comm_create with `c`, which must fail; the output stays as it was.
weft_status_t create_fails(weft_comm_config_t c) {
  weft_comm_t* sentinel = reinterpret_cast<weft_comm_t*>(uintptr_t{0x5e47});
  weft_comm_t* out = sentinel;
  const weft_status_t s = weft_comm_create(&c, &out);
  EXPECT_EQ(out, sentinel) << "*out written by a failed create";
  return s;
}

// A reduction whose recv must be left as it was (send != recv).
weft_status_t allreduce_untouched(weft_comm_t* c, size_t count, weft_dtype_t t, weft_op_t op) {
  std::vector<float> send(8, 1.0f), recv(8, 42.0f);
  const weft_status_t s = weft_allreduce(c, send.data(), recv.data(), count, t, op);
  for (float v : recv) EXPECT_EQ(v, 42.0f) << "recv written by a failed call";
  return s;
}

constexpr size_t kHuge = SIZE_MAX / 2 + 1;  // times any element size > 1 overflows

std::vector<BadCall> bad_calls() {
  static float buf[8];
  static const std::string bad_store = "file:/tmp/weft-capi-never-created-" + std::to_string(::getpid());
  const char* store = bad_store.c_str();
  return {
      // Set-up and lifetime.
      {"config_init_null", [](weft_comm_t*) { return weft_comm_config_init(nullptr); }, "weft_comm_config_init: config is NULL"},
      {"create_null_config", [](weft_comm_t*) { weft_comm_t* o = nullptr; return weft_comm_create(nullptr, &o); },
       "weft_comm_create: config is NULL"},
      {"create_null_out", [store](weft_comm_t*) { auto c = config(0, 1, store); return weft_comm_create(&c, nullptr); },
       "weft_comm_create: out is NULL"},
      {"create_null_store", [](weft_comm_t*) { return create_fails(config(0, 1, nullptr)); }, "config.store is NULL"},
      {"create_negative_rank", [store](weft_comm_t*) { return create_fails(config(-1, 2, store)); }, "rank -1 is outside [0, 2)"},
      {"create_rank_past_size", [store](weft_comm_t*) { return create_fails(config(2, 2, store)); }, "rank 2 is outside [0, 2)"},
      {"create_size_zero", [store](weft_comm_t*) { return create_fails(config(0, 0, store)); }, "size must be >= 1 (got 0)"},
      {"create_size_negative", [store](weft_comm_t*) { return create_fails(config(0, INT_MIN, store)); }, "size must be >= 1"},
      {"create_negative_timeout",
       [store](weft_comm_t*) {
         auto c = config(0, 1, store);
         c.timeout_ms = -5;
         return create_fails(c);
       },
       "config.timeout_ms -5 is negative"},
      {"create_unknown_transport",
       [store](weft_comm_t*) {
         auto c = config(0, 1, store);
         c.transport = "carrier-pigeon";
         return create_fails(c);
       },
       "unknown transport 'carrier-pigeon'"},
      {"create_store_prefix_with_a_slash",
       [store](weft_comm_t*) {
         auto c = config(0, 1, store);
         c.store_prefix = "job/7";
         return create_fails(c);
       },
       "config.store_prefix 'job/7' must be a non-empty name without '/'"},
      {"create_empty_store_prefix",
       [store](weft_comm_t*) {
         auto c = config(0, 1, store);
         c.store_prefix = "";
         return create_fails(c);
       },
       "config.store_prefix '' must be a non-empty name without '/'"},
      {"create_plan_epochs_without_plan",
       [store](weft_comm_t*) {
         auto c = config(0, 1, store);
         c.plan_epochs = "/tmp/weft-epochs.json";
         return create_fails(c);
       },
       "plan epochs (/tmp/weft-epochs.json) need a route plan"},
      {"create_from_env_null_out", [](weft_comm_t*) { return weft_comm_create_from_env(nullptr); },
       "weft_comm_create_from_env: out is NULL"},
      {"destroy_null", [](weft_comm_t*) { return weft_comm_destroy(nullptr); }, "weft_comm_destroy: comm is NULL"},
      {"rank_null", [](weft_comm_t*) { return weft_comm_rank(nullptr) == -1 ? WEFT_INVALID_ARGUMENT : WEFT_OK; },
       "weft_comm_rank: comm is NULL"},
      {"size_null", [](weft_comm_t*) { return weft_comm_size(nullptr) == -1 ? WEFT_INVALID_ARGUMENT : WEFT_OK; },
       "weft_comm_size: comm is NULL"},
      {"abort_null", [](weft_comm_t*) { return weft_comm_abort(nullptr, "x"); }, "weft_comm_abort: comm is NULL"},
      {"barrier_null", [](weft_comm_t*) { return weft_barrier(nullptr); }, "weft_barrier: comm is NULL"},
      // Registration.
      {"register_null_comm", [](weft_comm_t*) { weft_reg_t* h; return weft_comm_register(nullptr, buf, 8, &h); },
       "weft_comm_register: comm is NULL"},
      {"register_null_buf", [](weft_comm_t* c) { weft_reg_t* h; return weft_comm_register(c, nullptr, 8, &h); },
       "weft_comm_register: buf is NULL"},
      {"register_zero_bytes", [](weft_comm_t* c) { weft_reg_t* h; return weft_comm_register(c, buf, 0, &h); },
       "weft_comm_register: bytes is 0"},
      {"register_null_handle", [](weft_comm_t* c) { return weft_comm_register(c, buf, 8, nullptr); },
       "weft_comm_register: handle is NULL"},
      {"register_wrapping_range",
       [](weft_comm_t* c) {
         weft_reg_t* h = nullptr;
         const weft_status_t s = weft_comm_register(c, reinterpret_cast<void*>(UINTPTR_MAX - 8), 64, &h);
         EXPECT_EQ(h, nullptr) << "*handle written by a failed register";
         return s;
       },
       "wrap around the address space"},
      {"register_overlapping",
       [](weft_comm_t* c) {
         weft_reg_t *a = nullptr, *b = nullptr;
         EXPECT_EQ(weft_comm_register(c, buf, sizeof buf, &a), WEFT_OK) << weft_last_error();
         const weft_status_t s = weft_comm_register(c, buf + 4, 4, &b);
         EXPECT_EQ(b, nullptr) << "*handle written by a failed register";
         // A call that succeeds leaves weft_last_error() as it was.
         EXPECT_EQ(weft_comm_deregister(c, a), WEFT_OK) << weft_last_error();
         return s;
       },
       "overlaps the registration"},
      {"deregister_null_comm", [](weft_comm_t*) { return weft_comm_deregister(nullptr, nullptr); },
       "weft_comm_deregister: comm is NULL"},
      {"deregister_null_handle", [](weft_comm_t* c) { return weft_comm_deregister(c, nullptr); },
       "weft_comm_deregister: handle is NULL"},
      {"deregister_made_up_handle",
       [](weft_comm_t* c) { return weft_comm_deregister(c, reinterpret_cast<weft_reg_t*>(uintptr_t{0xdead})); },
       "not a registration of this communicator"},
      {"deregister_twice",
       [](weft_comm_t* c) {
         weft_reg_t* h = nullptr;
         EXPECT_EQ(weft_comm_register(c, buf, sizeof buf, &h), WEFT_OK) << weft_last_error();
         EXPECT_EQ(weft_comm_deregister(c, h), WEFT_OK) << weft_last_error();
         return weft_comm_deregister(c, h);
       },
       "already deregistered"},
      // AllReduce.
      {"allreduce_null_comm", [](weft_comm_t*) { return weft_allreduce(nullptr, buf, buf, 8, WEFT_F32, WEFT_SUM); },
       "weft_allreduce: comm is NULL"},
      {"allreduce_null_send", [](weft_comm_t* c) { return weft_allreduce(c, nullptr, buf, 8, WEFT_F32, WEFT_SUM); },
       "allreduce: send is null"},
      {"allreduce_null_recv", [](weft_comm_t* c) { return weft_allreduce(c, buf, nullptr, 8, WEFT_F32, WEFT_SUM); },
       "allreduce: recv is null"},
      {"allreduce_type_past_end", [](weft_comm_t* c) { return allreduce_untouched(c, 8, bad<weft_dtype_t>(7), WEFT_SUM); },
       "weft_allreduce: type 7 is not a weft_dtype_t"},
      {"allreduce_type_negative", [](weft_comm_t* c) { return allreduce_untouched(c, 8, bad<weft_dtype_t>(-1), WEFT_SUM); },
       "weft_allreduce: type -1 is not a weft_dtype_t"},
      {"allreduce_type_huge", [](weft_comm_t* c) { return allreduce_untouched(c, 8, bad<weft_dtype_t>(INT_MAX), WEFT_MAX); },
       "is not a weft_dtype_t"},
      {"allreduce_op_past_end", [](weft_comm_t* c) { return allreduce_untouched(c, 8, WEFT_F32, bad<weft_op_t>(4)); },
       "weft_allreduce: op 4 is not a weft_op_t"},
      {"allreduce_op_negative", [](weft_comm_t* c) { return allreduce_untouched(c, 8, WEFT_I64, bad<weft_op_t>(-3)); },
       "weft_allreduce: op -3 is not a weft_op_t"},
      {"allreduce_count_overflows", [](weft_comm_t* c) { return allreduce_untouched(c, kHuge, WEFT_F32, WEFT_SUM); },
       "allreduce: count 9223372036854775808 of f32 (4 bytes each) is more bytes than size_t holds"},
      // Reduce-scatter.
      {"reduce_scatter_null_comm",
       [](weft_comm_t*) { return weft_reduce_scatter(nullptr, buf, buf, 1, WEFT_F32, WEFT_SUM); },
       "weft_reduce_scatter: comm is NULL"},
      {"reduce_scatter_null_send",
       [](weft_comm_t* c) { return weft_reduce_scatter(c, nullptr, buf, 1, WEFT_F32, WEFT_SUM); },
       "reduce_scatter: send is null"},
      {"reduce_scatter_null_recv",
       [](weft_comm_t* c) { return weft_reduce_scatter(c, buf, nullptr, 1, WEFT_F32, WEFT_SUM); },
       "reduce_scatter: recv is null"},
      {"reduce_scatter_bad_type",
       [](weft_comm_t* c) { return weft_reduce_scatter(c, buf, buf, 1, bad<weft_dtype_t>(99), WEFT_SUM); },
       "weft_reduce_scatter: type 99 is not a weft_dtype_t"},
      {"reduce_scatter_bad_op",
       [](weft_comm_t* c) { return weft_reduce_scatter(c, buf, buf, 1, WEFT_U8, bad<weft_op_t>(17)); },
       "weft_reduce_scatter: op 17 is not a weft_op_t"},
      {"reduce_scatter_count_overflows",
       [](weft_comm_t* c) { return weft_reduce_scatter(c, buf, buf, kHuge, WEFT_F64, WEFT_SUM); },
       "reduce_scatter: recv_count 9223372036854775808 of f64"},
      // AllGather.
      {"allgather_null_comm", [](weft_comm_t*) { return weft_allgather(nullptr, buf, buf, 1, WEFT_F32); },
       "weft_allgather: comm is NULL"},
      {"allgather_null_send", [](weft_comm_t* c) { return weft_allgather(c, nullptr, buf, 1, WEFT_F32); },
       "allgather: send is null"},
      {"allgather_null_recv", [](weft_comm_t* c) { return weft_allgather(c, buf, nullptr, 1, WEFT_F32); },
       "allgather: recv is null"},
      {"allgather_bad_type", [](weft_comm_t* c) { return weft_allgather(c, buf, buf, 1, bad<weft_dtype_t>(7)); },
       "weft_allgather: type 7 is not a weft_dtype_t"},
      {"allgather_count_overflows", [](weft_comm_t* c) { return weft_allgather(c, buf, buf, kHuge, WEFT_BF16); },
       "allgather: send_count 9223372036854775808 of bf16"},
      // Broadcast.
      {"broadcast_null_comm", [](weft_comm_t*) { return weft_broadcast(nullptr, buf, 1, WEFT_F32, 0); },
       "weft_broadcast: comm is NULL"},
      {"broadcast_null_buf", [](weft_comm_t* c) { return weft_broadcast(c, nullptr, 1, WEFT_F32, 0); },
       "broadcast: buf is null"},
      {"broadcast_bad_type", [](weft_comm_t* c) { return weft_broadcast(c, buf, 1, bad<weft_dtype_t>(-7), 0); },
       "weft_broadcast: type -7 is not a weft_dtype_t"},
      {"broadcast_negative_root", [](weft_comm_t* c) { return weft_broadcast(c, buf, 1, WEFT_F32, -1); },
       "broadcast: root -1 is outside [0, 1)"},
      {"broadcast_root_past_size", [](weft_comm_t* c) { return weft_broadcast(c, buf, 1, WEFT_F32, 1); },
       "broadcast: root 1 is outside [0, 1)"},
      {"broadcast_count_overflows", [](weft_comm_t* c) { return weft_broadcast(c, buf, kHuge, WEFT_I32, 0); },
       "broadcast: count 9223372036854775808 of i32"},
  };
}

class CApiBadArgument : public ::testing::TestWithParam<BadCall> {};

TEST_P(CApiBadArgument, ReturnsInvalidArgumentNamingItAndWritesNothing) {
  ASSERT_NE(api().comm, nullptr) << weft_last_error();
  const BadCall& b = GetParam();
  const weft_status_t s = b.call(api().comm);
  EXPECT_EQ(s, WEFT_INVALID_ARGUMENT) << weft_status_name(s) << ": " << weft_last_error();
  const std::string said = weft_last_error();
  EXPECT_NE(said.find(b.says), std::string::npos) << "weft_last_error(): " << said;
  EXPECT_EQ(said.find('\n'), std::string::npos) << "one line: " << said;
  // No store directory from a create that failed its checks.
  EXPECT_FALSE(std::filesystem::exists("/tmp/weft-capi-never-created-" + std::to_string(::getpid())));
}

INSTANTIATE_TEST_SUITE_P(EveryEntryPoint, CApiBadArgument, ::testing::ValuesIn(bad_calls()),
                         [](const ::testing::TestParamInfo<BadCall>& p) { return p.param.name; });

TEST(CApi, TheCommunicatorStillWorksAfterEveryBadCall) {
  weft_comm_t* c = api().comm;
  ASSERT_NE(c, nullptr);
  for (const BadCall& b : bad_calls()) EXPECT_NE(b.call(c), WEFT_OK) << b.name;
  std::vector<double> v = {1.5, -2.0, 3.25};
  ASSERT_EQ(weft_allreduce(c, v.data(), v.data(), v.size(), WEFT_F64, WEFT_SUM), WEFT_OK) << weft_last_error();
  EXPECT_EQ(v[2], 3.25);
  weft_reg_t* h = nullptr;
  ASSERT_EQ(weft_comm_register(c, v.data(), v.size() * sizeof(double), &h), WEFT_OK) << weft_last_error();
  ASSERT_EQ(weft_broadcast(c, v.data(), v.size(), WEFT_F64, 0), WEFT_OK) << weft_last_error();
  ASSERT_EQ(weft_barrier(c), WEFT_OK) << weft_last_error();
  EXPECT_EQ(weft_comm_rank(c), 0);
  EXPECT_EQ(weft_comm_size(c), 1);
  EXPECT_EQ(weft_comm_deregister(c, h), WEFT_OK) << weft_last_error();
}

// Two ranks that make the same bad call both fail at once (nothing was
// sent, so no rank waits for the other), and the communicator still works.
TEST(CApi, TwoRanksMakingTheSameBadCallFailAtOnceAndKeepWorking) {
  TempDir tmp;
  const std::string store = "file:" + tmp.dir + "/two";
  std::vector<std::string> errors(2);
  std::vector<double> seconds(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      weft_comm_config_t c = config(r, 2, store.c_str());
      c.timeout_ms = 20000;
      weft_comm_t* comm = nullptr;
      ASSERT_EQ(weft_comm_create(&c, &comm), WEFT_OK) << weft_last_error();
      std::vector<float> v(1000, static_cast<float>(r + 1));
      const auto t0 = std::chrono::steady_clock::now();
      EXPECT_EQ(weft_allreduce(comm, v.data(), v.data(), v.size(), bad<weft_dtype_t>(12), WEFT_SUM),
                WEFT_INVALID_ARGUMENT);
      EXPECT_EQ(weft_allreduce(comm, v.data(), v.data(), v.size(), WEFT_F32, bad<weft_op_t>(5)), WEFT_INVALID_ARGUMENT);
      // recv_count fits, recv_count x 2 ranks does not.
      EXPECT_EQ(weft_reduce_scatter(comm, v.data(), v.data(), kHuge, WEFT_U8, WEFT_SUM), WEFT_INVALID_ARGUMENT);
      errors[static_cast<size_t>(r)] = weft_last_error();
      EXPECT_EQ(weft_broadcast(comm, v.data(), v.size(), WEFT_F32, 2), WEFT_INVALID_ARGUMENT);
      seconds[static_cast<size_t>(r)] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ASSERT_EQ(weft_allreduce(comm, v.data(), v.data(), v.size(), WEFT_F32, WEFT_SUM), WEFT_OK) << weft_last_error();
      EXPECT_EQ(v[999], 3.0f);
      EXPECT_EQ(weft_comm_destroy(comm), WEFT_OK);
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[static_cast<size_t>(r)].find("recv_count 9223372036854775808 of u8 (1 bytes each, times 2 ranks)"),
              std::string::npos)
        << errors[static_cast<size_t>(r)];
    EXPECT_LT(seconds[static_cast<size_t>(r)], 1.0) << "rank " << r << " waited for a call that could not start";
  }
}

// Communicators made one after the other on one file store, each over
// shared memory: every one gets keys of its own (the second used to read
// the first one's segment names, gone with it: shm_open failed ENOENT). A
// prefix of the caller's is numbered the same way, apart from the default.
TEST(CApi, CommunicatorsMadeOneAfterTheOtherOnOneStoreEachWork) {
  TempDir tmp;
  const std::string store = "file:" + tmp.dir + "/again";
  for (const char* prefix : {static_cast<const char*>(nullptr), "mine"}) {
    for (int round = 0; round < 3; ++round) {
      std::vector<std::thread> ranks;
      for (int r = 0; r < 3; ++r) {
        ranks.emplace_back([&, r] {
          weft_comm_config_t c = config(r, 3, store.c_str());
          c.transport = "shm";
          c.store_prefix = prefix;
          c.timeout_ms = 20000;
          weft_comm_t* comm = nullptr;
          ASSERT_EQ(weft_comm_create(&c, &comm), WEFT_OK) << "round " << round << ": " << weft_last_error();
          std::vector<int32_t> v(333, r + 1 + round);
          EXPECT_EQ(weft_allreduce(comm, v.data(), v.data(), v.size(), WEFT_I32, WEFT_SUM), WEFT_OK) << weft_last_error();
          EXPECT_EQ(v[332], 6 + 3 * round);
          EXPECT_EQ(weft_comm_destroy(comm), WEFT_OK);
        });
      }
      for (auto& t : ranks) t.join();
    }
  }
  std::vector<std::string> keys;
  for (const auto& e : std::filesystem::directory_iterator(tmp.dir + "/again")) keys.push_back(e.path().filename());
  for (const char* p : {"weft", "weft.1", "weft.2", "mine", "mine.1", "mine.2"}) {
    // FileStore names a key's file after it, '/' written as '%'.
    const std::string start = std::string(p) + "%";
    EXPECT_TRUE(std::any_of(keys.begin(), keys.end(), [&](const std::string& k) { return k.rfind(start, 0) == 0; }))
        << "no key of prefix " << p;
  }
}

// The names in a file store directory's key files (FileStore writes '/' as
// '%', so a prefix p names keys "p%...").
bool has_prefix(const std::string& dir, const std::string& p) {
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename().string().rfind(p + "%", 0) == 0) return true;
  }
  return false;
}

// Every create takes a name, a failed one too, and never one an earlier
// create took: the caller's "weft.1", then a create that fails (a plan file
// that is not there) takes "weft", then the next gets "weft.2".
TEST(CApi, EveryCreateTakesANameOfItsOwnAFailedOneToo) {
  TempDir tmp;
  const std::string store = "file:" + tmp.dir + "/names";
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      for (const char* prefix : {"weft.1", static_cast<const char*>(nullptr)}) {
        weft_comm_config_t c = config(r, 2, store.c_str());
        c.transport = "shm";
        c.store_prefix = prefix;
        c.timeout_ms = 20000;
        weft_comm_t* comm = nullptr;
        if (prefix == nullptr) {
          weft_comm_config_t bad_plan = c;
          bad_plan.plan_path = "/nonexistent/weft-plan.json";
          EXPECT_NE(weft_comm_create(&bad_plan, &comm), WEFT_OK);
        }
        ASSERT_EQ(weft_comm_create(&c, &comm), WEFT_OK) << weft_last_error();
        std::vector<int64_t> v(17, r + 1);
        EXPECT_EQ(weft_allreduce(comm, v.data(), v.data(), v.size(), WEFT_I64, WEFT_SUM), WEFT_OK) << weft_last_error();
        EXPECT_EQ(v[16], 3);
        EXPECT_EQ(weft_comm_destroy(comm), WEFT_OK);
      }
    });
  }
  for (auto& t : ranks) t.join();
  const std::string dir = tmp.dir + "/names";
  EXPECT_TRUE(has_prefix(dir, "weft.1"));
  EXPECT_FALSE(has_prefix(dir, "weft")) << "the failed create's name was given again";
  EXPECT_TRUE(has_prefix(dir, "weft.2"));
}

// Communicators made one after the other on one tcp:// store, each rank at
// its own pace: the others make their next one while rank 0 still holds its
// last (it destroys late), so their new client reaches the server of rank
// 0's last communicator. That server lives on for the process (it used to
// close with the communicator and fail their create).
TEST(CApi, CommunicatorsMadeOneAfterTheOtherOnOneTcpStoreWhileRankZeroDestroysLate) {
  const std::string store = fmt::format("tcp://127.0.0.1:{}", weft::coll::testing::free_ports(1).at(0));
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      for (int round = 0; round < 3; ++round) {
        weft_comm_config_t c = config(r, 3, store.c_str());
        c.transport = "tcp";
        c.timeout_ms = 20000;
        weft_comm_t* comm = nullptr;
        ASSERT_EQ(weft_comm_create(&c, &comm), WEFT_OK) << "rank " << r << ", round " << round << ": " << weft_last_error();
        std::vector<int32_t> v(77, r + 1 + round);
        EXPECT_EQ(weft_allreduce(comm, v.data(), v.data(), v.size(), WEFT_I32, WEFT_SUM), WEFT_OK) << weft_last_error();
        EXPECT_EQ(v[76], 6 + 3 * round);
        if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
        EXPECT_EQ(weft_comm_destroy(comm), WEFT_OK);
      }
    });
  }
  for (auto& t : ranks) t.join();
}

// Two communicators alive at once on one tcp:// store, used in turns: rank
// 0's process serves the store once for both (the second create used to
// fail binding the port the first one's server held).
TEST(CApi, CommunicatorsAliveAtOnceOnOneTcpStoreEachWork) {
  const std::string store = fmt::format("tcp://127.0.0.1:{}", weft::coll::testing::free_ports(1).at(0));
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      weft_comm_t* comms[2] = {nullptr, nullptr};
      const char* transports[2] = {"tcp", "shm"};
      for (int k = 0; k < 2; ++k) {
        weft_comm_config_t c = config(r, 3, store.c_str());
        c.transport = transports[k];
        c.timeout_ms = 20000;
        ASSERT_EQ(weft_comm_create(&c, &comms[k]), WEFT_OK) << "communicator " << k << ": " << weft_last_error();
      }
      for (int call = 0; call < 3; ++call) {
        const int k = call % 2;
        std::vector<float> v(1001, static_cast<float>(r + 1 + call));
        EXPECT_EQ(weft_allreduce(comms[k], v.data(), v.data(), v.size(), WEFT_F32, WEFT_SUM), WEFT_OK)
            << "call " << call << ": " << weft_last_error();
        EXPECT_EQ(v[1000], static_cast<float>(6 + 3 * call));
      }
      for (weft_comm_t* c : comms) EXPECT_EQ(weft_comm_destroy(c), WEFT_OK);
    });
  }
  for (auto& t : ranks) t.join();
}

// A malformed variable the communicator reads fails create before the store
// is opened: rank 0 would otherwise serve a store and drop it, and the other
// hosts would see a lost store instead of the reason.
struct BadVariable {
  const char* name;
  const char* value;
};

class CApiBadVariable : public ::testing::TestWithParam<BadVariable> {};

TEST_P(CApiBadVariable, FailsCreateNamingItBeforeTheStoreIsOpened) {
  const BadVariable& v = GetParam();
  ScopedEnv env(v.name, v.value);
  TempDir tmp;
  const std::string dir = tmp.dir + "/store";
  const std::string store = "file:" + dir;
  weft_comm_config_t c = config(0, 2, store.c_str());
  c.transport = "tcp";
  weft_comm_t* comm = nullptr;
  EXPECT_EQ(weft_comm_create(&c, &comm), WEFT_INVALID_ARGUMENT);
  EXPECT_EQ(comm, nullptr);
  EXPECT_NE(std::string(weft_last_error()).find(fmt::format("{} must", v.name)), std::string::npos) << weft_last_error();
  EXPECT_FALSE(std::filesystem::exists(dir)) << "the store was opened";
}

INSTANTIATE_TEST_SUITE_P(Environment, CApiBadVariable,
                         ::testing::Values(BadVariable{"WEFT_SWITCH_STALL_MS", "5"},
                                           BadVariable{"WEFT_SWITCH_STALL_MS", "200ms"},
                                           BadVariable{"WEFT_IN_CALL_SWITCH", "yes"},
                                           BadVariable{"WEFT_VERBS_DEVICES", "mlx5_0,"}),
                         [](const ::testing::TestParamInfo<BadVariable>& p) { return fmt::format("{}_{}", p.param.name, p.index); });

TEST(CApi, StatusNamesCoverEveryCodeAndSayUnknownOutsideTheEnum) {
  EXPECT_STREQ(weft_status_name(WEFT_OK), "ok");
  EXPECT_STREQ(weft_status_name(WEFT_INVALID_ARGUMENT), "invalid argument");
  EXPECT_STREQ(weft_status_name(WEFT_IO), "i/o error");
  EXPECT_STREQ(weft_status_name(bad<weft_status_t>(14)), "unknown");
  EXPECT_STREQ(weft_status_name(bad<weft_status_t>(-1)), "unknown");
  EXPECT_STREQ(weft_status_name(bad<weft_status_t>(INT_MAX)), "unknown");
}

}  // namespace
