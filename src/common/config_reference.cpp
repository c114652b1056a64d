// The configuration reference in Markdown, generated from the schema (docs/configuration.md
// embeds it; a test keeps the two identical).
#include <sstream>

#include <orbite/config.h>

#include "common/config_codec.h"
#include "common/config_schema.h"

namespace orbite {

namespace cs = config_schema;
namespace cc = config_codec;

namespace {

std::string type_of(const bool&, const std::monostate& c) {
  return cc::describe(c);
}
template <class T, class C>
std::string type_of(const T&, const C& c) {
  return cc::describe(c);
}
template <class T, class C>
std::string type_of(const std::optional<T>&, const C& c) {
  return cc::describe(c) + ", or null";
}
inline std::string type_of(const std::vector<std::string>&, const cs::Text& c) {
  return "an array of strings, each " + cc::describe(c).substr(2);
}

std::string escape_cell(std::string text) {
  std::string out;
  for (char ch : text) {
    if (ch == '|')
      out += "\\|";
    else
      out += ch;
  }
  return out;
}

class ReferenceWriter {
 public:
  ReferenceWriter(std::ostringstream& out, std::string path, std::string env)
      : out_(out), path_(std::move(path)), env_(std::move(env)) {}

  template <class T, class C>
  void field(std::string_view name, const T& value, const C& constraint, std::string_view doc) {
    std::string path = path_.empty() ? std::string(name) : path_ + "." + std::string(name);
    out_ << "| `" << path << "` | " << escape_cell(type_of(value, constraint)) << " | `"
         << escape_cell(cc::encode(value, constraint).dump()) << "` | `" << env_ << "_"
         << to_upper(name) << "` | " << escape_cell(std::string(doc)) << " |\n";
  }
  template <class Fn>
  void section(std::string_view name, Fn&& fn) {
    std::string path = path_.empty() ? std::string(name) : path_ + "." + std::string(name);
    ReferenceWriter sub(out_, path, env_ + "_" + to_upper(name));
    fn(sub);
  }

 private:
  std::ostringstream& out_;
  std::string path_;
  std::string env_;
};

}  // namespace

std::string configuration_reference_markdown() {
  std::ostringstream out;
  out << "| JSON path | type | default | environment | meaning |\n";
  out << "|---|---|---|---|---|\n";
  const EngineConfig defaults;
  ReferenceWriter writer(out, "", "ORBITE");
  cs::visit_engine(writer, defaults);
  return out.str();
}

}  // namespace orbite
