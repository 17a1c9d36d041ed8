// Rank, size and rendezvous from launcher environments (store.h).
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

#include "bootstrap/config_env.h"
#include "bootstrap/listen_address.h"
#include "tcp/socket.h"
#include "weft/collectives/store.h"
#include "weft/common/file_util.h"

namespace weft::coll {
namespace {

using internal::env_value;

Result<int> env_int(const char* name, int lo) {
  const char* v = env_value(name);
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < lo || x > (1 << 24)) {
    return invalid_argument(fmt::format("environment: {}='{}' is not an integer >= {}", name, v, lo));
  }
  return static_cast<int>(x);
}

}  // namespace

Result<LaunchInfo> launch_info_from_env() {
  struct Source {
    const char *launcher, *rank, *size, *local;
  };
  const Source sources[] = {
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
      {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
  };
  LaunchInfo info;
  bool found = false;
  for (const Source& s : sources) {
    if (!env_value(s.rank) || !env_value(s.size)) continue;
    WEFT_ASSIGN_OR_RETURN(info.rank, env_int(s.rank, 0));
    WEFT_ASSIGN_OR_RETURN(info.size, env_int(s.size, 1));
    if (env_value(s.local)) {
      WEFT_ASSIGN_OR_RETURN(info.local_rank, env_int(s.local, 0));
    }
    if (info.rank >= info.size) {
      return invalid_argument(fmt::format("environment: {}={} is not below {}={}", s.rank, info.rank, s.size, info.size));
    }
    info.launcher = s.launcher;
    found = true;
    break;
  }
  if (!found) {
    return not_found("no launcher environment: set RANK and WORLD_SIZE (torchrun), or run under mpirun or srun");
  }
  // A listen-address override that names nothing on this host fails here,
  // before the rank opens the store (listen_address.h says why).
  WEFT_RETURN_IF_ERROR(internal::check_listen_overrides(TcpOptions{}).with_context("environment"));
  if (const char* st = env_value("WEFT_STORE")) {
    info.store = st;
  } else if (env_value("MASTER_ADDR") && env_value("MASTER_PORT")) {
    // torchrun's elastic agent keeps its own c10d store listening on
    // MASTER_PORT for the whole job and tells its workers so: rank 0 could
    // not serve there (EADDRINUSE) and every other rank would meet a store
    // that speaks another protocol. Said at once, the same on every rank.
    if (const char* agent = env_value("TORCHELASTIC_USE_AGENT_STORE"); agent && std::string_view(agent) == "True") {
      return failed_precondition(fmt::format(
          "environment: torchrun's agent serves its own store on MASTER_PORT={} (TORCHELASTIC_USE_AGENT_STORE=True); "
          "give weft one of its own: WEFT_STORE=tcp://{}:PORT with a free PORT, the same on every rank (or use weft "
          "through torch.distributed)",
          env_value("MASTER_PORT"), env_value("MASTER_ADDR")));
    }
    info.store = fmt::format("tcp://{}:{}", env_value("MASTER_ADDR"), env_value("MASTER_PORT"));
  } else {
    return not_found("no rendezvous: set MASTER_ADDR and MASTER_PORT, or WEFT_STORE=tcp://host:port or file:/shared/dir");
  }
  return info;
}

Result<TcpStoreOptions> tcp_store_options_from_env() {
  TcpStoreOptions o;
  if (const char* b = env_value("WEFT_STORE_BIND")) o.bind_address = b;
  const char* secret = env_value("WEFT_STORE_SECRET");
  const char* file = env_value("WEFT_STORE_SECRET_FILE");
  if (secret && file) return invalid_argument("environment: set WEFT_STORE_SECRET or WEFT_STORE_SECRET_FILE, not both");
  if (secret) {
    o.secret = secret;
    if (o.secret.size() < 16) return invalid_argument("environment: WEFT_STORE_SECRET is shorter than 16 bytes");
  } else if (file) {
    auto r = read_secret_file(file, 16);
    if (!r) return r.status().with_context("WEFT_STORE_SECRET_FILE");
    o.secret = std::move(*r);
  }
  return o;
}

Result<std::unique_ptr<Store>> open_store(const std::string& spec, int rank,
                                          std::chrono::steady_clock::time_point deadline) {
  std::string_view s = spec;
  if (s.rfind("file:", 0) == 0) {
    WEFT_ASSIGN_OR_RETURN(auto fs, FileStore::open(std::string(s.substr(5))));
    return std::unique_ptr<Store>(std::move(fs));
  }
  if (s.rfind("tcp://", 0) == 0) {
    WEFT_ASSIGN_OR_RETURN(tcp::Endpoint ep, tcp::Endpoint::parse(std::string(s.substr(6))));
    WEFT_ASSIGN_OR_RETURN(TcpStoreOptions options, tcp_store_options_from_env());
    WEFT_ASSIGN_OR_RETURN(auto ts, TcpStore::open(ep.host, ep.port, rank == 0, deadline, options));
    return std::unique_ptr<Store>(std::move(ts));
  }
  return invalid_argument(fmt::format("store '{}' is neither tcp://host:port nor file:/dir", spec));
}

}  // namespace weft::coll
