// The threads of a weft process group: the first creates the group's
// communicator, then two run the group's collectives one after the other,
// in the order they were called, as ProcessGroupGloo's worker threads do
// (the second takes over while the first runs a finished work's callbacks). A communicator
// is used by one thread at a time (weft/collectives/communicator.h), and the
// caller (the training loop, DDP's autograd hooks) goes on while the data
// moves.
//
//   auto w = Worker::start(cfg, store, "rank 1 of 4", deadline);   // throws if setup fails
//   w->enqueue(work, [=](coll::Communicator& c) { return c.barrier(); });
//
// A thread that waits for a queued job may run it, and the jobs ahead of
// it, itself (run_here, WeftWork::wait); jobs still run one at a time and in
// order. A work completes (running its future's callbacks) after the
// communicator is released, so a callback may wait for a later job. A
// job runs with autograd off (a tensor that requires grad is written in
// place, as Gloo's raw copies do). A job that returns an error or throws
// fails its work (and future) with a std::runtime_error whose message
// names the operation, this rank and the library's message (which names
// the rank that was lost). A communicator that failed stays failed: later
// jobs fail at once with the first error.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <ATen/ThreadLocalState.h>

#include "weft/collectives/communicator.h"
#include "work.h"

namespace weft::pt {

class Worker : public std::enable_shared_from_this<Worker> {
 public:
  using Job = std::function<Status(coll::Communicator&)>;

  // Starts the thread, which creates the communicator through `store`
  // (collective: every rank of the group calls it) and returns once it
  // exists, or fails at `deadline`. `context` ("rank 1 of 4 in group 0")
  // prefixes every error. Throws c10::Error when the communicator cannot be
  // created.
  static std::shared_ptr<Worker> start(const coll::CommConfig& cfg, coll::Store& store, std::string context,
                                       std::chrono::steady_clock::time_point deadline);
  // Runs the queued jobs, then stops the threads (each job is bounded by
  // the communicator's timeout): returns when they have ended, or at once
  // when called on one of them (a callback), which then ends after the
  // queue on its own. The threads hold the worker until they end.
  void stop();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  void enqueue(c10::intrusive_ptr<WeftWork> work, Job job);
  // Runs the queued jobs up to and including `work` on the calling thread
  // while no other thread runs one; returns whether this thread ran `work`.
  // Calls still run one at a time and in order.
  bool run_here(WeftWork* work);
  // Returns true once every work queued before the one numbered `seq` has
  // completed (callbacks included), false if `deadline` comes first; true
  // at once on a thread that is running a work's callbacks, which may be
  // what such a work waits for.
  bool wait_completed_before(uint64_t seq, std::optional<std::chrono::steady_clock::time_point> deadline = {});

  // The transport that serves each rank ("shm", "tcp"; "" for this rank),
  // as set up by create().
  const std::vector<std::string>& peer_transports() const { return peer_transports_; }

 private:
  explicit Worker(std::string context) : context_(std::move(context)) {}
  void run(const coll::CommConfig& cfg, coll::Store& store, std::chrono::steady_clock::time_point deadline,
           std::promise<Status>& created);
  // Runs jobs until stopped with nothing queued: the first thread, and the
  // spare while the first runs callbacks.
  void serve(bool spare);
  // Runs the front job, if no thread runs one, and completes its work;
  // returns whether that work was `until`.
  bool run_next(const WeftWork* until = nullptr, bool first_thread = false);
  // Whether `work` waits in the queue (mu_ held).
  bool queued(const WeftWork* work) const;

  const std::string context_;
  std::unique_ptr<coll::Communicator> comm_;
  std::vector<std::string> peer_transports_;
  std::mutex mu_;
  std::condition_variable cv_;
  struct Queued {
    c10::intrusive_ptr<WeftWork> work;
    Job job;
    uint64_t seq;
    // The caller's thread-local state (inference mode, dispatch keys, ...):
    // a job runs on the worker or on a waiting thread, whichever is free,
    // and its ATen calls must see what the caller's would (as
    // c10::ivalue::Future::then carries it).
    at::ThreadLocalState tls;
  };
  std::deque<Queued> queue_;
  uint64_t enqueued_ = 0;         // works queued so far: the next one's seq - 1
  std::set<uint64_t> completing_;  // works run whose completion has not returned
  bool busy_ = false;  // a job runs (on the worker thread or in run_here)
  bool stop_ = false;
  bool in_callbacks_ = false;  // the first thread runs a finished work's callbacks: the spare may take jobs
  std::thread thread_;
  std::thread spare_;  // started and joined by thread_ (run)
};

}  // namespace weft::pt
