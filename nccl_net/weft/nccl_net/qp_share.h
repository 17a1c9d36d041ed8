// How a send is split over a connection's QPs (WEFT_NCCL_QPS): QP q writes
// bytes [offset, offset + bytes) of it, every QP one write (of 0 bytes
// where nothing is left), so the receiver counts one completion per QP.
//
// NCCL's LL and LL128 protocols do not wait for test(): the GPU reads the
// receive buffer while it fills and takes a line once its flags are there
// (an LL line is 16 bytes of data and flags, an LL128 line 128 bytes with
// its flag at the end). QPs complete in any order, so a line written by two
// QPs could show its flag before its data. Every share but the last is
// therefore a multiple of 128 bytes, as NCCL's IB transport splits its
// writes (IB_WRITE_CHUNK_ALIGNMENT in src/transport/net_ib/p2p.cc).
#pragma once

#include <algorithm>
#include <cstdint>

namespace weft::nccl_net {

inline constexpr std::uint64_t kQpShareAlign = 128;

struct QpShare {
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
};

// nq >= 1, q < nq.
inline QpShare qp_share(std::uint64_t size, std::uint64_t nq, std::uint64_t q) {
  const std::uint64_t even = (size + nq - 1) / nq;
  const std::uint64_t chunk = (even + kQpShareAlign - 1) / kQpShareAlign * kQpShareAlign;
  const std::uint64_t offset = std::min(size, q * chunk);
  return {offset, std::min(chunk, size - offset)};
}

}  // namespace weft::nccl_net
