// libFuzzer target: the control channel after the handshake (channel.h).
//   build-fuzz/sealed_frame_fuzz -max_total_time=60
// The first byte picks a mode:
//   even: the rest is a byte stream from the network, cut into frames as the
//         agent reads them; each is opened under a fixed session's key. A
//         rejection must name one of the four seal reasons and leave the
//         counter alone; an accepted frame must be exactly what the sealer
//         makes of its text at that counter, and its text goes on to the parser.
//   odd:  the rest is [op, text..., 0] records. Each text is sealed by the
//         controller's side and attacked as op says (deliver, replay the last
//         frame, flip one bit, swap with the next frame); the receiver must
//         reject exactly the attacked frame, for the right reason, and accept
//         the honest ones in order, so their texts reach parse_control.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "weft/agent/channel.h"
#include "weft/agent/control.h"

namespace {

using namespace weft::agent;

const SessionKeys& keys() {
  static const SessionKeys k =
      session_keys(weft::probe::MacKey::from_string("weft fuzz secret"), std::string(32, 'a'), std::string(32, 'c'));
  return k;
}

void check(bool ok) {
  if (!ok) __builtin_trap();
}

// What the agent does with an accepted text (control_message_fuzz covers the
// parser in depth; here it must not crash on what passed the seal).
void parse(std::string_view text) {
  auto m = parse_control(text);
  if (m && m->type == "campaign") check(static_cast<bool>(decode_campaign(m->body)));
}

void stream(std::string_view in) {
  Opener opener(keys().to_agent, Direction::kToAgent);
  Sealer mirror(keys().to_agent, Direction::kToAgent);
  while (in.size() >= 4) {
    const uint32_t n = frame_length(reinterpret_cast<const uint8_t*>(in.data()));
    in.remove_prefix(4);
    if (n > kMaxFrame || n > in.size()) return;  // the agent refuses or waits: the session ends
    const std::string_view body = in.substr(0, n);
    in.remove_prefix(n);
    const uint64_t before = opener.next();
    ControlReject why = ControlReject::kCount;
    auto text = opener.open(body, &why);
    if (!text) {
      check(why == ControlReject::kTruncated || why == ControlReject::kBadTag || why == ControlReject::kReplayed ||
            why == ControlReject::kOutOfOrder);
      check(opener.next() == before);
      continue;
    }
    check(opener.next() == before + 1);
    check(mirror.next() == before);
    check(std::string_view(mirror.seal_text(*text)).substr(4) == body);
    parse(*text);
  }
}

ControlReject attacked(Opener& opener, const std::string& frame) {
  ControlReject why = ControlReject::kCount;
  check(!opener.open(std::string_view(frame).substr(4), &why));
  return why;
}

void accept(Opener& opener, const std::string& frame, std::string_view text) {
  ControlReject why = ControlReject::kCount;
  auto got = opener.open(std::string_view(frame).substr(4), &why);
  check(got && *got == text);
  parse(*got);
}

void records(std::string_view in) {
  Sealer sealer(keys().to_agent, Direction::kToAgent);
  Opener opener(keys().to_agent, Direction::kToAgent);
  std::string last;
  while (!in.empty()) {
    const uint8_t op = static_cast<uint8_t>(in[0]);
    in.remove_prefix(1);
    const size_t end = std::min(in.find('\0'), in.size());
    const std::string text(in.substr(0, end));
    in.remove_prefix(std::min(end + 1, in.size()));
    std::string f = sealer.seal_text(text);
    switch (op % 4) {
      case 1:
        if (!last.empty()) check(attacked(opener, last) == ControlReject::kReplayed);
        break;
      case 2: {
        std::string g = f;
        const size_t bit = (op >> 2) % ((g.size() - 4) * 8);
        g[4 + bit / 8] = static_cast<char>(g[4 + bit / 8] ^ (1 << (bit % 8)));
        check(attacked(opener, g) == ControlReject::kBadTag);
        break;
      }
      case 3: {
        const std::string next = sealer.seal_text(text);
        check(attacked(opener, next) == ControlReject::kOutOfOrder);
        accept(opener, f, text);
        f = next;
        break;
      }
      default: break;
    }
    accept(opener, f, text);
    last = f;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) stream(rest);
  else records(rest);
  return 0;
}
