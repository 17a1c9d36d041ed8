#include "tensors.h"

#include <string>

#include <c10/util/Exception.h>

#include "huge_pages.h"

namespace weft::pt {
namespace {

bool is_floating(coll::DataType t) {
  return t == coll::DataType::kF32 || t == coll::DataType::kF64 || t == coll::DataType::kF16 ||
         t == coll::DataType::kBF16;
}

}  // namespace

// Not ATen's names ("Float"): the ones a Python user writes.
std::string python_name(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "torch.float32";
    case at::kDouble: return "torch.float64";
    case at::kHalf: return "torch.float16";
    case at::kBFloat16: return "torch.bfloat16";
    case at::kInt: return "torch.int32";
    case at::kLong: return "torch.int64";
    case at::kShort: return "torch.int16";
    case at::kChar: return "torch.int8";
    case at::kByte: return "torch.uint8";
    case at::kBool: return "torch.bool";
    case at::kComplexFloat: return "torch.complex64";
    case at::kComplexDouble: return "torch.complex128";
    case at::kQUInt8: return "torch.quint8";
    case at::kQInt8: return "torch.qint8";
    case at::kQInt32: return "torch.qint32";
    default: return std::string("torch.") + c10::toString(t);
  }
}

void check_tensor(const at::Tensor& t, std::string_view op) {
  TORCH_CHECK(t.defined(), "weft: ", op, " was given an undefined tensor");
  TORCH_CHECK(t.device().is_cpu(), "weft: ", op, " was given a tensor on ", t.device().str(),
              ": the weft backend moves CPU tensors only (use the nccl backend for CUDA tensors, or .cpu() them)");
  TORCH_CHECK(t.layout() == at::kStrided, "weft: ", op, " was given a ", t.layout(),
              " tensor: the weft backend moves dense (strided) tensors only");
  // The backend moves a tensor's memory, and a quantized tensor's values
  // need its scale and zero point too, which would stay behind (Gloo
  // refuses these types). Conjugate and negative views come resolved
  // (torch's dispatcher materialises them before a backend runs).
  TORCH_CHECK(!t.is_quantized(), "weft: ", op, " was given a quantized tensor (", python_name(t.scalar_type()),
              "): the weft backend moves plain values only; dequantize() it first");
}

void check_tensors(const std::vector<at::Tensor>& ts, std::string_view op, bool same_size) {
  TORCH_CHECK(!ts.empty(), "weft: ", op, " was given no tensors");
  for (const at::Tensor& t : ts) {
    check_tensor(t, op);
    TORCH_CHECK(t.scalar_type() == ts[0].scalar_type(), "weft: ", op, " was given tensors of different types (",
                python_name(ts[0].scalar_type()), " and ", python_name(t.scalar_type()), ")");
    TORCH_CHECK(!same_size || t.numel() == ts[0].numel(), "weft: ", op,
                " was given tensors of different sizes (", ts[0].numel(), " and ", t.numel(), " elements)");
  }
}

void check_root(int64_t root, int size, std::string_view op) {
  TORCH_CHECK(root >= 0 && root < size, "weft: ", op, ": root rank ", root, " is outside the group [0, ", size, ")");
}

coll::DataType reduce_type(const at::Tensor& t, std::string_view op) {
  switch (t.scalar_type()) {
    case at::kFloat: return coll::DataType::kF32;
    case at::kDouble: return coll::DataType::kF64;
    case at::kHalf: return coll::DataType::kF16;
    case at::kBFloat16: return coll::DataType::kBF16;
    case at::kInt: return coll::DataType::kI32;
    case at::kLong: return coll::DataType::kI64;
    case at::kByte: return coll::DataType::kU8;
    default: break;
  }
  TORCH_CHECK(false, "weft: ", op, " cannot reduce ", python_name(t.scalar_type()),
              " tensors (the weft backend reduces float32, float64, float16, bfloat16, int32, int64, uint8)");
}

namespace {

// As Python names it (torch.distributed.ReduceOp).
std::string reduce_op_name(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::BAND: return "ReduceOp.BAND";
    case c10d::ReduceOp::BOR: return "ReduceOp.BOR";
    case c10d::ReduceOp::BXOR: return "ReduceOp.BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "ReduceOp.PREMUL_SUM";
    default: return "ReduceOp " + std::to_string(static_cast<int>(op));
  }
}

}  // namespace

Reduction reduction(const c10d::ReduceOp& op, const at::Tensor& t, std::string_view what) {
  const coll::DataType dt = reduce_type(t, what);
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return {coll::ReduceOp::kSum, false, false};
    case c10d::ReduceOp::PRODUCT: return {coll::ReduceOp::kProd, false, false};
    case c10d::ReduceOp::MIN: return {coll::ReduceOp::kMin, false, false};
    case c10d::ReduceOp::MAX: return {coll::ReduceOp::kMax, false, false};
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(is_floating(dt), "weft: ", what, " with ReduceOp.AVG needs a floating-point tensor, not ",
                  python_name(t.scalar_type()), " (divide the SUM yourself)");
      return {coll::ReduceOp::kSum, true, dt == coll::DataType::kF16};
    default: break;
  }
  TORCH_CHECK(false, "weft: ", what, " does not support ", reduce_op_name(op.op_),
              "; the weft backend reduces with SUM, PRODUCT, MIN, MAX and AVG");
}

Staged::Staged(const at::Tensor& t) : user_(t), buf_(t.is_contiguous() ? t : t.contiguous()) {
  prefer_huge_pages(buf_.data_ptr(), bytes());
}

void Staged::write_back() {
  if (!buf_.is_same(user_)) user_.copy_(buf_);
}

// A tensor of no elements occupies no memory (its data_ptr() may be null):
// it neither breaks nor starts a run.
bool consecutive(const std::vector<at::Tensor>& ts) {
  const char* next = nullptr;
  for (const at::Tensor& t : ts) {
    if (t.numel() == 0) continue;
    if (!t.is_contiguous()) return false;
    const char* p = static_cast<const char*>(t.data_ptr());
    if (next && p != next) return false;
    next = p + t.numel() * t.element_size();
  }
  return true;
}

void* first_element(const std::vector<at::Tensor>& ts) {
  for (const at::Tensor& t : ts) {
    if (t.numel() > 0) return t.data_ptr();
  }
  return nullptr;
}

at::Tensor joined(const std::vector<at::Tensor>& ts) {
  int64_t total = 0;
  for (const at::Tensor& t : ts) total += t.numel();
  if (total == 0) return at::empty({0}, ts[0].options());
  if (consecutive(ts)) return at::from_blob(first_element(ts), {total}, ts[0].options());
  std::vector<at::Tensor> flat;
  flat.reserve(ts.size());
  for (const at::Tensor& t : ts) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

void split_into(const at::Tensor& flat, const std::vector<at::Tensor>& ts) {
  if (flat.numel() == 0 || flat.data_ptr() == first_element(ts)) return;  // nothing, or their own memory
  int64_t at = 0;
  for (const at::Tensor& t : ts) {
    t.copy_(flat.narrow(0, at, t.numel()).view_as(t));
    at += t.numel();
  }
}

}  // namespace weft::pt
