#include "path_source.h"

#include <fmt/format.h>

namespace weft::cli {
namespace {

DbPathTableFactory& db_factory() {
  static DbPathTableFactory f;
  return f;
}

}  // namespace

void set_db_path_table_factory(DbPathTableFactory factory) { db_factory() = std::move(factory); }

Result<std::unique_ptr<routing::PathTable>> open_path_table(const topo::Fabric& f, const std::string& paths,
                                                            const ModelSpec& model) {
  if (paths == "model") {
    auto hash = routing::make_hash(model.hash, model.seed);
    if (!hash) return hash.status();
    return routing::make_model_path_table(f, std::move(*hash), model.draw_seed);
  }
  if (paths.empty()) return invalid_argument("--paths is empty (model, or a probe database file)");
  if (!db_factory()) {
    return unimplemented(fmt::format(
        "--paths {}: this weft has no probe-database reader (the probe stage registers it); use --paths model",
        paths));
  }
  return db_factory()(f, paths);
}

}  // namespace weft::cli
