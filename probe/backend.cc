// Backend selection by name (backend.h).
#include <fmt/format.h>

#include "weft/probe/backend.h"

namespace weft::probe {

Result<std::unique_ptr<SenderBackend>> make_udp_sender(const SenderConfig& cfg);
Result<std::unique_ptr<SenderBackend>> make_tcp_syn_sender(const SenderConfig& cfg);
Result<std::unique_ptr<SenderBackend>> make_dpdk_sender(const SenderConfig& cfg);

Result<std::unique_ptr<SenderBackend>> make_sender(std::string_view backend, const SenderConfig& cfg) {
  if (cfg.probe_dscp > 63) return invalid_argument(fmt::format("probe DSCP {} > 63 (DSCP is 6 bits)", cfg.probe_dscp));
  if (cfg.dport == 0) return invalid_argument("probe destination port 0");
  // The probe MAC names the source address; a socket bound to 0.0.0.0 would
  // leave the kernel to pick another one and every probe would be refused.
  if (cfg.local_ip == 0) return invalid_argument("probe sender without a local address (local_ip 0.0.0.0)");
  if (backend == "udp") return make_udp_sender(cfg);
  if (backend == "tcp-syn") return make_tcp_syn_sender(cfg);
  if (backend == "dpdk") return make_dpdk_sender(cfg);
  return invalid_argument(fmt::format("unknown probe backend '{}' (udp, tcp-syn, dpdk)", backend));
}

}  // namespace weft::probe
