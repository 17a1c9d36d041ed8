// Whole-file reads and all-or-nothing writes.
//
// Every command that writes a file (rank files, topologies, plans) goes through
// write_file_atomic: the data lands in a temporary file beside the target and is
// renamed over it only when complete, so a failure never leaves partial output
// (rename(2) is atomic within one file system).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "weft/common/status.h"

namespace weft {

// The whole file. `spare`: capacity to keep beyond its bytes, for a parser
// that may read past the end (simdjson reads SIMDJSON_PADDING bytes more and
// copies a buffer without them).
Result<std::string> read_file(const std::string& path, size_t spare = 0);
// mode: the file's permission bits; by default those of the file it
// replaces, else 0666 less the umask, as open(2) creates files (a secret
// passes 0600: it is never readable by others, not even for a moment). The
// data is fsync'ed before the rename and the directory after it, so a crash
// leaves the old file or the new one, never an empty one (rename(2) alone
// does not promise that on ext4 or XFS). A path that names a device or a FIFO
// (/dev/null, /dev/stdout) is written in place instead, never replaced; a
// symbolic link is followed (the file it names is replaced, the link stays);
// a directory is refused.
Status write_file_atomic(const std::string& path, std::string_view data, std::optional<mode_t> mode = std::nullopt);
// A shared secret from a file that only its owner may read (refused when
// the group or others have any permission on it), trailing newlines
// dropped, at least min_bytes long.
Result<std::string> read_secret_file(const std::string& path, size_t min_bytes);

}  // namespace weft
