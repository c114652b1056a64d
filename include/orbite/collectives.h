// Element types and reduction operators of the collectives on a Communicator (see
// communicator.h). Counts passed to collectives are in elements of the DataType, as in NCCL.
#pragma once

#include <orbite/export.h>
#include <orbite/status.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace orbite {

enum class DataType : std::uint8_t {
  Int8,
  Uint8,
  Int32,
  Uint32,
  Int64,
  Uint64,
  Float16,   // IEEE 754 binary16; reduced through float32
  Bfloat16,  // bfloat16; reduced through float32
  Float32,
  Float64,
};

// Avg is the sum divided by the communicator's size (integer division, truncating toward zero,
// for integer types; for float16/bfloat16 the division happens in float32).
enum class ReduceOp : std::uint8_t { Sum, Prod, Min, Max, Avg };

inline constexpr int kDataTypeCount = 10;
inline constexpr int kReduceOpCount = 5;

// Bytes per element.
ORBITE_API std::size_t size_of(DataType type);
// "float32", "sum"...; the names nccl-tests' -d and -o accept.
ORBITE_API std::string_view to_string(DataType type);
ORBITE_API std::string_view to_string(ReduceOp op);
// Accepts the names above and NCCL's aliases (int, uint, half, float, double, bfloat16, ...).
ORBITE_API Result<DataType> parse_data_type(std::string_view name);
ORBITE_API Result<ReduceOp> parse_reduce_op(std::string_view name);

// Split colour of a rank that joins no new communicator (MPI_UNDEFINED, NCCL_SPLIT_NOCOLOR).
inline constexpr int kUndefinedColor = -1;

}  // namespace orbite
