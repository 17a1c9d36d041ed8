#include <algorithm>
#include <iterator>
#include <type_traits>
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

namespace {

// The plan as nlohmann::json's dump(1) writes it — objects' keys in sorted
// order (its default object type is a std::map), one space of indent per
// level, one array element per line — written straight into one buffer: a
// plan of 65,536 ranks holds ~10^6 flows, and a JSON tree of them costs
// ~2 x 10^7 allocations. Plans stay byte-identical to those of earlier weft
// versions (tests/routing/plan_file_test.cc checks this against dump(1)).
class PlanWriter {
 public:
  std::string finish() { return std::string(out_.data(), out_.size()); }

  void open(char c) { out_.push_back(c), ++depth_, first_ = true; }
  void close(char c) {
    --depth_;
    if (!first_) newline();
    out_.push_back(c);
    first_ = false;
  }
  void key(std::string_view k) {
    item();
    string(k);
    raw(": ");
  }
  void raw(std::string_view v) { out_.append(v); }
  template <class T>
  void number(T v) {
    fmt::format_to(std::back_inserter(out_), "{}", v);
  }
  // A JSON string. Names without a character that needs escaping (nearly
  // all) are copied; the rest go through nlohmann::json, which escapes as
  // dump() does and refuses invalid UTF-8 as dump() does.
  void string(std::string_view v) {
    const bool plain = std::all_of(v.begin(), v.end(), [](char c) {
      const auto u = static_cast<unsigned char>(c);
      return u >= 0x20 && u < 0x80 && c != '"' && c != '\\';
    });
    if (plain) {
      out_.push_back('"');
      out_.append(v);
      out_.push_back('"');
    } else {
      raw(nlohmann::json(std::string(v)).dump());
    }
  }
  // An element of the enclosing array (its value follows).
  void item() {
    if (!first_) out_.push_back(',');
    newline();
    first_ = false;
  }
  // Key k and its array, write(x) writing each element's value.
  template <class T, class Write>
  void list(std::string_view k, const std::vector<T>& v, Write&& write) {
    key(k);
    if (v.empty()) {
      raw("[]");
      return;
    }
    open('[');
    for (const auto& x : v) {
      item();
      write(x);
    }
    close(']');
  }
  template <class T>
  void array(std::string_view k, const std::vector<T>& v) {
    list(k, v, [this](const T& x) {
      if constexpr (std::is_same_v<T, std::string>) {
        string(x);
      } else {
        number(x);
      }
    });
  }

 private:
  void newline() {
    out_.push_back('\n');
    for (int i = 0; i < depth_; ++i) out_.push_back(' ');
  }

  fmt::memory_buffer out_;
  int depth_ = 0;
  bool first_ = true;
};

void write_flow(PlanWriter& w, const PlanFlow& f) {
  w.open('{');
  // Keys in sorted order; the optional ones only when set (plan.h).
  if (f.conn != 0) w.key("conn"), w.number(f.conn);
  w.key("dport"), w.number(f.dport);
  if (f.dqpn != 0) w.key("dqpn"), w.number(f.dqpn);
  if (!f.dst_addr.empty()) w.key("dst_addr"), w.string(f.dst_addr);
  w.key("dst_host"), w.string(f.dst_host);
  if (!f.dst_nic.empty()) w.key("dst_nic"), w.string(f.dst_nic);
  w.key("dst_rank"), w.number(f.dst_rank);
  w.array("path", f.path);
  w.key("protocol"), w.string(f.protocol);
  if (f.qp != 0) w.key("qp"), w.number(f.qp);
  // Written only when some step runs in rounds: plans without them stay
  // byte-identical to those of earlier weft versions.
  if (std::any_of(f.rounds.begin(), f.rounds.end(), [](int r) { return r != 0; })) w.array("rounds", f.rounds);
  w.key("sport"), w.number(f.sport);
  if (!f.src_addr.empty()) w.key("src_addr"), w.string(f.src_addr);
  w.key("src_host"), w.string(f.src_host);
  if (!f.src_nic.empty()) w.key("src_nic"), w.string(f.src_nic);
  w.key("src_rank"), w.number(f.src_rank);
  w.array("steps", f.steps);
  w.close('}');
}

}  // namespace

std::string plan_to_json(const RoutePlan& p) {
  PlanWriter w;
  w.open('{');
  w.key("collective"), w.string(p.collective);
  w.list("flows", p.flows, [&w](const PlanFlow& f) { write_flow(w, f); });
  w.key("ranks"), w.number(p.ranks);
  w.list("steps", p.steps, [&w](const PlanStep& s) {
    w.open('{');
    w.key("lower_bound"), w.number(s.lower_bound);
    w.key("max_load"), w.number(s.max_load);
    w.key("phase"), w.string(s.phase);
    if (s.rounds != 1) w.key("rounds"), w.number(s.rounds);
    w.key("step"), w.number(s.step);
    w.close('}');
  });
  w.key("topology"), w.string(p.topology);
  w.key("version"), w.number(p.version);
  w.close('}');
  return w.finish() + "\n";
}

Status save_plan(const RoutePlan& plan, const std::string& path) { return write_file_atomic(path, plan_to_json(plan)); }

}  // namespace weft::routing
