// kAuto's AllReduce choice: rule matching, validation, and — the point —
// that the built-in rules are the best fit of the table bench/allreduce_sweep.sh measured,
// as recorded in bench/results/2026-11-24-allreduce-selection.md between the
// selection-table markers.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

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

// How far a choice of thresholds is from the fastest algorithm over one
// (transport, ranks) group of the table: the geometric mean over its sizes
// of picked time / fastest time (1 = the fastest everywhere). The geometric
// mean weighs every size alike; a sum of times would let the largest sizes
// decide alone.
double misfit(const std::vector<const Measured*>& group, size_t hd_min, size_t ring_min) {
  double log_sum = 0;
  for (const Measured* m : group) {
    const double picked = m->bytes < hd_min ? m->us[0] : m->bytes >= ring_min ? m->us[2] : m->us[1];
    log_sum += std::log(picked / std::min({m->us[0], m->us[1], m->us[2]}));
  }
  return std::exp(log_sum / static_cast<double>(group.size()));
}

// The built-in thresholds must be the table's best fit: for every
// (transport, ranks) measured, no other pair of thresholds taken from the
// measured sizes comes within 1% closer to the fastest. Not "within 10% of
// the fastest at every point": on this shared 2-core host a single point
// swings by 2-5x with the neighbours' load (the table shows it), and no
// size threshold can follow such swings; the best fit is what can be
// measured honestly, and this test keeps the code and the measurement from
// drifting apart.
TEST(Selection, BuiltInRulesAreTheBestFitOfTheMeasuredTable) {
  const auto rows = read_table();
  ASSERT_GE(rows.size(), 20u) << kTables << " has no selection table (run bench/allreduce_sweep.sh)";
  std::map<std::pair<std::string, int>, std::vector<const Measured*>> groups;
  for (const Measured& m : rows) groups[{m.transport, m.ranks}].push_back(&m);
  const Selection sel;
  for (const auto& [key, group] : groups) {
    std::vector<size_t> cuts = {0, SIZE_MAX};
    for (const Measured* m : group) cuts.push_back(m->bytes);
    double best = 1e300;
    size_t best_hd = 0, best_ring = 0;
    for (size_t h : cuts) {
      for (size_t r : cuts) {
        if (r < h) continue;
        const double f = misfit(group, h, r);
        if (f < best) best = f, best_hd = h, best_ring = r;
      }
    }
    // What the built-in rules pick, size by size.
    double log_sum = 0;
    for (const Measured* m : group) {
      const Algorithm a = select_allreduce(sel, key.first, key.second, m->bytes, false);
      const int i = index_of(a);
      ASSERT_GE(i, 0) << algorithm_name(a);
      log_sum += std::log(m->us[i] / std::min({m->us[0], m->us[1], m->us[2]}));
    }
    const double builtin = std::exp(log_sum / static_cast<double>(group.size()));
    EXPECT_LE(builtin, 1.01 * best) << key.first << ", " << key.second << " ranks: the built-in rules are "
                                    << builtin << "x the fastest (geometric mean over " << group.size()
                                    << " sizes), HD from " << best_hd << " B and ring from " << best_ring
                                    << " B would be " << best << "x";
  }
}

// The one-shot thresholds (SelectionRule::oneshot_below_bytes) against
// their own table in the same file ("oneshot-table" markers: one-shot
// and butterfly times where the host's ranks outnumber its CPUs): for every
// (transport, ranks) measured, no other cut among the measured sizes comes
// within 1% closer to the faster of the two (same measure as above).
TEST(Selection, OneShotThresholdsAreTheBestFitOfTheirMeasuredTable) {
  std::map<std::pair<std::string, int>, std::vector<std::array<double, 3>>> groups;  // size, oneshot, butterfly
  for (const auto& [line, cells] : table_rows("oneshot-table")) {
    ASSERT_GE(cells.size(), 5u) << kTables << ":" << line;
    groups[{cells[0], std::stoi(cells[1])}].push_back({std::stod(cells[2]), std::stod(cells[3]), std::stod(cells[4])});
  }
  ASSERT_GE(groups.size(), 3u) << kTables << " has no one-shot table";
  const Selection sel;
  for (const auto& [key, rows] : groups) {
    auto misfit = [&](auto oneshot_at) {
      double log_sum = 0;
      for (const auto& r : rows) log_sum += std::log((oneshot_at(r[0]) ? r[1] : r[2]) / std::min(r[1], r[2]));
      return std::exp(log_sum / static_cast<double>(rows.size()));
    };
    double best = 1e300, best_cut = 0;
    std::vector<double> cuts = {0, 1e300};
    for (const auto& r : rows) cuts.push_back(r[0]);
    for (double c : cuts) {
      const double f = misfit([c](double bytes) { return bytes < c; });
      if (f < best) best = f, best_cut = c;
    }
    const double builtin = misfit([&, &k = key](double bytes) {
      return select_allreduce(sel, k.first, k.second, static_cast<size_t>(bytes), false, true) == Algorithm::kOneShot;
    });
    EXPECT_LE(builtin, 1.01 * best) << key.first << ", " << key.second << " ranks: the built-in one-shot threshold is "
                                    << builtin << "x the faster, one-shot below " << best_cut << " B would be " << best
                                    << "x";
  }
}

TEST(Selection, FirstMatchingRuleDecidesBySize) {
  Selection s;
  s.rules = {{"shm", 4, 1024, 1 << 20}, {"*", INT_MAX, 64, 128}};
  EXPECT_EQ(select_allreduce(s, "shm", 4, 1023, false), Algorithm::kButterfly);
  EXPECT_EQ(select_allreduce(s, "shm", 4, 1024, false), Algorithm::kHalvingDoubling);
  EXPECT_EQ(select_allreduce(s, "shm", 4, 1 << 20, false), Algorithm::kRing);
  EXPECT_EQ(select_allreduce(s, "shm", 5, 1024, false), Algorithm::kRing);  // past max_ranks: the catch-all
  EXPECT_EQ(select_allreduce(s, "tcp", 2, 100, false), Algorithm::kHalvingDoubling);
  EXPECT_EQ(select_allreduce(s, "tcp", 2, 100, true), Algorithm::kHybrid);
  s.hybrid_when_multi_host = false;
  EXPECT_EQ(select_allreduce(s, "tcp", 2, 100, true), Algorithm::kHalvingDoubling);
}

TEST(Selection, OneShotOnlyBelowItsThresholdWhereRanksOutnumberCpus) {
  Selection s;
  s.rules = {{"shm", 4, 1024, 1 << 20, 512}, {"*", INT_MAX, 64, 128}};
  EXPECT_EQ(select_allreduce(s, "shm", 4, 511, false, true), Algorithm::kOneShot);
  EXPECT_EQ(select_allreduce(s, "shm", 4, 512, false, true), Algorithm::kButterfly);
  EXPECT_EQ(select_allreduce(s, "shm", 4, 511, false, false), Algorithm::kButterfly) << "ranks fit the CPUs";
  EXPECT_EQ(select_allreduce(s, "tcp", 4, 4, false, true), Algorithm::kButterfly)
      << "the catch-all has no one-shot threshold";
  s.hybrid_when_multi_host = true;
  EXPECT_EQ(select_allreduce(s, "shm", 4, 4, true, true), Algorithm::kHybrid);
  // The built-in rules: one-shot where it measured faster (shm, 8 ranks,
  // below 256 B), never over tcp.
  const Selection builtin;
  EXPECT_EQ(select_allreduce(builtin, "shm", 8, 4, false, true), Algorithm::kOneShot);
  EXPECT_EQ(select_allreduce(builtin, "shm", 8, 256, false, true), Algorithm::kButterfly);
  EXPECT_EQ(select_allreduce(builtin, "shm", 4, 4, false, true), Algorithm::kButterfly);
  EXPECT_EQ(select_allreduce(builtin, "shm", 3, 4, false, true), Algorithm::kButterfly);
  EXPECT_EQ(select_allreduce(builtin, "shm", 2, 4, false, true), Algorithm::kButterfly);
  EXPECT_EQ(select_allreduce(builtin, "tcp", 4, 4, false, true), Algorithm::kButterfly);
}

TEST(Selection, RulesWithoutACatchAllOrWithCrossedThresholdsAreRejected) {
  Selection s;
  EXPECT_TRUE(s.validate()) << "built-in rules";
  s.rules = {{"tcp", INT_MAX, 16, 32}};
  Status v = s.validate();
  EXPECT_FALSE(v);
  EXPECT_NE(v.message().find("last rule"), std::string::npos) << v.message();
  s.rules = {{"tcp", 8, 64, 32}, {"*", INT_MAX, 16, 32}};
  v = s.validate();
  EXPECT_FALSE(v);
  EXPECT_NE(v.message().find("ring_min_bytes 32 below hd_min_bytes 64"), std::string::npos) << v.message();
  CommConfig cfg;
  cfg.selection.rules.clear();
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
