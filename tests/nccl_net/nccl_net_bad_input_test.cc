// Bad input to the plugin, and plan entries it cannot apply: an
// ncclResult_t and a log line (and a counter), never a crash, never a
// silent fallback. Each case runs in a forked process: the plugin's state
// is per process, as in an NCCL rank.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "../verbs/verbs_env.h"
#include "children.h"
#include "plugin_driver.h"
#include "weft/routing/plan.h"

namespace weft::nccl_net::testing {
namespace {

using verbs::testing::VerbsEnv;

// Bad input: an error code and a log line, never a crash.
std::vector<std::string>& log_lines() {
  static std::vector<std::string> lines;
  return lines;
}
void collect_log(ncclDebugLogLevel, unsigned long, const char*, int, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  log_lines().push_back(buf);
}

// How many log lines contain `what`.
int said(const std::string& what) {
  int n = 0;
  for (const auto& l : log_lines()) n += l.find(what) != std::string::npos;
  return n;
}

// A plan with one flow, src_addr -> dst_addr, conn 0, qp 0, on `sport`.
std::string save_one_flow_plan(const std::string& src_addr, const std::string& dst_addr, std::uint16_t sport,
                               const char* tag) {
  routing::RoutePlan plan;
  plan.collective = "nccl-ring";
  plan.ranks = 2;
  routing::PlanFlow f;
  f.src_rank = 0;
  f.dst_rank = 1;
  f.src_host = "x";
  f.dst_host = "y";
  f.src_addr = src_addr;
  f.dst_addr = dst_addr;
  f.sport = sport;
  f.dport = 4791;
  plan.flows.push_back(f);
  const std::string path = fmt::format("/tmp/weft-nccl-{}-{}.json", tag, getpid());
  return routing::save_plan(plan, path).is_ok() ? path : "";
}

std::string bad_input(const VerbsEnv& env, int version) {
  setenv("WEFT_NCCL_DEVICES", env.dev_a.c_str(), 1);
  // A plan whose flows all leave other hosts.
  const std::string plan_path = save_one_flow_plan("192.0.2.1", "192.0.2.2", 50000, "other");
  if (plan_path.empty()) return "save_plan";
  setenv("WEFT_PLAN", plan_path.c_str(), 1);
  auto d = Driver::load(version);
  if (!d) return d.status().message();
  ncclResult_t r = d->init(collect_log);
  unlink(plan_path.c_str());
  if (r != ncclInvalidArgument) return fmt::format("init with another host's plan returned {}", static_cast<int>(r));
  if (said("lists no flow from this host's NICs") == 0) return "no log line for the foreign plan";
  unsetenv("WEFT_PLAN");
  if (d->init(collect_log) != ncclSuccess) return "init without plan";
  Props p;
  if (d->properties(1, &p) != ncclInvalidArgument) return "getProperties(1) with one device";
  if (said("device index 1 out of range (0..0)") == 0) return "no log line for device 1";
  std::uint8_t handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* lc = nullptr;
  if (d->listen(-1, handle, &lc) != ncclInvalidArgument || lc != nullptr) return "listen(-1)";
  if (d->listen(0, handle, &lc) != ncclSuccess) return "listen(0)";
  std::uint8_t garbage[NCCL_NET_HANDLE_MAXSIZE];
  for (std::size_t i = 0; i < sizeof(garbage); ++i) garbage[i] = static_cast<std::uint8_t>(i * 37 + 1);
  std::memset(garbage + 120, 0, 8);  // the connector's own state slot starts empty, as NCCL's copy does
  void* sc = nullptr;
  if (d->connect(0, garbage, &sc) != ncclInvalidArgument || sc != nullptr) return "connect(garbage)";
  if (said("not weft's") == 0) return "no log line for the garbage handle";
  std::uint8_t stray[NCCL_NET_HANDLE_MAXSIZE];
  std::memcpy(stray, handle, sizeof(stray));
  stray[100] = 1;
  if (d->connect(0, stray, &sc) != ncclInvalidArgument || sc != nullptr) return "connect(stray byte)";
  if (d->connect(3, handle, &sc) != ncclInvalidArgument) return "connect(device 3)";
  if (d->close_listen(lc) != ncclSuccess) return "closeListen";
  if (d->counters().errors < 5) return fmt::format("error counter {}", d->counters().errors);
  return "";
}

// A plan whose entry for QP 0 cannot be applied (49152 needs flow label 0,
// which means "hash") and which lists no QP 1: each is one log line and a
// counter, and the connection still works (on label 0). One process
// connects to its own listener on one device.
std::string unapplicable_entries(const VerbsEnv& env) {
  const std::string ip = ip_of(env.dev_a);
  const std::string plan_path = save_one_flow_plan(ip, ip, 49152, "unapplicable");
  if (plan_path.empty()) return "save_plan";
  setenv("WEFT_NCCL_DEVICES", env.dev_a.c_str(), 1);
  setenv("WEFT_NCCL_QPS", "2", 1);
  setenv("WEFT_PLAN", plan_path.c_str(), 1);
  auto d = Driver::load(11);
  if (!d) return d.status().message();
  ncclResult_t r = d->init(collect_log);
  unlink(plan_path.c_str());
  if (r != ncclSuccess) return "init";
  std::uint8_t handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void *lc = nullptr, *sc = nullptr, *rc = nullptr;
  if (d->listen(0, handle, &lc) != ncclSuccess) return "listen";
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((sc == nullptr || rc == nullptr) && std::chrono::steady_clock::now() < end) {
    if (sc == nullptr && d->connect(0, handle, &sc) != ncclSuccess) return "connect";
    if (rc == nullptr && d->accept(lc, &rc) != ncclSuccess) return "accept";
  }
  if (sc == nullptr || rc == nullptr) return "connect/accept never completed";
  weft_nccl_net_counters_t c = d->counters();
  if (c.planned != 0 || c.unapplicable != 1 || c.unplanned != 1) {
    return fmt::format("counters planned {} unapplicable {} unplanned {}", c.planned, c.unapplicable, c.unplanned);
  }
  const std::string qp0 = fmt::format("plan flow {} -> {} conn 0 qp 0: ", ip, ip);
  const std::string qp1 = fmt::format("the plan has no flow {} -> {} conn 0 qp 1", ip, ip);
  if (said(qp0) != 1 || said(qp1) != 1) return fmt::format("log lines: {} for qp 0, {} for qp 1", said(qp0), said(qp1));
  // The connection works on label 0: one message, checked.
  std::vector<std::uint8_t> tx = verbs::testing::pattern(70001, 5), rx(70001, 0);
  void *mt = nullptr, *mr = nullptr, *sreq = nullptr, *rreq = nullptr;
  if (d->reg_mr(sc, tx.data(), tx.size(), NCCL_PTR_HOST, &mt) != ncclSuccess) return "regMr tx";
  if (d->reg_mr(rc, rx.data(), rx.size(), NCCL_PTR_HOST, &mr) != ncclSuccess) return "regMr rx";
  void* data = rx.data();
  std::size_t size = rx.size();
  int tag = 1, sdone = 0, rdone = 0, got = 0;
  if (d->irecv(rc, 1, &data, &size, &tag, &mr, &rreq) != ncclSuccess || rreq == nullptr) return "irecv";
  while ((!sdone || !rdone) && std::chrono::steady_clock::now() < end) {
    if (sreq == nullptr) {
      if (d->isend(sc, tx.data(), tx.size(), tag, mt, &sreq) != ncclSuccess) return "isend";
    } else if (!sdone && d->test(sreq, &sdone, nullptr) != ncclSuccess) {
      return "test send";
    }
    if (!rdone && d->test(rreq, &rdone, &got) != ncclSuccess) return "test recv";
  }
  if (!sdone || !rdone || got != 70001 || rx != tx) return fmt::format("message: {} bytes, equal {}", got, rx == tx);
  d->dereg_mr(sc, mt);
  d->dereg_mr(rc, mr);
  d->close_send(sc);
  d->close_recv(rc);
  d->close_listen(lc);
  return d->finalize() == ncclSuccess ? "" : "finalize";
}

TEST(PlanEntries, ThatCannotBeAppliedAreALogLineAndACounterEach) {
  WEFT_REQUIRE_VERBS_ENV(env);
  Children kids = fork_children(1, [&](int, std::uint16_t) {
    std::string err = unapplicable_entries(env);
    if (!err.empty()) std::fprintf(stderr, "%s\n", err.c_str());
    return err.empty() ? 0 : 1;
  });
  EXPECT_EQ(release_and_wait(kids, 1, std::chrono::seconds(60))[0], 0);
}

class BadInput : public ::testing::TestWithParam<int> {};

TEST_P(BadInput, IsAnErrorCodeAndALogLineNeverACrash) {
  WEFT_REQUIRE_VERBS_ENV(env);
  Children kids = fork_children(1, [&](int, std::uint16_t) {
    std::string err = bad_input(env, GetParam());
    if (!err.empty()) std::fprintf(stderr, "%s\n", err.c_str());
    return err.empty() ? 0 : 1;
  });
  EXPECT_EQ(release_and_wait(kids, 1, std::chrono::seconds(60))[0], 0);
}

INSTANTIATE_TEST_SUITE_P(V, BadInput, ::testing::Values(8, 11),
                         [](const auto& p) { return "v" + std::to_string(p.param); });

}  // namespace
}  // namespace weft::nccl_net::testing
