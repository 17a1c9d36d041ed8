#include <sys/stat.h>

#include <cerrno>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "weft/collectives/store.h"
#include "weft/common/file_util.h"

namespace weft::coll {

Status MemoryStore::set(const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> l(mu_);
    kv_[key] = value;
  }
  cv_.notify_all();
  return ok_status();
}

Result<std::string> MemoryStore::get(const std::string& key,
                                     std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> l(mu_);
  if (!cv_.wait_until(l, deadline, [&] { return kv_.count(key) > 0; })) {
    return deadline_exceeded(fmt::format("store: key '{}' was not set in time", key));
  }
  return kv_[key];
}

Result<std::unique_ptr<FileStore>> FileStore::open(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return io_error(fmt::format("file store: creating {}", dir), ec.value());
  return std::unique_ptr<FileStore>(new FileStore(dir));
}

// Keys contain '/', which becomes '%' so every key is one flat file name.
std::string FileStore::path_of(const std::string& key) const {
  std::string name = key;
  for (char& c : name) {
    if (c == '/') c = '%';
  }
  return dir_ + "/" + name;
}

Status FileStore::set(const std::string& key, const std::string& value) {
  return write_file_atomic(path_of(key), value).with_context("file store");
}

Result<std::string> FileStore::get(const std::string& key,
                                   std::chrono::steady_clock::time_point deadline) {
  const std::string path = path_of(key);
  auto pause = std::chrono::microseconds(100);
  for (;;) {
    struct stat st{};
    if (::stat(path.c_str(), &st) == 0) return read_file(path);
    if (std::chrono::steady_clock::now() > deadline) {
      return deadline_exceeded(fmt::format("file store: key '{}' did not appear in {}", key, dir_));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
}

}  // namespace weft::coll
