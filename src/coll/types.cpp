// Names, sizes and parsing of the collectives' element types and reduction operators.
#include <orbite/collectives.h>

#include <string>

namespace orbite {

namespace {

struct TypeName {
  DataType type;
  std::string_view name;
  std::size_t size;
};

constexpr TypeName kTypes[] = {
    {DataType::Int8, "int8", 1},       {DataType::Uint8, "uint8", 1},
    {DataType::Int32, "int32", 4},     {DataType::Uint32, "uint32", 4},
    {DataType::Int64, "int64", 8},     {DataType::Uint64, "uint64", 8},
    {DataType::Float16, "float16", 2}, {DataType::Bfloat16, "bfloat16", 2},
    {DataType::Float32, "float32", 4}, {DataType::Float64, "float64", 8},
};

// nccl-tests' and NCCL's spellings.
constexpr std::pair<std::string_view, DataType> kTypeAliases[] = {
    {"char", DataType::Int8},     {"int", DataType::Int32},    {"uint", DataType::Uint32},
    {"half", DataType::Float16},  {"fp16", DataType::Float16}, {"bf16", DataType::Bfloat16},
    {"float", DataType::Float32}, {"fp32", DataType::Float32}, {"double", DataType::Float64},
    {"fp64", DataType::Float64},
};

constexpr std::pair<ReduceOp, std::string_view> kOps[] = {{ReduceOp::Sum, "sum"},
                                                          {ReduceOp::Prod, "prod"},
                                                          {ReduceOp::Min, "min"},
                                                          {ReduceOp::Max, "max"},
                                                          {ReduceOp::Avg, "avg"}};

}  // namespace

std::size_t size_of(DataType type) {
  for (const auto& t : kTypes) {
    if (t.type == type) return t.size;
  }
  return 0;
}

std::string_view to_string(DataType type) {
  for (const auto& t : kTypes) {
    if (t.type == type) return t.name;
  }
  return "unknown";
}

std::string_view to_string(ReduceOp op) {
  for (const auto& [o, name] : kOps) {
    if (o == op) return name;
  }
  return "unknown";
}

Result<DataType> parse_data_type(std::string_view name) {
  for (const auto& t : kTypes) {
    if (t.name == name) return t.type;
  }
  for (const auto& [alias, type] : kTypeAliases) {
    if (alias == name) return type;
  }
  std::string names;
  for (const auto& t : kTypes) names += (names.empty() ? "" : ", ") + std::string(t.name);
  return Status::error(Errc::InvalidArgument,
                       "data type '" + std::string(name) + "' is not one of " + names);
}

Result<ReduceOp> parse_reduce_op(std::string_view name) {
  for (const auto& [op, n] : kOps) {
    if (n == name) return op;
  }
  return Status::error(Errc::InvalidArgument, "reduction op '" + std::string(name) +
                                                  "' is not one of sum, prod, min, max, avg");
}

}  // namespace orbite
