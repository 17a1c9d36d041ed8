// The Python extension weft_torch._C: ProcessGroupWeft as a subclass of
// torch.distributed.ProcessGroup. weft_torch/__init__.py registers it as the
// backend "weft".
#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include <torch/csrc/utils/pybind.h>

#include "process_group.h"
#include "store_adapter.h"

namespace py = pybind11;

namespace weft::pt {
namespace {

// Holds a process group for Python and drops it without the GIL: its
// destructor joins the worker thread, whose last work may be completing a
// future with a Python callback (DDP's hooks, Future.then) that needs the
// GIL. torch.distributed holds its own process groups the same way.
template <typename T>
class GilFreeHolder {
 public:
  GilFreeHolder() = default;
  GilFreeHolder(c10::intrusive_ptr<T> p) : p_(std::move(p)) {}  // NOLINT: pybind11 converts
  // pybind11 makes a holder from a raw pointer to an object it allocated
  // (no owner yet) or to one a C++ owner returned (a new reference).
  explicit GilFreeHolder(T* p)
      : p_(c10::raw::intrusive_ptr::use_count(p) == 0 ? c10::intrusive_ptr<T>::unsafe_steal_from_new(p)
                                                      : c10::intrusive_ptr<T>::reclaim_copy(p)) {}
  GilFreeHolder(const GilFreeHolder&) = default;
  GilFreeHolder(GilFreeHolder&&) noexcept = default;
  GilFreeHolder& operator=(const GilFreeHolder&) = default;
  GilFreeHolder& operator=(GilFreeHolder&&) noexcept = default;
  ~GilFreeHolder() {
    if (!p_) return;
    if (PyGILState_Check()) {
      py::gil_scoped_release release;
      p_.reset();
    } else {
      p_.reset();
    }
  }
  T* get() const noexcept { return p_.get(); }
  T& operator*() const noexcept { return *p_; }
  T* operator->() const noexcept { return p_.get(); }

 private:
  c10::intrusive_ptr<T> p_;
};

}  // namespace
}  // namespace weft::pt

PYBIND11_DECLARE_HOLDER_TYPE(T, weft::pt::GilFreeHolder<T>, true);

PYBIND11_MODULE(_C, m) {
  using weft::pt::ProcessGroupWeft;
  m.doc() = "weft's collective library as a torch.distributed process group";
  // The base class must be known to pybind11: torch.distributed binds it.
  py::module_::import("torch.distributed");
  const py::object base = py::module_::import("torch._C._distributed_c10d").attr("ProcessGroup");

  py::class_<ProcessGroupWeft, weft::pt::GilFreeHolder<ProcessGroupWeft>>(m, "ProcessGroupWeft", base)
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, int64_t timeout_ms,
                       std::vector<int64_t> global_ranks, std::string group_name) {
             // timedelta.max and the like ("no timeout"): the longest a
             // deadline can be made of.
             weft::pt::GroupInfo group{std::move(group_name), std::move(global_ranks),
                                       std::min(std::chrono::milliseconds(timeout_ms), weft::coll::kLongestTimeout)};
             auto options = weft::pt::backend_options_from_env();
             if (!options) {
               weft::pt::hold_until_every_rank_failed(store, size, std::chrono::steady_clock::now() + group.timeout);
               TORCH_CHECK(false, "weft: ", options.status().message());
             }
             return weft::pt::GilFreeHolder<ProcessGroupWeft>(
                 c10::make_intrusive<ProcessGroupWeft>(store, rank, size, std::move(group), *options));
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_ms"), py::arg("global_ranks"),
           py::arg("group_name"), py::call_guard<py::gil_scoped_release>(),
           "Creates the group's communicator through `store` (every member calls it at once).")
      .def("_peer_transports", &ProcessGroupWeft::peer_transports,
           "The library transport serving each rank of the group ('shm', 'tcp'; '' for this rank).");
}
