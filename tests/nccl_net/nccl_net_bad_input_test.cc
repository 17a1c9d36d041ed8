// Bad input to the plugin, plan entries it cannot apply, and dma-buf
// registration: an ncclResult_t and a log line (and a counter), never a
// crash, never a silent fallback. Each case runs in a forked process: the plugin's state
// is per process, as in an NCCL rank.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "../verbs/verbs_env.h"
#include "children.h"
#include "log_capture.h"
#include "weft/nccl_net/driver.h"
#include "weft/routing/plan.h"
#include "weft/verbs/device.h"

namespace weft::nccl_net::testing {
namespace {

using verbs::testing::VerbsEnv;

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

// One bad call's trace: its result, exactly one new log line (the whole
// line, as NCCL's logger would print it), and the error counter one higher.
class Trace {
 public:
  explicit Trace(const Driver& d) : d_(d) { sync(); }
  // Forget what came before (init's informational lines).
  void sync() {
    lines_ = log_lines().size();
    errors_ = d_.counters().errors;
  }
  std::string check(const std::string& call, ncclResult_t got, ncclResult_t want, const std::string& line) {
    std::string err;
    if (got != want) {
      err = fmt::format("{} returned {}, expected {}", call, static_cast<int>(got), static_cast<int>(want));
    } else if (log_lines().size() != lines_ + 1) {
      err = fmt::format("{} logged {} lines, expected 1", call, log_lines().size() - lines_);
    } else if (log_lines().back().text != line) {
      err = fmt::format("{} logged '{}', expected '{}'", call, log_lines().back().text, line);
    } else if (d_.counters().errors != errors_ + 1) {
      err = fmt::format("{} moved the error counter from {} to {}", call, errors_, d_.counters().errors);
    }
    sync();
    return err;
  }

 private:
  const Driver& d_;
  std::size_t lines_ = 0;
  std::uint64_t errors_ = 0;
};

#define BAD_CHECK(expr)                          \
  do {                                           \
    if (std::string e = (expr); !e.empty()) return e; \
  } while (0)

// A plan for other hosts, device indices out of range, malformed handles:
// each an ncclResult_t, one log line and one count.
std::string bad_input(const VerbsEnv& env, int version) {
  setenv("WEFT_NCCL_DEVICES", env.dev_a.c_str(), 1);
  const std::string ip = ip_of(env.dev_a);
  // A plan whose flows all leave other hosts.
  const std::string plan_path = save_one_flow_plan("192.0.2.1", "192.0.2.2", 50000, "other");
  if (plan_path.empty()) return "save_plan";
  setenv("WEFT_PLAN", plan_path.c_str(), 1);
  auto d = Driver::load(version);
  if (!d) return d.status().message();
  Trace t(*d);
  ncclResult_t r = d->init(collect_log);
  unlink(plan_path.c_str());
  BAD_CHECK(t.check("init(plan for other hosts)", r, ncclInvalidArgument,
                    fmt::format("NET/weft: init: WEFT_PLAN {} lists no flow from this host's NICs ({}): a plan for "
                                "other hosts?",
                                plan_path, ip)));
  unsetenv("WEFT_PLAN");
  if (d->init(collect_log) != ncclSuccess) return "init without plan";
  t.sync();

  // Device indices out of range (one device: 0..0).
  Props p;
  BAD_CHECK(t.check("getProperties(1)", d->properties(1, &p), ncclInvalidArgument,
                    "NET/weft: device index 1 out of range (0..0)"));
  std::uint8_t handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* lc = nullptr;
  BAD_CHECK(t.check("listen(-1)", d->listen(-1, handle, &lc), ncclInvalidArgument,
                    "NET/weft: device index -1 out of range (0..0)"));
  if (lc != nullptr) return "listen(-1) returned a comm";
  if (d->listen(0, handle, &lc) != ncclSuccess) return "listen(0)";
  t.sync();
  void* sc = nullptr;
  BAD_CHECK(t.check("connect(3)", d->connect(3, handle, &sc), ncclInvalidArgument,
                    "NET/weft: device index 3 out of range (0..0)"));

  // Malformed handles, each a copy of the good one with one thing wrong.
  struct Malformed {
    const char* what;
    std::size_t at;
    std::vector<std::uint8_t> bytes;
    std::string line;
  };
  const std::vector<Malformed> malformed = {
      {"another plugin's magic", 0, {0x4E, 0x43, 0x43, 0x4C},
       "NET/weft: connect: connection handle has magic 0x4e43434c, not weft's 0x57464e43 (another plugin's handle?)"},
      {"another wire version", 4, {0x00, 0x63}, "NET/weft: connect: connection handle version 99, this plugin speaks 2"},
      {"port 0", 6, {0x00, 0x00}, "NET/weft: connect: connection handle names no address or port"},
      {"a reserved byte set", 100, {0x01}, "NET/weft: connect: connection handle byte 100 is 0x01, must be 0"},
      {"garbage in the connect state", 120, {0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41},
       "NET/weft: connect: connection handle bytes 120..127 hold 0x4141414141414141, which no connect of this "
       "process left there (not a handle from listen?)"},
  };
  for (const Malformed& m : malformed) {
    std::uint8_t bad[NCCL_NET_HANDLE_MAXSIZE];
    std::memcpy(bad, handle, sizeof(bad));
    std::memcpy(bad + m.at, m.bytes.data(), m.bytes.size());
    BAD_CHECK(t.check(fmt::format("connect({})", m.what), d->connect(0, bad, &sc), ncclInvalidArgument, m.line));
    if (sc != nullptr) return fmt::format("connect({}) returned a comm", m.what);
  }
  if (d->close_listen(lc) != ncclSuccess) return "closeListen";
  return "";
}

// Connects the process to its own listener on its one device.
std::string connect_self(Driver& d, void** lc, void** sc, void** rc) {
  std::uint8_t handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  if (d.listen(0, handle, lc) != ncclSuccess) return "listen";
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((*sc == nullptr || *rc == nullptr) && std::chrono::steady_clock::now() < end) {
    if (*sc == nullptr && d.connect(0, handle, sc) != ncclSuccess) return "connect";
    if (*rc == nullptr && d.accept(*lc, rc) != ncclSuccess) return "accept";
  }
  return *sc != nullptr && *rc != nullptr ? "" : "connect/accept never completed";
}

// Why `device` takes no dma-buf registration, asked of verbs directly with
// the probe NCCL's IB transport makes (register fd -1: EOPNOTSUPP or
// EPROTONOSUPPORT without the verb, EBADF with it); "" when it takes them.
std::string dmabuf_refusal_of(const std::string& device) {
  verbs::DeviceConfig cfg;
  cfg.name = device;
  auto dev = verbs::Device::open(cfg);
  if (!dev) return "cannot open " + device;
  errno = 0;
  ibv_mr* mr = ibv_reg_dmabuf_mr(dev->pd(), 0, 0, 0, -1, 0);
  const int err = errno;
  if (mr != nullptr) ibv_dereg_mr(mr);
  if (mr == nullptr && (err == EOPNOTSUPP || err == EPROTONOSUPPORT)) {
    return fmt::format("ibv_reg_dmabuf_mr: {}", std::strerror(err));
  }
  return "";
}

// dma-buf: never advertised (NCCL_PTR_DMABUF would make NCCL receive into GPU
// memory, which needs a flush the plugin does not do: plugin.cc
// fill_common); registered only where the device takes it, elsewhere one log
// line at init and regMrDmaBuf an error; GPU memory refused everywhere. fd -1
// with NCCL_PTR_HOST registers host memory, as NCCL's IB transport does.
std::string dmabuf(const VerbsEnv& env, int version) {
  setenv("WEFT_NCCL_DEVICES", env.dev_a.c_str(), 1);
  setenv("WEFT_NCCL_QPS", "1", 1);
  unsetenv("WEFT_PLAN");
  const std::string refusal = dmabuf_refusal_of(env.dev_a);
  auto d = Driver::load(version);
  if (!d) return d.status().message();
  if (d->init(collect_log) != ncclSuccess) return "init";
  const std::string init_line = fmt::format(
      "NET/weft: {}: no dma-buf registration ({}): regMrDmaBuf fails", env.dev_a, refusal);
  if (said(init_line) != (refusal.empty() ? 0 : 1)) return fmt::format("{} lines '{}'", said(init_line), init_line);
  Props p;
  if (d->properties(0, &p) != ncclSuccess) return "getProperties";
  const int want = NCCL_PTR_HOST;
  if (p.ptr_support != want) return fmt::format("ptrSupport {:#x}, expected {:#x} ({})", p.ptr_support, want, refusal);
  void *lc = nullptr, *sc = nullptr, *rc = nullptr;
  BAD_CHECK(connect_self(*d, &lc, &sc, &rc));
  std::vector<std::uint8_t> buf(8192);
  const int fd = memfd_create("weft-not-a-dma-buf", MFD_CLOEXEC);  // an fd, but no dma-buf
  if (fd < 0 || ftruncate(fd, 8192) != 0) return "memfd";
  Trace t(*d);
  void* mh = nullptr;
  ncclResult_t r = d->reg_mr_dmabuf(sc, buf.data(), buf.size(), NCCL_PTR_DMABUF, 0, fd, &mh);
  if (!refusal.empty()) {
    BAD_CHECK(t.check("regMrDmaBuf", r, ncclInvalidUsage,
                      fmt::format("NET/weft: regMrDmaBuf: {} takes no dma-buf registration ({}); ptrSupport has no "
                                  "NCCL_PTR_DMABUF",
                                  env.dev_a, refusal)));
  } else {
    // The device takes dma-bufs and the kernel refuses this fd.
    const std::string prefix = fmt::format("NET/weft: regMrDmaBuf: ibv_reg_dmabuf_mr(fd {}, offset 0, 8192 bytes)", fd);
    if (r != ncclSystemError || log_lines().back().text.rfind(prefix, 0) != 0) {
      return fmt::format("regMrDmaBuf of a memfd returned {}, logged '{}'", static_cast<int>(r),
                         log_lines().back().text);
    }
  }
  if (mh != nullptr) return "regMrDmaBuf returned a handle";
  t.sync();
  r = d->reg_mr_dmabuf(sc, buf.data(), buf.size(), NCCL_PTR_CUDA, 0, fd, &mh);
  BAD_CHECK(t.check("regMrDmaBuf", r, ncclInvalidArgument,
                    "NET/weft: regMrDmaBuf: GPU memory (NCCL_PTR_CUDA) is not offered: ptrSupport is NCCL_PTR_HOST, "
                    "and iflush does no read to order GPU receives"));
  close(fd);
  if (mh != nullptr) return "regMrDmaBuf returned a handle";
  if (d->reg_mr_dmabuf(sc, buf.data(), buf.size(), NCCL_PTR_HOST, 0, -1, &mh) != ncclSuccess || mh == nullptr) {
    return "regMrDmaBuf(NCCL_PTR_HOST, fd -1)";
  }
  if (d->dereg_mr(sc, mh) != ncclSuccess) return "deregMr";
  d->close_send(sc);
  d->close_recv(rc);
  d->close_listen(lc);
  return d->finalize() == ncclSuccess ? "" : "finalize";
}

// A plan whose entry for QP 0 cannot be applied (port 40000: no flow label
// gives a port below 49152) and which lists no QP 1: each is one log line and a
// counter, and the connection still works (on label 0). One process
// connects to its own listener on one device.
// What reaches fd 2 while it lives: a temporary file, read back whole.
struct StderrToFile {
  int saved = ::dup(2);
  std::FILE* file = std::tmpfile();
  StderrToFile() {
    if (file != nullptr) ::dup2(fileno(file), 2);
  }
  ~StderrToFile() {
    ::dup2(saved, 2);
    ::close(saved);
    if (file != nullptr) std::fclose(file);
  }
  std::string text() {
    std::string all;
    if (file == nullptr) return all;
    std::rewind(file);
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof(buf), file)) > 0;) all.append(buf, n);
    return all;
  }
};

std::string unapplicable_entries(const VerbsEnv& env) {
  const std::string ip = ip_of(env.dev_a);
  const std::string plan_path = save_one_flow_plan(ip, ip, 40000, "unapplicable");
  if (plan_path.empty()) return "save_plan";
  setenv("WEFT_NCCL_DEVICES", env.dev_a.c_str(), 1);
  setenv("WEFT_NCCL_QPS", "2", 1);
  setenv("WEFT_PLAN", plan_path.c_str(), 1);
  auto d = Driver::load(11);
  if (!d) return d.status().message();
  StderrToFile err;
  ncclResult_t r = d->init(collect_log);
  unlink(plan_path.c_str());
  if (r != ncclSuccess) return "init";
  void *lc = nullptr, *sc = nullptr, *rc = nullptr;
  BAD_CHECK(connect_self(*d, &lc, &sc, &rc));
  // NCCL prints the plugin's warnings only with NCCL_DEBUG=WARN: the first
  // fallback of each kind is on stderr too, QP 0's first.
  const std::string on_stderr = err.text();
  const std::string first = fmt::format("weft nccl_net: plan flow {} -> {} conn 0 qp 0: ", ip, ip);
  const std::string second = fmt::format("weft nccl_net: the plan has no flow {} -> {} conn 0 qp 1; this QP gets flow "
                                         "label 0 (the kernel hashes its QP numbers into the port) (the first such "
                                         "line; NCCL_DEBUG=WARN shows each)\n",
                                         ip, ip);
  if (on_stderr.rfind(first, 0) != 0 || std::count(on_stderr.begin(), on_stderr.end(), '\n') != 2 ||
      on_stderr.size() < second.size() || on_stderr.compare(on_stderr.size() - second.size(), second.size(), second)) {
    return fmt::format("stderr: '{}'", on_stderr);
  }
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
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
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

// Runs `body` in a forked process (the plugin's state is per process, as in
// an NCCL rank); its exit code, 0 when `body` found nothing wrong.
int in_child(const std::function<std::string()>& body) {
  Children kids = fork_children(1, [&](int, std::uint16_t) {
    std::string err = body();
    if (!err.empty()) std::fprintf(stderr, "%s\n", err.c_str());
    return err.empty() ? 0 : 1;
  });
  return release_and_wait(kids, 1, std::chrono::seconds(60))[0];
}

TEST(PlanEntries, ThatCannotBeAppliedAreALogLineAndACounterEach) {
  WEFT_REQUIRE_VERBS_ENV(env);
  EXPECT_EQ(in_child([&] { return unapplicable_entries(env); }), 0);
}

class BadInput : public ::testing::TestWithParam<int> {};

TEST_P(BadInput, IsAnErrorCodeAndALogLineNeverACrash) {
  WEFT_REQUIRE_VERBS_ENV(env);
  EXPECT_EQ(in_child([&] { return bad_input(env, GetParam()); }), 0);
}

// Connections to a listener that are not a peer's handshake (garbage, or
// closed at once) are dropped with a warning each and the listener goes on:
// the real connection queued behind them completes, and no call fails.
std::string strangers(const VerbsEnv& env, int version) {
  setenv("WEFT_NCCL_DEVICES", env.dev_a.c_str(), 1);
  setenv("WEFT_NCCL_QPS", "1", 1);
  unsetenv("WEFT_PLAN");
  auto d = Driver::load(version);
  if (!d) return d.status().message();
  if (d->init(collect_log) != ncclSuccess) return "init";
  std::uint8_t handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void *lc = nullptr, *sc = nullptr, *rc = nullptr;
  if (d->listen(0, handle, &lc) != ncclSuccess) return "listen";
  // The listener's TCP port and address, big-endian at bytes 6 and 8 of the
  // handle (nccl_net/wire.cc encode_handle): read here, not through the
  // plugin's own code, which this harness only reaches through dlopen.
  sockaddr_in to{};
  to.sin_family = AF_INET;
  std::memcpy(&to.sin_port, handle + 6, 2);
  std::memcpy(&to.sin_addr.s_addr, handle + 8, 4);
  // First a stranger that connects and stays silent (it holds its socket to
  // the end), then a health check and a port scan, then a hello with this
  // listener's serial whose QP record is garbage: none may hold the peer up.
  std::vector<int> kept;
  auto stranger = [&](const std::string& bytes, bool keep) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) return false;
    if (!bytes.empty() && ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) < 0) return false;
    keep ? kept.push_back(fd) : void(::close(fd));
    return true;
  };
  // Hello layout (nccl_net/wire.cc): magic "WFNH", version 2, 1 QP, address,
  // the serial (the handle's bytes 12..15), no traffic class and two zero
  // bytes, then one 64-byte QP record.
  std::string hello = {'W', 'F', 'N', 'H', 0, 2, 0, 1, 10, 0, 0, 99};
  hello.append(reinterpret_cast<const char*>(handle) + 12, 4);
  hello.append(4, '\0');
  hello.append(64, '\xff');
  const bool ok = stranger("", true) && stranger("GET / HTTP/1.1\r\nHost: probe\r\n\r\n", false) &&
                  stranger("", false) && stranger(hello, true);
  struct Closer {
    std::vector<int>& fds;
    ~Closer() {
      for (int fd : fds) ::close(fd);
    }
  } closer{kept};
  if (!ok) return "a stranger's connect or send";
  const std::uint64_t errors = d->counters().errors;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((sc == nullptr || rc == nullptr) && std::chrono::steady_clock::now() < end) {
    if (sc == nullptr && d->connect(0, handle, &sc) != ncclSuccess) return "connect";
    if (rc == nullptr && d->accept(lc, &rc) != ncclSuccess) return "accept failed on a stranger";
  }
  if (sc == nullptr || rc == nullptr) return "connect/accept never completed behind the strangers";
  const std::string dropped = "NET/weft: accept: dropped a connection that is not a peer's handshake: ";
  if (said(dropped) != 3) return fmt::format("{} lines '{}...', expected 3", said(dropped), dropped);
  if (said(dropped + "peer closed the connection during setup") != 1) return "no line for the closed connection";
  if (said(dropped + "peer's QP records") != 1) return "no line for the garbage QP record";
  if (d->counters().errors != errors) return "a dropped stranger counted as an error";
  d->close_send(sc);
  d->close_recv(rc);
  d->close_listen(lc);
  return d->finalize() == ncclSuccess ? "" : "finalize";
}

TEST_P(BadInput, StrangersOnTheListenPortAreDroppedAndThePeerBehindThemConnects) {
  WEFT_REQUIRE_VERBS_ENV(env);
  EXPECT_EQ(in_child([&] { return strangers(env, GetParam()); }), 0);
}

// A connector whose proxy stops polling connect() after its hello, for
// longer than the listener's 30 s handshake limit, while the listener has
// replied and waits for the ready byte: both sides still complete (the
// listener used to drop it at 30 s; the connector then got a comm whose
// peer QPs were gone, and accept() never completed).
std::string slow_connector(const VerbsEnv& env) {
  setenv("WEFT_NCCL_DEVICES", env.dev_a.c_str(), 1);
  setenv("WEFT_NCCL_QPS", "1", 1);
  unsetenv("WEFT_PLAN");
  auto d = Driver::load(11);
  if (!d) return d.status().message();
  if (d->init(collect_log) != ncclSuccess) return "init";
  std::uint8_t handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void *lc = nullptr, *sc = nullptr, *rc = nullptr;
  if (d->listen(0, handle, &lc) != ncclSuccess) return "listen";
  using std::chrono::steady_clock;
  auto poll_for = [&](std::chrono::milliseconds span, bool connect, bool accept) -> std::string {
    for (const auto end = steady_clock::now() + span; steady_clock::now() < end && (sc == nullptr || rc == nullptr);) {
      if (connect && sc == nullptr && d->connect(0, handle, &sc) != ncclSuccess) return "connect";
      if (accept && rc == nullptr && d->accept(lc, &rc) != ncclSuccess) return "accept";
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return "";
  };
  // The hello goes out, the listener replies; then 31 s of accept() alone.
  if (auto e = poll_for(std::chrono::milliseconds(300), true, false); !e.empty()) return e;
  if (auto e = poll_for(std::chrono::milliseconds(300), false, true); !e.empty()) return e;
  if (sc != nullptr || rc != nullptr) return "a side completed before the other had replied";
  if (auto e = poll_for(std::chrono::seconds(31), false, true); !e.empty()) return e;
  if (auto e = poll_for(std::chrono::seconds(10), true, true); !e.empty()) return e;
  if (sc == nullptr || rc == nullptr) return fmt::format("connect {}, accept {} after the stall", sc ? "done" : "NULL",
                                                         rc ? "done" : "NULL");
  if (said("dropped") != 0) return "the listener dropped the connection it had replied to";
  d->close_send(sc);
  d->close_recv(rc);
  d->close_listen(lc);
  return d->finalize() == ncclSuccess ? "" : "finalize";
}

TEST(SlowConnector, ThatPollsAgainAfterTheHandshakeLimitStillConnects) {
  WEFT_REQUIRE_VERBS_ENV(env);
  EXPECT_EQ(in_child([&] { return slow_connector(env); }), 0);
}

class DmaBuf : public ::testing::TestWithParam<int> {};

TEST_P(DmaBuf, IsNeverAdvertisedRefusedForGpuMemoryAndRegisteredOnlyWhereTheDeviceTakesIt) {
  WEFT_REQUIRE_VERBS_ENV(env);
  EXPECT_EQ(in_child([&] { return dmabuf(env, GetParam()); }), 0);
}

INSTANTIATE_TEST_SUITE_P(V, DmaBuf, ::testing::Values(8, 11),
                         [](const auto& p) { return "v" + std::to_string(p.param); });

INSTANTIATE_TEST_SUITE_P(V, BadInput, ::testing::Values(8, 11),
                         [](const auto& p) { return "v" + std::to_string(p.param); });

}  // namespace
}  // namespace weft::nccl_net::testing
