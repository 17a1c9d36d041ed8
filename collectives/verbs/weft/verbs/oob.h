// Out-of-band exchange of EndpointInfo over a connected stream socket (the
// bootstrap connection between two ranks, or a socketpair in tests).
#pragma once

#include <chrono>

#include "weft/common/status.h"
#include "weft/verbs/rc_qp.h"

namespace weft::verbs {

// Writes ours, reads theirs; both sides call it. Fails with the peer's name
// when the socket closes or nothing arrives within `timeout`.
Result<EndpointInfo> exchange_endpoint(int fd, const EndpointInfo& mine, std::chrono::milliseconds timeout,
                                       const std::string& peer_name);

}  // namespace weft::verbs
