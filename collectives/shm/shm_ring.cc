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

// Zeroes the seq word of the line after the frame, then publishes the frame
// (shm_ring.h: why the zero comes first, and why it suffices).
void RingWriter::publish(size_t frame) {
  const size_t next = off_ + frame == bytes_ ? 0 : off_ + frame;  // frames never straddle the end
  at(next)->seq.store(0, std::memory_order_relaxed);
  at(off_)->seq.store(seq_at(head_), std::memory_order_release);
  head_ += frame;
  off_ = next;
}

bool RingWriter::put(const char* src, size_t len, size_t& done) {
  for (;;) {
    const size_t to_end = bytes_ - off_;
    const size_t want = frame_bytes(len - done);
    if (want > to_end && to_end < kMinCut) {
      if (space(to_end) < to_end) return false;
      Frame* f = at(off_);
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
    if (n > 0) std::memcpy(reinterpret_cast<char*>(f) + sizeof(Frame), src + done, n);
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
  f->len = len | kSingleCopy;
  f->arg = reinterpret_cast<uint64_t>(addr);
  publish(kLine);
  return true;
}

const Frame* RingReader::next() {
  for (;;) {
    const Frame* f = reinterpret_cast<const Frame*>(ring_ + off_);
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
