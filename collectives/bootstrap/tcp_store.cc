// The TCP rendezvous store's client (store.h): blocking calls with
// deadlines on one connection, after the handshake that proves the secret
// both ways. The server is tcp_store_server.cc.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "bootstrap/store_wire.h"
#include "bootstrap/tcp_store_server.h"
#include "tcp/socket.h"
#include "weft/collectives/store.h"

namespace weft::coll {

using namespace store_wire;

namespace {

// Reads one reply: status and payload. A length past what the server may
// send (a value, or an error message) means this is not a weft store.
Result<std::pair<uint32_t, std::string>> read_reply(int fd, size_t max_ok, Deadline deadline) {
  char h[kReplyHeader];
  WEFT_RETURN_IF_ERROR(tcp::read_all(fd, h, sizeof h, deadline));
  const uint32_t status = get32(h), len = get32(h + 4);
  if ((status != kOk && status != kError) || len > (status == kOk ? max_ok : kMaxMessage)) {
    return data_loss(fmt::format("a reply of status {} and {} bytes is not the weft store protocol", status, len));
  }
  std::string payload(len, '\0');
  WEFT_RETURN_IF_ERROR(tcp::read_all(fd, payload.data(), payload.size(), deadline));
  return std::make_pair(status, std::move(payload));
}

Status check_sizes(const TcpStoreLimits& limits, size_t key_bytes, size_t value_bytes, std::string_view what,
                   const std::string& key) {
  const std::string why = size_error(limits, key_bytes, value_bytes);
  if (why.empty()) return ok_status();
  return invalid_argument(fmt::format("TCP store {} '{}': {}", what, key.substr(0, 64), why));
}

// An IPv4 literal as it is; a name resolved to its first IPv4 address. A
// name that does not resolve yet is asked again until the deadline: ranks
// start before DNS knows their rendezvous host (a Kubernetes headless
// service lists a pod once it is ready), and a resolver may fail for a
// while (EAI_AGAIN).
Result<std::string> ipv4_of(const std::string& host, Deadline deadline) {
  in_addr a{};
  if (::inet_pton(AF_INET, host.c_str(), &a) == 1) return host;
  // An IPv6 address (bare or in brackets, as in a URL) or a name with IPv6
  // addresses only never resolves to IPv4: said at once, not at the deadline.
  const auto ipv6_only = [&](std::string_view why) {
    return invalid_argument(fmt::format("TCP store host '{}' is {}: the store speaks IPv4 only (give rank 0's IPv4 "
                                        "address, or a name that resolves to one)", host, why));
  };
  if (host.find(':') != std::string::npos) return ipv6_only("an IPv6 address");
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  auto pause = std::chrono::milliseconds(10);
  for (bool said = false;; said = true) {
    addrinfo* res = nullptr;
    const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
    if (rc == 0 && res) {
      char buf[INET_ADDRSTRLEN] = {};
      ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(res->ai_addr)->sin_addr, buf, sizeof buf);
      ::freeaddrinfo(res);
      return std::string(buf);
    }
    if (res) ::freeaddrinfo(res);
    addrinfo any{};
    any.ai_family = AF_UNSPEC;
    any.ai_socktype = SOCK_STREAM;
    addrinfo* res6 = nullptr;
    bool v4 = false, v6 = false;  // v4: it resolves now, so asking again finds it
    if (::getaddrinfo(host.c_str(), nullptr, &any, &res6) == 0) {
      for (const addrinfo* r = res6; r != nullptr; r = r->ai_next) (r->ai_family == AF_INET ? v4 : v6) = true;
    }
    if (res6) ::freeaddrinfo(res6);
    if (v6 && !v4) return ipv6_only("a name with IPv6 addresses only");
    const std::string why = rc != 0 ? ::gai_strerror(rc) : "no address";
    const bool transient = rc == EAI_AGAIN || rc == EAI_NONAME || rc == EAI_NODATA || rc == 0;
    if (!transient) {
      return invalid_argument(fmt::format("TCP store host '{}' is neither an IPv4 address nor a name that resolves "
                                          "to one ({})", host, why));
    }
    if (Clock::now() >= deadline) {
      return deadline_exceeded(fmt::format("TCP store host '{}' is neither an IPv4 address nor a name that resolves "
                                           "to one ({}; asked until the deadline)", host, why));
    }
    if (!said) spdlog::info("weft: TCP store host '{}' does not resolve yet ({}): asking again until the deadline", host, why);
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - Clock::now()));
    pause = std::min(pause * 2, std::chrono::milliseconds(1000));
  }
}

// Where rank 0 serves: WEFT_STORE_BIND if set, else the address the store is
// opened at. A host name other than localhost that this host resolves to
// loopback is the exception: Debian's and Ubuntu's /etc/hosts map the host's
// own name to 127.0.1.1, while the other hosts resolve it (DNS, their own
// /etc/hosts) to its address on the network, where a loopback listener never
// answers and every other rank would retry until its deadline. Then it
// listens on every address, as PyTorch's TCPStore always does.
bool named_loopback(const std::string& name, const std::string& host) {
  return name != host && name != "localhost" && !name.starts_with("localhost.") && host.starts_with("127.");
}

std::string serve_address(const std::string& name, const std::string& host, const std::string& bind) {
  if (!bind.empty()) return bind;
  if (named_loopback(name, host)) {
    spdlog::info("weft: TCP store host '{}' is {} (loopback) here: serving on every address, where the other hosts "
                 "reach it (WEFT_STORE_BIND sets one)", name, host);
    return "0.0.0.0";
  }
  return host;
}

// The servers this process runs, by listening address and port: a second
// store opened to serve a port this process already serves (a communicator
// made while another one on the same store lives) shares that server instead
// of failing to bind it; the server lives while a store holds it.
struct Served {
  std::weak_ptr<TcpStore::Server> server;
  std::string secret;
};
std::mutex g_served_mu;
std::map<std::pair<std::string, uint16_t>, Served> g_served;

Result<std::shared_ptr<TcpStore::Server>> serve_port(const std::string& bind, uint16_t port,
                                                     const TcpStoreOptions& options) {
  std::lock_guard<std::mutex> lock(g_served_mu);
  std::erase_if(g_served, [](const auto& e) { return e.second.server.expired(); });
  if (port != 0) {
    if (auto it = g_served.find({bind, port}); it != g_served.end()) {
      if (it->second.secret != options.secret) {
        const std::string theirs = it->second.secret.empty() ? "without a secret"
                                   : options.secret.empty()  ? "with a secret"
                                                             : "with another secret";
        return invalid_argument(
            fmt::format("serving the TCP store on {}:{}: this process serves it already, {}", bind, port, theirs));
      }
      return it->second.server.lock();
    }
  }
  auto server = std::make_shared<TcpStore::Server>(options);
  WEFT_RETURN_IF_ERROR(server->start(bind, port).with_context("serving the TCP store"));
  g_served[{bind, server->port()}] = Served{server, options.secret};
  return server;
}

}  // namespace

Result<std::unique_ptr<TcpStore>> TcpStore::open(const std::string& name, uint16_t port, bool serve,
                                                 std::chrono::steady_clock::time_point deadline,
                                                 const TcpStoreOptions& options) {
  if (!options.secret.empty() && options.secret.size() < 16) {
    return invalid_argument(fmt::format("TCP store: a secret of {} bytes is too short (16 at least)", options.secret.size()));
  }
  WEFT_ASSIGN_OR_RETURN(const std::string host, ipv4_of(name, deadline));
  std::unique_ptr<TcpStore> s(new TcpStore());
  s->options_ = options;
  s->port_ = port;
  s->named_loopback_ = named_loopback(name, host);
  // Where this client connects: the store's host, except on rank 0 when
  // WEFT_STORE_BIND names one address that is not it (the host's name maps
  // to 127.0.1.1 here and the store listens on the address the others
  // resolve it to): there, where the server listens. So too on the other
  // ranks of rank 0's host, whose name maps to loopback here as there.
  std::string reach = host;
  const std::string& bind_to = options.bind_address;
  if (!serve && s->named_loopback_ && !bind_to.empty() && bind_to != "0.0.0.0") {
    reach = bind_to;
    s->named_loopback_ = false;
  }
  if (serve) {
    const std::string bind = serve_address(name, host, options.bind_address);
    auto server = serve_port(bind, port, options);
    if (!server && !options.bind_address.empty()) return server.status().with_context("WEFT_STORE_BIND");
    if (!server) return server.status();
    s->server_ = std::move(*server);
    s->port_ = s->server_->port();
    if (bind != "0.0.0.0" && bind != host) {
      reach = bind;
      s->named_loopback_ = false;
    }
  }
  const std::string where = name == reach ? fmt::format("{}:{}", reach, s->port_)
                                          : fmt::format("{}:{} ({})", name, s->port_, reach);
  auto fd = tcp::connect_to(tcp::Endpoint{reach, s->port_}, "0.0.0.0", 0, 1 << 16, deadline);
  if (!fd) return fd.status().with_context(fmt::format("TCP store at {} (MASTER_ADDR:MASTER_PORT)", where));
  s->fd_ = fd->release();
  WEFT_RETURN_IF_ERROR(s->handshake(where, deadline).with_context(fmt::format("TCP store at {}", where)));
  return s;
}

std::string TcpStore::local_address() const {
  if (named_loopback_) return "";
  sockaddr_in a{};
  socklen_t len = sizeof a;
  char buf[INET_ADDRSTRLEN] = {};
  if (fd_ < 0 || ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0 || a.sin_family != AF_INET ||
      !::inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf)) {
    return "";
  }
  return buf;
}

// store.h, "Protocol": hello, challenge, the client's proof, the server's.
Status TcpStore::handshake(const std::string& where, Deadline deadline) {
  const std::string& secret = options_.secret;
  const Nonce mine = random_nonce();
  std::string hello;
  put32(hello, kMagic);
  put32(hello, kVersion);
  put32(hello, secret.empty() ? 0 : kFlagSecret);
  hello += bytes(mine);
  WEFT_RETURN_IF_ERROR(tcp::write_all(fd_, hello.data(), hello.size(), deadline));
  WEFT_ASSIGN_OR_RETURN(auto challenge, read_reply(fd_, kChallengeBytes, deadline));
  if (challenge.first == kError) return permission_denied(fmt::format("refused: {}", challenge.second));
  if (challenge.second.size() != kChallengeBytes) return data_loss("a handshake that is not the weft store protocol");
  Nonce theirs{};
  std::memcpy(theirs.data(), challenge.second.data() + 4, kNonceBytes);
  const Proof proof = client_proof(secret, theirs, mine);
  WEFT_RETURN_IF_ERROR(tcp::write_all(fd_, proof.data(), proof.size(), deadline));
  WEFT_ASSIGN_OR_RETURN(auto welcome, read_reply(fd_, kProofBytes, deadline));
  if (welcome.first == kError) return permission_denied(fmt::format("refused: {}", welcome.second));
  if (welcome.second.size() != kProofBytes) return data_loss("a handshake that is not the weft store protocol");
  if (!secret.empty() && !proofs_equal(server_proof(secret, mine, theirs), welcome.second.data())) {
    return permission_denied(fmt::format("the process serving {} does not know the secret (another program on "
                                         "that port?)", where));
  }
  return ok_status();
}

TcpStore::~TcpStore() {
  if (fd_ >= 0) ::close(fd_);
}

TcpStoreCounters TcpStore::counters() const { return server_ ? server_->counters() : TcpStoreCounters{}; }

// One request and its reply. A failure part-way leaves the connection out
// of step (a late reply would answer the next request): it is closed.
Result<std::string> TcpStore::exchange(const std::string& request, const std::string& what, Deadline deadline) {
  if (fd_ < 0) return unavailable(fmt::format("TCP store {}: the connection was closed after an earlier failure", what));
  Status s = tcp::write_all(fd_, request.data(), request.size(), deadline);
  Result<std::pair<uint32_t, std::string>> r = s ? read_reply(fd_, options_.limits.max_value_bytes, deadline)
                                                 : Result<std::pair<uint32_t, std::string>>(s);
  if (!r) {
    ::close(fd_);
    fd_ = -1;
    return r.status().with_context(fmt::format("TCP store {}", what));
  }
  if (r->first == kError) return failed_precondition(fmt::format("TCP store {}: {}", what, r->second));
  return std::move(r->second);
}

Status TcpStore::set(const std::string& key, const std::string& value) {
  return set_by(key, value, Clock::now() + std::chrono::seconds(60));
}

Status TcpStore::set_by(const std::string& key, const std::string& value, std::chrono::steady_clock::time_point deadline) {
  WEFT_RETURN_IF_ERROR(check_sizes(options_.limits, key.size(), value.size(), "set", key));
  std::lock_guard<std::mutex> l(mu_);
  std::string req;
  put32(req, kSet);
  put32(req, static_cast<uint32_t>(key.size()));
  put32(req, static_cast<uint32_t>(value.size()));
  req += key;
  req += value;
  return exchange(req, fmt::format("set '{}'", key), deadline).status();
}

Result<std::string> TcpStore::get(const std::string& key, std::chrono::steady_clock::time_point deadline) {
  WEFT_RETURN_IF_ERROR(check_sizes(options_.limits, key.size(), 0, "get", key));
  std::lock_guard<std::mutex> l(mu_);
  std::string req;
  put32(req, kGet);
  put32(req, static_cast<uint32_t>(key.size()));
  put32(req, 0);
  req += key;
  auto v = exchange(req, fmt::format("get '{}'", key), deadline);
  if (!v && v.status().code() == StatusCode::kDeadlineExceeded) {
    return deadline_exceeded(fmt::format("TCP store: key '{}' was not set in time", key));
  }
  return v;
}

}  // namespace weft::coll
