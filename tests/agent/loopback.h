// Test harness for the control plane on loopback: in-process agents, a
// blocking control client that speaks the sealed channel, and a
// man-in-the-middle TCP proxy that can inject, replay, swap, cut and alter
// frames between a controller and an agent.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/agent/agent.h"
#include "weft/agent/channel.h"
#include "weft/agent/controller.h"

namespace weft::agent::testing {

const probe::MacKey& test_secret();

// Loopback addresses of this process's own, 127.X.Y.k with X.Y from the pid:
// tests that run in parallel (ctest -j) never share a source address and port.
std::string own_ip(int k);
uint32_t own_ip_u32(int k);

// Two hosts x 8 source ports at 2000/s, answers within 100 ms, two results
// frames per sender: a campaign of well under a second (sports 50000..50007).
ProbeRunConfig quick_campaign();

// A UDP port free on 127.0.0.1 and 127.0.0.2 a moment ago (for the reflectors).
uint16_t free_udp_port();

// An agent on `ip` (a loopback address), control port chosen by the kernel,
// running on its own thread until destroyed.
class LoopbackAgent {
 public:
  static std::unique_ptr<LoopbackAgent> start(const std::string& ip, uint16_t udp_port,
                                              const std::function<void(AgentConfig&)>& tweak = {});
  ~LoopbackAgent();
  Agent& agent() { return *agent_; }
  uint16_t port() const { return agent_->control_port(); }
  const std::string& ip() const { return ip_; }
  uint64_t rejected(ControlReject r) const { return agent_->counters().rejected[static_cast<size_t>(r)]; }

 private:
  std::string ip_;
  std::unique_ptr<Agent> agent_;
  std::thread thread_;
};

// A blocking control client with 5 s timeouts, from `source` if given.
class Client {
 public:
  Client(const std::string& ip, uint16_t port, const std::string& source = "");
  ~Client();
  bool connected() const { return fd_ >= 0; }
  bool send_raw(const std::string& bytes);
  bool send_plain(const nlohmann::json& j);  // a pre-authentication frame
  bool send(const nlohmann::json& j);        // sealed once authenticated
  bool send_text(const std::string& text);   // any bytes as a frame body, sealed once authenticated
  // The next frame's JSON (opened once authenticated), or discarded on EOF,
  // timeout or a frame that fails its seal.
  nlohmann::json read();
  // Handshake as a controller of `version`, then (version 2) the host list.
  bool authenticate(const probe::MacKey& secret, const std::vector<uint32_t>& hosts, int version = kControlVersion);
  // The agent's hello (read once, then remembered).
  nlohmann::json hello();
  bool closed_by_peer();
  // Whether the peer closes within `ms` (no data arrives meanwhile).
  bool closed_within(int ms);
  // How long a send may block (5 s by default); a send that times out may
  // leave a frame cut on the wire.
  void set_send_timeout(int ms);

 private:
  bool read_n(uint8_t* p, size_t n);
  int fd_ = -1;
  nlohmann::json hello_;
  std::unique_ptr<Sealer> sealer_;
  std::unique_ptr<Opener> opener_;
};

// A `weft agent` process (the build's binary) on `ip` with the test secret,
// plus `extra` arguments; killed and reaped on destruction.
class AgentProcess {
 public:
  AgentProcess(const std::string& dir, const std::string& ip, uint16_t udp_port, std::vector<std::string> extra);
  ~AgentProcess();
  pid_t pid() const { return pid_; }
  uint16_t port() const { return port_; }  // 0: it did not start (see log())
  std::string log() const;

 private:
  std::string log_;
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

std::string slurp(const std::string& path);

enum class Toward { kAgent, kController };

// What the proxy does with one frame: send these byte strings instead, then
// (cut) close both connections.
struct Action {
  std::vector<std::string> send;
  bool cut = false;
};

// Forwards whole frames between a controller and the agent at ip:port, each
// through hook(direction, index of the frame in that direction, frame bytes).
// Calls to the hook are serialised.
class MitmProxy {
 public:
  using Hook = std::function<Action(Toward, int, const std::string&)>;
  // Listens on listen_ip:listen_port (port 0: any).
  MitmProxy(const std::string& agent_ip, uint16_t agent_port, Hook hook, const std::string& listen_ip = "127.0.0.1",
            uint16_t listen_port = 0);
  ~MitmProxy();
  uint16_t port() const { return port_; }

 private:
  void accept_loop();
  void pump(int from, int to, Toward dir);
  std::string agent_ip_;
  uint16_t agent_port_;
  Hook hook_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::mutex mu_;
  std::vector<int> fds_;
  std::vector<std::thread> threads_;
  std::thread acceptor_;
  bool stopping_ = false;
};

// What an attacker does to one frame (the first of the type it waits for).
enum class Tamper {
  kForged,            // inject a frame with a random tag before it: a campaign to a real host, or a result
  kPlaintext,         // inject an unsealed campaign frame before it
  kReplay,            // send it twice
  kSwap,              // hold it back and send it after the next frame of its direction
  kShortenRefit,      // cut 5 bytes off its end and fix the length
  kShortenBelowSeal,  // cut its body to 20 bytes (shorter than the seal) and fix the length
  kCutMidFrame,       // send half of it, then close both connections
};
// The frames the attacker sends in place of `f`; `held` carries a frame to the
// next one of the same direction for a swap.
Action tamper(Tamper kind, Toward toward, const std::string& f, std::optional<std::string>& held);

// The JSON of a frame as the proxy sees it (sealed frames carry plain JSON
// after the seal); null when it does not parse.
nlohmann::json frame_json(const std::string& frame, bool sealed);
// A frame that looks sealed but whose tag is random: what an attacker without
// the session key can build.
std::string forged_frame(const nlohmann::json& j, uint64_t counter);

}  // namespace weft::agent::testing
