// The link events `weft watch` records (table link_events, docs/database.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "weft/db/database.h"

namespace weft::db {

struct LinkEventRow {
  int64_t id = 0;
  std::string link;
  int64_t first_loss_us = 0;
  int64_t localised_us = 0;
  std::optional<int64_t> published_us;
  std::optional<int64_t> restored_us;
  int64_t tuples = 0;
  int64_t failing = 1;
};

// Inserts a link that went down (id, published_us and restored_us ignored); returns its id.
Result<int64_t> add_link_down(Database& db, const LinkEventRow& row);
Status set_link_published(Database& db, int64_t id, int64_t published_us);
Status set_link_restored(Database& db, int64_t id, int64_t restored_us);
Result<std::vector<LinkEventRow>> load_link_events(Database& db);

}  // namespace weft::db
