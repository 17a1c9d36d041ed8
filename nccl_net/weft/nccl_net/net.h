// The plugin's state and operations, shared by the v8..v11 tables
// (plugin.cc adapts each version's signatures to these).
//
// One process-wide Net: the RoCE v2 devices it serves (each opened once,
// its protection domain shared by every comm on it), the settings and the
// route plan. NCCL calls a comm from one thread at a time; init, devices and
// listen may come from several, so those take the Net's lock.
//
// What NCCL does not show by default reaches stderr as well: NCCL logs a
// plugin's init failure at INFO and falls back to its own IB transport
// (src/plugin/net.cc, ncclNetPluginInit), and it prints the plugin's WARN
// lines only with NCCL_DEBUG=WARN or more. So an init failure, and the
// first QP of each kind that falls back from the plan, is also one line on
// stderr ("weft nccl_net: ..."), once per cause in the process.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "weft/common/status.h"
#include "weft/nccl_net/abi.h"
#include "weft/routing/plan.h"
#include "weft/verbs/device.h"

namespace weft::nccl_net {

// From the environment, read at init:
//   WEFT_NCCL_DEVICES  comma-separated device names ("" = every device with
//                      an active port and a RoCE v2 IPv4 GID)
//   WEFT_NCCL_QPS      QPs per connection, 1..16 (default 1); each QP is its
//                      own flow with its own planned port
//   WEFT_PLAN          a route plan (docs/route-plan.md) with per-QP flows
struct Settings {
  std::vector<std::string> devices;
  int qps = 1;
  std::string plan_path;
};
Result<Settings> settings_from_env();

struct NetDevice {
  std::unique_ptr<verbs::Device> dev;
  std::string pci_path;  // "" when the device has no PCI parent (rxe)
  std::uint64_t guid = 0;
  int speed_mbps = 0;
  int max_qp = 0;
  std::uint32_t ipv4 = 0;  // of the chosen GID, host order
  // The device takes dma-buf registrations (ibv_reg_dmabuf_mr(3)): probed
  // once at init; regMrDmaBuf of a dma-buf works only then. ptrSupport
  // never has NCCL_PTR_DMABUF (docs/nccl.md, regMrDmaBuf: NCCL would then
  // receive into GPU memory, which needs an iflush this plugin does not post).
  bool dmabuf = false;
  std::string dmabuf_refusal;  // why not, when it does not
};

struct Counters {
  std::atomic<std::uint64_t> planned{0};      // QPs given their planned port
  std::atomic<std::uint64_t> unplanned{0};    // QPs a loaded plan did not list
  std::atomic<std::uint64_t> unapplicable{0}; // plan entries that could not be applied
  std::atomic<std::uint64_t> errors{0};       // calls that returned an error
};

// Counts the objects of this plugin that NCCL holds: comms, listen comms,
// memory handles and connects in progress each carry a Held member.
class Held {
 public:
  Held() noexcept;
  Held(const Held&) noexcept;
  Held& operator=(const Held&) noexcept { return *this; }
  ~Held();
  static std::int64_t count() noexcept;
};

// A process-wide T, made on first use and deleted when the library is
// unloaded (NCCL dlclose()s its plugin once its last communicator is gone)
// or the process exits -- unless NCCL still holds something of the plugin's
// (Held::count() > 0), when it is left alone. A process that exits without
// ncclCommDestroy runs the library's destructors under NCCL's running proxy
// thread (exit(3) stops no thread), which may be polling a request at that
// moment. NCCL's own IB transport never frees its devices.
// Left alone, every call stays valid until the process is gone, and the
// kernel closes the devices (and a connect that NCCL gave up without
// finalizing its context) with it.
template <typename T>
class Lasting {
 public:
  T& get() { return *p_; }
  Lasting() = default;
  Lasting(const Lasting&) = delete;
  Lasting& operator=(const Lasting&) = delete;
  ~Lasting() {
    if (Held::count() == 0) delete p_;
  }

 private:
  T* p_ = new T;
};

class Net {
 public:
  static Net& get();
  // Opens the devices and loads the plan once; later calls only check.
  ncclResult_t init(ncclDebugLogger_t log);
  int device_count() const { return static_cast<int>(devices_.size()); }
  // nullptr (and a log line) when dev is out of range or init did not run.
  NetDevice* device(int dev);
  const Settings& settings() const { return settings_; }
  const routing::RoutePlan* plan() const { return plan_ ? &*plan_ : nullptr; }
  std::uint32_t next_serial(int dev) { return serials_[static_cast<std::size_t>(dev)]++; }
  Counters& counters() { return counters_; }

  void warn(const std::string& msg);
  void info(const std::string& msg);
  // warn(msg), and "weft nccl_net: msg" on stderr the first time `cause`
  // is alerted in this process (a repeat goes to NCCL's logger only).
  void alert(const std::string& cause, const std::string& msg);
  // Logs `s` (prefixed by `call`), counts it and maps it to an ncclResult_t.
  ncclResult_t fail(const char* call, const Status& s);

 private:
  // Opens the devices and loads the plan (init, under mu_).
  Status open_all();
  // warn/info: through NCCL's logger once init has one, else spdlog.
  void emit(ncclDebugLogLevel level, const std::string& msg);
  // "weft nccl_net: msg" on stderr, the first time `cause` comes.
  void stderr_once(const std::string& cause, const std::string& msg);

  std::mutex mu_;
  std::atomic<bool> ready_{false};
  // Set by every init (under mu_), read by any thread that logs, which
  // takes no lock: NCCL may call init from one thread while its proxy
  // thread's calls log.
  std::atomic<ncclDebugLogger_t> log_{nullptr};
  std::mutex alerted_mu_;  // not mu_: init alerts while it holds mu_
  std::set<std::string> alerted_;
  Settings settings_;
  std::optional<routing::RoutePlan> plan_;
  std::vector<NetDevice> devices_;
  std::unique_ptr<std::atomic<std::uint32_t>[]> serials_;
  Counters counters_;
};

}  // namespace weft::nccl_net
