// The service side of `weft agent` (agent_service.h).
#include "agent_service.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "agent_config.h"
#include "weft/agent/metrics.h"

namespace weft::cli {
namespace {

// sd-daemon(3): a "<N>" prefix gives journald the line's syslog priority.
class SyslogPriority : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& m, const std::tm&, spdlog::memory_buf_t& dest) override {
    // trace, debug -> 7 (debug); info -> 6; warn -> 4; err -> 3; critical -> 2.
    static constexpr char kPriority[] = {'7', '7', '6', '4', '3', '2', '6'};
    const char p[] = {'<', kPriority[static_cast<int>(m.level)], '>'};
    dest.append(p, p + 3);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<SyslogPriority>(); }
};

// systemd sets JOURNAL_STREAM=DEV:INODE of the stream it connects stderr to
// (systemd.exec(5)); a match means stderr still goes there.
bool stderr_is_journal() {
  const char* js = std::getenv("JOURNAL_STREAM");
  struct stat st{};
  if (!js || ::fstat(STDERR_FILENO, &st) != 0) return false;
  return fmt::format("{}:{}", st.st_dev, st.st_ino) == js;
}

}  // namespace

Status set_log_level(const std::string& level) {
  const auto lv = spdlog::level::from_str(level);
  // from_str turns any unknown name into "off"
  if (lv == spdlog::level::off && level != "off") {
    return invalid_argument(fmt::format("log level '{}' is not one of trace, debug, info, warn, error, critical, off",
                                        level));
  }
  static const bool journal = stderr_is_journal();
  static std::once_flag once;
  std::call_once(once, [] {
    auto logger = spdlog::stderr_color_mt("weft");
    auto f = std::make_unique<spdlog::pattern_formatter>();
    if (journal) {
      f->add_flag<SyslogPriority>('*').set_pattern("%*%v");
    } else {
      f->set_pattern("%Y-%m-%dT%H:%M:%S.%e [%l] %v");
    }
    logger->set_formatter(std::move(f));
    spdlog::set_default_logger(logger);
  });
  spdlog::set_level(lv);
  return ok_status();
}

Result<std::unique_ptr<agent::MetricsServer>> start_metrics(const std::string& address, const agent::Agent& ag) {
  WEFT_ASSIGN_OR_RETURN(auto ep, parse_address_port(address, "--metrics"));
  agent::MetricsServerConfig mc;
  mc.ip = ep.first;
  mc.port = ep.second;
  return agent::MetricsServer::start(mc, [&ag] { return agent::render_metrics(ag.snapshot()); });
}

struct SignalLoop::Impl {
  std::atomic<bool> done{false};
  std::thread thread;
};

void SignalLoop::block_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGHUP, SIGINT, SIGTERM}) sigaddset(&set, s);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

SignalLoop::SignalLoop(agent::Agent& ag, std::function<void()> reload, std::chrono::milliseconds grace)
    : impl_(std::make_unique<Impl>()) {
  impl_->thread = std::thread([this, &ag, reload = std::move(reload), grace] {
    sigset_t set;
    sigemptyset(&set);
    for (int s : {SIGHUP, SIGINT, SIGTERM}) sigaddset(&set, s);
    bool draining = false;
    const timespec tick{0, 100'000'000};  // to notice that the agent stopped
    while (!impl_->done.load()) {
      const int s = sigtimedwait(&set, nullptr, &tick);
      if (s == SIGHUP) {
        reload();
      } else if ((s == SIGTERM || s == SIGINT) && !draining) {
        spdlog::info("{}: draining (open sessions and running sweeps get {:.1f} s); another signal stops at once", s == SIGINT ? "SIGINT" : "SIGTERM",
                     grace.count() / 1000.0);
        draining = true;
        ag.drain(grace);
      } else if (s == SIGTERM || s == SIGINT) {
        spdlog::warn("{} while draining: stopping now", s == SIGINT ? "SIGINT" : "SIGTERM");
        ag.stop();
      }
    }
  });
}

SignalLoop::~SignalLoop() {
  impl_->done.store(true);
  impl_->thread.join();
}

}  // namespace weft::cli
