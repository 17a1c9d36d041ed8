// weft agent: the per-host daemon (reflector + authenticated control plane).
#include <arpa/inet.h>
#include <signal.h>

#include <charconv>
#include <string_view>
#include <thread>

#include <fmt/format.h>

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
};

Result<uint32_t> ipv4(const std::string& s, const char* what) {
  in_addr a{};
  if (::inet_pton(AF_INET, s.c_str(), &a) != 1) return invalid_argument(fmt::format("{} '{}' is not an IPv4 address", what, s));
  return ntohl(a.s_addr);
}

int run_agent(const AgentArgs& a) {
  agent::AgentConfig cfg;
  if (a.ip.empty() && a.listen.empty()) return fail(invalid_argument("give --ip: the host address probes are sent from"));
  if (!(a.max_rate > 0 && a.max_rate <= 1e9)) {
    return fail(invalid_argument(fmt::format("--max-rate {} is not a rate in (0, 1e9] probes/s", a.max_rate)));
  }
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
  cfg.probe_ip = *probe_ip;
  cfg.max_rate_pps = a.max_rate;
  cfg.name = a.name;
  cfg.reflector.bind_ip = *probe_ip;
  cfg.reflector.udp_port = a.udp_port;
  cfg.reflector.tcp_port = a.tcp_port;
  cfg.reflector.probe_dscp = static_cast<uint8_t>(a.probe_dscp);
  cfg.reflector.reply_dscp = static_cast<uint8_t>(a.reply_dscp);

  // SIGINT/SIGTERM end the daemon cleanly: block them here (threads inherit the
  // mask) and wait for them on a dedicated thread (sigwait(3)).
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  agent::Agent ag(cfg);
  if (Status st = ag.start(); !st) return fail(st);
  fmt::print(stderr, "weft agent {}: control on {}:{}, reflector on udp {}{}\n", a.name.empty() ? ip : a.name,
             cfg.listen_ip, ag.control_port(), a.udp_port, a.tcp_port ? fmt::format(", tcp-syn capture on {}", a.tcp_port) : "");
  std::thread sig([&] {
    int s = 0;
    sigwait(&set, &s);
    ag.stop();
  });
  ag.run();  // returns once the signal thread stopped the agent
  sig.join();
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
  cmd->add_option("--secret-file", a.secret_file, "Shared secret (>= 16 bytes, mode 600)")->required();
  cmd->add_option("--ip", a.ip, "This host's address on the fabric (probes leave from it)");
  cmd->add_option("--max-rate", a.max_rate,
                  "Most probes/s a campaign may send from this host; faster or unpaced (0) requests are capped to it")
      ->capture_default_str();
  cmd->add_option("--name", a.name, "Name reported to the controller (default: hostname)");
  cmd->add_option("--udp-port", a.udp_port, "UDP port probes arrive at (RoCEv2: 4791)")->capture_default_str();
  cmd->add_option("--tcp-port", a.tcp_port, "Capture TCP SYN probes to this data port (0 = off)")->capture_default_str();
  cmd->add_option("--probe-dscp", a.probe_dscp, "X: spine N rewrites DSCP X to X+N")->capture_default_str();
  cmd->add_option("--reply-dscp", a.reply_dscp, "DSCP of answers (must not be X)")->capture_default_str();
  cmd->callback([&reg] { reg.run = [] { return run_agent(a); }; });
}

}  // namespace weft::cli
