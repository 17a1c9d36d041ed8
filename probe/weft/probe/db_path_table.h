// The measured path table: routing::PathTable over a probe database's
// observations, for `weft route --paths fabric.db` (routing/path_table.h has
// the contract).
//
// Mapping from the database to the topology file's fabric:
//   hosts   by name (a fabric host with that name, its NIC whose address equals
//           the probed ip, else its first NIC); a NIC with no probed host has
//           no measured ports;
//   spines  spine number N (DSCP X+N, or the N-th ICMP source of a TTL
//           campaign) -> the spine-tier switch whose probe id is N;
//   leaves  from the topology (the NIC's own switch), so a route is always
//           {leaf of src, spine, leaf of dst}, or {leaf} for a same-leaf pair.
// Which campaign: the newest finished one of the query's protocol and dport
// (or a fixed one). Unanswered and unstable 5-tuples are not offered.
//
//   WEFT_ASSIGN_OR_RETURN(auto table, probe::open_db_path_table(fabric, "fabric.db"));
//   table->ports(query, range, 64, out);
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "weft/routing/path_table.h"

namespace weft::probe {

struct DbPathTableOptions {
  std::optional<int64_t> campaign;  // default: newest done campaign per (protocol, dport)
};

Result<std::unique_ptr<routing::PathTable>> open_db_path_table(const topo::Fabric& fabric, const std::string& db_path,
                                                               const DbPathTableOptions& opt = {});

}  // namespace weft::probe
