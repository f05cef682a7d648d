#include "py_buffer.h"

#include <string>

namespace py = pybind11;

namespace kvpool::python {
namespace {

size_t ItemSize(const std::string& typestr) {
  // e.g. "<f2", "|u1", "<i4": the digits after the kind are the item size.
  if (typestr.size() < 3) throw py::value_error("__cuda_array_interface__: bad typestr " + typestr);
  return std::stoul(typestr.substr(2));
}

int TorchDevice(const py::object& obj) {
  if (!py::hasattr(obj, "device")) return -1;
  py::object dev = obj.attr("device");
  if (!py::hasattr(dev, "type") || dev.attr("type").cast<std::string>() != "cuda") return -1;
  py::object index = dev.attr("index");
  return index.is_none() ? 0 : index.cast<int>();
}

}  // namespace

RawBuffer ResolveBuffer(const py::object& obj, bool writable) {
  RawBuffer out;
  if (py::hasattr(obj, "data_ptr") && py::hasattr(obj, "element_size") && py::hasattr(obj, "numel")) {
    if (py::hasattr(obj, "is_contiguous") && !obj.attr("is_contiguous")().cast<bool>()) {
      throw py::value_error("tensor is not contiguous");
    }
    out.data = reinterpret_cast<std::byte*>(obj.attr("data_ptr")().cast<uintptr_t>());
    out.bytes = obj.attr("numel")().cast<size_t>() * obj.attr("element_size")().cast<size_t>();
    out.cuda_device = TorchDevice(obj);
    return out;
  }
  if (py::hasattr(obj, "__cuda_array_interface__")) {
    py::dict cai = obj.attr("__cuda_array_interface__");
    py::tuple data = cai["data"];
    if (writable && data[1].cast<bool>()) throw py::value_error("CUDA array is read-only");
    if (cai.contains("strides") && !cai["strides"].is_none()) {
      throw py::value_error("CUDA array is not C-contiguous (strides given)");
    }
    size_t n = ItemSize(cai["typestr"].cast<std::string>());
    for (auto d : cai["shape"].cast<py::tuple>()) n *= d.cast<size_t>();
    out.data = reinterpret_cast<std::byte*>(data[0].cast<uintptr_t>());
    out.bytes = n;
    out.cuda_device = TorchDevice(obj);
    if (out.cuda_device < 0) out.cuda_device = 0;  // CAI says device memory; the device is the current one
    return out;
  }
  py::buffer buf = py::reinterpret_borrow<py::buffer>(obj);
  if (!PyObject_CheckBuffer(obj.ptr())) {
    throw py::type_error("expected a buffer (numpy array, bytearray, ...), a torch tensor or a CUDA array");
  }
  py::buffer_info info = buf.request(writable);
  // Contiguity: strides must be the C-order strides of the shape.
  ssize_t expect = info.itemsize;
  for (ssize_t d = info.ndim - 1; d >= 0; --d) {
    if (info.shape[d] > 1 && info.strides[d] != expect) throw py::value_error("buffer is not C-contiguous");
    expect *= info.shape[d];
  }
  out.data = static_cast<std::byte*>(info.ptr);
  out.bytes = static_cast<size_t>(info.size * info.itemsize);
  return out;
}

}  // namespace kvpool::python
