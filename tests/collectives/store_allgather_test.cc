// The rendezvous all-gather (bootstrap/store_allgather.h): every rank's
// value in rank order, in O(P) store requests, large lists in chunks, and
// a rank that never comes named by rank 0.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "bootstrap/store_allgather.h"
#include "harness.h"

namespace weft::coll::testing {
namespace {

using namespace std::chrono_literals;
using internal::decode_values;
using internal::encode_values;
using internal::kStoreChunkBytes;
using internal::store_allgather;

// A MemoryStore that counts what is asked of it.
class CountingStore final : public Store {
 public:
  Status set(const std::string& key, const std::string& value) override {
    ++sets;
    return inner_.set(key, value);
  }
  Result<std::string> get(const std::string& key, std::chrono::steady_clock::time_point deadline) override {
    ++gets;
    return inner_.get(key, deadline);
  }
  std::atomic<int> sets{0}, gets{0};

 private:
  MemoryStore inner_;
};

std::string value_of(int rank, size_t bytes) {
  std::string v = fmt::format("{}:{}\n", rank, rank * 7);  // digits and ':' inside a value
  v.resize(bytes, static_cast<char>('a' + rank % 26));
  if (bytes > 3) v[2] = '\0';
  return v;
}

struct Gather {
  int ranks;
  size_t value_bytes;
};
std::ostream& operator<<(std::ostream& o, const Gather& g) { return o << g.ranks << " ranks of " << g.value_bytes; }

class StoreAllgather : public ::testing::TestWithParam<Gather> {};

TEST_P(StoreAllgather, EveryRankGetsEveryValueInRankOrderInLinearlyManyRequests) {
  const Gather& g = GetParam();
  CountingStore store;
  std::vector<Result<std::vector<std::string>>> got(static_cast<size_t>(g.ranks), internal_error("not run"));
  std::vector<std::thread> ranks;
  for (int r = 0; r < g.ranks; ++r) {
    ranks.emplace_back([&, r] {
      got[static_cast<size_t>(r)] =
          store_allgather(store, "weft/host", r, g.ranks, value_of(r, g.value_bytes), Clock::now() + 20s);
    });
  }
  for (auto& t : ranks) t.join();
  std::vector<std::string> want;
  for (int r = 0; r < g.ranks; ++r) want.push_back(value_of(r, g.value_bytes));
  for (int r = 0; r < g.ranks; ++r) {
    ASSERT_TRUE(got[static_cast<size_t>(r)]) << "rank " << r << ": " << got[static_cast<size_t>(r)].status().to_string();
    EXPECT_EQ(*got[static_cast<size_t>(r)], want) << "rank " << r;
  }
  const int chunks = static_cast<int>((encode_values(want).size() + kStoreChunkBytes - 1) / kStoreChunkBytes);
  const int others = g.ranks - 1;
  // Each rank but 0 publishes its value; rank 0 the chunks and their count.
  EXPECT_EQ(store.sets.load(), others + chunks + 1);
  // Rank 0 reads each other rank's value; each other rank the count and the chunks.
  EXPECT_EQ(store.gets.load(), others + others * (1 + chunks));
}

INSTANTIATE_TEST_SUITE_P(Sizes, StoreAllgather,
                         ::testing::Values(Gather{1, 9}, Gather{2, 0}, Gather{3, 1}, Gather{37, 17},
                                           Gather{5, kStoreChunkBytes / 3 + 1},       // 2 chunks
                                           Gather{2, kStoreChunkBytes / 2 - 7},       // "131065:" + 131065: one chunk exactly
                                           Gather{2, kStoreChunkBytes / 2 - 6}));     // 2 bytes over one chunk

TEST(StoreAllgather, RankZeroNamesTheRankThatDidNotComeAndTheOthersSayWhoTheyWaitedFor) {
  MemoryStore store;
  Result<std::vector<std::string>> zero = internal_error("not run"), one = internal_error("not run");
  std::thread t0([&] { zero = store_allgather(store, "p/host", 0, 3, "a", Clock::now() + 300ms); });
  std::thread t1([&] { one = store_allgather(store, "p/host", 1, 3, "b", Clock::now() + 300ms); });
  t0.join();
  t1.join();
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(zero.status().message(),
            "rank 2 of 3 did not join (is it running, with the same store and world size, and a rank of its own?): "
            "store: key 'p/host/2' was not set in time");
  ASSERT_FALSE(one);
  EXPECT_EQ(one.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(one.status().message(),
            "rank 1 waited for rank 0 to gather every rank's 'p/host/<rank>' (rank 0's error names a rank that did "
            "not come): store: key 'p/host/all' was not set in time");
}

TEST(StoreAllgatherList, ValuesOfAnyBytesRoundTrip) {
  const std::vector<std::string> values = {"", "12:ab", std::string("\0:\0", 3), "h", std::string(1000, ':')};
  auto back = decode_values(encode_values(values), values.size());
  ASSERT_TRUE(back) << back.status().to_string();
  EXPECT_EQ(*back, values);
  EXPECT_EQ(encode_values({"ab", ""}), "2:ab0:");
}

struct Bad {
  std::string bytes;
  size_t count;
  std::string message;
};
std::ostream& operator<<(std::ostream& o, const Bad& b) { return o << "'" << b.bytes << "' as " << b.count; }

class StoreAllgatherBadList : public ::testing::TestWithParam<Bad> {};

TEST_P(StoreAllgatherBadList, IsRefusedSayingWhere) {
  auto got = decode_values(GetParam().bytes, GetParam().count);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.status().message(), GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Lists, StoreAllgatherBadList,
    ::testing::Values(Bad{"2:ab3:xy", 2, "store: the gathered list is malformed at value 1"},
                      Bad{"2:ab", 2, "store: the gathered list has 1 values, not 2"},
                      Bad{"2:ab1:c", 1, "store: the gathered list has 2 values, not 1"},
                      Bad{"x:ab", 1, "store: the gathered list is malformed at value 0"},
                      Bad{"2", 1, "store: the gathered list is malformed at value 0"},
                      Bad{"99999999999999999999999:a", 1, "store: the gathered list is malformed at value 0"},
                      Bad{"", 1, "store: the gathered list has 0 values, not 1"}));

}  // namespace
}  // namespace weft::coll::testing
