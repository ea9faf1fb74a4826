#include "coordinator/session/proto_json.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/wrappers.pb.h"

namespace profctl::coordinator {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// A string with a byte past ASCII, as protobuf's own printer writes it: it escapes some code
// points (C1 controls, format characters, the line separators) and drops malformed UTF-8 in ways
// of its own, so those rare strings go through it (a StringValue prints as the bare string).
void AppendNonAsciiString(std::string* out, const std::string& s) {
  google::protobuf::StringValue value;
  value.set_value(s);
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(value, &json).ok()) json = "\"\"";
  out->append(json);
}

// protobuf's JSON escaping of ASCII: the two-character escapes, every other control character,
// the HTML characters < and > and DEL as \uXXXX; the rest as is.
void AppendString(std::string* out, const std::string& s) {
  const size_t start = out->size();
  out->push_back('"');
  const size_t n = s.size();
  size_t plain = 0;  // start of the bytes not yet copied
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {  // one pass: what was escaped so far is dropped for protobuf's text
      out->resize(start);
      AppendNonAsciiString(out, s);
      return;
    }
    if (c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != 0x7f) continue;
    out->append(s, plain, i - plain);
    plain = i + 1;
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default: {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\u%04x", c);
        out->append(buf);
      }
    }
  }
  out->append(s, plain, n - plain);
  out->push_back('"');
}

// protobuf's SimpleDtoa: the shorter of 15 or 17 significant digits that reads back as the same
// value; NaN and the infinities as strings. (snprintf and strtod follow the C locale, which
// profctl never changes; protobuf's own float printing, which differs for subnormal floats, is
// not copied: messages with float fields are left to it.)
void AppendDouble(std::string* out, double v) {
  if (std::isnan(v)) {
    out->append("\"NaN\"");
    return;
  }
  if (std::isinf(v)) {
    out->append(v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    return;
  }
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.*g", DBL_DIG, v);
  if (std::strtod(buf, nullptr) != v) std::snprintf(buf, sizeof(buf), "%.*g", DBL_DIG + 2, v);
  out->append(buf);
}

void AppendIndent(std::string* out, int depth) { out->append(static_cast<size_t>(depth), ' '); }

void AppendMessage(std::string* out, const Message& m, int depth);

// One value of `f` (element `index` of a repeated field, else -1).
void AppendValue(std::string* out, const Message& m, const FieldDescriptor* f, int index,
                 int depth) {
  const Reflection* r = m.GetReflection();
  const bool rep = index >= 0;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      absl::StrAppend(out, rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f));
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      absl::StrAppend(out, rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f));
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      absl::StrAppend(out, "\"", rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f), "\"");
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      absl::StrAppend(out, "\"", rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f),
                      "\"");
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      AppendDouble(out, rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f));
      break;
    case FieldDescriptor::CPPTYPE_FLOAT:  // SupportedByFastJson refuses these
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      out->append((rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f)) ? "true" : "false");
      break;
    case FieldDescriptor::CPPTYPE_ENUM: {
      const int value = rep ? r->GetRepeatedEnumValue(m, f, index) : r->GetEnumValue(m, f);
      const google::protobuf::EnumValueDescriptor* e = f->enum_type()->FindValueByNumber(value);
      if (e != nullptr) {
        AppendString(out, e->name());
      } else {
        absl::StrAppend(out, value);
      }
      break;
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string scratch;
      const std::string& s = rep ? r->GetRepeatedStringReference(m, f, index, &scratch)
                                 : r->GetStringReference(m, f, &scratch);
      if (f->type() == FieldDescriptor::TYPE_BYTES) {
        absl::StrAppend(out, "\"", absl::Base64Escape(s), "\"");
      } else {
        AppendString(out, s);
      }
      break;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      AppendMessage(out, rep ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f), depth);
      break;
  }
}

// protobuf's order: the fields outside any oneof in declaration order (each at its default
// value too), then the scalar members of oneofs (proto3 `optional` included) that are set, by
// number. (protobuf keeps a message-typed member in its declared place: SupportedByFastJson
// refuses those.)
void AppendMessage(std::string* out, const Message& m, int depth) {
  const Descriptor* d = m.GetDescriptor();
  const Reflection* r = m.GetReflection();
  absl::InlinedVector<const FieldDescriptor*, 16> fields;
  absl::InlinedVector<const FieldDescriptor*, 4> set_in_oneofs;
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->containing_oneof() != nullptr) {
      if (r->HasField(m, f)) set_in_oneofs.push_back(f);
    } else if (f->is_repeated() || f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE ||
               r->HasField(m, f)) {
      fields.push_back(f);
    }
  }
  std::sort(
      set_in_oneofs.begin(), set_in_oneofs.end(),
      [](const FieldDescriptor* a, const FieldDescriptor* b) { return a->number() < b->number(); });
  fields.insert(fields.end(), set_in_oneofs.begin(), set_in_oneofs.end());
  bool first = true;
  for (const FieldDescriptor* f : fields) {
    out->append(first ? "{\n" : ",\n");
    first = false;
    AppendIndent(out, depth + 1);
    AppendString(out, f->name());
    out->append(": ");
    if (!f->is_repeated()) {
      AppendValue(out, m, f, -1, depth + 1);
      continue;
    }
    const int n = r->FieldSize(m, f);
    if (n == 0) {
      out->append("[]");
      continue;
    }
    out->append("[\n");
    for (int k = 0; k < n; ++k) {
      if (k > 0) out->append(",\n");
      AppendIndent(out, depth + 2);
      AppendValue(out, m, f, k, depth + 2);
    }
    out->push_back('\n');
    AppendIndent(out, depth + 1);
    out->push_back(']');
  }
  if (first) {
    out->append("{}");
    return;
  }
  out->push_back('\n');
  AppendIndent(out, depth);
  out->push_back('}');
}

}  // namespace

std::string EveryFieldJson(const Message& message) {
  std::string out;
  AppendMessage(&out, message, 0);
  out.push_back('\n');
  return out;
}

namespace {

bool Supported(const Descriptor& type, std::vector<const Descriptor*>& seen) {
  if (absl::c_linear_search(seen, &type)) return true;  // being checked further up
  seen.push_back(&type);
  if (absl::StartsWith(type.file()->name(), "google/protobuf/")) return false;  // well-known types
  for (int i = 0; i < type.field_count(); ++i) {
    const FieldDescriptor* f = type.field(i);
    if (f->is_map() || f->cpp_type() == FieldDescriptor::CPPTYPE_FLOAT) return false;
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE &&
        (f->containing_oneof() != nullptr || !Supported(*f->message_type(), seen))) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool SupportedByFastJson(const Descriptor& type) {
  std::vector<const Descriptor*> seen;
  return Supported(type, seen);
}

}  // namespace profctl::coordinator
