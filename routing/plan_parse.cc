// Reading a route plan (docs/route-plan.md) with simdjson's DOM parser
// (https://simdjson.org, "The Basics: DOM"). Every rank of a job reads the
// whole plan — its rounds become gates between flows of other ranks
// (gates.cc) — and a plan of 65,536 ranks is ~10^6 flows in 332 MB. A
// nlohmann::json tree of it is one allocation per value, most of the cost of
// the reader this one replaced (bench/plan_parse_bench.cc; figures in
// bench/results/2026-11-27-plan-read.md). simdjson keeps the document in one
// tape, and each flow's members are found in one pass over them.
//
// The checks and their order are the reader's contract: a bad file is one
// line naming the JSON path of the first fault, in file order, the plan's
// own fields first. Numbers must be integers that fit their field (no
// 2.0 for a rank, no true for 1). A document simdjson refuses is parsed
// again by nlohmann::json, without a tree, for its line and column
// (common/json.h check_json); that slow parse runs only for a broken file.
#include <array>
#include <climits>
#include <map>
#include <string_view>
#include <unordered_set>

#include <fmt/format.h>

#include <simdjson.h>

#include "weft/common/file_util.h"
#include "weft/common/json.h"
#include "weft/routing/ecmp.h"
#include "weft/routing/plan.h"

namespace weft::routing {
namespace dom = simdjson::dom;
static_assert(kPlanTextSpare >= simdjson::SIMDJSON_PADDING, "plan.h's spare capacity is simdjson's padding");
// Named inside the anonymous namespace: a unity build puts this file in one
// unit with the other plan sources, whose file-local names must not meet
// these.
namespace {
namespace reader {

Status plan_fault(std::string_view path, std::string_view what) {
  return data_loss(fmt::format("route plan {}: {}", path, what));
}

// nlohmann::json's type_name(), which earlier readers printed.
std::string_view json_type(dom::element e) {
  switch (e.type()) {
    case dom::element_type::ARRAY: return "array";
    case dom::element_type::OBJECT: return "object";
    case dom::element_type::STRING: return "string";
    case dom::element_type::BOOL: return "boolean";
    case dom::element_type::NULL_VALUE: return "null";
    default: return "number";
  }
}

// Where an element sits: "/flows/3/sport". Built only for a message.
struct Where {
  std::string_view parent;  // "", "/flows", "/steps"
  long index = -1;          // the element of `parent`, or -1 for the root
  std::string_view name;    // a member, or ""
  long item = -1;           // the element of member `name`, or -1
  std::string str() const {
    std::string s(parent);
    if (index >= 0) s += fmt::format("/{}", index);
    if (!name.empty()) s += fmt::format("/{}", name);
    if (item >= 0) s += fmt::format("/{}", item);
    return s;
  }
};

Result<int64_t> to_int64(dom::element e, const Where& w, int64_t lo, int64_t hi) {
  int64_t v = 0;
  if (e.get_int64().get(v) != simdjson::SUCCESS) {
    uint64_t u = 0;
    if (e.get_uint64().get(u) == simdjson::SUCCESS) return plan_fault(w.str(), fmt::format("{} is out of range", u));
    if (e.is_double()) return plan_fault(w.str(), fmt::format("{} is not an integer", simdjson::minify(e)));
    return plan_fault(w.str(), fmt::format("wrong type ({})", json_type(e)));
  }
  if (v < lo || v > hi) return plan_fault(w.str(), fmt::format("{} is out of range", v));
  return v;
}

Result<int> to_int(dom::element e, const Where& w) {
  WEFT_ASSIGN_OR_RETURN(int64_t v, to_int64(e, w, INT_MIN, INT_MAX));
  return static_cast<int>(v);
}

Result<std::string> to_string(dom::element e, const Where& w) {
  std::string_view v;
  if (e.get_string().get(v) != simdjson::SUCCESS) return plan_fault(w.str(), fmt::format("wrong type ({})", json_type(e)));
  return std::string(v);
}

template <class T, class Convert>
Result<std::vector<T>> to_vector(dom::element e, const Where& w, Convert convert) {
  dom::array a;
  if (e.get_array().get(a) != simdjson::SUCCESS) return plan_fault(w.str(), fmt::format("wrong type ({})", json_type(e)));
  std::vector<T> out;
  out.reserve(a.size());
  long i = 0;
  for (dom::element x : a) {
    WEFT_ASSIGN_OR_RETURN(T v, convert(x, Where{w.parent, w.index, w.name, i++}));
    out.push_back(std::move(v));
  }
  return out;
}

// The members of one object that the plan names, found in one pass over
// them (an unknown member is skipped: readers ignore fields added later; of
// a member given twice the last counts, as in earlier readers).
template <size_t N>
class Members {
 public:
  Members(dom::object o, const std::array<std::string_view, N>& names, Where at) : names_(names), at_(at) {
    for (dom::key_value_pair kv : o) {
      for (size_t i = 0; i < N; ++i) {
        if (kv.key == names[i]) {
          value_[i] = kv.value;
          has_[i] = true;
          break;
        }
      }
    }
  }
  bool has(size_t k) const { return has_[k]; }
  Where where(size_t k) const { return Where{at_.parent, at_.index, names_[k]}; }
  Result<dom::element> get(size_t k) const {
    if (!has_[k]) return plan_fault(where(k).str(), "missing");
    return value_[k];
  }
  Result<int> integer(size_t k) const {
    WEFT_ASSIGN_OR_RETURN(dom::element e, get(k));
    return to_int(e, where(k));
  }
  Result<int64_t> int64(size_t k) const {
    WEFT_ASSIGN_OR_RETURN(dom::element e, get(k));
    return to_int64(e, where(k), INT64_MIN, INT64_MAX);
  }
  Result<std::string> string(size_t k) const {
    WEFT_ASSIGN_OR_RETURN(dom::element e, get(k));
    return to_string(e, where(k));
  }
  Result<std::vector<int>> integers(size_t k) const {
    WEFT_ASSIGN_OR_RETURN(dom::element e, get(k));
    return to_vector<int>(e, where(k), to_int);
  }
  Result<std::vector<std::string>> strings(size_t k) const {
    WEFT_ASSIGN_OR_RETURN(dom::element e, get(k));
    return to_vector<std::string>(e, where(k), to_string);
  }

 private:
  const std::array<std::string_view, N>& names_;
  Where at_;
  std::array<dom::element, N> value_{};
  std::array<bool, N> has_{};
};

enum RootKey : size_t { kVersion, kCollective, kTopology, kRanks, kFlows, kSteps, kRootKeys };
constexpr std::array<std::string_view, kRootKeys> kRootNames = {"version", "collective", "topology",
                                                                "ranks",   "flows",      "steps"};
enum FlowKey : size_t {
  kSrcRank, kDstRank, kConn, kQp, kSrcAddr, kDstAddr, kSrcHost, kDstHost, kSrcNic, kDstNic,
  kProtocol, kSport, kDport, kDqpn, kPath, kFlowSteps, kFlowRounds, kFlowKeys
};
constexpr std::array<std::string_view, kFlowKeys> kFlowNames = {
    "src_rank", "dst_rank", "conn",     "qp",    "src_addr", "dst_addr", "src_host", "dst_host", "src_nic",
    "dst_nic",  "protocol", "sport",    "dport", "dqpn",     "path",     "steps",    "rounds"};
enum StepKey : size_t { kStep, kPhase, kMaxLoad, kLowerBound, kStepRounds, kStepKeys };
constexpr std::array<std::string_view, kStepKeys> kStepNames = {"step", "phase", "max_load", "lower_bound",
                                                                "rounds"};

// One directed pair's connection and QP: the key no two flows may share.
struct FlowSlot {
  int src, dst, conn, qp;
  bool operator==(const FlowSlot&) const = default;
};
struct FlowSlotHash {
  size_t operator()(const FlowSlot& s) const {
    const uint64_t a = (uint64_t{static_cast<uint32_t>(s.src)} << 32) | static_cast<uint32_t>(s.dst);
    const uint64_t b = (uint64_t{static_cast<uint32_t>(s.conn)} << 32) | static_cast<uint32_t>(s.qp);
    return std::hash<uint64_t>{}(a * 0x9E3779B97F4A7C15ULL ^ b);
  }
};

// One flow into `f` (made in place in the plan's vector: a PlanFlow is
// ~300 bytes, a million of them), checked in file order and against the
// flows before it.
Status parse_flow(const Members<kFlowKeys>& m, int ranks, const Where& at, PlanFlow& f,
                  std::unordered_set<FlowSlot, FlowSlotHash>& seen, std::map<int, uint16_t>& dport_of) {
  WEFT_ASSIGN_OR_RETURN(f.src_rank, m.integer(kSrcRank));
  WEFT_ASSIGN_OR_RETURN(f.dst_rank, m.integer(kDstRank));
  for (size_t k : {kSrcRank, kDstRank}) {
    const int r = k == kSrcRank ? f.src_rank : f.dst_rank;
    if (r < 0 || r >= ranks) return plan_fault(m.where(k).str(), fmt::format("{} is not a rank of {}", r, ranks));
  }
  if (f.src_rank == f.dst_rank) return plan_fault(at.str(), "a flow from a rank to itself");
  for (size_t k : {kConn, kQp}) {
    if (!m.has(k)) continue;
    WEFT_ASSIGN_OR_RETURN(int v, m.integer(k));
    if (v < 0) return plan_fault(m.where(k).str(), fmt::format("{} is negative", v));
    (k == kConn ? f.conn : f.qp) = v;
  }
  if (!seen.insert(FlowSlot{f.src_rank, f.dst_rank, f.conn, f.qp}).second) {
    return plan_fault(at.str(),
                      fmt::format("second flow {} -> {} (conn {}, qp {})", f.src_rank, f.dst_rank, f.conn, f.qp));
  }
  for (auto [k, dst] : {std::pair{kSrcAddr, &f.src_addr}, std::pair{kDstAddr, &f.dst_addr},
                        std::pair{kSrcHost, &f.src_host}, std::pair{kDstHost, &f.dst_host},
                        std::pair{kSrcNic, &f.src_nic}, std::pair{kDstNic, &f.dst_nic}}) {
    const bool required = k == kSrcHost || k == kDstHost;
    if (!required && !m.has(k)) continue;
    WEFT_ASSIGN_OR_RETURN(*dst, m.string(k));
  }
  WEFT_ASSIGN_OR_RETURN(f.protocol, m.string(kProtocol));
  if (f.protocol != "udp" && f.protocol != "tcp") {
    // {:?}: quoted and escaped, so that the message stays one line.
    return plan_fault(m.where(kProtocol).str(), fmt::format("{:?} is not udp or tcp", f.protocol));
  }
  for (size_t k : {kSport, kDport}) {
    WEFT_ASSIGN_OR_RETURN(int64_t v, m.int64(k));
    if (v < 1 || v > 65535) return plan_fault(m.where(k).str(), fmt::format("{} is not a port (1..65535)", v));
    (k == kSport ? f.sport : f.dport) = static_cast<uint16_t>(v);
  }
  if (m.has(kDqpn)) {
    // A QPN is 24 bits; 0 and 1 are the special QPs (ecmp.h).
    WEFT_ASSIGN_OR_RETURN(int64_t q, m.int64(kDqpn));
    if (q < kMinDataQpn || q > kMaxQpn) {
      return plan_fault(m.where(kDqpn).str(),
                        fmt::format("{} is not a data QP number ({}..{})", q, kMinDataQpn, kMaxQpn));
    }
    if (f.protocol != "udp") {
      return plan_fault(m.where(kDqpn).str(), "a destination QP on a tcp flow (QPs are RoCE's: udp flows only)");
    }
    f.dqpn = static_cast<uint32_t>(q);
  }
  if (f.protocol == "tcp") {
    auto [it, fresh] = dport_of.emplace(f.dst_rank, f.dport);
    if (!fresh && it->second != f.dport) {
      return plan_fault(m.where(kDport).str(), fmt::format("rank {} listens on {} in another flow, not {}",
                                                           f.dst_rank, it->second, f.dport));
    }
  }
  WEFT_ASSIGN_OR_RETURN(f.path, m.strings(kPath));
  if (m.has(kFlowSteps)) {
    WEFT_ASSIGN_OR_RETURN(f.steps, m.integers(kFlowSteps));
  }
  if (m.has(kFlowRounds)) {
    WEFT_ASSIGN_OR_RETURN(f.rounds, m.integers(kFlowRounds));
    const std::string where = m.where(kFlowRounds).str();
    if (f.rounds.size() != f.steps.size()) {
      return plan_fault(where, fmt::format("{} rounds for {} steps (one per step)", f.rounds.size(), f.steps.size()));
    }
    for (int r : f.rounds) {
      if (r < 0) return plan_fault(where, fmt::format("round {} is negative", r));
    }
  }
  return ok_status();
}

Result<PlanStep> parse_step(const Members<kStepKeys>& m) {
  PlanStep s;
  WEFT_ASSIGN_OR_RETURN(s.step, m.integer(kStep));
  if (m.has(kPhase)) {
    WEFT_ASSIGN_OR_RETURN(s.phase, m.string(kPhase));
  }
  WEFT_ASSIGN_OR_RETURN(s.max_load, m.integer(kMaxLoad));
  WEFT_ASSIGN_OR_RETURN(s.lower_bound, m.integer(kLowerBound));
  if (m.has(kStepRounds)) {
    WEFT_ASSIGN_OR_RETURN(s.rounds, m.integer(kStepRounds));
    if (s.rounds < 1) return plan_fault(m.where(kStepRounds).str(), fmt::format("{} rounds (at least 1)", s.rounds));
  }
  return s;
}

// Every flow's round must exist in its step.
Status check_rounds(const RoutePlan& p) {
  std::map<int, int> rounds_of;
  for (const auto& s : p.steps) rounds_of[s.step] = s.rounds;
  for (size_t i = 0; i < p.flows.size(); ++i) {
    const PlanFlow& f = p.flows[i];
    for (size_t k = 0; k < f.rounds.size(); ++k) {
      auto it = rounds_of.find(f.steps[k]);
      const int have = it == rounds_of.end() ? 1 : it->second;
      if (f.rounds[k] >= have) {
        return plan_fault(fmt::format("/flows/{}/rounds", i), fmt::format("round {} in step {}, which has {} round{}",
                                                                          f.rounds[k], f.steps[k], have,
                                                                          have == 1 ? "" : "s"));
      }
    }
  }
  return ok_status();
}

Result<RoutePlan> parse_root(dom::element doc) {
  dom::object root;
  if (doc.get_object().get(root) != simdjson::SUCCESS) return plan_fault("/", "not a JSON object");
  const Members<kRootKeys> m(root, kRootNames, Where{});
  RoutePlan p;
  WEFT_ASSIGN_OR_RETURN(p.version, m.integer(kVersion));
  if (p.version != 1) {
    return plan_fault("/version", fmt::format("unsupported version {} (this weft reads 1)", p.version));
  }
  WEFT_ASSIGN_OR_RETURN(p.collective, m.string(kCollective));
  if (m.has(kTopology)) {
    WEFT_ASSIGN_OR_RETURN(p.topology, m.string(kTopology));
  }
  WEFT_ASSIGN_OR_RETURN(p.ranks, m.integer(kRanks));
  if (p.ranks < 1) return plan_fault("/ranks", "must be >= 1");
  dom::array flows;
  if (!m.has(kFlows) || m.get(kFlows)->get_array().get(flows) != simdjson::SUCCESS) {
    return plan_fault("/flows", "missing or not an array");
  }
  p.flows.reserve(flows.size());
  std::unordered_set<FlowSlot, FlowSlotHash> seen;
  seen.reserve(flows.size());
  std::map<int, uint16_t> dport_of;
  long i = 0;
  for (dom::element jf : flows) {
    const Where at{"/flows", i++, ""};
    dom::object o;
    if (jf.get_object().get(o) != simdjson::SUCCESS) return plan_fault(at.str(), "not an object");
    WEFT_RETURN_IF_ERROR(parse_flow(Members<kFlowKeys>(o, kFlowNames, at), p.ranks, at, p.flows.emplace_back(), seen,
                                    dport_of));
  }
  if (m.has(kSteps)) {
    dom::array steps;
    if (m.get(kSteps)->get_array().get(steps) != simdjson::SUCCESS) return plan_fault("/steps", "not an array");
    long k = 0;
    for (dom::element js : steps) {
      const Where at{"/steps", k++, ""};
      dom::object o;
      if (js.get_object().get(o) != simdjson::SUCCESS) return plan_fault(at.str(), "not an object");
      WEFT_ASSIGN_OR_RETURN(PlanStep s, parse_step(Members<kStepKeys>(o, kStepNames, at)));
      p.steps.push_back(std::move(s));
    }
  }
  WEFT_RETURN_IF_ERROR(check_rounds(p));
  return p;
}

// simdjson parse of `text` into `parser`, past a UTF-8 byte order mark
// (RFC 8259 section 8.1 lets a reader ignore one; nlohmann::json does, and
// simdjson 3.0 does not). Copies `text` only if it lacks SIMDJSON_PADDING
// bytes of spare capacity (load_plan leaves them).
simdjson::simdjson_result<dom::element> parse_text(dom::parser& parser, const std::string& text) {
  const size_t skip = text.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0;
  const bool padded = text.capacity() - text.size() >= simdjson::SIMDJSON_PADDING;
  return parser.parse(reinterpret_cast<const uint8_t*>(text.data()) + skip, text.size() - skip, !padded);
}

// The document of `text`, or why not.
Result<dom::element> parse_document(dom::parser& parser, const std::string& text) {
  dom::element doc;
  const simdjson::error_code e = parse_text(parser, text).get(doc);
  if (e == simdjson::SUCCESS) return doc;
  if (e == simdjson::CAPACITY || e == simdjson::MEMALLOC) {
    return data_loss(fmt::format("route plan: {} bytes: {}", text.size(), simdjson::error_message(e)));
  }
  // Where the text stops being JSON, by nlohmann's parser without a tree of
  // it: simdjson's own message names no place.
  parser = dom::parser{};
  if (Status where = check_json(text, StatusCode::kDataLoss, "route plan"); !where) return where;
  // JSON that simdjson 3.0 cannot read: an integer beyond 64 bits (also in a
  // member readers ignore) or nesting deeper than 1024.
  return data_loss(fmt::format("route plan: {} (an integer beyond 64 bits, or nesting deeper than 1024?)",
                               simdjson::error_message(e)));
}

}  // namespace reader
}  // namespace

Result<RoutePlan> parse_plan(const std::string& text) {
  dom::parser parser;
  WEFT_ASSIGN_OR_RETURN(dom::element doc, reader::parse_document(parser, text));
  return reader::parse_root(doc);
}

Result<PlanMember> parse_plan_member(const std::string& text, std::string_view member) {
  dom::parser parser;
  dom::element doc;
  if (const simdjson::error_code e = reader::parse_text(parser, text).get(doc); e != simdjson::SUCCESS) {
    return invalid_argument(fmt::format("not JSON: {}", simdjson::error_message(e)));
  }
  dom::object o;
  if (doc.get_object().get(o) != simdjson::SUCCESS) return invalid_argument("/: not an object");
  PlanMember out;
  dom::element plan;
  for (dom::key_value_pair kv : o) {  // of a member given twice the last counts
    if (kv.key == member) {
      out.present = kv.value.is_object();
      plan = kv.value;
    } else {
      out.others.insert_or_assign(std::string(kv.key), simdjson::minify(kv.value));
    }
  }
  if (out.present) {
    Result<RoutePlan> p = reader::parse_root(plan);
    if (p) {
      out.plan = std::move(*p);
    } else {
      out.plan_status = p.status();
    }
  }
  return out;
}

Result<RoutePlan> load_plan(const std::string& path) {
  WEFT_ASSIGN_OR_RETURN(std::string text, read_file(path, kPlanTextSpare));
  dom::parser parser;
  Result<dom::element> doc = reader::parse_document(parser, text);
  if (!doc) return doc.status().with_context(path);
  // The tape holds its own copy of every string: the text can go before the
  // flows are made (a third of the peak memory at 65,536 ranks).
  std::string().swap(text);
  auto p = reader::parse_root(*doc);
  if (!p) return p.status().with_context(path);
  return p;
}

}  // namespace weft::routing
