#include "worker.h"

#include <algorithm>
#include <cctype>
#include <exception>
#include <optional>
#include <stdexcept>

#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

namespace weft::pt {
namespace {

// c10::Error's what() carries a C++ backtrace; Python shows the message.
std::string message_of(const std::exception& e) {
  if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) return c10->what_without_backtrace();
  return e.what();
}

std::string op_name(c10d::OpType t) {
  std::string s = c10d::opTypeToString(t);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Completions (future callbacks) this thread is running, in any group.
thread_local int t_completing = 0;
// The worker whose thread (first or spare) this is, if any.
thread_local const Worker* t_worker = nullptr;

}  // namespace

std::shared_ptr<Worker> Worker::start(const coll::CommConfig& cfg, coll::Store& store, std::string context,
                                      std::chrono::steady_clock::time_point deadline) {
  std::shared_ptr<Worker> w(new Worker(std::move(context)));
  std::promise<Status> created;
  std::future<Status> done = created.get_future();
  // The communicator is made on the thread that will use it: the library
  // places the calling thread (TcpOptions::group_on_cpus) and tells its TCP
  // peers that thread's id (collectives/tcp/peer_cpu.h).
  // The thread holds the worker until it ends: stop() may leave it to end
  // on its own (called from one of its callbacks).
  w->thread_ = std::thread([self = w, &cfg, &store, deadline, &created] {
    t_worker = self.get();
    self->run(cfg, store, deadline, created);
  });
  const Status s = done.get();
  if (!s) {
    w->thread_.join();
    TORCH_CHECK(false, "weft: cannot create the process group (", w->context_, "): ", s.message());
  }
  return w;
}

void Worker::run(const coll::CommConfig& cfg, coll::Store& store, std::chrono::steady_clock::time_point deadline,
                 std::promise<Status>& created) {
  auto comm = coll::Communicator::create(cfg, store, deadline);
  if (!comm) {
    created.set_value(comm.status());
    return;
  }
  comm_ = std::move(*comm);
  peer_transports_.resize(static_cast<size_t>(comm_->size()));
  for (int r = 0; r < comm_->size(); ++r) {
    if (const coll::Transport* t = comm_->transport_for(r)) peer_transports_[static_cast<size_t>(r)] = t->name();
  }
  created.set_value(ok_status());  // cfg and store are the caller's: not touched from here on

  // A second thread takes the jobs while this one runs a work's callbacks,
  // which may wait for a later job (as ProcessGroupGloo's two threads).
  spare_ = std::thread([this] {
    t_worker = this;
    serve(/*spare=*/true);
  });
  serve(/*spare=*/false);
  if (spare_.joinable()) spare_.join();
  comm_.reset();  // says goodbye to the peers from the thread that made it
}

// The spare runs jobs only while the first thread is in callbacks: the
// first is the thread the communicator placed and told its peers about.
void Worker::serve(bool spare) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return !busy_ && (stop_ || (!queue_.empty() && (!spare || in_callbacks_))); });
    if (queue_.empty()) break;  // stop_, and nothing left to run
    lock.unlock();
    run_next(nullptr, !spare);
    lock.lock();
  }
}

// The communicator is released (busy_ false) before the work completes:
// completing runs the future's callbacks, and a callback may wait for a
// collective queued after this one (DDP's PowerSGD hook does), which the
// other thread of serve() (or the waiter itself, run_here) then runs. Only
// the job is guarded, as ProcessGroupGloo's AsyncWork::execute: a
// callback's errors are its own.
bool Worker::run_next(const WeftWork* until, bool first_thread) {
  std::unique_lock<std::mutex> lock(mu_);
  if (busy_ || queue_.empty()) return false;
  // A waiter runs only jobs up to its own: another thread may have taken
  // that one since the waiter looked.
  if (until && !queued(until)) return false;
  Queued q = std::move(queue_.front());
  queue_.pop_front();
  busy_ = true;
  lock.unlock();
  c10::intrusive_ptr<WeftWork> work = std::move(q.work);
  const Job job = std::move(q.job);
  std::optional<std::string> error;
  bool thrown = false;  // by torch, not a Status of the library
  {
    const at::ThreadLocalStateGuard caller(q.tls);
    const c10::AutoGradMode no_autograd(false);
    try {
      const Status s = job(*comm_);
      if (!s) error = s.to_string();
    } catch (const std::exception& e) {
      error = message_of(e);
      thrown = true;
    } catch (...) {
      error = "unknown exception";
      thrown = true;
    }
    // A job throws from torch's side (a staging copy or scratch tensor that
    // cannot be had, an in-place divide refused), on this rank only, before
    // or after its library call: peers already inside the call would wait
    // out the whole timeout. Aborting tells them now, as the library does
    // for its own rank-local errors (a Status: it has failed the
    // communicator where the peers need to know); a group one rank failed
    // a collective of cannot go on anyway.
    if (thrown) {
      comm_->abort(fmt::format("{} failed: {}", op_name(work->retrieveOpType()), *error));
    }
  }
  lock.lock();
  busy_ = false;
  if (first_thread) in_callbacks_ = true;
  completing_.insert(q.seq);
  lock.unlock();
  cv_.notify_all();  // the spare thread, or a waiter, may run the next job
  const bool was = work.get() == until;
  ++t_completing;
  if (!error) {
    work->complete();
  } else {
    work->fail(std::make_exception_ptr(std::runtime_error(
        fmt::format("weft: {} failed ({}): {}", op_name(work->retrieveOpType()), context_, *error))));
  }
  --t_completing;
  work.reset();  // the tensors go back to their owners before the next job
  lock.lock();
  if (first_thread) in_callbacks_ = false;
  completing_.erase(q.seq);
  lock.unlock();
  cv_.notify_all();
  return was;
}

bool Worker::queued(const WeftWork* work) const {
  return std::any_of(queue_.begin(), queue_.end(), [&](const Queued& q) { return q.work.get() == work; });
}

bool Worker::run_here(WeftWork* work) {
  // The jobs ahead of `work` run first, in order: it may be behind others
  // queued while a callback of this thread waited. run_next() returns false
  // without running anything once `work` is no longer queued or another
  // thread runs a job.
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!queued(work) || busy_) return false;
    }
    if (run_next(work)) return true;
  }
}

bool Worker::wait_completed_before(uint64_t seq, std::optional<std::chrono::steady_clock::time_point> deadline) {
  if (t_completing > 0) return true;
  std::unique_lock<std::mutex> lock(mu_);
  const auto done = [&] { return completing_.empty() || *completing_.begin() >= seq; };
  if (!deadline) {
    cv_.wait(lock, done);
    return true;
  }
  return cv_.wait_until(lock, *deadline, done);
}

void Worker::enqueue(c10::intrusive_ptr<WeftWork> work, Job job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    work->set_runner(weak_from_this(), ++enqueued_);
    const uint64_t seq = enqueued_;
    queue_.push_back({std::move(work), std::move(job), seq, at::ThreadLocalState()});
  }
  cv_.notify_all();
}

// A callback on one of the worker's threads may drop the group's last
// reference: joining would then wait for itself (std::thread::join throws
// resource_deadlock_would_occur, and the thread that serves the other is
// never joined), so the threads finish the queue and end on their own.
void Worker::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (!thread_.joinable()) return;
  if (t_worker == this) {
    thread_.detach();
  } else {
    thread_.join();
  }
}

}  // namespace weft::pt
