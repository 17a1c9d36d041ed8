#include "shm/shm_ring.h"

#include <algorithm>
#include <cstring>

namespace weft::coll::shm {
namespace {

// A frame that does not fit before the ring's end is cut there when at
// least this much is left, else the rest of the lap is skipped: a small
// message stays one frame (one header to read), a large one wastes no room.
constexpr size_t kMinCut = 1024;
// A frame shorter than it wants is written only if it is at least this
// long (or runs to the ring's end): a nearly full ring waits for room
// rather than sending a run of headers with a few bytes each.
constexpr size_t kMinChunk = 4096;

}  // namespace

// Frame bytes free for the sender, keeping one line beyond them for the
// zeroed seq word (shm_ring.h); the receiver's tail is reloaded only when
// the last one seen leaves less than `want`.
size_t RingWriter::space(size_t want) {
  auto free = [&] { return bytes_ - static_cast<size_t>(head_ - tail_seen_) - kLine; };
  if (free() < want) tail_seen_ = ctl_->tail.load(std::memory_order_acquire);
  return free();
}

// The order of a frame's stores: the zeroed seq word after the frame
// (begin; shm_ring.h says why it precedes the frame), the frame's lines
// after the first, then every store to the first line, the seq word last
// (publish). The receiver polls that first line, so each time this CPU
// gives it up between two of its stores, the next one waits for it to come
// back: one more cache-line round trip before the frame is visible. Stores
// leave in program order (x86: Intel SDM vol. 3A 9.2.2), and a store to
// another line between them (the zero, a payload line) holds the later
// ones until its own line arrives; so nothing else goes between the first
// and the last store to the first line.
void RingWriter::begin(size_t frame) {
  next_ = off_ + frame == bytes_ ? 0 : off_ + frame;  // frames never straddle the end
  at(next_)->seq.store(0, std::memory_order_relaxed);
}

void RingWriter::publish(size_t frame) {
  at(off_)->seq.store(seq_at(head_), std::memory_order_release);
  head_ += frame;
  off_ = next_;
}

// A frame cut short of the message (by room or the ring's end) is whole
// lines, so its payload is a multiple of 8 bytes: it holds whole elements of
// every type, which a receiver that reduces straight from the ring relies
// on (shm_transport.cc, progress_recv).
static_assert(kLine % 8 == 0 && sizeof(Frame) % 8 == 0, "cut frames carry whole 8-byte elements");

bool RingWriter::put(const char* src, size_t len, size_t& done) {
  for (;;) {
    const size_t to_end = bytes_ - off_;
    const size_t want = frame_bytes(len - done);
    if (want > to_end && to_end < kMinCut) {
      if (space(to_end) < to_end) return false;
      Frame* f = at(off_);
      begin(to_end);
      f->len = kSkip;
      f->arg = to_end;
      publish(to_end);
      continue;
    }
    const size_t fit = std::min(want, to_end);
    const size_t frame = std::min(fit, space(fit));
    if (frame < fit && frame < kMinChunk) return false;
    Frame* f = at(off_);
    const size_t n = std::min(len - done, frame - sizeof(Frame));
    begin(frame_bytes(n));
    char* payload = reinterpret_cast<char*>(f) + sizeof(Frame);
    const size_t first = std::min(n, kLine - sizeof(Frame));  // payload bytes in the first line
    if (n > first) std::memcpy(payload + first, src + done + first, n - first);
    if (first > 0) std::memcpy(payload, src + done, first);
    f->len = len;
    f->arg = n;
    publish(frame_bytes(n));
    done += n;
    if (done == len) return true;
  }
}

bool RingWriter::put_single(size_t len, const void* addr) {
  if (space(kLine) < kLine) return false;
  Frame* f = at(off_);
  begin(kLine);
  f->len = len | kSingleCopy;
  f->arg = reinterpret_cast<uint64_t>(addr);
  publish(kLine);
  return true;
}

// Why the look prefetches the expected frame's lines after the first: a
// frame's lines are written by the sender's CPU, and the receiver's copy of
// them misses. Taken after the seq word is seen, those misses are a second
// cache-line round trip after the first, and a small AllReduce over 2 ranks
// paid it on every call: 0.40 us at 4-32 B (one line), 0.49 at 64 B (two),
// 0.60 at 256 B (five); copying nothing, or the sender writing nothing, made
// 64 and 256 B cost what 16 B does, and reading one byte of the last line
// cost the whole copy's extra. With this prefetch 0.43 and 0.48 us (same
// minutes, 20000 calls per size; bench/results/2026-11-24-shm.md has the
// rest). A prefetch before each look re-fetches every line the sender has
// written since the last look (a line it wrote was taken from this CPU, so
// the prefetch is a miss that fetches the new
// bytes), in parallel with the seq word; a prefetch once, before the frame
// was written, fetches the old lap's bytes and gains nothing. Frames up to
// kPrefetchMax only: larger ones are streamed, and the hardware prefetcher
// follows a long copy anyway. A wrong guess (a skip frame, a cut frame)
// costs only the fetches.
constexpr size_t kPrefetchMax = 1024;

const Frame* RingReader::next(size_t expect) {
  for (;;) {
    const Frame* f = reinterpret_cast<const Frame*>(ring_ + off_);
    const size_t want = frame_bytes(expect);
    if (expect > 0 && want <= kPrefetchMax && want <= bytes_ - off_) {
      for (size_t o = kLine; o < want; o += kLine) __builtin_prefetch(ring_ + off_ + o, 0, 3);
    }
    if (f->seq.load(std::memory_order_acquire) != seq_at(tail_)) return nullptr;
    if (!(f->len & kSkip)) return f;
    advance(f->arg);
  }
}

bool RingReader::publish() {
  if (tail_ == published_) return false;
  ctl_->tail.store(tail_, std::memory_order_release);
  published_ = tail_;
  return true;
}

}  // namespace weft::coll::shm
