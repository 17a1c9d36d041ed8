// RC queue pairs: creation, the RESET -> INIT -> RTR -> RTS walk, and the
// endpoint record two sides swap out of band before RTR.
//
// Source port: at RTR the GRH flow label is set to (planned port - 0xC000),
// which the kernel turns into exactly that UDP source port (source_port.h);
// where the device is mlx5 and weft was built with mlx5dv, the port is also
// set directly after RTS (mlx5dv_modify_qp_udp_sport(3)), since mlx5
// firmware does not derive it from the flow label.
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <cstdint>

#include "weft/common/status.h"
#include "weft/verbs/device.h"
#include "weft/verbs/handle.h"

namespace weft::verbs {

struct RcQpConfig {
  std::uint32_t max_send_wr = 128;
  std::uint32_t max_recv_wr = 128;
  std::uint32_t max_inline = 0;
  // 0 = let the provider choose; else 49152..65535 (source_port.h).
  std::uint32_t planned_sport = 0;
  std::uint8_t traffic_class = 0;  // DSCP << 2 | ECN
  std::uint8_t hop_limit = 64;
  // Local ACK timeout 4.096 us * 2^20 = 4.3 s (NCCL_IB_TIMEOUT's default), 7
  // retries (ibv_modify_qp(3): timeout, retry_cnt). Shorter timeouts fire
  // spuriously on a loaded host: soft-RoCE under emulation saw thousands of
  // needless retransmissions at 2^17 (0.54 s). A dead peer is found through
  // its bootstrap socket long before the retries run out.
  std::uint8_t ack_timeout = 20;
  std::uint8_t retry_cnt = 7;
  std::uint8_t rnr_retry = 7;  // 7 = retry forever on receiver-not-ready
  std::uint8_t min_rnr_timer = 12;  // 0.64 ms
};

Status validate(const RcQpConfig& config);

// What one side tells the other before RTR. Sent as EndpointWire.
struct EndpointInfo {
  std::uint32_t qpn = 0;
  std::uint32_t psn = 0;  // 24 bits
  Gid gid{};
  std::uint32_t mtu_bytes = 0;      // the sender's port MTU; RTR uses the smaller
  std::uint32_t recv_depth = 0;     // receive WRs the sender keeps posted (connection.h)
  std::uint32_t max_msg_bytes = 0;  // the sender's port limit on one work request
};

// Fixed-layout, big-endian record for the out-of-band exchange.
struct EndpointWire {
  std::uint8_t bytes[64];
};
static_assert(sizeof(EndpointWire) == 64, "the OOB endpoint record is 64 bytes on the wire");
inline constexpr std::uint32_t kEndpointMagic = 0x57465642;  // "WFVB"
inline constexpr std::uint16_t kEndpointVersion = 2;  // 2: receiver-driven (no ring)

EndpointWire encode(const EndpointInfo& info);
// Rejects a wrong magic/version or out-of-range fields with a message.
Result<EndpointInfo> decode(const EndpointWire& wire);

class RcQp {
 public:
  // Creates the QP (RESET) and moves it to INIT with REMOTE_WRITE access.
  static Result<RcQp> create(const Device& dev, ibv_cq* send_cq, ibv_cq* recv_cq, const RcQpConfig& config);

  ibv_qp* get() const { return qp_.get(); }
  std::uint32_t qpn() const { return qp_->qp_num; }
  std::uint32_t psn() const { return psn_; }
  // Flow label used at RTR (0 when no source port was planned).
  std::uint32_t flow_label() const { return flow_label_; }

  // INIT -> RTR -> RTS against `remote`; applies the planned source port.
  // A port the device refuses to set directly (mlx5) does not fail the
  // connect: the QP is in RTS on its flow label, and sport_status() says
  // why the port was not set. A caller that needs the exact port checks it.
  Status connect(const EndpointInfo& remote);
  // Whether connect() set the planned port directly where the device takes
  // it that way; ok when it did, or when nothing was to be set directly.
  const Status& sport_status() const { return sport_status_; }

  // Forces the QP into the error state (what a NIC does on a fatal error):
  // every outstanding work request completes with IBV_WC_WR_FLUSH_ERR.
  Status set_error_state();
  Result<ibv_qp_state> state() const;

  Status close() { return qp_.close(); }

 private:
  const Device* dev_ = nullptr;
  QpHandle qp_;
  RcQpConfig config_;
  std::uint32_t psn_ = 0;
  std::uint32_t flow_label_ = 0;
  Status sport_status_;
};

}  // namespace weft::verbs
