// The schema's migrations (migrations.cc), applied in order by
// Database::migrate (database.cc). Internal to the db library.
#pragma once

#include <cstddef>

namespace weft::db::internal {

struct Migration {
  int version;
  const char* what;
  const char* sql;
};

// The migrations in version order; *count receives how many.
const Migration* migrations(size_t* count);

}  // namespace weft::db::internal
