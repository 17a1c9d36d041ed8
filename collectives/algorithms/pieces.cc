#include "algorithms/pieces.h"

#include <algorithm>

#include "algorithms/segments.h"

namespace weft::coll::internal {
namespace {

class Pieces final : public Plan {
 public:
  Pieces(const Shape& s, size_t piece_bytes, MakePlanFn make) : me_(s.rank) {
    for (const Segment& p : split(0, s.count, s.esize, piece_bytes)) {
      Shape part = s;
      part.count = p.n;
      part.offset = s.offset + p.lo;
      parts_.push_back(make(part));
      scratch_ = std::max(scratch_, parts_.back()->scratch_bytes());
    }
  }
  size_t scratch_bytes() const override { return scratch_; }
  std::vector<int> peers() const override {
    std::vector<int> out;
    for (const auto& p : parts_) {
      const std::vector<int> mine = p->peers();
      out.insert(out.end(), mine.begin(), mine.end());
    }
    return peer_set(std::move(out), me_);
  }
  Status run(Context& ctx) const override {
    for (const auto& p : parts_) {
      if (Status s = p->run(ctx); !s) return s;
    }
    return ok_status();
  }

 private:
  std::vector<std::unique_ptr<Plan>> parts_;
  size_t scratch_ = 0;
  int me_;
};

}  // namespace

std::unique_ptr<Plan> plan_in_pieces(const Shape& s, size_t piece_bytes, MakePlanFn make) {
  return std::make_unique<Pieces>(s, piece_bytes, make);
}

}  // namespace weft::coll::internal
