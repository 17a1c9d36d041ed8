// The TCP rendezvous store (store.h). The server is a poll(2) loop on a
// background thread; the set of keys is small (a few per rank), so a map and
// a list of waiting gets are enough.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "tcp/socket.h"
#include "weft/collectives/store.h"

namespace weft::coll {

namespace {

enum : uint32_t { kSet = 1, kGet = 2 };
constexpr uint32_t kMaxField = 64 << 20;

struct Client {
  tcp::Fd fd;
  std::string in;  // bytes of a partial request
};

}  // namespace

class TcpStore::Server {
 public:
  Status start(uint16_t port) {
    WEFT_ASSIGN_OR_RETURN(listen_, tcp::listen_on("0.0.0.0", port, nullptr));
    if (::pipe(stop_) != 0) return io_error("pipe", errno);
    thread_ = std::thread([this] { loop(); });
    return Status::ok();
  }
  ~Server() {
    if (thread_.joinable()) {
      char c = 1;
      (void)!::write(stop_[1], &c, 1);
      thread_.join();
    }
    if (stop_[0] >= 0) ::close(stop_[0]);
    if (stop_[1] >= 0) ::close(stop_[1]);
  }

 private:
  static void reply(int fd, const std::string& v) {
    uint32_t h[2] = {0, static_cast<uint32_t>(v.size())};
    std::string out(reinterpret_cast<char*>(h), sizeof h);
    out += v;
    (void)tcp::write_all(fd, out.data(), out.size(), Clock::now() + std::chrono::seconds(10));
  }
  // Handles every complete request in c.in; false if the client sent garbage.
  bool handle(Client& c) {
    for (;;) {
      if (c.in.size() < 12) return true;
      uint32_t h[3];
      std::memcpy(h, c.in.data(), sizeof h);
      if (h[1] > kMaxField || h[2] > kMaxField || (h[0] != kSet && h[0] != kGet)) return false;
      if (c.in.size() < 12 + size_t{h[1]} + h[2]) return true;
      std::string key = c.in.substr(12, h[1]), value = c.in.substr(12 + h[1], h[2]);
      c.in.erase(0, 12 + size_t{h[1]} + h[2]);
      if (h[0] == kSet) {
        kv_[key] = value;
        for (auto it = waiting_.begin(); it != waiting_.end();) {
          if (it->first == key) {
            reply(it->second, value);
            it = waiting_.erase(it);
          } else {
            ++it;
          }
        }
        reply(c.fd.get(), "");
      } else if (auto it = kv_.find(key); it != kv_.end()) {
        reply(c.fd.get(), it->second);
      } else {
        waiting_.emplace_back(key, c.fd.get());
      }
    }
  }
  void loop() {
    for (;;) {
      std::vector<pollfd> pf = {{stop_[0], POLLIN, 0}, {listen_.get(), POLLIN, 0}};
      for (auto& c : clients_) pf.push_back({c.fd.get(), POLLIN, 0});
      if (::poll(pf.data(), pf.size(), -1) < 0 && errno != EINTR) return;
      if (pf[0].revents) return;
      if (pf[1].revents & POLLIN) {
        int fd = ::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) clients_.push_back(Client{tcp::Fd(fd), {}});
      }
      for (size_t i = 2; i < pf.size(); ++i) {
        if (!pf[i].revents) continue;
        Client& c = clients_[i - 2];
        char buf[65536];
        ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) c.in.append(buf, static_cast<size_t>(n));
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) || !handle(c)) {
          const int dead = c.fd.get();
          std::erase_if(waiting_, [dead](const auto& w) { return w.second == dead; });
          c.fd = tcp::Fd();
        }
      }
      std::erase_if(clients_, [](const Client& c) { return !c.fd; });
    }
  }

  tcp::Fd listen_;
  int stop_[2] = {-1, -1};
  std::thread thread_;
  std::vector<Client> clients_;
  std::map<std::string, std::string> kv_;
  std::vector<std::pair<std::string, int>> waiting_;
};

Result<std::unique_ptr<TcpStore>> TcpStore::open(const std::string& host, uint16_t port, bool serve,
                                                 std::chrono::steady_clock::time_point deadline) {
  std::unique_ptr<TcpStore> s(new TcpStore());
  if (serve) {
    s->server_ = std::make_unique<Server>();
    WEFT_RETURN_IF_ERROR(s->server_->start(port).with_context(fmt::format("serving the TCP store on port {}", port)));
  }
  auto fd = tcp::connect_to(tcp::Endpoint{host, port}, "0.0.0.0", 0, 1 << 16, deadline);
  if (!fd) return fd.status().with_context("TCP store (MASTER_ADDR:MASTER_PORT)");
  s->fd_ = fd->release();
  return s;
}

std::string TcpStore::local_address() const {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  char buf[INET_ADDRSTRLEN] = {};
  if (fd_ < 0 || ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0 || a.sin_family != AF_INET ||
      !::inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf)) {
    return "";
  }
  return buf;
}

TcpStore::~TcpStore() {
  if (fd_ >= 0) ::close(fd_);
}

Status TcpStore::set(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> l(mu_);
  uint32_t h[3] = {kSet, static_cast<uint32_t>(key.size()), static_cast<uint32_t>(value.size())};
  std::string req(reinterpret_cast<char*>(h), sizeof h);
  req += key;
  req += value;
  const auto d = Clock::now() + std::chrono::seconds(60);
  WEFT_RETURN_IF_ERROR(tcp::write_all(fd_, req.data(), req.size(), d).with_context("TCP store set"));
  uint32_t r[2];
  return tcp::read_all(fd_, r, sizeof r, d).with_context("TCP store set");
}

Result<std::string> TcpStore::get(const std::string& key, std::chrono::steady_clock::time_point deadline) {
  std::lock_guard<std::mutex> l(mu_);
  uint32_t h[3] = {kGet, static_cast<uint32_t>(key.size()), 0};
  std::string req(reinterpret_cast<char*>(h), sizeof h);
  req += key;
  WEFT_RETURN_IF_ERROR(tcp::write_all(fd_, req.data(), req.size(), deadline).with_context("TCP store get"));
  uint32_t r[2];
  Status s = tcp::read_all(fd_, r, sizeof r, deadline);
  if (!s) {
    // A late answer would desynchronise the connection: drop it.
    ::close(fd_);
    fd_ = -1;
    return s.code() == StatusCode::kDeadlineExceeded
               ? deadline_exceeded(fmt::format("TCP store: key '{}' was not set in time", key))
               : s.with_context("TCP store get");
  }
  std::string v(r[1], '\0');
  WEFT_RETURN_IF_ERROR(tcp::read_all(fd_, v.data(), v.size(), deadline).with_context("TCP store get"));
  return v;
}

}  // namespace weft::coll
