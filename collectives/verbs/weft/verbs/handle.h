// Handle<T, Destroy>: RAII ownership of one ibv_* object.
//
// Every ibv_* object weft creates lives in a Handle, so cleanup runs on every
// path, in reverse order of creation (C++ member order), and never stops at
// the first failure: a failing ibv_destroy_* is reported and the remaining
// handles are still destroyed. rdma-core's examples use goto ladders that leak
// everything below the first failing step.
//
//   CqHandle cq(ibv_create_cq(ctx, 64, nullptr, nullptr, 0));
//   if (!cq) return verbs_errno_status("ibv_create_cq");
//   ...
//   WEFT_RETURN_IF_ERROR(cq.close());  // or let the destructor do it
#pragma once

#include <infiniband/verbs.h>

#include <cerrno>
#include <string>
#include <string_view>
#include <utility>

#include "weft/common/status.h"

namespace weft::verbs {

namespace internal {
// Logs a destroy failure that nobody can return any more (a destructor).
void report_cleanup_failure(std::string_view what, int err);
}  // namespace internal

// Collects the failures of several close() calls: the first one does not stop
// the others. ok() when all succeeded; otherwise every failure, joined by "; ".
class CleanupErrors {
 public:
  void add(const Status& s);
  Status status() const;

 private:
  std::string message_;
  int count_ = 0;
};

// Destroy returns 0 or an errno value (all ibv_destroy_*/dealloc/dereg/close
// calls do, per their man pages); Name is what a failure report calls it.
template <typename T, int (*Destroy)(T*), const char* Name>
class Handle {
 public:
  Handle() = default;
  explicit Handle(T* p) : p_(p) {}
  Handle(Handle&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      destroy_reporting();
      p_ = std::exchange(o.p_, nullptr);
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { destroy_reporting(); }

  T* get() const { return p_; }
  T* operator->() const { return p_; }
  explicit operator bool() const { return p_ != nullptr; }

  // Destroys now and says whether it worked. The handle is empty afterwards
  // either way: a failed destroy is not retried (the object's state is
  // unknown), and retrying from the destructor would report it twice.
  Status close() {
    if (p_ == nullptr) return ok_status();
    int rc = Destroy(std::exchange(p_, nullptr));
    if (rc == 0) return ok_status();
    return io_error(Name, rc < 0 ? -rc : rc);
  }

 private:
  void destroy_reporting() {
    if (p_ == nullptr) return;
    int rc = Destroy(std::exchange(p_, nullptr));
    if (rc != 0) internal::report_cleanup_failure(Name, rc < 0 ? -rc : rc);
  }
  T* p_ = nullptr;
};

namespace names {
inline constexpr char kCloseDevice[] = "ibv_close_device";
inline constexpr char kDeallocPd[] = "ibv_dealloc_pd";
inline constexpr char kDeregMr[] = "ibv_dereg_mr";
inline constexpr char kDestroyCq[] = "ibv_destroy_cq";
inline constexpr char kDestroyCompChannel[] = "ibv_destroy_comp_channel";
inline constexpr char kDestroyQp[] = "ibv_destroy_qp";
}  // namespace names

using ContextHandle = Handle<ibv_context, ibv_close_device, names::kCloseDevice>;
using PdHandle = Handle<ibv_pd, ibv_dealloc_pd, names::kDeallocPd>;
using MrHandle = Handle<ibv_mr, ibv_dereg_mr, names::kDeregMr>;
using CqHandle = Handle<ibv_cq, ibv_destroy_cq, names::kDestroyCq>;
using CompChannelHandle = Handle<ibv_comp_channel, ibv_destroy_comp_channel, names::kDestroyCompChannel>;
using QpHandle = Handle<ibv_qp, ibv_destroy_qp, names::kDestroyQp>;

}  // namespace weft::verbs
