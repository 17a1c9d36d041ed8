#include "weft/nccl_net/ports.h"

#include <arpa/inet.h>

#include <fmt/format.h>

#include "weft/verbs/source_port.h"

namespace weft::nccl_net {

PortChoice choose_port(const routing::RoutePlan* plan, const std::string& local_addr, const std::string& remote_addr,
                       int conn, int qp) {
  PortChoice c;
  if (plan == nullptr) return c;
  const routing::PlanFlow* f = plan->find_qp(local_addr, remote_addr, conn, qp);
  c.flow = fmt::format("plan flow {} -> {} conn {} qp {}", local_addr, remote_addr, conn, qp);
  if (f == nullptr) {
    c.kind = PortChoice::kNotInPlan;
    c.why = fmt::format("the plan has no flow {} -> {} conn {} qp {}", local_addr, remote_addr, conn, qp);
    return c;
  }
  c.sport = f->sport;
  if (f->protocol != "udp") {
    c.kind = PortChoice::kUnapplicable;
    c.why = fmt::format("{} is {}, not udp (RoCE v2)", c.flow, f->protocol);
    return c;
  }
  auto label = verbs::flow_label_for_sport(f->sport);
  if (!label) {
    c.kind = PortChoice::kUnapplicable;
    c.why = fmt::format("{}: {}", c.flow, label.status().message());
    return c;
  }
  c.kind = PortChoice::kPlanned;
  c.flow_label = *label;
  return c;
}

std::string ipv4_string(std::uint32_t addr) {
  return fmt::format("{}.{}.{}.{}", addr >> 24, addr >> 16 & 0xFF, addr >> 8 & 0xFF, addr & 0xFF);
}

std::uint32_t ipv4_value(const std::string& dotted) {
  in_addr a{};
  if (inet_pton(AF_INET, dotted.c_str(), &a) != 1) return 0;
  return ntohl(a.s_addr);
}

}  // namespace weft::nccl_net
