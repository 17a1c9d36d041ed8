// Rendezvous key-value stores: how ranks find each other before any
// transport is up (Gloo's rendezvous/{file,tcp}_store, torchrun's TCPStore).
//
//   auto store = weft::coll::FileStore::open("/shared/dir/job42");
//   store->set("weft/tcp/3", address);
//   auto peer = store->get("weft/tcp/5", deadline);   // blocks until set
//
// Keys are written once; get() waits for the key or the deadline. Values are
// opaque bytes.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "weft/common/status.h"

namespace weft::coll {

class Store {
 public:
  virtual ~Store() = default;
  virtual Status set(const std::string& key, const std::string& value) = 0;
  // Waits until the key exists; kDeadlineExceeded names the key.
  virtual Result<std::string> get(const std::string& key,
                                  std::chrono::steady_clock::time_point deadline) = 0;
};

// In-process store: ranks that are threads of one process (tests, loopback).
class MemoryStore final : public Store {
 public:
  Status set(const std::string& key, const std::string& value) override;
  Result<std::string> get(const std::string& key,
                          std::chrono::steady_clock::time_point deadline) override;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> kv_;
};

// One file per key in a directory every rank can read (a shared file system
// or, on one host, /tmp). Writes are atomic (temporary file + rename), so a
// reader never sees half a value.
class FileStore final : public Store {
 public:
  static Result<std::unique_ptr<FileStore>> open(const std::string& dir);
  Status set(const std::string& key, const std::string& value) override;
  Result<std::string> get(const std::string& key,
                          std::chrono::steady_clock::time_point deadline) override;

 private:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {}
  std::string path_of(const std::string& key) const;
  std::string dir_;
};

}  // namespace weft::coll
