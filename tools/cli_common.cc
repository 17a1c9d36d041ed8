#include "cli_common.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "weft/common/file_util.h"

namespace weft::cli {

int fail(const Status& st) {
  std::string msg = st.message();
  for (char& c : msg) {
    if (c == '\n') c = ' ';
  }
  // What went to stdout before the error is flushed first, so that a
  // transcript of both streams reads in the order things happened.
  std::fflush(stdout);
  fmt::print(stderr, "weft: error: {}\n", msg);
  return 1;
}

int finish_stdout(int rc) {
  // As gnulib's close_stdout: output that could not be written (a full
  // disk, /dev/full, a closed descriptor) is an error even when the command
  // itself succeeded, or a script would take a truncated file for a result.
  errno = 0;
  if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return rc;
  const int err = errno != 0 ? errno : EIO;
  std::clearerr(stdout);
  if (rc != 0) return rc;  // the command's own error was printed already
  fmt::print(stderr, "weft: error: {}\n", io_error("writing standard output", err).message());
  return 1;
}

std::optional<uint64_t> parse_size(std::string_view s) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p == s.data()) return std::nullopt;
  std::string unit(p, s.data() + s.size());
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  uint64_t mul = 1;
  if (unit.empty() || unit == "b") mul = 1;
  else if (unit == "k" || unit == "kib" || unit == "kb") mul = 1ull << 10;
  else if (unit == "m" || unit == "mib" || unit == "mb") mul = 1ull << 20;
  else if (unit == "g" || unit == "gib" || unit == "gb") mul = 1ull << 30;
  else return std::nullopt;
  if (v > UINT64_MAX / mul) return std::nullopt;  // 16777216G would wrap to 0
  return v * mul;
}

std::string format_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  return u == 0 ? fmt::format("{:.0f} {}", b, units[u]) : fmt::format("{:.1f} {}", b, units[u]);
}

Status emit(const std::string& path, std::string_view text) {
  if (path.empty() || path == "-") {
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
      return io_error("writing standard output", errno);
    }
    return ok_status();
  }
  return write_file_atomic(path, text);
}

Status check_output_path(std::string_view flag, const std::string& path) {
  if (path.empty() || path == "-") return ok_status();
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return invalid_argument(fmt::format("{} {} is a directory", flag, path));
  }
  // A device or FIFO (/dev/null) is written in place (write_file_atomic).
  const auto kind = std::filesystem::status(path, ec).type();
  if (!ec && kind != std::filesystem::file_type::regular && kind != std::filesystem::file_type::not_found) {
    if (::access(path.c_str(), W_OK) != 0) return io_error(fmt::format("{} {}: cannot write there", flag, path), errno);
    return ok_status();
  }
  // The same template write_file_atomic uses (common/file_util.cc), beside
  // the file a link names.
  std::string real = path;
  if (std::filesystem::is_symlink(path, ec)) {
    const auto target = std::filesystem::weakly_canonical(path, ec);
    if (!ec) real = target.string();
  }
  std::string tmp = real + ".tmp.XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) return io_error(fmt::format("{} {}: cannot create a file there", flag, path), errno);
  ::close(fd);
  ::unlink(tmp.c_str());
  return ok_status();
}

void add_nccl_ring_options(CLI::App& cmd, std::optional<int>& channels, std::optional<int>& qps) {
  cmd.add_option("--channels", channels,
                 fmt::format("nccl-ring: NCCL channels, 1..{} (default 1)", routing::kMaxNcclChannels));
  cmd.add_option("--qps", qps,
                 fmt::format("nccl-ring: QPs per connection, 1..{} (the plugin's WEFT_NCCL_QPS; default 1)",
                             routing::kMaxNcclQps));
}

Result<routing::Collective> collective_option(std::string_view s) {
  if (auto c = routing::parse_collective(s)) return *c;
  return invalid_argument(
      fmt::format("unknown --collective '{}' (allreduce-hd, allreduce-ring, allreduce-hybrid, nccl-ring)", s));
}

Result<routing::NcclRingShape> nccl_ring_shape(std::string_view collective, std::optional<int> channels,
                                               std::optional<int> qps) {
  if (collective != routing::collective_name(routing::Collective::kNcclRing)) {
    if (channels || qps) {
      return invalid_argument(fmt::format("{} is for --collective nccl-ring only, not {}", channels ? "--channels" : "--qps",
                                          collective));
    }
    return routing::NcclRingShape{};
  }
  routing::NcclRingShape shape{channels.value_or(1), qps.value_or(1)};
  if (shape.channels < 1 || shape.channels > routing::kMaxNcclChannels) {
    return invalid_argument(fmt::format("--channels {} is out of range (1..{}, NCCL's MAXCHANNELS)", shape.channels,
                                        routing::kMaxNcclChannels));
  }
  if (shape.qps < 1 || shape.qps > routing::kMaxNcclQps) {
    return invalid_argument(fmt::format("--qps {} is out of range (1..{}, the plugin's WEFT_NCCL_QPS)", shape.qps,
                                        routing::kMaxNcclQps));
  }
  return shape;
}

std::vector<int> access_down_nics(const topo::Fabric& f, const std::vector<int>& alloc) {
  std::vector<int> down;
  for (int nic : alloc) {
    if (f.links[static_cast<size_t>(f.nic_link(nic))].state != topo::LinkState::kUp) down.push_back(nic);
  }
  return down;
}

std::string describe_access(const topo::Fabric& f, const std::vector<int>& nics) {
  std::string out;
  const size_t shown = std::min<size_t>(nics.size(), 4);
  for (size_t i = 0; i < shown; ++i) {
    const int nic = nics[i];
    out += fmt::format("{}{} (to '{}')", i ? ", " : "", f.nic_qualified_name(nic),
                       f.switches[static_cast<size_t>(f.nic_switch(nic))].name);
  }
  return nics.size() > shown ? out + ", ..." : out;
}

}  // namespace weft::cli
