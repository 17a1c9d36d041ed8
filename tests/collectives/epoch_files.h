// Plan epochs for the tests (docs/route-plan.md "Plan epochs"): TCP plans on
// ports free on this host, and epoch files written as the watcher writes
// them (PATH.tmp, then rename(2)).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "weft/routing/plan.h"

namespace weft::coll::testing {

// A directory of per-rank epoch files, removed with what is in it.
struct EpochDir {
  std::string path;
  EpochDir() {
    char tmpl[] = "/tmp/weft-epochs-XXXXXX";
    if (::mkdtemp(tmpl)) path = tmpl;
  }
  ~EpochDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(int rank) const { return fmt::format("{}/rank{}.json", path, rank); }
};

// `k` distinct TCP ports that were free a moment ago: bound at once to
// 127.0.0.1 port 0, then released (another process may take one meanwhile:
// then a bind or connect names it).
inline std::vector<uint16_t> free_ports(size_t k) {
  std::vector<int> fds;
  std::vector<uint16_t> ports;
  for (size_t i = 0; i < k; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      if (fd >= 0) ::close(fd);
      break;
    }
    fds.push_back(fd);
    ports.push_back(ntohs(a.sin_port));
  }
  for (int fd : fds) ::close(fd);
  return ports;
}

// A TCP plan of `collective` on n ranks, a flow per directed pair: flow
// s -> d leaves from sports[s * n + d] to dports[d].
inline routing::RoutePlan tcp_plan(int n, const std::string& collective, const std::vector<uint16_t>& dports,
                                   const std::vector<uint16_t>& sports) {
  routing::RoutePlan plan;
  plan.collective = collective;
  plan.topology = "loopback";
  plan.ranks = n;
  for (int s = 0; s < n; ++s) {
    for (int d = 0; d < n; ++d) {
      if (s == d) continue;
      routing::PlanFlow f;
      f.src_rank = s;
      f.dst_rank = d;
      f.src_host = f.dst_host = "localhost";
      f.protocol = "tcp";
      f.sport = sports[static_cast<size_t>(s * n + d)];
      f.dport = dports[static_cast<size_t>(d)];
      plan.flows.push_back(f);
    }
  }
  return plan;
}

// Two TCP plans of `collective` on n ranks on free ports: the same listen
// ports, every flow on another source port in b than in a. ok() is false
// when the host had too few free ports (the caller skips).
struct TwoPlans {
  std::vector<uint16_t> dports, sports_a, sports_b;
  routing::RoutePlan a, b;
  bool ok() const { return !dports.empty(); }
};
inline TwoPlans two_tcp_plans(int n, const std::string& collective) {
  const size_t nn = static_cast<size_t>(n);
  const std::vector<uint16_t> ports = free_ports(nn + 2 * nn * nn);
  TwoPlans t;
  if (ports.size() < nn + 2 * nn * nn) return t;
  t.dports.assign(ports.begin(), ports.begin() + n);
  t.sports_a.assign(ports.begin() + n, ports.begin() + n + n * n);
  t.sports_b.assign(ports.begin() + n + n * n, ports.end());
  t.a = tcp_plan(n, collective, t.dports, t.sports_a);
  t.b = tcp_plan(n, collective, t.dports, t.sports_b);
  return t;
}

inline std::string epoch_json(const std::string& job, uint64_t epoch, const routing::RoutePlan& plan) {
  return fmt::format(R"({{"version": 1, "job": "{}", "epoch": {}, "reason": "test", "plan": {}}})", job, epoch,
                     routing::plan_to_json(plan));
}

// Replaces `path` atomically with `text`, as `weft watch --publish` does.
inline bool publish(const std::string& path, const std::string& text) {
  {
    std::ofstream f(path + ".tmp", std::ios::trunc);
    f << text;
    if (!f) return false;
  }
  return std::rename((path + ".tmp").c_str(), path.c_str()) == 0;
}

}  // namespace weft::coll::testing
