// kAuto's AllReduce choice: the point — that the cost model with the
// built-in constants picks (nearly) the fastest algorithm of the table
// bench/allreduce_sweep.sh measured, recorded in
// bench/results/2026-11-24-allreduce-selection.md between the
// selection-table markers — and the explicit rules that replace the model.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <iostream>
#include <vector>

#include <fmt/format.h>

#include "weft/collectives/communicator.h"

namespace weft::coll {
namespace {

struct Measured {
  std::string transport;
  int ranks = 0;
  size_t bytes = 0;
  double us[3] = {0, 0, 0};  // butterfly, hd, ring
  int line = 0;
};

// The data rows of the markdown table between "<!-- NAME" and "<!-- /NAME"
// in the measurements file: (line number, cells).
constexpr const char* kTables = "bench/results/2026-11-24-allreduce-selection.md";
std::vector<std::pair<int, std::vector<std::string>>> table_rows(const std::string& name) {
  std::ifstream in(std::string(WEFT_SOURCE_DIR) + "/" + kTables);
  std::vector<std::pair<int, std::vector<std::string>>> rows;
  std::string l;
  bool inside = false;
  for (int line = 1; std::getline(in, l); ++line) {
    if (l.rfind("<!-- " + name, 0) == 0) inside = true;
    if (l.rfind("<!-- /" + name, 0) == 0) inside = false;
    if (!inside || l.rfind("| ", 0) != 0 || l.find("---") != std::string::npos || l.find("transport") != std::string::npos) {
      continue;
    }
    std::vector<std::string> cells;
    std::stringstream ss(l);
    std::string cell;
    while (std::getline(ss, cell, '|')) {
      const size_t a = cell.find_first_not_of(' '), b = cell.find_last_not_of(' ');
      if (a != std::string::npos) cells.push_back(cell.substr(a, b - a + 1));
    }
    rows.emplace_back(line, std::move(cells));
  }
  return rows;
}

// The selection table's rows.
std::vector<Measured> read_table() {
  std::vector<Measured> rows;
  for (const auto& [line, cells] : table_rows("selection-table")) {
    if (cells.size() < 7) continue;
    Measured m;
    m.transport = cells[0];
    m.ranks = std::stoi(cells[1]);
    m.bytes = std::stoull(cells[2]);
    for (int i = 0; i < 3; ++i) m.us[i] = std::stod(cells[static_cast<size_t>(3 + i)]);
    m.line = line;
    rows.push_back(m);
  }
  return rows;
}

int index_of(Algorithm a) {
  switch (a) {
    case Algorithm::kButterfly: return 0;
    case Algorithm::kHalvingDoubling: return 1;
    case Algorithm::kRing: return 2;
    default: return -1;
  }
}

// The model's pick for `ranks` ranks of one host of `cpus` CPUs over `transport`.
Algorithm pick(const Selection& s, const std::string& transport, int ranks, size_t bytes, bool oneshot = false, int cpus = 0) {
  SelectionInput in = SelectionInput::blocks(transport, 1, ranks, "", cpus);
  in.oneshot = oneshot;
  return select_allreduce(s, built_in_tuning(), in).at(bytes);
}

// How far the built-in model's picks are from the fastest algorithm of the
// measured table: per (transport, ranks), the geometric mean over the sizes
// of picked time / fastest time (1 = the fastest everywhere; the geometric
// mean weighs every size alike, where a sum of times would let the largest
// decide alone). The constants were measured by `weft bench --calibrate`
// (two ranks), the table by the sweep on 2 to 8 ranks of the same machine
// two days earlier: the test is that a model fitted on two ranks carries
// over. Bounds: 1.10 over the whole table, 1.30 for any (transport, ranks)
// (the 3- and 8-rank rows were measured at load 9-11, where single points
// swung 2-5x: no size rule follows those; the hand-fitted rules the model
// replaced reached 1.01-1.16 per group by fitting this very table).
constexpr int kTableCpus = 2;  // the table's header: "2 cpus"
TEST(Selection, BuiltInModelPicksWithinToleranceOfTheFastestOnTheMeasuredTable) {
  const auto rows = read_table();
  ASSERT_GE(rows.size(), 20u) << kTables << " has no selection table (run bench/allreduce_sweep.sh)";
  std::map<std::pair<std::string, int>, std::vector<const Measured*>> groups;
  for (const Measured& m : rows) groups[{m.transport, m.ranks}].push_back(&m);
  const Selection sel;
  double all_log = 0;
  for (const auto& [key, group] : groups) {
    double log_sum = 0;
    std::string picks;
    for (const Measured* m : group) {
      const Algorithm a = pick(sel, key.first, key.second, m->bytes, false, kTableCpus);
      const int i = index_of(a);
      ASSERT_GE(i, 0) << algorithm_name(a) << " is not in the table (" << kTables << ":" << m->line << ")";
      log_sum += std::log(m->us[i] / std::min({m->us[0], m->us[1], m->us[2]}));
      picks += fmt::format(" {}:{}", m->bytes, algorithm_name(a));
    }
    all_log += log_sum;
    const double misfit = std::exp(log_sum / static_cast<double>(group.size()));
    std::cout << key.first << " " << key.second << " ranks: " << fmt::format("{:.3f}", misfit) << "x the fastest;" << picks << "\n";
    EXPECT_LE(misfit, 1.30) << key.first << ", " << key.second << " ranks:" << picks;
  }
  const double overall = std::exp(all_log / static_cast<double>(rows.size()));
  std::cout << "whole table: " << fmt::format("{:.3f}", overall) << "x the fastest (geometric mean over " << rows.size() << " sizes)\n";
  EXPECT_LE(overall, 1.10);
}

TEST(Selection, FirstMatchingRuleDecidesBySize) {
  Selection s;
  s.rules = {{"shm", 4, 1024, 1 << 20}, {"*", INT_MAX, 64, 128}};
  EXPECT_EQ(pick(s, "shm", 4, 1023), Algorithm::kButterfly);
  EXPECT_EQ(pick(s, "shm", 4, 1024), Algorithm::kHalvingDoubling);
  EXPECT_EQ(pick(s, "shm", 4, 1 << 20), Algorithm::kRing);
  EXPECT_EQ(pick(s, "shm", 5, 1024), Algorithm::kRing);  // past max_ranks: the catch-all
  EXPECT_EQ(pick(s, "tcp", 2, 100), Algorithm::kHalvingDoubling);
  const SelectionInput hosts = SelectionInput::blocks("tcp", 2, 2);
  EXPECT_EQ(select_allreduce(s, built_in_tuning(), hosts).at(100), Algorithm::kHalvingDoubling)
      << "rules run hybrid only from hybrid_min_bytes";
  s.rules.back().hybrid_min_bytes = 1000;
  EXPECT_EQ(select_allreduce(s, built_in_tuning(), hosts).at(999), Algorithm::kRing);
  EXPECT_EQ(select_allreduce(s, built_in_tuning(), hosts).at(1000), Algorithm::kHybrid);
  s.hybrid_when_multi_host = false;
  EXPECT_EQ(select_allreduce(s, built_in_tuning(), hosts).at(1000), Algorithm::kRing);
}

TEST(Selection, OneShotRuleOnlyBelowItsThresholdWhereOneShotMayRun) {
  Selection s;
  s.rules = {{"shm", 4, 1024, 1 << 20, 512}, {"*", INT_MAX, 64, 128}};
  EXPECT_EQ(pick(s, "shm", 4, 511, true), Algorithm::kOneShot);
  EXPECT_EQ(pick(s, "shm", 4, 512, true), Algorithm::kButterfly);
  EXPECT_EQ(pick(s, "shm", 4, 511, false), Algorithm::kButterfly) << "ranks fit the CPUs";
  EXPECT_EQ(pick(s, "tcp", 4, 4, true), Algorithm::kButterfly) << "the catch-all has no one-shot threshold";
}

TEST(Selection, RulesWithoutACatchAllOrWithCrossedThresholdsAreRejected) {
  Selection s;
  EXPECT_TRUE(s.validate()) << "no rules: the model";
  s.rules = {{"tcp", INT_MAX, 16, 32}};
  Status v = s.validate();
  EXPECT_FALSE(v);
  EXPECT_NE(v.message().find("last rule"), std::string::npos) << v.message();
  s.rules = {{"tcp", 8, 64, 32}, {"*", INT_MAX, 16, 32}};
  v = s.validate();
  EXPECT_FALSE(v);
  EXPECT_NE(v.message().find("ring_min_bytes 32 below hd_min_bytes 64"), std::string::npos) << v.message();
  CommConfig cfg;
  cfg.selection.rules = {{"tcp", INT_MAX, 16, 32}};
  EXPECT_FALSE(cfg.validate()) << "the communicator rejects an invalid selection";
}

TEST(Selection, HdPiecesBelowAPageAreRejected) {
  Selection s;
  s.rules = {{"tcp", 4, 64, 128, 0, kMinHdPieceBytes - 1}, {"*", INT_MAX, 16, 32}};
  Status v = s.validate();
  EXPECT_FALSE(v);
  EXPECT_NE(v.message().find("hd_piece_bytes 4095: 0 (whole) or at least 4096"), std::string::npos) << v.message();
  s.rules.front().hd_piece_bytes = kMinHdPieceBytes;
  EXPECT_TRUE(s.validate());
  s.rules.front().hd_piece_bytes = 0;
  EXPECT_TRUE(s.validate()) << "0 = the whole vector";
}

}  // namespace
}  // namespace weft::coll
