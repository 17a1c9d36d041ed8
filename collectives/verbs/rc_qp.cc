#include "weft/verbs/rc_qp.h"

#include <algorithm>
#include <random>

#include <fmt/format.h>

#include "weft/config.h"
#include "weft/verbs/error.h"
#include "weft/verbs/source_port.h"
#if WEFT_HAVE_MLX5DV
#include <infiniband/mlx5dv.h>
#endif

namespace weft::verbs {
namespace {

void put32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (24 - 8 * i));
}
std::uint32_t get32(const std::uint8_t* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = v << 8 | p[i];
  return v;
}

// Layout of EndpointWire (offsets in bytes).
enum : int { kMagic = 0, kVersion = 4, kQpn = 8, kPsn = 12, kGid = 16, kMtu = 32, kRecvDepth = 36,
             kMaxMsg = 40, kEnd = 44 };
static_assert(kEnd <= static_cast<int>(sizeof(EndpointWire)), "EndpointWire fields must fit its 64 bytes");

std::optional<ibv_mtu> mtu_enum(std::uint32_t bytes) {
  switch (bytes) {
    case 256: return IBV_MTU_256;
    case 512: return IBV_MTU_512;
    case 1024: return IBV_MTU_1024;
    case 2048: return IBV_MTU_2048;
    case 4096: return IBV_MTU_4096;
    default: return std::nullopt;
  }
}

}  // namespace

Status validate(const RcQpConfig& c) {
  if (c.max_send_wr == 0 || c.max_recv_wr == 0) return invalid_argument("QP queue depths must be >= 1");
  if (c.planned_sport != 0) WEFT_RETURN_IF_ERROR(flow_label_for_sport(c.planned_sport));
  if (c.ack_timeout > 31) return invalid_argument(fmt::format("ack_timeout {} > 31", c.ack_timeout));
  if (c.retry_cnt > 7 || c.rnr_retry > 7) return invalid_argument("retry_cnt and rnr_retry are 3-bit (0..7)");
  if (c.min_rnr_timer > 31) return invalid_argument("min_rnr_timer is 5-bit (0..31)");
  return ok_status();
}

EndpointWire encode(const EndpointInfo& in) {
  EndpointWire w{};
  put32(w.bytes + kMagic, kEndpointMagic);
  put32(w.bytes + kVersion, kEndpointVersion);
  put32(w.bytes + kQpn, in.qpn);
  put32(w.bytes + kPsn, in.psn);
  std::copy(in.gid.begin(), in.gid.end(), w.bytes + kGid);
  put32(w.bytes + kMtu, in.mtu_bytes);
  put32(w.bytes + kRecvDepth, in.recv_depth);
  put32(w.bytes + kMaxMsg, in.max_msg_bytes);
  return w;
}

Result<EndpointInfo> decode(const EndpointWire& w) {
  if (get32(w.bytes + kMagic) != kEndpointMagic) {
    return data_loss(fmt::format("endpoint record has magic {:#x}, expected {:#x} (not a weft verbs peer?)",
                                 get32(w.bytes + kMagic), kEndpointMagic));
  }
  if (get32(w.bytes + kVersion) != kEndpointVersion) {
    return data_loss(fmt::format("endpoint record version {}, this weft speaks {}", get32(w.bytes + kVersion),
                                 kEndpointVersion));
  }
  EndpointInfo e;
  e.qpn = get32(w.bytes + kQpn);
  e.psn = get32(w.bytes + kPsn);
  std::copy(w.bytes + kGid, w.bytes + kGid + 16, e.gid.begin());
  e.mtu_bytes = get32(w.bytes + kMtu);
  e.recv_depth = get32(w.bytes + kRecvDepth);
  e.max_msg_bytes = get32(w.bytes + kMaxMsg);
  if (e.qpn == 0 || e.qpn > 0xFFFFFF) return data_loss(fmt::format("endpoint QPN {:#x} out of range", e.qpn));
  if (e.psn > 0xFFFFFF) return data_loss(fmt::format("endpoint PSN {:#x} is not 24-bit", e.psn));
  if (!mtu_enum(e.mtu_bytes)) return data_loss(fmt::format("endpoint MTU {} is not an IB MTU", e.mtu_bytes));
  if (e.recv_depth < 2) return data_loss(fmt::format("endpoint receive depth {} is below 2", e.recv_depth));
  if (e.max_msg_bytes < 4096) {
    return data_loss(fmt::format("endpoint message limit {} bytes is below 4096", e.max_msg_bytes));
  }
  return e;
}

Result<RcQp> RcQp::create(const Device& dev, ibv_cq* send_cq, ibv_cq* recv_cq, const RcQpConfig& config) {
  WEFT_RETURN_IF_ERROR(validate(config));
  RcQp q;
  q.dev_ = &dev;
  q.config_ = config;
  if (config.planned_sport != 0) {
    WEFT_ASSIGN_OR_RETURN(q.flow_label_, flow_label_for_sport(config.planned_sport));
  }
  ibv_qp_init_attr init{};
  init.send_cq = send_cq;
  init.recv_cq = recv_cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = config.max_send_wr;
  init.cap.max_recv_wr = config.max_recv_wr;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.cap.max_inline_data = config.max_inline;
  q.qp_ = QpHandle(ibv_create_qp(dev.pd(), &init));
  if (!q.qp_) {
    return verbs_errno_error(fmt::format("ibv_create_qp(RC, send {}, recv {})", config.max_send_wr,
                                         config.max_recv_wr));
  }
  // A random initial PSN (as ibv_rc_pingpong does) keeps a stale packet of an
  // earlier QP with the same number from being accepted.
  std::random_device rd;
  q.psn_ = rd() & 0xFFFFFF;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = dev.port().port_num;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
  if (int rc = ibv_modify_qp(q.qp_.get(), &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
      rc != 0) {
    return verbs_call_error("ibv_modify_qp(RESET -> INIT)", rc);
  }
  return q;
}

Status RcQp::connect(const EndpointInfo& remote) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  // Path MTU: the smaller of both ports' active MTUs (a larger one is dropped
  // by the smaller side).
  std::uint32_t mtu = std::min(dev_->port().active_mtu_bytes, remote.mtu_bytes);
  a.path_mtu = *mtu_enum(mtu);
  a.dest_qp_num = remote.qpn;
  a.rq_psn = remote.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = config_.min_rnr_timer;
  a.ah_attr.is_global = 1;  // RoCE always carries a GRH
  a.ah_attr.port_num = dev_->port().port_num;
  std::copy(remote.gid.begin(), remote.gid.end(), a.ah_attr.grh.dgid.raw);
  a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(dev_->gid().index);
  a.ah_attr.grh.hop_limit = config_.hop_limit;
  a.ah_attr.grh.traffic_class = config_.traffic_class;
  a.ah_attr.grh.flow_label = flow_label_;
  if (int rc = ibv_modify_qp(qp_.get(), &a,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
      rc != 0) {
    return verbs_call_error(fmt::format("ibv_modify_qp(INIT -> RTR, remote qpn {:#x})", remote.qpn), rc);
  }
  ibv_qp_attr s{};
  s.qp_state = IBV_QPS_RTS;
  s.sq_psn = psn_;
  s.timeout = config_.ack_timeout;
  s.retry_cnt = config_.retry_cnt;
  s.rnr_retry = config_.rnr_retry;
  s.max_rd_atomic = 1;
  if (int rc = ibv_modify_qp(qp_.get(), &s,
                             IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                 IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
      rc != 0) {
    return verbs_call_error("ibv_modify_qp(RTR -> RTS)", rc);
  }
  sport_status_ = ok_status();
#if WEFT_HAVE_MLX5DV
  if (config_.planned_sport != 0 && dev_->has_mlx5_sport()) {
    // The QP is in RTS and works without the port: a refusal is the
    // caller's to weigh (rc_qp.h sport_status).
    if (int rc = mlx5dv_modify_qp_udp_sport(qp_.get(), static_cast<std::uint16_t>(config_.planned_sport)); rc != 0) {
      sport_status_ = verbs_call_error(fmt::format("mlx5dv_modify_qp_udp_sport({})", config_.planned_sport), rc);
    }
  }
#endif
  return ok_status();
}

Status RcQp::set_error_state() {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  if (int rc = ibv_modify_qp(qp_.get(), &a, IBV_QP_STATE); rc != 0) return verbs_call_error("ibv_modify_qp(ERR)", rc);
  return ok_status();
}

Result<ibv_qp_state> RcQp::state() const {
  ibv_qp_attr a{};
  ibv_qp_init_attr init{};
  if (int rc = ibv_query_qp(qp_.get(), &a, IBV_QP_STATE, &init); rc != 0) return verbs_call_error("ibv_query_qp", rc);
  return a.qp_state;
}

}  // namespace weft::verbs
