#include "weft/common/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace weft {

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error(fmt::format("cannot open {}", path), errno);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return io_error(fmt::format("cannot read {}", path), errno);
  return ss.str();
}

Result<std::string> read_secret_file(const std::string& path, size_t min_bytes) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return io_error("secret file " + path, errno);
  if (st.st_mode & 077) return failed_precondition(fmt::format("secret file {} is readable by others (chmod 600 it)", path));
  WEFT_ASSIGN_OR_RETURN(std::string s, read_file(path));
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  if (s.size() < min_bytes) return invalid_argument(fmt::format("secret in {} is shorter than {} bytes", path, min_bytes));
  return s;
}

namespace {
// Closes the fd and removes the temporary unless release() was called.
class TempFile {
 public:
  explicit TempFile(std::string path) : path_(std::move(path)) {}
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!released_) ::unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  int open() {
    fd_ = ::mkstemp(path_.data());
    return fd_;
  }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  int close() {
    int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }
  void release() { released_ = true; }

 private:
  std::string path_;
  int fd_ = -1;
  bool released_ = false;
};
}  // namespace

Status write_file_atomic(const std::string& path, std::string_view data) {
  if (path.empty()) return invalid_argument("empty output path");
  TempFile tmp(path + ".tmp.XXXXXX");
  if (tmp.open() < 0) return io_error(fmt::format("cannot create a file beside {}", path), errno);
  // mkstemp creates 0600; rank files and plans are meant to be shared.
  ::fchmod(tmp.fd(), 0644);
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(tmp.fd(), p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error(fmt::format("cannot write {}", path), errno);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (tmp.close() != 0) return io_error(fmt::format("cannot write {}", path), errno);
  if (::rename(tmp.path().c_str(), path.c_str()) != 0) {
    return io_error(fmt::format("cannot move output into place at {}", path), errno);
  }
  tmp.release();
  return Status::ok();
}

}  // namespace weft
