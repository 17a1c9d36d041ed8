// One sender's ring in the receiver's segment (internal to the shm
// transport): frames on 64-byte lines, each carrying its own sequence word,
// so that a small message arrives as one cache line.
//
// A frame starts on a line: a 24-byte header, then up to the rest of the
// frame's lines of payload. The sender writes header and payload, then the
// header's `seq` word last (release); the receiver polls the `seq` word of
// the line where the next frame must start and takes the frame once it
// reads seq_at(that position) (acquire). There is no shared head word: the
// line the receiver polls is the line the message lands in, one cache-line
// transfer per small message instead of two (head, then frame).
//
// Why a stale line cannot pass for a new frame: before the sender publishes
// a frame ending at position E, it zeroes the seq word at E (the line it
// must own anyway, as room is kept for it), and the receiver reads E only
// after acquiring that frame. So at E the receiver sees 0 or the frame the
// sender writes there next, never an old lap's payload (which may hold any
// bytes, also a would-be sequence number). Sequence numbers from position
// (seq_at) are a second line of defence, not the argument.
//
// A frame that would straddle the ring's end is a skip frame to the end
// when it is small (it stays one contiguous frame), else it is cut at the
// end; a message larger than the room is streamed as several frames as the
// receiver frees room. The receiver publishes how far it has read (`tail`)
// and the sender reloads it only when the ring looks full, so the tail's
// line does not bounce on every message.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "shm/shm_segment.h"

namespace weft::coll::shm {

constexpr size_t kLine = 64;
constexpr uint64_t kSingleCopy = uint64_t{1} << 63;  // Frame::len flag: payload stays in the sender
constexpr uint64_t kSkip = uint64_t{1} << 62;        // Frame::len flag: no message, go on at the ring's start

struct Frame {
  std::atomic<uint64_t> seq;  // seq_at(this frame's position) once the frame is complete
  uint64_t len;               // the message's length | kSingleCopy | kSkip
  uint64_t arg;               // inline: payload bytes in this frame; single-copy: the sender's address;
                              // skip: bytes to the ring's end
};
static_assert(sizeof(Frame) == 24, "frame header is 24 bytes in every process");

// Never 0: a zeroed line is never a frame.
inline uint64_t seq_at(uint64_t pos) { return pos / kLine + 1; }
// Bytes of ring a frame with `payload` inline bytes takes.
inline size_t frame_bytes(size_t payload) { return (sizeof(Frame) + payload + kLine - 1) / kLine * kLine; }

class RingWriter {
 public:
  RingWriter() = default;
  RingWriter(char* ring, size_t bytes, RingCtl* ctl) : ring_(ring), bytes_(bytes), ctl_(ctl) {}
  // Writes the rest of message [src, src + len) from `done` on, as frames as
  // room allows, advancing `done`; true once its last frame is written (a
  // message of 0 bytes is one frame).
  bool put(const char* src, size_t len, size_t& done);
  // A single-copy message: one line naming the sender's buffer; false if
  // there is no room yet.
  bool put_single(size_t len, const void* addr);
  uint64_t head() const { return head_; }

 private:
  Frame* at(size_t off) const { return reinterpret_cast<Frame*>(ring_ + off); }
  size_t space(size_t want);
  // A frame of `frame` bytes at the head: begin() before its first store,
  // publish() after its last (shm_ring.cc: the order of the stores).
  void begin(size_t frame);
  void publish(size_t frame);

  char* ring_ = nullptr;
  size_t bytes_ = 0;
  RingCtl* ctl_ = nullptr;
  uint64_t head_ = 0;       // where the next frame goes (only this sender knows it)
  size_t off_ = 0;          // head_ % bytes_, kept without a division per frame
  size_t next_ = 0;         // off_ of the frame after the one begun
  uint64_t tail_seen_ = 0;  // the receiver's tail as last read
};

class RingReader {
 public:
  RingReader() = default;
  RingReader(char* ring, size_t bytes, RingCtl* ctl) : ring_(ring), bytes_(bytes), ctl_(ctl) {}
  // The next complete message frame (skip frames are passed over), or
  // nullptr if none has arrived. `expect`: the inline payload bytes the
  // receiver waits for (0 if unknown or single-copy), whose further lines
  // it pulls in on every look (shm_ring.cc: why).
  const Frame* next(size_t expect);
  static const char* payload(const Frame* f) { return reinterpret_cast<const char*>(f + 1); }
  // Done with the frame next() returned: its lines may be reused once
  // publish() tells the sender.
  void consume(const Frame* f) { advance((f->len & kSingleCopy) ? kLine : frame_bytes(f->arg)); }
  // Stores the tail for the sender if it moved; true if it did.
  bool publish();

 private:
  // Frames never straddle the ring's end: the offset reaches it at most.
  void advance(size_t n) {
    tail_ += n;
    off_ += n;
    if (off_ >= bytes_) off_ -= bytes_;
  }

  char* ring_ = nullptr;
  size_t bytes_ = 0;
  RingCtl* ctl_ = nullptr;
  uint64_t tail_ = 0, published_ = 0;
  size_t off_ = 0;  // tail_ % bytes_
};

}  // namespace weft::coll::shm
