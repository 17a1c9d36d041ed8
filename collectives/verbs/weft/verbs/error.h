// Verbs error reporting: completion statuses by name, errno from verbs calls.
//
// A completion error is reported with the enum's name and libibverbs' text,
// never a bare number: "IBV_WC_RETRY_EXC_ERR (transport retry counter
// exceeded)" tells an operator what broke; "status 12" does not.
#pragma once

#include <infiniband/verbs.h>

#include <string>
#include <string_view>

#include "weft/common/status.h"

namespace weft::verbs {

// "IBV_WC_REM_ACCESS_ERR"; "IBV_WC_<unknown 99>" for values newer than us.
std::string wc_status_name(ibv_wc_status status);

// "IBV_WC_RETRY_EXC_ERR (transport retry counter exceeded), opcode
// IBV_WC_RDMA_WRITE, wr_id 7, qp 0x11, vendor_err 0x0".
std::string describe_completion(const ibv_wc& wc);

// "IBV_WC_RDMA_WRITE", "IBV_WC_RECV_RDMA_WITH_IMM", ...
std::string_view wc_opcode_name(ibv_wc_opcode opcode);

// "IBV_EVENT_QP_ACCESS_ERR (local access violation error)", ...
std::string describe_async_event(ibv_event_type type);

// "IBV_QPS_RTS", ...
std::string_view qp_state_name(ibv_qp_state state);

// For verbs calls that return an errno value (ibv_modify_qp, ibv_post_send...).
Status verbs_call_error(std::string_view call, int rc);
// For verbs calls that return NULL and set errno (ibv_create_qp, ibv_reg_mr...).
Status verbs_errno_error(std::string_view call);

}  // namespace weft::verbs
