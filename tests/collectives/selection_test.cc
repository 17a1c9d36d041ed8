// kAuto's AllReduce choice: rule matching, validation, and — the point —
// that the built-in rules follow the table bench/allreduce_sweep.sh measured,
// as recorded in docs/collectives.md between the selection-table markers.
#include <gtest/gtest.h>

#include <climits>
#include <fstream>
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

// The rows of the markdown table between "<!-- selection-table" and
// "<!-- /selection-table -->".
std::vector<Measured> read_table(const std::string& path) {
  std::ifstream in(path);
  std::vector<Measured> rows;
  std::string l;
  bool inside = false;
  for (int line = 1; std::getline(in, l); ++line) {
    if (l.rfind("<!-- selection-table", 0) == 0) inside = true;
    if (l.rfind("<!-- /selection-table", 0) == 0) inside = false;
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

TEST(Selection, BuiltInRulesPickWithinTenPercentOfTheFastestAtEveryMeasuredPoint) {
  const std::string doc = std::string(WEFT_SOURCE_DIR) + "/docs/collectives.md";
  const auto rows = read_table(doc);
  ASSERT_GE(rows.size(), 20u) << doc << " has no selection table (run bench/allreduce_sweep.sh)";
  const Selection sel;
  for (const Measured& m : rows) {
    const Algorithm pick = select_allreduce(sel, m.transport, m.ranks, m.bytes, false);
    const int i = index_of(pick);
    ASSERT_GE(i, 0) << algorithm_name(pick);
    const double best = std::min({m.us[0], m.us[1], m.us[2]});
    EXPECT_LE(m.us[i], 1.10 * best) << doc << ":" << m.line << ": " << m.transport << ", " << m.ranks << " ranks, "
                                    << m.bytes << " B: the rules pick " << algorithm_name(pick) << " (" << m.us[i]
                                    << " us), the fastest took " << best << " us";
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

}  // namespace
}  // namespace weft::coll
