#include "weft/verbs/error.h"

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "weft/verbs/handle.h"

namespace weft::verbs {

std::string wc_status_name(ibv_wc_status status) {
  // Every value of enum ibv_wc_status in rdma-core's verbs.h (v44).
  switch (status) {
    case IBV_WC_SUCCESS: return "IBV_WC_SUCCESS";
    case IBV_WC_LOC_LEN_ERR: return "IBV_WC_LOC_LEN_ERR";
    case IBV_WC_LOC_QP_OP_ERR: return "IBV_WC_LOC_QP_OP_ERR";
    case IBV_WC_LOC_EEC_OP_ERR: return "IBV_WC_LOC_EEC_OP_ERR";
    case IBV_WC_LOC_PROT_ERR: return "IBV_WC_LOC_PROT_ERR";
    case IBV_WC_WR_FLUSH_ERR: return "IBV_WC_WR_FLUSH_ERR";
    case IBV_WC_MW_BIND_ERR: return "IBV_WC_MW_BIND_ERR";
    case IBV_WC_BAD_RESP_ERR: return "IBV_WC_BAD_RESP_ERR";
    case IBV_WC_LOC_ACCESS_ERR: return "IBV_WC_LOC_ACCESS_ERR";
    case IBV_WC_REM_INV_REQ_ERR: return "IBV_WC_REM_INV_REQ_ERR";
    case IBV_WC_REM_ACCESS_ERR: return "IBV_WC_REM_ACCESS_ERR";
    case IBV_WC_REM_OP_ERR: return "IBV_WC_REM_OP_ERR";
    case IBV_WC_RETRY_EXC_ERR: return "IBV_WC_RETRY_EXC_ERR";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "IBV_WC_RNR_RETRY_EXC_ERR";
    case IBV_WC_LOC_RDD_VIOL_ERR: return "IBV_WC_LOC_RDD_VIOL_ERR";
    case IBV_WC_REM_INV_RD_REQ_ERR: return "IBV_WC_REM_INV_RD_REQ_ERR";
    case IBV_WC_REM_ABORT_ERR: return "IBV_WC_REM_ABORT_ERR";
    case IBV_WC_INV_EECN_ERR: return "IBV_WC_INV_EECN_ERR";
    case IBV_WC_INV_EEC_STATE_ERR: return "IBV_WC_INV_EEC_STATE_ERR";
    case IBV_WC_FATAL_ERR: return "IBV_WC_FATAL_ERR";
    case IBV_WC_RESP_TIMEOUT_ERR: return "IBV_WC_RESP_TIMEOUT_ERR";
    case IBV_WC_GENERAL_ERR: return "IBV_WC_GENERAL_ERR";
    case IBV_WC_TM_ERR: return "IBV_WC_TM_ERR";
    case IBV_WC_TM_RNDV_INCOMPLETE: return "IBV_WC_TM_RNDV_INCOMPLETE";
  }
  return fmt::format("IBV_WC_<unknown {}>", static_cast<int>(status));
}

std::string_view wc_opcode_name(ibv_wc_opcode opcode) {
  switch (opcode) {
    case IBV_WC_SEND: return "IBV_WC_SEND";
    case IBV_WC_RDMA_WRITE: return "IBV_WC_RDMA_WRITE";
    case IBV_WC_RDMA_READ: return "IBV_WC_RDMA_READ";
    case IBV_WC_COMP_SWAP: return "IBV_WC_COMP_SWAP";
    case IBV_WC_FETCH_ADD: return "IBV_WC_FETCH_ADD";
    case IBV_WC_BIND_MW: return "IBV_WC_BIND_MW";
    case IBV_WC_LOCAL_INV: return "IBV_WC_LOCAL_INV";
    case IBV_WC_TSO: return "IBV_WC_TSO";
    case IBV_WC_ATOMIC_WRITE: return "IBV_WC_ATOMIC_WRITE";
    case IBV_WC_RECV: return "IBV_WC_RECV";
    case IBV_WC_RECV_RDMA_WITH_IMM: return "IBV_WC_RECV_RDMA_WITH_IMM";
    case IBV_WC_TM_ADD: return "IBV_WC_TM_ADD";
    case IBV_WC_TM_DEL: return "IBV_WC_TM_DEL";
    case IBV_WC_TM_SYNC: return "IBV_WC_TM_SYNC";
    case IBV_WC_TM_RECV: return "IBV_WC_TM_RECV";
    case IBV_WC_TM_NO_TAG: return "IBV_WC_TM_NO_TAG";
    case IBV_WC_DRIVER1: return "IBV_WC_DRIVER1";
    case IBV_WC_DRIVER2: return "IBV_WC_DRIVER2";
    case IBV_WC_DRIVER3: return "IBV_WC_DRIVER3";
  }
  return "IBV_WC_<unknown opcode>";
}

std::string describe_async_event(ibv_event_type type) {
  // Every value of enum ibv_event_type in rdma-core's verbs.h (v44).
  const char* name = nullptr;
  switch (type) {
    case IBV_EVENT_CQ_ERR: name = "IBV_EVENT_CQ_ERR"; break;
    case IBV_EVENT_QP_FATAL: name = "IBV_EVENT_QP_FATAL"; break;
    case IBV_EVENT_QP_REQ_ERR: name = "IBV_EVENT_QP_REQ_ERR"; break;
    case IBV_EVENT_QP_ACCESS_ERR: name = "IBV_EVENT_QP_ACCESS_ERR"; break;
    case IBV_EVENT_COMM_EST: name = "IBV_EVENT_COMM_EST"; break;
    case IBV_EVENT_SQ_DRAINED: name = "IBV_EVENT_SQ_DRAINED"; break;
    case IBV_EVENT_PATH_MIG: name = "IBV_EVENT_PATH_MIG"; break;
    case IBV_EVENT_PATH_MIG_ERR: name = "IBV_EVENT_PATH_MIG_ERR"; break;
    case IBV_EVENT_DEVICE_FATAL: name = "IBV_EVENT_DEVICE_FATAL"; break;
    case IBV_EVENT_PORT_ACTIVE: name = "IBV_EVENT_PORT_ACTIVE"; break;
    case IBV_EVENT_PORT_ERR: name = "IBV_EVENT_PORT_ERR"; break;
    case IBV_EVENT_LID_CHANGE: name = "IBV_EVENT_LID_CHANGE"; break;
    case IBV_EVENT_PKEY_CHANGE: name = "IBV_EVENT_PKEY_CHANGE"; break;
    case IBV_EVENT_SM_CHANGE: name = "IBV_EVENT_SM_CHANGE"; break;
    case IBV_EVENT_SRQ_ERR: name = "IBV_EVENT_SRQ_ERR"; break;
    case IBV_EVENT_SRQ_LIMIT_REACHED: name = "IBV_EVENT_SRQ_LIMIT_REACHED"; break;
    case IBV_EVENT_QP_LAST_WQE_REACHED: name = "IBV_EVENT_QP_LAST_WQE_REACHED"; break;
    case IBV_EVENT_CLIENT_REREGISTER: name = "IBV_EVENT_CLIENT_REREGISTER"; break;
    case IBV_EVENT_GID_CHANGE: name = "IBV_EVENT_GID_CHANGE"; break;
    case IBV_EVENT_WQ_FATAL: name = "IBV_EVENT_WQ_FATAL"; break;
  }
  if (name == nullptr) return fmt::format("IBV_EVENT_<unknown {}>", static_cast<int>(type));
  return fmt::format("{} ({})", name, ibv_event_type_str(type));
}

std::string_view qp_state_name(ibv_qp_state state) {
  switch (state) {
    case IBV_QPS_RESET: return "IBV_QPS_RESET";
    case IBV_QPS_INIT: return "IBV_QPS_INIT";
    case IBV_QPS_RTR: return "IBV_QPS_RTR";
    case IBV_QPS_RTS: return "IBV_QPS_RTS";
    case IBV_QPS_SQD: return "IBV_QPS_SQD";
    case IBV_QPS_SQE: return "IBV_QPS_SQE";
    case IBV_QPS_ERR: return "IBV_QPS_ERR";
    case IBV_QPS_UNKNOWN: return "IBV_QPS_UNKNOWN";
  }
  return "IBV_QPS_<unknown>";
}

std::string describe_completion(const ibv_wc& wc) {
  // The opcode of a failed completion is undefined (ibv_poll_cq(3)), so it is
  // named only for successful ones.
  std::string op = wc.status == IBV_WC_SUCCESS
                       ? fmt::format(", opcode {}", wc_opcode_name(wc.opcode))
                       : std::string();
  return fmt::format("{} ({}){}, wr_id {}, qp {:#x}, vendor_err {:#x}", wc_status_name(wc.status),
                     ibv_wc_status_str(wc.status), op, wc.wr_id, wc.qp_num, wc.vendor_err);
}

Status verbs_call_error(std::string_view call, int rc) {
  // Most verbs return a positive errno; a few providers return -errno.
  return io_error(call, rc < 0 ? -rc : rc);
}

Status verbs_errno_error(std::string_view call) {
  int err = errno;
  return io_error(call, err == 0 ? EIO : err);
}

namespace internal {
void report_cleanup_failure(std::string_view what, int err) {
  spdlog::error("weft verbs cleanup: {} failed: {} (continuing with the remaining objects)", what,
                std::strerror(err));
}
}  // namespace internal

void CleanupErrors::add(const Status& s) {
  if (s.is_ok()) return;
  // fmt rather than operator+=: GCC 12 -O3 reports a false -Wrestrict on the
  // latter (GCC bug 105329).
  message_ = count_++ == 0 ? s.message() : fmt::format("{}; {}", message_, s.message());
}

Status CleanupErrors::status() const {
  if (count_ == 0) return ok_status();
  return {StatusCode::kIo, fmt::format("{} cleanup step(s) failed: {}", count_, message_)};
}

}  // namespace weft::verbs
