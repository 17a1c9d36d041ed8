// Rank files: the rank order written for the launcher that starts the job.
//
//   openmpi   Open MPI rankfile, "rank N=host slot=S" (mpirun --rankfile;
//             slot = the NIC's index on its host, one process per subnode)
//   mpich     MPICH/Hydra hostfile "host:count", consecutive ranks on a host
//             merged (mpiexec -f; Hydra fills hosts in file order)
//   slurm     SLURM_HOSTFILE, one host per rank (srun -m arbitrary)
//   hccl      HCCL rank table JSON, version 1.0 layout (server_list/device)
//   torchrun  node order for torchrun's --node_rank (equal ranks per host,
//             each host's ranks contiguous — otherwise an error says why)
//   csv       "rank,host,nic,switch" (switch = where the NIC attaches)
//
// openmpi, hccl and csv carry the NIC of every rank and read back exactly;
// mpich, slurm and torchrun carry hosts only, and a read resolves the k-th
// rank on a host to the host's k-th NIC.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "weft/ranking/rank_order.h"

namespace weft::ranking {

enum class RankFormat { kOpenMpi, kMpich, kSlurm, kHccl, kTorchrun, kCsv };

std::string_view rank_format_name(RankFormat f);
std::optional<RankFormat> parse_rank_format(std::string_view s);
bool format_carries_nics(RankFormat f);

Result<std::string> format_rank_file(const topo::Fabric& f, const RankOrder& order, RankFormat fmt);
Status write_rank_file(const topo::Fabric& f, const RankOrder& order, RankFormat fmt, const std::string& path);

// Parses a rank file; `fmt` nullopt detects the format from the content.
Result<RankOrder> parse_rank_file(const topo::Fabric& f, const std::string& text,
                                  std::optional<RankFormat> fmt = std::nullopt);
Result<RankOrder> load_rank_file(const topo::Fabric& f, const std::string& path,
                                 std::optional<RankFormat> fmt = std::nullopt);
std::optional<RankFormat> detect_rank_format(std::string_view text);

}  // namespace weft::ranking
