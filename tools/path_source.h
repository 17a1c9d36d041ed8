// Where `weft route --paths` (and weft sim) get their path table.
//
//   --paths model       an ECMP hash model over the topology (--hash, --seed)
//   --paths FILE        a probe database (fabric.db) with measured paths
//
// routing/ defines the PathTable interface; the measured table lives in the
// probe stage, which tools/ links. The probe stage plugs in here: main.cc
// calls set_db_path_table_factory() with its opener once, before parsing, and
// from then on `--paths fabric.db` opens that table. Without a registered
// opener, a file argument is an error that says so.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "weft/routing/path_table.h"

namespace weft::cli {

// Ports per pair a planner asks a probe database for: every port it holds
// (campaigns probe at most this many per pair, targeted ones included), so
// that the ports a targeted campaign gathered are all on offer.
inline constexpr int kDbPortsPerPair = 1024;

struct ModelSpec {
  std::string hash = "crc32";  // routing::make_hash model name
  uint32_t seed = 1;           // switch hash seed
  uint32_t draw_seed = 1;      // which ports the model samples per pair
};

using DbPathTableFactory =
    std::function<Result<std::unique_ptr<routing::PathTable>>(const topo::Fabric& fabric, const std::string& path)>;

void set_db_path_table_factory(DbPathTableFactory factory);

Result<std::unique_ptr<routing::PathTable>> open_path_table(const topo::Fabric& f, const std::string& paths,
                                                            const ModelSpec& model);

}  // namespace weft::cli
