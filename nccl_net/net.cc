#include "weft/nccl_net/net.h"

#include <infiniband/verbs.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "weft/nccl_net/ports.h"
#include "weft/verbs/handle.h"

namespace weft::nccl_net {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// ibv_query_port(3): active_speed is a per-lane rate code, active_width a lane-count code.
int port_speed_mbps(const ibv_port_attr& a) {
  int lane = 0;
  switch (a.active_speed) {
    case 1: lane = 2500; break;
    case 2: lane = 5000; break;
    case 4: case 8: lane = 10000; break;
    case 16: lane = 14000; break;
    case 32: lane = 25000; break;
    case 64: lane = 50000; break;
    case 128: lane = 100000; break;
    default: lane = 10000; break;
  }
  int width = 1;
  switch (a.active_width) {
    case 1: width = 1; break;
    case 2: width = 4; break;
    case 4: width = 8; break;
    case 8: width = 12; break;
    case 16: width = 2; break;
    default: width = 1; break;
  }
  return lane * width;
}

// Whether the device takes dma-buf registrations, probed as NCCL's IB
// transport does (ncclIbDmaBufSupport, src/transport/net_ib.cc): register
// fd -1. A kernel or driver without the verb (rxe in Linux 6.1 has no
// reg_user_mr_dmabuf, so uverbs leaves UVERBS_METHOD_REG_DMABUF_MR out)
// fails with EOPNOTSUPP or EPROTONOSUPPORT; one with it fails on the fd
// (EBADF). Nothing is registered either way. "" when it does.
std::string dmabuf_refusal(ibv_pd* pd) {
  errno = 0;
  ibv_mr* mr = ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0);
  const int err = errno;
  if (mr != nullptr) {
    ibv_dereg_mr(mr);
    return "";
  }
  if (err == EOPNOTSUPP || err == EPROTONOSUPPORT) {
    return fmt::format("ibv_reg_dmabuf_mr: {}", std::strerror(err));
  }
  return "";
}

std::string pci_path_of(const std::string& name) {
  char buf[PATH_MAX];
  std::string link = "/sys/class/infiniband/" + name + "/device";
  if (realpath(link.c_str(), buf) == nullptr) return "";
  return buf;
}

Result<NetDevice> open_device(const std::string& name) {
  verbs::DeviceConfig cfg;
  cfg.name = name;
  WEFT_ASSIGN_OR_RETURN(verbs::Device d, verbs::Device::open(cfg));
  NetDevice nd;
  nd.dev = std::make_unique<verbs::Device>(std::move(d));
  ibv_device_attr attr{};
  if (int rc = ibv_query_device(nd.dev->context(), &attr); rc != 0) {
    return io_error(fmt::format("ibv_query_device({})", name), rc);
  }
  ibv_port_attr pa{};
  if (int rc = ibv_query_port(nd.dev->context(), nd.dev->port().port_num, &pa); rc != 0) {
    return io_error(fmt::format("ibv_query_port({})", name), rc);
  }
  nd.guid = attr.node_guid;
  nd.max_qp = attr.max_qp;
  nd.speed_mbps = port_speed_mbps(pa);
  nd.pci_path = pci_path_of(name);
  nd.dmabuf_refusal = dmabuf_refusal(nd.dev->pd());
  nd.dmabuf = nd.dmabuf_refusal.empty();
  nd.ipv4 = ipv4_value(nd.dev->gid().ipv4());
  if (nd.ipv4 == 0) return failed_precondition(fmt::format("{}: its RoCE v2 GID maps no IPv4 address", name));
  return nd;
}

}  // namespace

Result<Settings> settings_from_env() {
  Settings s;
  std::string devs = env("WEFT_NCCL_DEVICES");
  for (std::size_t pos = 0; pos < devs.size();) {
    std::size_t comma = devs.find(',', pos);
    if (comma == std::string::npos) comma = devs.size();
    if (comma > pos) s.devices.push_back(devs.substr(pos, comma - pos));
    pos = comma + 1;
  }
  if (std::string q = env("WEFT_NCCL_QPS"); !q.empty()) {
    char* end = nullptr;
    long v = std::strtol(q.c_str(), &end, 10);
    if (*end != '\0' || v < 1 || v > 16) {
      return invalid_argument(fmt::format("WEFT_NCCL_QPS={} is not a QP count (1..16)", q));
    }
    s.qps = static_cast<int>(v);
  }
  s.plan_path = env("WEFT_PLAN");
  return s;
}

namespace {
// Constant-initialized and trivially destructible: valid in every
// destructor that runs at unload or exit.
std::atomic<std::int64_t> held_objects{0};
}  // namespace

Held::Held() noexcept { held_objects.fetch_add(1, std::memory_order_relaxed); }
Held::Held(const Held&) noexcept { held_objects.fetch_add(1, std::memory_order_relaxed); }
Held::~Held() { held_objects.fetch_sub(1, std::memory_order_relaxed); }
std::int64_t Held::count() noexcept { return held_objects.load(std::memory_order_acquire); }

Net& Net::get() {
  // Made after every namespace-scope object of the library and before the
  // connects table (connect.cc), so deleted after it: a parked connect's
  // QPs close while their device is still open.
  static Lasting<Net> net;
  return net.get();
}

void Net::emit(ncclDebugLogLevel level, const std::string& msg) {
  if (ncclDebugLogger_t f = log_.load(std::memory_order_acquire)) {
    f(level, NCCL_NET, __FILE__, __LINE__, "NET/weft: %s", msg.c_str());
  } else if (level == NCCL_LOG_WARN) {
    spdlog::warn("NET/weft: {}", msg);
  } else {
    spdlog::info("NET/weft: {}", msg);
  }
}

void Net::warn(const std::string& msg) { emit(NCCL_LOG_WARN, msg); }

void Net::info(const std::string& msg) { emit(NCCL_LOG_INFO, msg); }

void Net::alert(const std::string& cause, const std::string& msg) {
  warn(msg);
  stderr_once(cause, msg + " (the first such line; NCCL_DEBUG=WARN shows each)");
}

void Net::stderr_once(const std::string& cause, const std::string& msg) {
  {
    std::lock_guard lock(alerted_mu_);
    if (!alerted_.insert(cause).second) return;
  }
  // One fputs of the whole line: stderr is unbuffered, and a line written
  // in pieces could interleave with another thread's.
  std::fputs(fmt::format("weft nccl_net: {}\n", msg).c_str(), stderr);
}

ncclResult_t Net::fail(const char* call, const Status& s) {
  counters_.errors++;
  warn(fmt::format("{}: {}", call, s.message()));
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kOutOfRange: return ncclInvalidArgument;
    case StatusCode::kFailedPrecondition: return ncclInvalidUsage;
    case StatusCode::kDataLoss:
    case StatusCode::kUnavailable:
    case StatusCode::kAborted: return ncclRemoteError;
    case StatusCode::kInternal: return ncclInternalError;
    default: return ncclSystemError;
  }
}

ncclResult_t Net::init(ncclDebugLogger_t log) {
  std::lock_guard lock(mu_);
  if (log) log_.store(log, std::memory_order_release);
  if (ready_) return ncclSuccess;
  Status s = open_all();
  if (s.is_ok()) return ncclSuccess;
  // NCCL takes the failure quietly and falls back to its own transport
  // (net.h): this line says so where the job's output goes.
  ncclResult_t r = fail("init", s);
  stderr_once("init: " + s.message(),
              fmt::format("init: {}; NCCL goes on without this plugin (NCCL_NET=weft makes that an error instead: "
                          "docs/nccl.md)",
                          s.message()));
  return r;
}

Status Net::open_all() {
  auto settings = settings_from_env();
  if (!settings) return settings.status();
  settings_ = *settings;
  std::vector<std::string> names = settings_.devices;
  if (names.empty()) {
    auto all = verbs::list_devices();
    if (!all) return all.status();
    for (const auto& d : *all) names.push_back(d.name);
  }
  std::vector<NetDevice> opened;
  for (const auto& name : names) {
    auto d = open_device(name);
    if (d) {
      opened.push_back(std::move(*d));
    } else if (!settings_.devices.empty()) {
      return d.status().with_context("WEFT_NCCL_DEVICES");
    } else {
      info(fmt::format("skipping {}: {}", name, d.status().message()));
    }
  }
  if (opened.empty()) return unavailable("no RDMA device with an active RoCE v2 IPv4 port");
  if (!settings_.plan_path.empty()) {
    auto plan = routing::load_plan(settings_.plan_path);
    if (!plan) return plan.status().with_context("WEFT_PLAN");
    std::set<std::string> mine;
    for (const auto& d : opened) mine.insert(ipv4_string(d.ipv4));
    bool any = false;
    for (const auto& f : plan->flows) any = any || mine.count(f.src_addr) > 0;
    if (!any) {
      std::string list;
      for (const auto& a : mine) list += (list.empty() ? "" : ", ") + a;
      return invalid_argument(fmt::format("WEFT_PLAN {} lists no flow from this host's NICs ({}): a plan for other "
                                          "hosts?",
                                          settings_.plan_path, list));
    }
    plan_ = std::move(*plan);
  }
  devices_ = std::move(opened);
  serials_ = std::make_unique<std::atomic<std::uint32_t>[]>(devices_.size());
  for (const auto& d : devices_) {
    info(fmt::format("{} ({}), {} QP(s) per connection, {}", d.dev->name(), ipv4_string(d.ipv4), settings_.qps,
                     plan_ ? "ports from " + settings_.plan_path : std::string("no plan: flow label 0")));
    if (!d.dmabuf) {
      info(fmt::format("{}: no dma-buf registration ({}): regMrDmaBuf fails", d.dev->name(), d.dmabuf_refusal));
    }
  }
  ready_ = true;
  return ok_status();
}

NetDevice* Net::device(int dev) {
  if (!ready_) {
    warn("called before init");
    return nullptr;
  }
  if (dev < 0 || dev >= device_count()) {
    counters_.errors++;
    warn(fmt::format("device index {} out of range (0..{})", dev, device_count() - 1));
    return nullptr;
  }
  return &devices_[static_cast<std::size_t>(dev)];
}

}  // namespace weft::nccl_net
