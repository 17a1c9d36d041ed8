// The route plan's lookups and its writer (the reader: plan_parse.cc).
#include <algorithm>
#include <string_view>
#include <type_traits>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "weft/common/file_util.h"
#include "weft/routing/plan.h"

namespace weft::routing {

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

namespace {

// The plan as nlohmann::json's dump(1) writes it — objects' keys in sorted
// order (its default object type is a std::map), one space of indent per
// level, one array element per line — written straight into one buffer: a
// plan of 65,536 ranks holds ~10^6 flows, and a JSON tree of them costs
// ~2 x 10^7 allocations. Plans stay byte-identical to those of earlier weft
// versions (tests/routing/plan_json_test.cc checks this against dump(1)).
class PlanWriter {
 public:
  // Room for the whole text at once: grown by doubling, a large plan's text
  // would be faulted in (memory the kernel zeroes first) and copied several
  // times over (bench/results/2026-11-28-route-check-and-write.md).
  void reserve(size_t bytes) { out_.reserve(bytes); }
  std::string finish() { return std::move(out_); }

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
    static_assert(std::is_integral_v<T>, "a plan's numbers are integers");
    const fmt::format_int text(v);
    out_.append(text.data(), text.size());
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

  std::string out_;
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

// At least the text write_flow makes of f (names that need no escaping, as
// all of weft's do): each line's indent and punctuation, the keys, and the
// numbers at their longest. Only a reservation: a longer text still grows,
// and pages reserved but never written cost nothing (malloc maps a large
// block, and the kernel backs a page on its first touch).
size_t text_bound(const PlanFlow& f) {
  size_t n = 512 + f.src_host.size() + f.dst_host.size() + f.src_nic.size() + f.dst_nic.size() + f.protocol.size() +
             f.src_addr.size() + f.dst_addr.size();
  for (const auto& sw : f.path) n += sw.size() + 16;
  return n + 24 * (f.steps.size() + f.rounds.size());
}

}  // namespace

std::string plan_to_json(const RoutePlan& p) {
  PlanWriter w;
  size_t bound = 4096 + p.collective.size() + p.topology.size();
  for (const auto& f : p.flows) bound += text_bound(f);
  for (const auto& s : p.steps) bound += 256 + s.phase.size();
  w.reserve(bound);
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
  w.raw("\n");
  return w.finish();
}

Status save_plan(const RoutePlan& plan, const std::string& path) { return write_file_atomic(path, plan_to_json(plan)); }

}  // namespace weft::routing
