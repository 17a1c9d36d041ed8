// In-process transport: ranks are threads of one process (unit tests, the
// correctness matrix). Rank 0 creates a hub and publishes its id in the
// store; every pair is a pair of queues in the hub, and the thread that posts
// the second half of a send/recv match copies the bytes.
#pragma once

#include <memory>

#include "weft/collectives/transport.h"

namespace weft::coll {

Result<std::unique_ptr<Transport>> make_loopback_transport(const TransportConfig& config,
                                                           Store& store, Deadline deadline);

}  // namespace weft::coll
