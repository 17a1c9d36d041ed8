// The loopback control-plane harness (loopback.h).
#include "loopback.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace weft::agent::testing {

using nlohmann::json;

namespace {

sockaddr_in addr_of(const std::string& ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  return a;
}

int connect_to(const std::string& ip, uint16_t port, const std::string& source = "") {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (!source.empty()) {
    const sockaddr_in s = addr_of(source, 0);
    ::bind(fd, reinterpret_cast<const sockaddr*>(&s), sizeof s);
  }
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  const sockaddr_in a = addr_of(ip, port);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool read_all(int fd, uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool write_all(int fd, const std::string& b) {
  return ::send(fd, b.data(), b.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(b.size());
}

std::string be32(size_t n) {
  std::string h(4, '\0');
  for (int i = 0; i < 4; ++i) h[static_cast<size_t>(i)] = static_cast<char>((n >> (24 - 8 * i)) & 0xff);
  return h;
}

}  // namespace

const probe::MacKey& test_secret() {
  static const probe::MacKey k = probe::MacKey::from_string("the loopback test's shared secret");
  return k;
}

uint32_t own_ip_u32(int k) {
  const uint32_t pid = static_cast<uint32_t>(::getpid());
  return 127u << 24 | (1 + (pid >> 8) % 254) << 16 | (pid & 0xff) << 8 | static_cast<uint32_t>(k);
}

std::string own_ip(int k) {
  const uint32_t a = own_ip_u32(k);
  return std::to_string(a >> 24) + "." + std::to_string(a >> 16 & 0xff) + "." + std::to_string(a >> 8 & 0xff) + "." +
         std::to_string(a & 0xff);
}

ProbeRunConfig quick_campaign() {
  ProbeRunConfig c;
  c.sport_first = 50000;
  c.sport_count = 8;
  c.port_window = 4;
  c.rate_pps = 2000;
  c.timeout_ms = 100;
  c.retries = 0;
  c.connect_timeout_ms = 3000;
  return c;
}

uint16_t free_udp_port() {
  // Below the ephemeral range (32768..60999) and the campaigns' source ports,
  // and free on both of this process's agent addresses.
  auto bindable = [](const std::string& ip, uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    const sockaddr_in a = addr_of(ip, port);
    const bool ok = ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return ok;
  };
  for (uint32_t i = 0;; ++i) {
    const auto port = static_cast<uint16_t>(20000 + (static_cast<uint32_t>(::getpid()) * 7 + i * 131) % 10000);
    if (bindable(own_ip(1), port) && bindable(own_ip(2), port)) return port;
  }
}

std::unique_ptr<LoopbackAgent> LoopbackAgent::start(const std::string& ip, uint16_t udp_port,
                                                    const std::function<void(AgentConfig&)>& tweak) {
  AgentConfig cfg;
  cfg.name = "agent-" + ip;
  cfg.listen_ip = ip;
  cfg.listen_port = 0;
  in_addr a{};
  ::inet_pton(AF_INET, ip.c_str(), &a);
  cfg.probe_ip = ntohl(a.s_addr);
  cfg.secret = test_secret();
  cfg.reflector.bind_ip = cfg.probe_ip;
  cfg.reflector.udp_port = udp_port;
  if (tweak) tweak(cfg);
  auto la = std::unique_ptr<LoopbackAgent>(new LoopbackAgent);
  la->ip_ = ip;
  la->agent_ = std::make_unique<Agent>(cfg);
  if (Status st = la->agent_->start(); !st) {
    ADD_FAILURE() << "agent on " << ip << ": " << st.to_string();
    return nullptr;
  }
  la->thread_ = std::thread([a = la->agent_.get()] { a->run(); });
  return la;
}

LoopbackAgent::~LoopbackAgent() {
  agent_->stop();
  if (thread_.joinable()) thread_.join();
}

Client::Client(const std::string& ip, uint16_t port, const std::string& source)
    : fd_(connect_to(ip, port, source)) {}

Client::~Client() {
  if (fd_ >= 0) ::close(fd_);
}

bool Client::send_raw(const std::string& bytes) { return write_all(fd_, bytes); }

bool Client::send_plain(const json& j) { return send_raw(frame(j)); }

bool Client::send(const json& j) { return send_text(j.dump()); }

bool Client::send_text(const std::string& text) {
  return send_raw(sealer_ ? sealer_->seal_text(text) : be32(text.size()) + text);
}

bool Client::read_n(uint8_t* p, size_t n) { return read_all(fd_, p, n); }

json Client::read() {
  uint8_t h[4];
  if (!read_n(h, 4)) return json(json::value_t::discarded);
  std::string body(frame_length(h), '\0');
  if (!read_n(reinterpret_cast<uint8_t*>(body.data()), body.size())) return json(json::value_t::discarded);
  if (opener_) {
    ControlReject why{};
    auto text = opener_->open(body, &why);
    if (!text) return json(json::value_t::discarded);
    body = *text;
  }
  return json::parse(body, nullptr, false);
}

bool Client::authenticate(const probe::MacKey& secret, const std::vector<uint32_t>& hosts, int version) {
  const json hello = this->hello();
  if (!hello.is_object() || hello.value("type", "") != "hello") return false;
  const std::string an = hello["nonce"], cn = probe::to_hex(probe::random_bytes(16));
  json auth = {{"type", "auth"}, {"nonce", cn}, {"mac", client_proof(secret, an, cn)}};
  if (version > 1) auth["version"] = version;
  send_plain(auth);
  json ok = read();
  if (!ok.is_object() || ok.value("type", "") != "auth_ok" ||
      !proof_matches(agent_proof(secret, cn, an), ok.value("mac", ""))) {
    return false;
  }
  const SessionKeys k = session_keys(secret, an, cn);
  sealer_ = std::make_unique<Sealer>(k.to_agent, Direction::kToAgent);
  opener_ = std::make_unique<Opener>(k.to_controller, Direction::kToController);
  send(json{{"type", "hosts"}, {"ips", hosts}});
  return read().value("type", "") == "ok";
}

json Client::hello() {
  if (hello_.is_null()) hello_ = read();
  return hello_;
}

bool Client::closed_within(int ms) {
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, ms) != 1) return false;
  uint8_t c;
  return ::recv(fd_, &c, 1, MSG_DONTWAIT) == 0;
}

void Client::set_send_timeout(int ms) {
  timeval tv{ms / 1000, (ms % 1000) * 1000};
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

bool Client::closed_by_peer() {
  uint8_t c;
  return ::recv(fd_, &c, 1, 0) == 0;
}

MitmProxy::MitmProxy(const std::string& agent_ip, uint16_t agent_port, Hook hook, const std::string& listen_ip,
                     uint16_t listen_port)
    : agent_ip_(agent_ip), agent_port_(agent_port), hook_(std::move(hook)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a = addr_of(listen_ip, listen_port);
  ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::listen(listen_fd_, 16);
  socklen_t len = sizeof a;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

MitmProxy::~MitmProxy() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
  }
  acceptor_.join();
  for (auto& t : threads_) t.join();
  for (int fd : fds_) ::close(fd);
  ::close(listen_fd_);
}

void MitmProxy::accept_loop() {
  for (;;) {
    pollfd p{listen_fd_, POLLIN, 0};
    ::poll(&p, 1, 50);
    std::lock_guard lock(mu_);
    if (stopping_) return;
    if (!(p.revents & POLLIN)) continue;
    const int down = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (down < 0) continue;
    const int up = connect_to(agent_ip_, agent_port_);
    if (up < 0) {
      ::close(down);
      continue;
    }
    for (int fd : {down, up}) {  // the pumps block in recv until a shutdown
      timeval tv{0, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
    fds_.push_back(down);
    fds_.push_back(up);
    threads_.emplace_back([this, down, up] { pump(down, up, Toward::kAgent); });
    threads_.emplace_back([this, down, up] { pump(up, down, Toward::kController); });
  }
}

void MitmProxy::pump(int from, int to, Toward dir) {
  for (int index = 0;; ++index) {
    uint8_t h[4];
    std::string f;
    if (read_all(from, h, 4)) {
      f.assign(reinterpret_cast<const char*>(h), 4);
      std::string body(frame_length(h), '\0');
      if (read_all(from, reinterpret_cast<uint8_t*>(body.data()), body.size())) f += body;
      else f.clear();
    }
    if (f.empty()) break;
    Action act;
    {
      std::lock_guard lock(mu_);
      act = hook_(dir, index, f);
    }
    for (const auto& b : act.send) write_all(to, b);
    if (act.cut) break;
  }
  ::shutdown(from, SHUT_RDWR);
  ::shutdown(to, SHUT_RDWR);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

AgentProcess::AgentProcess(const std::string& dir, const std::string& ip, uint16_t udp_port,
                           std::vector<std::string> extra)
    : log_(dir + "/agent.log") {
  const std::string secret = dir + "/secret";
  std::ofstream(secret) << "the loopback test's shared secret\n";  // test_secret()
  ::chmod(secret.c_str(), 0600);
  std::vector<std::string> argv = {std::string(WEFT_BINARY_DIR) + "/weft", "agent", "--secret-file", secret, "--ip",
                                   ip, "--name", "a", "--udp-port", std::to_string(udp_port)};
  argv.insert(argv.end(), extra.begin(), extra.end());
  std::vector<char*> args;  // built before fork(): the child of a threaded process may not allocate
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  pid_ = ::fork();
  if (pid_ == 0) {
    ::dup2(fd, 2);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(fd);
  for (int i = 0; i < 500 && port_ == 0; ++i) {  // up to 10 s: a sanitizer build starts slowly
    const std::string text = slurp(log_);
    if (auto at = text.find("control on " + ip + ":"); at != std::string::npos) {
      port_ = static_cast<uint16_t>(std::stoi(text.substr(at + 12 + ip.size())));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

AgentProcess::~AgentProcess() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  int st = 0;
  ::waitpid(pid_, &st, 0);
}

std::string AgentProcess::log() const { return slurp(log_); }

json frame_json(const std::string& f, bool sealed) {
  const size_t skip = 4 + (sealed ? kSealOverhead : 0);
  if (f.size() < skip) return nullptr;
  json j = json::parse(f.substr(skip), nullptr, false);
  return j.is_discarded() ? json(nullptr) : j;
}

namespace {

uint64_t counter_of(const std::string& f) {
  uint64_t v = 0;
  for (size_t i = 4; i < 12; ++i) v = v << 8 | static_cast<uint8_t>(f[i]);
  return v;
}

std::string reframe(const std::string& body) { return be32(body.size()) + body; }

}  // namespace

Action tamper(Tamper kind, Toward toward, const std::string& f, std::optional<std::string>& held) {
  const std::string body = f.substr(4);
  switch (kind) {
    case Tamper::kForged: {
      json forged;
      if (toward == Toward::kAgent) {  // a campaign to a real host: only the seal stops it
        CampaignCommand c;
        c.run = 99;
        c.nonce = std::string(32, 'e');
        c.plan.targets = {0x7f000002};
        c.plan.sport_first = 40000;
        c.plan.sport_count = 4;
        c.plan.rate_pps = 0;
        forged = encode_campaign(c);
      } else {  // a result for a port outside the campaign
        probe::FlowResult r;
        r.dst_ip = 0x7f000002;
        r.sport = 1234;
        r.sent = 1;
        r.answered = 1;
        r.spine = 7;
        forged = {{"type", "results"}, {"run", frame_json(f, true).value("run", 1)}, {"rows", {encode_flow(r)}}};
      }
      return {{forged_frame(forged, counter_of(f)), f}};
    }
    case Tamper::kPlaintext: {  // the old, unsealed protocol's campaign frame
      CampaignCommand c;
      c.run = 98;
      c.nonce = std::string(32, 'e');
      c.plan.targets = {0x7f000002};
      return {{frame(encode_campaign(c)), f}};
    }
    case Tamper::kReplay: return {{f, f}};
    case Tamper::kSwap: held = f; return {};
    case Tamper::kShortenRefit: return {{reframe(body.substr(0, body.size() - 5))}};
    case Tamper::kShortenBelowSeal: return {{reframe(body.substr(0, 20))}};
    case Tamper::kCutMidFrame: return {{f.substr(0, f.size() / 2)}, true};
  }
  return {};
}

std::string forged_frame(const json& j, uint64_t counter) {
  const std::string text = j.dump();
  std::string out = be32(kSealOverhead + text.size());
  for (int i = 7; i >= 0; --i) out += static_cast<char>((counter >> (8 * i)) & 0xff);
  const auto tag = probe::random_bytes(32);
  out.append(tag.begin(), tag.end());
  return out + text;
}

}  // namespace weft::agent::testing
