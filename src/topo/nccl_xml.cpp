// NCCL topology XML: a reader for the part of XML the format uses (elements, attributes,
// comments, processing instructions; no text content, no DTD), and the walk that turns its
// elements into NUMA nodes, GPUs and NICs with their switch paths.
#include "topo/nccl_xml.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <iterator>
#include <optional>
#include <utility>

#include "common/strings.h"

namespace orbite::topo {
namespace {

constexpr std::size_t kNcclMaxFileBytes = 16u << 20;
constexpr std::size_t kNcclMaxDepth = 64;
constexpr std::size_t kNcclMaxElements = 100000;

struct XmlTag {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attributes;
  bool end = false;           // </name>
  bool self_closing = false;  // <name ... />
  int line = 1;

  [[nodiscard]] const std::string* attribute(std::string_view key) const {
    for (const auto& [k, v] : attributes) {
      if (k == key) return &v;
    }
    return nullptr;
  }
};

bool xml_name_start(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || c == ':';
}
bool xml_name_char(char c) {
  return xml_name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.';
}
bool xml_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

class XmlReader {
 public:
  XmlReader(std::string_view text, std::string_view origin) : text_(text), origin_(origin) {}

  [[nodiscard]] Status error(int line, const std::string& what) const {
    return Status::error(Errc::Configuration, "topology.nccl_xml: " + quote_path(origin_) +
                                                  " line " + std::to_string(line) + ": " + what);
  }

  // The next start or end tag; nullopt at the end of the text.
  Result<std::optional<XmlTag>> next() {
    for (;;) {
      const std::size_t lt = text_.find('<', pos_);
      advance_to(lt == std::string_view::npos ? text_.size() : lt);
      if (pos_ >= text_.size()) return std::optional<XmlTag>();
      const std::string_view rest = text_.substr(pos_);
      if (rest.starts_with("<!--")) {
        ORBITE_RETURN_IF_ERROR(skip_past("-->", "an unterminated comment"));
      } else if (rest.starts_with("<?")) {
        ORBITE_RETURN_IF_ERROR(skip_past("?>", "an unterminated processing instruction"));
      } else if (rest.starts_with("<!")) {
        return error(line_, "a DOCTYPE or CDATA section, which NCCL's format has none of");
      } else {
        return read_tag();
      }
    }
  }

 private:
  void advance_to(std::size_t to) {
    line_ += static_cast<int>(std::count(text_.begin() + static_cast<std::ptrdiff_t>(pos_),
                                         text_.begin() + static_cast<std::ptrdiff_t>(to), '\n'));
    pos_ = to;
  }

  Status skip_past(std::string_view end, const char* what) {
    const std::size_t at = text_.find(end, pos_);
    if (at == std::string_view::npos) return error(line_, what);
    advance_to(at + end.size());
    return {};
  }

  void skip_space() {
    while (pos_ < text_.size() && xml_space(text_[pos_])) advance_to(pos_ + 1);
  }

  std::string read_name() {
    const std::size_t start = pos_;
    if (pos_ < text_.size() && xml_name_start(text_[pos_])) {
      while (pos_ < text_.size() && xml_name_char(text_[pos_])) ++pos_;
    }
    return std::string(text_.substr(start, pos_ - start));
  }

  Result<std::string> read_value() {
    const char mark = text_[pos_];
    const std::size_t close = text_.find(mark, pos_ + 1);
    if (close == std::string_view::npos) return error(line_, "an attribute value is not closed");
    std::string_view raw = text_.substr(pos_ + 1, close - pos_ - 1);
    if (raw.find('<') != std::string_view::npos) {
      return error(line_, "'<' inside an attribute value");
    }
    std::string out;
    for (std::size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '&') {
        out += raw[i];
        continue;
      }
      static constexpr std::pair<std::string_view, char> kEntities[] = {
          {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
      bool known = false;
      for (const auto& [entity, c] : kEntities) {
        if (raw.substr(i).starts_with(entity)) {
          out += c;
          i += entity.size() - 1;
          known = true;
          break;
        }
      }
      if (!known) return error(line_, "an unknown entity in " + quote(std::string(raw)));
    }
    advance_to(close + 1);
    return out;
  }

  Result<std::optional<XmlTag>> read_tag() {
    XmlTag tag;
    tag.line = line_;
    ++pos_;  // '<'
    if (pos_ < text_.size() && text_[pos_] == '/') {
      tag.end = true;
      ++pos_;
    }
    tag.name = read_name();
    if (tag.name.empty()) return error(tag.line, "a tag without a name");
    for (;;) {
      skip_space();
      if (pos_ >= text_.size()) return error(tag.line, "<" + tag.name + "> is not closed");
      if (text_[pos_] == '>') {
        ++pos_;
        return std::optional<XmlTag>(std::move(tag));
      }
      if (!tag.end && text_.substr(pos_).starts_with("/>")) {
        pos_ += 2;
        tag.self_closing = true;
        return std::optional<XmlTag>(std::move(tag));
      }
      if (tag.end) return error(tag.line, "</" + tag.name + "> carries attributes");
      std::string key = read_name();
      if (key.empty()) {
        return error(line_,
                     "unexpected " + quote(std::string(1, text_[pos_])) + " in <" + tag.name + ">");
      }
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] != '=') {
        return error(line_, "attribute " + key + " of <" + tag.name + "> has no value");
      }
      ++pos_;
      skip_space();
      if (pos_ >= text_.size() || (text_[pos_] != '"' && text_[pos_] != '\'')) {
        return error(line_, "attribute " + key + " of <" + tag.name + "> is not quoted");
      }
      ORBITE_ASSIGN_OR_RETURN(std::string value, read_value());
      tag.attributes.emplace_back(std::move(key), std::move(value));
    }
  }

  std::string_view text_;
  std::string_view origin_;
  std::size_t pos_ = 0;
  int line_ = 1;
};

std::optional<std::uint32_t> nccl_hex(std::string_view text) {
  if (text.starts_with("0x") || text.starts_with("0X")) text.remove_prefix(2);
  if (text.empty() || text.size() > 8) return std::nullopt;
  std::uint32_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v, 16);
  if (ec != std::errc{} || ptr != text.data() + text.size()) return std::nullopt;
  return v;
}

// One open element of the walk.
struct WalkFrame {
  std::string name;
  int numa = kUnknownNuma;  // of the nearest <cpu> at or above it
  enum Kind : std::uint8_t { Other, Bridge, Device, LooseNic } kind = Other;
  NcclDevice device;  // Device and LooseNic
  std::uint32_t class24 = 0;
  std::optional<std::uint16_t> vendor;
  bool has_gpu = false;
  bool has_nic = false;
};

class NcclWalk {
 public:
  explicit NcclWalk(const XmlReader& reader) : reader_(reader) {}

  Status open(const XmlTag& tag) {
    if (stack_.size() >= kNcclMaxDepth) return reader_.error(tag.line, "nesting deeper than 64");
    WalkFrame f;
    f.name = tag.name;
    f.numa = stack_.empty() ? kUnknownNuma : stack_.back().numa;
    if (tag.name == "system") saw_system_ = true;
    if (tag.name == "cpu") {
      ORBITE_RETURN_IF_ERROR(open_cpu(tag, f));
    } else if (tag.name == "pci") {
      ORBITE_RETURN_IF_ERROR(open_pci(tag, f));
    } else if (tag.name == "gpu") {
      if (WalkFrame* pci = nearest(WalkFrame::Device)) pci->has_gpu = true;
    } else if (tag.name == "nic") {
      if (WalkFrame* pci = nearest(WalkFrame::Device)) {
        pci->has_nic = true;
      } else {
        f.kind = WalkFrame::LooseNic;  // a NIC NCCL placed under a CPU only
        f.device.placed = false;
        f.device.numa = f.numa;
        f.has_nic = true;
      }
    } else if (tag.name == "net") {
      WalkFrame* owner = nearest(WalkFrame::LooseNic);
      if (owner == nullptr) owner = nearest(WalkFrame::Device);
      if (owner != nullptr) ORBITE_RETURN_IF_ERROR(read_net(tag, owner->device));
    }
    stack_.push_back(std::move(f));
    return {};
  }

  Status close(const XmlTag& tag) {
    if (stack_.empty() || stack_.back().name != tag.name) {
      return reader_.error(
          tag.line, "</" + tag.name + "> closes " +
                        (stack_.empty() ? std::string("nothing") : "<" + stack_.back().name + ">"));
    }
    WalkFrame f = std::move(stack_.back());
    stack_.pop_back();
    if (f.kind == WalkFrame::Device) emit(std::move(f));
    if (f.kind == WalkFrame::LooseNic) out_.nics.push_back(std::move(f.device));
    return {};
  }

  Result<NcclTopology> finish(int line) {
    if (!stack_.empty()) return reader_.error(line, "<" + stack_.back().name + "> is not closed");
    // An empty file, a directory or another XML format: not a topology that places nothing.
    if (!saw_system_) return reader_.error(line, "no <system> element: not an NCCL topology");
    return std::move(out_);
  }

 private:
  WalkFrame* nearest(WalkFrame::Kind kind) {
    for (auto it = stack_.rbegin(); it != stack_.rend(); ++it) {
      if (it->kind == kind) return &*it;
    }
    return nullptr;
  }

  Status open_cpu(const XmlTag& tag, WalkFrame& f) {
    const std::string* id = tag.attribute("numaid");
    if (id == nullptr) return {};  // a CPU without a NUMA node: its devices' node is unknown
    const auto n = parse_int64(*id);
    if (!n || *n < 0 || *n > 65535) {
      return reader_.error(tag.line, "<cpu numaid=" + quote(*id) + "> is not a NUMA node number");
    }
    f.numa = static_cast<int>(*n);
    NumaNode node;
    node.os_index = f.numa;
    if (const std::string* mask = tag.attribute("affinity")) {
      auto list = cpu_list_of_mask(*mask);
      if (!list) {
        return reader_.error(tag.line, "<cpu affinity=" + quote(*mask) + "> is not a CPU mask");
      }
      node.cpuset = *list;
    }
    out_.numa_nodes.push_back(std::move(node));
    return {};
  }

  Status open_pci(const XmlTag& tag, WalkFrame& f) {
    const std::string* busid = tag.attribute("busid");
    const std::string* cls = tag.attribute("class");
    if (busid == nullptr || cls == nullptr) {
      return reader_.error(tag.line,
                           "<pci> without " + std::string(busid == nullptr ? "busid" : "class"));
    }
    const auto address = PciAddress::parse(*busid);
    if (!address) return reader_.error(tag.line, "busid " + quote(*busid) + " is not a bus ID");
    auto value = nccl_hex(*cls);
    if (!value || *value > 0xffffff) {
      return reader_.error(tag.line, "class " + quote(*cls) + " is not a PCI class");
    }
    f.class24 = *value > 0xffff ? *value : *value << 8;  // "0x0302" as well as "0x030200"
    f.device.pci.address = *address;
    f.device.pci.class_id = static_cast<std::uint16_t>(f.class24 >> 8);
    f.device.numa = f.numa;
    for (const char* key : {"vendor", "device"}) {
      const std::string* text = tag.attribute(key);
      if (text == nullptr) continue;
      const auto id = nccl_hex(*text);
      if (!id || *id > 0xffff) {
        return reader_.error(tag.line, std::string(key) + " " + quote(*text) + " is not a PCI ID");
      }
      // 0x0000 and 0xffff are the placeholders of hand-written files: no vendor stated.
      if (std::string_view(key) == "vendor" && *id != 0 && *id != 0xffff) {
        f.vendor = static_cast<std::uint16_t>(*id);
        f.device.pci.vendor_id = *f.vendor;
      } else if (std::string_view(key) == "device" && *id != 0xffff) {
        f.device.pci.device_id = static_cast<std::uint16_t>(*id);
      }
    }
    for (auto it = stack_.rbegin(); it != stack_.rend(); ++it) {
      if (it->kind == WalkFrame::Bridge) f.device.pci.bridges.push_back(it->device.pci.address);
    }
    f.kind = (f.class24 >> 8) == 0x0604 ? WalkFrame::Bridge : WalkFrame::Device;
    return {};
  }

  Status read_net(const XmlTag& tag, NcclDevice& device) {
    if (const std::string* name = tag.attribute("name")) device.name = *name;
    if (const std::string* speed = tag.attribute("speed")) {
      const auto mbps = parse_uint64(*speed);
      if (!mbps) return reader_.error(tag.line, "<net speed=" + quote(*speed) + "> is not Mb/s");
      device.speed_gbps = static_cast<double>(*mbps) / 1000.0;
    }
    return {};
  }

  void emit(WalkFrame&& f) {
    const std::uint32_t base = f.class24 >> 16;
    const bool nvidia_or_unstated = !f.vendor || *f.vendor == 0x10de;
    if (f.has_gpu || (base == 0x03 && nvidia_or_unstated)) {
      out_.gpus.push_back(std::move(f.device));
    } else if (f.has_nic || base == 0x02) {
      out_.nics.push_back(std::move(f.device));
    }
  }

  const XmlReader& reader_;
  std::vector<WalkFrame> stack_;
  NcclTopology out_;
  bool saw_system_ = false;
};

}  // namespace

std::optional<std::string> cpu_list_of_mask(std::string_view mask) {
  std::vector<std::uint32_t> words;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = mask.find(',', start);
    const auto word = nccl_hex(mask.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (!word || words.size() >= 1024) return std::nullopt;
    words.push_back(*word);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  std::reverse(words.begin(), words.end());  // least significant first
  std::string out;
  int run_start = -1;
  const int bits = static_cast<int>(words.size()) * 32;
  for (int i = 0; i <= bits; ++i) {
    const bool set = i < bits && ((words[static_cast<std::size_t>(i / 32)] >> (i % 32)) & 1u) != 0;
    if (set && run_start < 0) run_start = i;
    if (!set && run_start >= 0) {
      if (!out.empty()) out += ',';
      out += std::to_string(run_start);
      if (i - 1 > run_start) out += "-" + std::to_string(i - 1);
      run_start = -1;
    }
  }
  return out;
}

Result<NcclTopology> parse_nccl_topology(std::string_view xml, std::string_view origin) {
  XmlReader reader(xml, origin);
  NcclWalk walk(reader);
  std::size_t elements = 0;
  int last_line = 1;
  for (;;) {
    ORBITE_ASSIGN_OR_RETURN(std::optional<XmlTag> tag, reader.next());
    if (!tag) break;
    last_line = tag->line;
    if (++elements > kNcclMaxElements) return reader.error(tag->line, "more than 100000 elements");
    if (tag->end) {
      ORBITE_RETURN_IF_ERROR(walk.close(*tag));
      continue;
    }
    ORBITE_RETURN_IF_ERROR(walk.open(*tag));
    if (tag->self_closing) ORBITE_RETURN_IF_ERROR(walk.close(*tag));
  }
  return walk.finish(last_line);
}

Result<NcclTopology> load_nccl_topology(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::error(Errc::Configuration, "topology.nccl_xml: cannot open " + quote_path(path));
  }
  // Read in pieces up to the bound: a size from the file system is not trusted (a pipe, /proc).
  std::string text;
  char chunk[64 * 1024];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<std::size_t>(in.gcount()));
    if (text.size() > kNcclMaxFileBytes) {
      return Status::error(Errc::Configuration,
                           "topology.nccl_xml: " + quote_path(path) + " is larger than 16 MiB");
    }
  }
  return parse_nccl_topology(text, path);
}

void overlay_nccl_gpus(std::vector<GpuInfo>& gpus, const NcclTopology& nccl) {
  for (const NcclDevice& d : nccl.gpus) {
    auto it = std::find_if(gpus.begin(), gpus.end(),
                           [&](const GpuInfo& g) { return g.pci.address == d.pci.address; });
    if (it == gpus.end()) {
      GpuInfo g;
      g.pci = d.pci;
      g.numa = d.numa;
      gpus.push_back(std::move(g));
      continue;
    }
    it->pci.bridges = d.pci.bridges;
    it->numa = d.numa;
  }
}

void overlay_nccl_nics(std::vector<NicInfo>& nics, const NcclTopology& nccl) {
  for (const NcclDevice& d : nccl.nics) {
    auto it = std::find_if(nics.begin(), nics.end(), [&](const NicInfo& n) {
      return (d.placed && n.pci && n.pci->address == d.pci.address) ||
             (!d.name.empty() && n.name == d.name);
    });
    if (it == nics.end()) {
      NicInfo n;
      n.name = !d.name.empty() ? d.name
               : d.placed      ? "pci:" + d.pci.address.to_string()
                               : "nic" + std::to_string(nics.size());
      it = nics.insert(nics.end(), std::move(n));
    }
    if (d.placed) {
      if (!it->pci) it->pci = d.pci;
      it->pci->bridges = d.pci.bridges;
    }
    it->numa = d.numa;
    if (it->name.empty()) it->name = d.name;
    if (it->ports.empty() && d.speed_gbps > 0) {
      PortInfo port;
      port.rate_gbps = d.speed_gbps;
      it->ports.push_back(std::move(port));
    }
  }
}

void overlay_nccl_numa(std::vector<NumaNode>& nodes, const NcclTopology& nccl) {
  for (const NumaNode& n : nccl.numa_nodes) {
    const bool known = std::any_of(nodes.begin(), nodes.end(),
                                   [&](const NumaNode& m) { return m.os_index == n.os_index; });
    if (!known) nodes.push_back(n);
  }
}

}  // namespace orbite::topo
