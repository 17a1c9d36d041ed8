#include "weft/common/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

namespace weft {

Result<std::string> read_file(const std::string& path, size_t spare) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error(fmt::format("cannot open {}", path), errno);
  const struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  // Sized once from fstat(2) of the file opened (a route plan of 65,536
  // ranks is 332 MB: growing by doubling would copy it and hold twice that
  // for a while) and read straight into the string; a file without a size
  // (a pipe, procfs) or one that grows is read on in chunks.
  struct stat st{};
  const size_t hint = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? static_cast<size_t>(st.st_size) : 0;
  std::string s;
  // Room past the size: for `spare`, and so that the end of the file is
  // seen without growing the string.
  s.resize(hint + std::max<size_t>(spare, 4096));
  size_t used = 0;
  for (;;) {
    if (used == s.size()) s.resize(s.size() * 2);
    const ssize_t n = ::read(fd, s.data() + used, s.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error(fmt::format("cannot read {}", path), errno);
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  s.resize(used);
  if (s.capacity() - s.size() < spare) s.reserve(s.size() + spare);
  return s;
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

// The process's umask without changing it (umask(2) can only set it, which
// races with other threads creating files): /proc/self/status "Umask:"
// (Linux 4.7); 022 where it cannot be read.
mode_t current_umask() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Umask:", 0) == 0) return static_cast<mode_t>(std::stoul(line.substr(6), nullptr, 8));
  }
  return 022;
}

// The permission bits write_file_atomic gives `path` (file_util.h).
mode_t mode_for(const std::string& path, std::optional<mode_t> mode) {
  if (mode) return *mode & 07777;
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0) return st.st_mode & 07777;
  return 0666 & ~current_umask();
}

// fsync(2) of the directory holding `path`, so that a rename into it lasts.
int sync_directory(const std::string& path) {
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  const int rc = ::fsync(fd);
  ::close(fd);
  return rc;
}

// `data` written through an existing node that is not a regular file (a
// device, a FIFO): no rename, no creation, no truncation.
Status write_in_place(const std::string& path, std::string_view data) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return io_error(fmt::format("cannot open {} for writing", path), errno);
  const char* p = data.data();
  size_t left = data.size();
  int err = 0;
  while (left > 0 && err == 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno != EINTR) err = errno;
      continue;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::close(fd) != 0 && err == 0 && errno != EINTR) err = errno;
  if (err != 0) return io_error(fmt::format("cannot write {}", path), err);
  return ok_status();
}
}  // namespace

Status write_file_atomic(const std::string& given, std::string_view data, std::optional<mode_t> mode) {
  if (given.empty()) return invalid_argument("empty output path");
  // Renaming a temporary file onto a node that is not a regular file would
  // replace that node: `-o /dev/null` run as root would turn /dev/null into
  // a regular file for the whole system, and `-o /dev/stdout` would replace
  // the link instead of writing to the terminal or pipe. Such a node is
  // written in place (stat(2) follows links). A link to a regular file is
  // followed too: the file it names is replaced, and the link stays.
  struct stat st{};
  if (::stat(given.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) return invalid_argument(fmt::format("{} is a directory", given));
    return write_in_place(given, data);
  }
  std::string path = given;
  if (::lstat(given.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    std::error_code ec;
    const std::filesystem::path target = std::filesystem::weakly_canonical(given, ec);
    if (ec) return io_error(fmt::format("cannot follow the link {}", given), ec.value());
    path = target.string();
  }
  TempFile tmp(path + ".tmp.XXXXXX");
  if (tmp.open() < 0) return io_error(fmt::format("cannot create a file beside {}", path), errno);
  // mkstemp creates 0600, which only ever widens to what was asked.
  if (::fchmod(tmp.fd(), mode_for(path, mode)) != 0) return io_error(fmt::format("cannot set the mode of {}", path), errno);
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
  if (::fsync(tmp.fd()) != 0) return io_error(fmt::format("cannot write {} to disk", path), errno);
  if (tmp.close() != 0) return io_error(fmt::format("cannot write {}", path), errno);
  if (::rename(tmp.path().c_str(), path.c_str()) != 0) {
    return io_error(fmt::format("cannot move output into place at {}", path), errno);
  }
  tmp.release();
  if (sync_directory(path) != 0) return io_error(fmt::format("cannot write the directory of {} to disk", path), errno);
  return ok_status();
}

}  // namespace weft
