// weft agent: the per-host daemon (reflector + authenticated control plane).
#include <arpa/inet.h>
#include <signal.h>

#include <charconv>
#include <string_view>
#include <thread>

#include <fmt/format.h>

#include <spdlog/spdlog.h>

#include "agent_config.h"
#include "agent_service.h"
#include "cli_common.h"
#include "weft/agent/agent.h"

namespace weft::cli {
namespace {

struct AgentArgs {
  std::string listen;  // default: the --ip address, port 7400
  double max_rate = 100000;
  std::string secret_file;
  std::string ip;
  std::string name;
  uint16_t udp_port = 4791;
  uint16_t tcp_port = 0;
  int probe_dscp = 8;
  int reply_dscp = 4;
  // The service (agent_service.h) and its configuration file (agent_config.h).
  std::string config;
  std::string metrics;
  std::string log_level = "info";
  double drain_timeout = 30;
  bool print_config = false;
};

// SIGHUP: the arguments as the command line and the re-read file give them,
// and the keys that changed.
using Reread = std::function<Result<std::pair<AgentArgs, std::set<std::string>>>()>;

Result<uint32_t> ipv4(const std::string& s, const char* what) {
  in_addr a{};
  if (::inet_pton(AF_INET, s.c_str(), &a) != 1) return invalid_argument(fmt::format("{} '{}' is not an IPv4 address", what, s));
  return ntohl(a.s_addr);
}

int run_agent(const AgentArgs& a, const Reread& reread) {
  if (Status st = set_log_level(a.log_level); !st) return fail(st);
  if (a.secret_file.empty()) return fail(invalid_argument("give --secret-file (or secret-file in the --config file)"));
  agent::AgentConfig cfg;
  if (a.ip.empty() && a.listen.empty()) return fail(invalid_argument("give --ip: the host address probes are sent from"));
  // The control port listens on the fabric address, not on every interface,
  // unless --listen says otherwise.
  const std::string listen = a.listen.empty() ? a.ip + ":7400" : a.listen;
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos) return fail(invalid_argument(fmt::format("--listen '{}' is not ADDR:PORT", listen)));
  cfg.listen_ip = listen.substr(0, colon);
  if (auto addr = ipv4(cfg.listen_ip, "--listen address"); !addr) return fail(addr.status());
  // The whole rest must be the port: atoi read ":abc" as port 0 (any port).
  const std::string_view digits = std::string_view(listen).substr(colon + 1);
  unsigned port = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || port > 65535) {
    return fail(invalid_argument(fmt::format("--listen port '{}' in '{}' is not a number 0..65535", digits, listen)));
  }
  cfg.listen_port = static_cast<uint16_t>(port);
  auto secret = agent::load_secret(a.secret_file);
  if (!secret) return fail(secret.status());
  cfg.secret = *secret;
  const std::string ip = a.ip.empty() ? cfg.listen_ip : a.ip;
  auto probe_ip = ipv4(ip, "--ip");
  if (!probe_ip) return fail(probe_ip.status());
  if (*probe_ip == 0) return fail(invalid_argument("give --ip: the host address probes are sent from"));
  if (a.probe_dscp < 0 || a.probe_dscp > 63 || a.reply_dscp < 0 || a.reply_dscp > 63) {
    return fail(invalid_argument("DSCP values are 0..63 (6 bits)"));
  }
  // Port 0 would bind the reflector to an ephemeral port that no controller
  // knows: every probe to --dport would go unanswered. (Tests that want any
  // free port start an Agent or a Reflector in-process with udp_port 0.)
  // Checked here, after the file, so its value is refused too.
  if (a.udp_port == 0) {
    return fail(invalid_argument("--udp-port must be the port probes arrive at (4791 for RoCEv2), not 0"));
  }
  cfg.probe_ip = *probe_ip;
  cfg.max_rate_pps = a.max_rate;
  cfg.name = a.name;
  cfg.reflector.bind_ip = *probe_ip;
  cfg.reflector.udp_port = a.udp_port;
  cfg.reflector.tcp_port = a.tcp_port;
  cfg.reflector.probe_dscp = static_cast<uint8_t>(a.probe_dscp);
  cfg.reflector.reply_dscp = static_cast<uint8_t>(a.reply_dscp);
  // NaN passes CLI::Range (every comparison with it is false), and a file's
  // value is not checked by the flag at all.
  if (!(a.drain_timeout >= 0 && a.drain_timeout <= 3600)) {
    return fail(invalid_argument(fmt::format("drain timeout must be 0..3600 s, got {}", a.drain_timeout)));
  }
  if (a.print_config) {
    fmt::print("{}", describe_config(cfg, {a.metrics, a.log_level, a.drain_timeout}));
    return 0;
  }

  // SIGHUP, SIGINT and SIGTERM are handled on a dedicated thread (sigtimedwait(2)):
  // block them here, threads inherit the mask.
  SignalLoop::block_signals();
  agent::Agent ag(cfg);
  if (Status st = ag.start(); !st) return fail(st);
  std::unique_ptr<agent::MetricsServer> metrics;
  if (!a.metrics.empty()) {
    auto m = start_metrics(a.metrics, ag);
    if (!m) return fail(m.status());
    metrics = std::move(*m);
    spdlog::info("metrics on http://{}:{}/metrics", a.metrics.substr(0, a.metrics.rfind(':')), metrics->port());
  }
  fmt::print(stderr, "weft agent {}: control on {}:{}, reflector on udp {}{}\n", a.name.empty() ? ip : a.name,
             cfg.listen_ip, ag.control_port(), a.udp_port, a.tcp_port ? fmt::format(", tcp-syn capture on {}", a.tcp_port) : "");
  auto reload = [&] {
    auto next = reread();
    if (!next) return spdlog::error("reload: {}; the running configuration stays", next.status().message());
    auto new_secret = agent::load_secret(next->first.secret_file);
    if (!new_secret) return spdlog::error("reload: {}; the running configuration stays", new_secret.status().message());
    const double rate = next->first.max_rate;
    if (!(rate > 0 && rate <= 1e9)) {
      return spdlog::error("reload: max-rate {} is not a rate in (0, 1e9] probes/s; the running configuration stays",
                           rate);
    }
    agent::AgentConfig live = cfg;
    live.secret = *new_secret;
    live.max_rate_pps = rate;
    ag.reload(live);
    for (const std::string& key : next->second) {
      if (key != "secret-file" && key != "log-level" && key != "max-rate") {
        spdlog::warn("reload: '{}' changed; it takes a restart", key);
      }
    }
    // Logged at the old level: a quieter new one would hide it.
    spdlog::info("reload: secret, max rate ({} probes/s) and log level ({}) applied", rate, next->first.log_level);
    if (Status st = set_log_level(next->first.log_level); !st) spdlog::error("reload: {}", st.message());
  };
  {
    SignalLoop signals(ag, reload, std::chrono::milliseconds(static_cast<int64_t>(a.drain_timeout * 1000)));
    ag.run();  // returns once a signal stopped or drained the agent
  }
  spdlog::info("stopped");
  return 0;
}

}  // namespace

void register_agent(CLI::App& app, Registry& reg) {
  static AgentArgs a;
  auto* cmd = app.add_subcommand(
      "agent",
      "Run the per-host probe agent: a reflector that answers probes with the DSCP\n"
      "they arrived with, and a control plane (TCP, shared-secret challenge-response)\n"
      "through which `weft probe` starts sweeps from this host.\n"
      "Capabilities: none for UDP probes (dscp and ttl methods); CAP_NET_RAW for\n"
      "--tcp-port (libpcap capture of TCP SYN probes) and the tcp-syn backend.\n"
      "Example: weft agent --secret-file /etc/weft/secret --ip 10.0.1.1");
  cmd->add_option("--listen", a.listen,
                  "Control-plane address ADDR:PORT (default: the --ip address, port 7400; 0.0.0.0 listens on "
                  "every interface)");
  cmd->add_option("--secret-file", a.secret_file, "Shared secret (>= 16 bytes, mode 600); required");
  cmd->add_option("--ip", a.ip, "This host's address on the fabric (probes leave from it)");
  cmd->add_option("--max-rate", a.max_rate,
                  "Most probes/s a campaign may send from this host; faster or unpaced (0) requests are capped to it")
      ->capture_default_str()
      ->check(CLI::Validator([](std::string& v) {
        double x = 0;
        const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
        const bool ok = ec == std::errc() && end == v.data() + v.size() && x > 0 && x <= 1e9;
        return ok ? std::string() : fmt::format("{} is not a rate in (0, 1e9] probes/s", v);
      }, "RATE"));
  cmd->add_option("--name", a.name, "Name reported to the controller (default: hostname)");
  cmd->add_option("--udp-port", a.udp_port, "UDP port probes arrive at (RoCEv2: 4791; not 0)")->capture_default_str();
  cmd->add_option("--tcp-port", a.tcp_port, "Capture TCP SYN probes to this data port (0 = off)")->capture_default_str();
  cmd->add_option("--probe-dscp", a.probe_dscp, "X: spine N rewrites DSCP X to X+N")
      ->capture_default_str()->check(CLI::Range(0, 63));
  cmd->add_option("--reply-dscp", a.reply_dscp, "DSCP of answers (must not be X)")
      ->capture_default_str()->check(CLI::Range(0, 63));
  cmd->add_option("--config", a.config, "TOML file of these flags without '--' (the command line overrides it)");
  cmd->add_option("--metrics", a.metrics, "Serve Prometheus metrics on ADDR:PORT (default: off)")
      ->check(CLI::Validator([](std::string& v) {
        auto ep = parse_address_port(v, "--metrics");
        return ep ? std::string() : ep.status().message();
      }, "ADDR:PORT"));
  cmd->add_option("--log-level", a.log_level, "Least severe messages logged")
      ->capture_default_str()->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  cmd->add_option("--drain-timeout", a.drain_timeout, "SIGTERM: seconds running sweeps may take before they are cancelled")
      ->capture_default_str()->check(CLI::Range(0.0, 3600.0));
  cmd->add_flag("--print-config", a.print_config, "Print the effective configuration and exit");
  static AgentArgs from_cli;          // the command line's values, before the file
  static std::set<std::string> given;  // the flags the command line gave
  cmd->callback([&reg, cmd] {
    reg.run = [cmd] {
      given = keys_given(*cmd);
      from_cli = a;
      if (!a.config.empty()) {
        if (Status st = apply_config_file(*cmd, a.config, given); !st) return fail(st);
      }
      return run_agent(a, [cmd]() -> Result<std::pair<AgentArgs, std::set<std::string>>> {
        const AgentArgs running = a;
        auto changed = reapply_config_file(*cmd, a.config, given, [] { a = from_cli; });
        std::pair<AgentArgs, std::set<std::string>> next{a, {}};
        a = running;
        if (!changed) return changed.status();
        next.second = *changed;
        return next;
      });
    };
  });
}

}  // namespace weft::cli
