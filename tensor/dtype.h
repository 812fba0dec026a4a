// Element types. float32 is the default; float64 is what gradient checks run in; int64 holds
// indices and labels; bool/uint8 hold masks. Plain C++ (no fmt): nvcc compiles it too; the fmt
// formatter for DType is in error.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace linea {

enum class DType : uint8_t { Float32, Float64, Int64, Bool, UInt8 };

inline constexpr DType float32 = DType::Float32;
inline constexpr DType float64 = DType::Float64;
inline constexpr DType int64 = DType::Int64;
inline constexpr DType boolean = DType::Bool;
inline constexpr DType uint8 = DType::UInt8;

constexpr std::size_t itemsize(DType t) {
  switch (t) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int64: return 8;
    case DType::Bool: return 1;
    case DType::UInt8: return 1;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
    case DType::UInt8: return "uint8";
  }
  return "?";
}

constexpr bool is_floating(DType t) { return t == DType::Float32 || t == DType::Float64; }

// C++ type <-> DType.
template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::UInt8; };
template <class T> inline constexpr DType dtype_v = dtype_of<T>::value;

// Type promotion for binary ops: bool < uint8 < int64 < float32 < float64.
constexpr DType promote(DType a, DType b) {
  auto rank = [](DType t) {
    switch (t) {
      case DType::Bool: return 0;
      case DType::UInt8: return 1;
      case DType::Int64: return 2;
      case DType::Float32: return 3;
      case DType::Float64: return 4;
    }
    return 0;
  };
  return rank(a) >= rank(b) ? a : b;
}

// Throws the linea::Error "[op] expected a floating dtype (float32 or float64), got <t>" (or
// "unknown dtype" for a value outside the enum); out of line (tensor/shape.cpp) so that this
// header needs neither fmt nor error.h.
[[noreturn]] void dtype_error(std::string_view op, DType t);

// dispatch(dtype, [&]<class T>() { ... }) calls the lambda with T = the C++ element type.
template <class F>
decltype(auto) dispatch(DType t, F&& f) {
  switch (t) {
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
    case DType::Int64: return f.template operator()<int64_t>();
    case DType::Bool: return f.template operator()<bool>();
    case DType::UInt8: return f.template operator()<uint8_t>();
  }
  dtype_error("dispatch", t);
}

// Same, restricted to float32/float64; `op` names the caller in the error.
template <class F>
decltype(auto) dispatch_floating(DType t, std::string_view op, F&& f) {
  switch (t) {
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
    default: break;
  }
  dtype_error(op, t);
}

}  // namespace linea
