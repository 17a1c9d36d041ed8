#include <algorithm>
#include <map>
#include <set>
#include <string_view>
#include <tuple>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "weft/common/file_util.h"
#include "weft/common/json.h"
#include "weft/routing/ecmp.h"
#include "weft/routing/plan.h"

namespace weft::routing {
namespace {

using json = nlohmann::json;

Status bad(const std::string& path, const std::string& what) {
  return data_loss(fmt::format("route plan {}: {}", path, what));
}

template <typename T>
Result<T> field(const json& j, const std::string& path, const char* name) {
  auto it = j.find(name);
  if (it == j.end()) return bad(path + "/" + name, "missing");
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    return bad(path + "/" + name, fmt::format("wrong type ({})", it->type_name()));
  }
}

Result<uint16_t> port(const json& j, const std::string& path, const char* name) {
  WEFT_ASSIGN_OR_RETURN(int64_t v, field<int64_t>(j, path, name));
  if (v < 1 || v > 65535) return bad(path + "/" + name, fmt::format("{} is not a port (1..65535)", v));
  return static_cast<uint16_t>(v);
}

}  // namespace

int PlanFlow::round_in(int step) const {
  for (size_t i = 0; i < steps.size() && i < rounds.size(); ++i) {
    if (steps[i] == step) return rounds[i];
  }
  return 0;
}

const PlanFlow* RoutePlan::find(int src_rank, int dst_rank) const {
  for (const auto& f : flows) {
    if (f.src_rank == src_rank && f.dst_rank == dst_rank) return &f;
  }
  return nullptr;
}

const PlanFlow* RoutePlan::find_qp(const std::string& src_addr, const std::string& dst_addr, int conn,
                                   int qp) const {
  for (const auto& f : flows) {
    if (f.src_addr == src_addr && f.dst_addr == dst_addr && f.conn == conn && f.qp == qp) return &f;
  }
  return nullptr;
}

Result<RoutePlan> parse_plan(const std::string& text) {
  WEFT_ASSIGN_OR_RETURN(json root, parse_json(text, StatusCode::kDataLoss, "route plan"));
  if (!root.is_object()) return bad("/", "not a JSON object");
  RoutePlan p;
  WEFT_ASSIGN_OR_RETURN(p.version, field<int>(root, "", "version"));
  if (p.version != 1) return bad("/version", fmt::format("unsupported version {} (this weft reads 1)", p.version));
  WEFT_ASSIGN_OR_RETURN(p.collective, field<std::string>(root, "", "collective"));
  if (root.contains("topology")) {
      WEFT_ASSIGN_OR_RETURN(p.topology, field<std::string>(root, "", "topology"));
    }
  WEFT_ASSIGN_OR_RETURN(p.ranks, field<int>(root, "", "ranks"));
  if (p.ranks < 1) return bad("/ranks", "must be >= 1");
  auto flows = root.find("flows");
  if (flows == root.end() || !flows->is_array()) return bad("/flows", "missing or not an array");
  std::set<std::tuple<int, int, int, int>> seen;
  std::map<int, uint16_t> dport_of;
  for (size_t i = 0; i < flows->size(); ++i) {
    const json& jf = (*flows)[i];
    const std::string path = fmt::format("/flows/{}", i);
    if (!jf.is_object()) return bad(path, "not an object");
    PlanFlow f;
    WEFT_ASSIGN_OR_RETURN(f.src_rank, field<int>(jf, path, "src_rank"));
    WEFT_ASSIGN_OR_RETURN(f.dst_rank, field<int>(jf, path, "dst_rank"));
    if (f.src_rank < 0 || f.src_rank >= p.ranks) return bad(path + "/src_rank", fmt::format("{} is not a rank of {}", f.src_rank, p.ranks));
    if (f.dst_rank < 0 || f.dst_rank >= p.ranks) return bad(path + "/dst_rank", fmt::format("{} is not a rank of {}", f.dst_rank, p.ranks));
    if (f.src_rank == f.dst_rank) return bad(path, "a flow from a rank to itself");
    for (const char* key : {"conn", "qp"}) {
      if (!jf.contains(key)) continue;
      WEFT_ASSIGN_OR_RETURN(int v, field<int>(jf, path, key));
      if (v < 0) return bad(path + "/" + key, fmt::format("{} is negative", v));
      (std::string_view(key) == "conn" ? f.conn : f.qp) = v;
    }
    if (!seen.emplace(f.src_rank, f.dst_rank, f.conn, f.qp).second) {
      return bad(path, fmt::format("second flow {} -> {} (conn {}, qp {})", f.src_rank, f.dst_rank, f.conn, f.qp));
    }
    for (auto [key, dst] : {std::pair{"src_addr", &f.src_addr}, std::pair{"dst_addr", &f.dst_addr}}) {
      if (jf.contains(key)) {
        WEFT_ASSIGN_OR_RETURN(*dst, field<std::string>(jf, path, key));
      }
    }
    WEFT_ASSIGN_OR_RETURN(f.src_host, field<std::string>(jf, path, "src_host"));
    WEFT_ASSIGN_OR_RETURN(f.dst_host, field<std::string>(jf, path, "dst_host"));
    if (jf.contains("src_nic")) {
      WEFT_ASSIGN_OR_RETURN(f.src_nic, field<std::string>(jf, path, "src_nic"));
    }
    if (jf.contains("dst_nic")) {
      WEFT_ASSIGN_OR_RETURN(f.dst_nic, field<std::string>(jf, path, "dst_nic"));
    }
    WEFT_ASSIGN_OR_RETURN(f.protocol, field<std::string>(jf, path, "protocol"));
    if (f.protocol != "udp" && f.protocol != "tcp") return bad(path + "/protocol", fmt::format("'{}' is not udp or tcp", f.protocol));
    WEFT_ASSIGN_OR_RETURN(f.sport, port(jf, path, "sport"));
    WEFT_ASSIGN_OR_RETURN(f.dport, port(jf, path, "dport"));
    if (jf.contains("dqpn")) {
      // A QPN is 24 bits; 0 and 1 are the special QPs (ecmp.h).
      WEFT_ASSIGN_OR_RETURN(int64_t q, field<int64_t>(jf, path, "dqpn"));
      if (q < kMinDataQpn || q > kMaxQpn) {
        return bad(path + "/dqpn", fmt::format("{} is not a data QP number ({}..{})", q, kMinDataQpn, kMaxQpn));
      }
      if (f.protocol != "udp") {
        return bad(path + "/dqpn", "a destination QP on a tcp flow (QPs are RoCE's: udp flows only)");
      }
      f.dqpn = static_cast<uint32_t>(q);
    }
    if (f.protocol == "tcp") {
      auto [it, fresh] = dport_of.emplace(f.dst_rank, f.dport);
      if (!fresh && it->second != f.dport) {
        return bad(path + "/dport", fmt::format("rank {} listens on {} in another flow, not {}", f.dst_rank, it->second, f.dport));
      }
    }
    WEFT_ASSIGN_OR_RETURN(f.path, field<std::vector<std::string>>(jf, path, "path"));
    if (jf.contains("steps")) {
      WEFT_ASSIGN_OR_RETURN(f.steps, field<std::vector<int>>(jf, path, "steps"));
    }
    if (jf.contains("rounds")) {
      WEFT_ASSIGN_OR_RETURN(f.rounds, field<std::vector<int>>(jf, path, "rounds"));
      if (f.rounds.size() != f.steps.size()) {
        return bad(path + "/rounds", fmt::format("{} rounds for {} steps (one per step)", f.rounds.size(), f.steps.size()));
      }
      for (int r : f.rounds) {
        if (r < 0) return bad(path + "/rounds", fmt::format("round {} is negative", r));
      }
    }
    p.flows.push_back(std::move(f));
  }
  if (root.contains("steps")) {
    const json& js = root["steps"];
    if (!js.is_array()) return bad("/steps", "not an array");
    for (size_t i = 0; i < js.size(); ++i) {
      const std::string path = fmt::format("/steps/{}", i);
      PlanStep s;
      WEFT_ASSIGN_OR_RETURN(s.step, field<int>(js[i], path, "step"));
      if (js[i].contains("phase")) {
      WEFT_ASSIGN_OR_RETURN(s.phase, field<std::string>(js[i], path, "phase"));
    }
      WEFT_ASSIGN_OR_RETURN(s.max_load, field<int>(js[i], path, "max_load"));
      WEFT_ASSIGN_OR_RETURN(s.lower_bound, field<int>(js[i], path, "lower_bound"));
      if (js[i].contains("rounds")) {
        WEFT_ASSIGN_OR_RETURN(s.rounds, field<int>(js[i], path, "rounds"));
        if (s.rounds < 1) return bad(path + "/rounds", fmt::format("{} rounds (at least 1)", s.rounds));
      }
      p.steps.push_back(std::move(s));
    }
  }
  // A flow's round must exist in its step.
  std::map<int, int> rounds_of;
  for (const auto& s : p.steps) rounds_of[s.step] = s.rounds;
  for (size_t i = 0; i < p.flows.size(); ++i) {
    const PlanFlow& f = p.flows[i];
    for (size_t k = 0; k < f.rounds.size(); ++k) {
      auto it = rounds_of.find(f.steps[k]);
      const int have = it == rounds_of.end() ? 1 : it->second;
      if (f.rounds[k] >= have) {
        return bad(fmt::format("/flows/{}/rounds", i),
                   fmt::format("round {} in step {}, which has {} round{}", f.rounds[k], f.steps[k], have, have == 1 ? "" : "s"));
      }
    }
  }
  return p;
}

Result<RoutePlan> load_plan(const std::string& path) {
  WEFT_ASSIGN_OR_RETURN(std::string text, read_file(path));
  auto p = parse_plan(text);
  if (!p) return p.status().with_context(path);
  return p;
}

std::string plan_to_json(const RoutePlan& p) {
  json flows = json::array();
  for (const auto& f : p.flows) {
    json jf = {{"src_rank", f.src_rank}, {"dst_rank", f.dst_rank}, {"src_host", f.src_host},
               {"dst_host", f.dst_host}, {"protocol", f.protocol}, {"sport", f.sport},
               {"dport", f.dport},       {"path", f.path},         {"steps", f.steps}};
    if (!f.src_nic.empty()) jf["src_nic"] = f.src_nic;
    if (!f.dst_nic.empty()) jf["dst_nic"] = f.dst_nic;
    if (!f.src_addr.empty()) jf["src_addr"] = f.src_addr;
    if (!f.dst_addr.empty()) jf["dst_addr"] = f.dst_addr;
    if (f.conn != 0) jf["conn"] = f.conn;
    if (f.qp != 0) jf["qp"] = f.qp;
    if (f.dqpn != 0) jf["dqpn"] = f.dqpn;
    // Written only when some step runs in rounds: plans without them stay
    // byte-identical to those of earlier weft versions.
    if (std::any_of(f.rounds.begin(), f.rounds.end(), [](int r) { return r != 0; })) jf["rounds"] = f.rounds;
    flows.push_back(std::move(jf));
  }
  json steps = json::array();
  for (const auto& s : p.steps) {
    json js = {{"step", s.step}, {"phase", s.phase}, {"max_load", s.max_load}, {"lower_bound", s.lower_bound}};
    if (s.rounds != 1) js["rounds"] = s.rounds;
    steps.push_back(std::move(js));
  }
  json root = {{"version", p.version}, {"collective", p.collective}, {"topology", p.topology},
               {"ranks", p.ranks},     {"flows", std::move(flows)},   {"steps", std::move(steps)}};
  return root.dump(1) + "\n";
}

Status save_plan(const RoutePlan& plan, const std::string& path) { return write_file_atomic(path, plan_to_json(plan)); }

}  // namespace weft::routing
