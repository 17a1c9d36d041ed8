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
  // This process's IPv4 address on its way to the rendezvous, "" when the
  // store cannot tell (files): the network the job was started on, where
  // the TCP transport listens by default (TcpOptions::listen_address).
  virtual std::string local_address() const { return ""; }
};

// In-process store: ranks that are threads of one process (tests, loopback).
class MemoryStore final : public Store {
 public:
  Status set(const std::string& key, const std::string& value) override;
  Result<std::string> get(const std::string& key,
                          std::chrono::steady_clock::time_point deadline) override;
  // The ranks are threads of this process: loopback reaches them all.
  std::string local_address() const override { return "127.0.0.1"; }

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

// torchrun-style TCP store: one process serves it at host:port (rank 0, from
// a background thread); every rank, the server's included, is a client.
// Protocol (all integers little-endian u32): request = op, key length,
// value length, key, value (op 1 = set, 2 = get); a get is answered when the
// key exists: status, value length, value.
class TcpStore final : public Store {
 public:
  // serve: this process listens on port (rank 0). Clients retry connecting
  // until the deadline.
  static Result<std::unique_ptr<TcpStore>> open(const std::string& host, uint16_t port, bool serve,
                                                std::chrono::steady_clock::time_point deadline);
  ~TcpStore() override;
  Status set(const std::string& key, const std::string& value) override;
  Result<std::string> get(const std::string& key,
                          std::chrono::steady_clock::time_point deadline) override;
  std::string local_address() const override;  // getsockname(2) of the client connection

  class Server;

 private:
  TcpStore() = default;
  std::unique_ptr<Server> server_;
  int fd_ = -1;
  std::mutex mu_;  // one request at a time on the client connection
};

// Rank, size and rendezvous as a launcher hands them over, read from the
// environment in this order (first match wins):
//   torchrun:  RANK, WORLD_SIZE, LOCAL_RANK
//   Open MPI:  OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK
//   Slurm:     SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID
// The store: WEFT_STORE ("tcp://host:port" or "file:/shared/dir"), else
// MASTER_ADDR + MASTER_PORT (a TCP store served by rank 0). WEFT_LISTEN_ADDR
// and WEFT_SOCKET_IFNAME (TcpOptions::listen_address) are checked here too:
// one that names nothing on this host fails before any store is opened.
struct LaunchInfo {
  int rank = 0;
  int size = 1;
  int local_rank = -1;
  std::string launcher;  // "torchrun", "openmpi", "slurm"
  std::string store;     // "tcp://host:port" or "file:/dir"
};
Result<LaunchInfo> launch_info_from_env();

// Opens the store a LaunchInfo::store names; rank 0 serves a TCP store.
Result<std::unique_ptr<Store>> open_store(const std::string& spec, int rank,
                                          std::chrono::steady_clock::time_point deadline);

}  // namespace weft::coll
