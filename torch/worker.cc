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

}  // namespace

std::shared_ptr<Worker> Worker::start(const coll::CommConfig& cfg, coll::Store& store, std::string context) {
  std::shared_ptr<Worker> w(new Worker(std::move(context)));
  std::promise<Status> created;
  std::future<Status> done = created.get_future();
  // The communicator is made on the thread that will use it: the library
  // places the calling thread (TcpOptions::group_on_cpus) and tells its TCP
  // peers that thread's id (collectives/tcp/peer_cpu.h).
  w->thread_ = std::thread([&w = *w, &cfg, &store, &created] { w.run(cfg, store, created); });
  const Status s = done.get();
  if (!s) {
    w->thread_.join();
    TORCH_CHECK(false, "weft: cannot create the process group (", w->context_, "): ", s.message());
  }
  return w;
}

void Worker::run(const coll::CommConfig& cfg, coll::Store& store, std::promise<Status>& created) {
  auto comm = coll::Communicator::create(cfg, store);
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

  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return !busy_ && (stop_ || !queue_.empty()); });
    if (queue_.empty()) break;  // stop_, and nothing left to run
    auto [work, job] = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    run_job(*work, job);
    work.reset();  // the tensors go back to their owners before the next job
    lock.lock();
    busy_ = false;
  }
  lock.unlock();
  comm_.reset();  // says goodbye to the peers from the thread that used it
}

// As ProcessGroupGloo's AsyncWork::execute: only the job is guarded;
// completing the work runs the future's callbacks, whose errors are theirs.
void Worker::run_job(WeftWork& work, const Job& job) {
  const c10::AutoGradMode no_autograd(false);
  std::optional<std::string> error;
  try {
    const Status s = job(*comm_);
    if (!s) error = s.to_string();
  } catch (const std::exception& e) {
    error = message_of(e);
  } catch (...) {
    error = "unknown exception";
  }
  if (!error) {
    work.complete();
    return;
  }
  work.fail(std::make_exception_ptr(
      std::runtime_error(fmt::format("weft: {} failed ({}): {}", op_name(work.retrieveOpType()), context_, *error))));
}

bool Worker::run_here(WeftWork* work) {
  std::unique_lock<std::mutex> lock(mu_);
  if (busy_ || queue_.empty() || queue_.front().first.get() != work) return false;
  auto [w, job] = std::move(queue_.front());
  queue_.pop_front();
  busy_ = true;
  lock.unlock();
  run_job(*w, job);
  lock.lock();
  busy_ = false;
  lock.unlock();
  cv_.notify_one();  // the worker thread may have work queued behind this one
  return true;
}

void Worker::enqueue(c10::intrusive_ptr<WeftWork> work, Job job) {
  work->set_runner(weak_from_this());
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.emplace_back(std::move(work), std::move(job));
  }
  cv_.notify_one();
}

Worker::~Worker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

}  // namespace weft::pt
