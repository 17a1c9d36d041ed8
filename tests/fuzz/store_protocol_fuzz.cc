// libFuzzer target: the TCP store server's protocol (StoreCore,
// collectives/bootstrap/store_core.h) as four clients drive it, without
// sockets: handshakes with and without a secret, requests cut anywhere,
// oversize and unknown requests, hang-ups and handshake timeouts.
//   build-fuzz/store_protocol_fuzz -max_total_time=60 tests/fuzz/corpus/store
//
// Input: one byte whose bit 0 gives the server a secret, then records of
// [control][length][length bytes]. control bits 0-1 pick the client; bit 2
// hangs it up (and a new client takes its place); bit 3 fires its handshake
// timer; otherwise the bytes are what it sends.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "bootstrap/store_core.h"

namespace {

using weft::coll::store_internal::StoreCore;
namespace wire = weft::coll::store_wire;

// Every reply is whole and well-formed, to a client that is connected.
void check(const std::vector<StoreCore::Out>& out, const uint64_t (&ids)[4]) {
  for (const auto& o : out) {
    bool known = false;
    for (uint64_t id : ids) known = known || id == o.conn;
    if (!known || o.bytes.size() < wire::kReplyHeader) __builtin_trap();
    const uint32_t status = wire::get32(o.bytes.data()), len = wire::get32(o.bytes.data() + 4);
    if (len != o.bytes.size() - wire::kReplyHeader) __builtin_trap();
    if (status != wire::kOk && (status != wire::kError || len > wire::kMaxMessage)) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  weft::coll::TcpStoreLimits limits;
  limits.max_key_bytes = 64;  // small, so that inputs reach them
  limits.max_value_bytes = 200;
  limits.max_total_bytes = 1000;
  StoreCore core(limits, (data[0] & 1) ? "a fuzzing secret of 32 bytes...." : "");
  uint64_t ids[4];
  for (uint64_t& id : ids) id = core.open();
  std::vector<StoreCore::Out> out;
  for (size_t pos = 1; pos + 2 <= size;) {
    const uint8_t control = data[pos];
    const size_t len = std::min<size_t>(data[pos + 1], size - pos - 2);
    pos += 2;
    uint64_t& id = ids[control & 3];
    bool keep = true;
    if (control & 4) {
      keep = false;
    } else if (control & 8) {
      const bool was_ready = core.ready(id);
      core.handshake_expired(id);
      keep = was_ready;  // the event loop closes one that was not
    } else {
      keep = core.feed(id, std::string_view(reinterpret_cast<const char*>(data + pos), len), out);
      pos += len;
    }
    check(out, ids);
    out.clear();
    if (!keep) {
      core.close(id);
      id = core.open();
    }
    if (core.connections() != 4 || core.held_bytes() > limits.max_total_bytes) __builtin_trap();
  }
  return 0;
}
