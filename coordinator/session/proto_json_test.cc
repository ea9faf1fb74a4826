#include "coordinator/session/proto_json.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>

#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "profctl/v1/coordinator.pb.h"
#include "profctl/v1/session.pb.h"

namespace profctl::coordinator {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// What session.json was printed with before (and still is for types EveryFieldJson declines).
std::string Protobufs(const Message& m) {
  google::protobuf::util::JsonPrintOptions o;
  o.add_whitespace = true;
  o.preserve_proto_field_names = true;
  o.always_print_primitive_fields = true;
  std::string json;
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(m, &json, o).ok());
  return json;
}

// Strings that take every path of the escaping: each ASCII character, non-ASCII text, the
// code points protobuf escapes, and malformed UTF-8 (which protobuf drops in its own ways).
std::string AString(std::mt19937_64& rng) {
  static const char* const kStrings[] = {
      "",
      "a",
      "\"quoted\"",
      "back\\slash",
      "<tag> & </tag>",
      "tab\there\nnl\r\b\f",
      "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac",            // UTF-8
      "\xe2\x80\xa8\xe2\x80\xa9 \xef\xbb\xbf \xc2\x80",  // escaped code points
      "\xff\xfe cut",                                    // not UTF-8
      "a\xe2\x41",                                       // cut short
      "\xf0\x9f\x98\x80",                                // past the BMP
      "\xed\xa0\x80 surrogate",
      "\x80 stray",
      "<\"esc\"\tbefore> caf\xc3\xa9",  // escapes before the first byte past ASCII
  };
  const size_t pick = rng() % (std::size(kStrings) + 1);
  if (pick < std::size(kStrings)) return kStrings[pick];
  std::string ascii;
  for (int c = 0; c < 128; ++c) ascii.push_back(static_cast<char>(c));
  return ascii;
}

double ADouble(std::mt19937_64& rng) {
  static const double kDoubles[] = {0,
                                    1,
                                    -1,
                                    0.1,
                                    1.0 / 3,
                                    487.868077,
                                    1e21,
                                    1e-7,
                                    123456789012345678.0,
                                    4.9e-324,
                                    std::numeric_limits<double>::max(),
                                    std::numeric_limits<double>::quiet_NaN(),
                                    std::numeric_limits<double>::infinity(),
                                    -std::numeric_limits<double>::infinity()};
  return kDoubles[rng() % std::size(kDoubles)];
}

// Sets about three in four fields of `m` (some repeated ones to several values, messages to
// depth 4, enums sometimes to a number no value has), recursively.
void Fill(Message* m, std::mt19937_64& rng, int depth) {
  const Descriptor* d = m->GetDescriptor();
  const Reflection* r = m->GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (rng() % 4 == 0) continue;
    const int n = f->is_repeated() ? static_cast<int>(rng() % 3) : 1;
    for (int k = 0; k < n; ++k) {
      const bool rep = f->is_repeated();
      switch (f->cpp_type()) {
        case FieldDescriptor::CPPTYPE_INT32: {
          const auto v = rng() % 3 == 0 ? 0 : static_cast<int32_t>(rng());
          rep ? r->AddInt32(m, f, v) : r->SetInt32(m, f, v);
          break;
        }
        case FieldDescriptor::CPPTYPE_UINT32: {  // 0 set in a proto3 `optional` prints too
          const auto v = rng() % 3 == 0 ? 0 : static_cast<uint32_t>(rng());
          rep ? r->AddUInt32(m, f, v) : r->SetUInt32(m, f, v);
          break;
        }
        case FieldDescriptor::CPPTYPE_INT64: {
          static const int64_t kInts[] = {0,
                                          1,
                                          -1,
                                          std::numeric_limits<int64_t>::max(),
                                          std::numeric_limits<int64_t>::min(),
                                          1795988152035323011};
          const int64_t v = kInts[rng() % std::size(kInts)];
          rep ? r->AddInt64(m, f, v) : r->SetInt64(m, f, v);
          break;
        }
        case FieldDescriptor::CPPTYPE_UINT64: {
          const uint64_t v = rng();
          rep ? r->AddUInt64(m, f, v) : r->SetUInt64(m, f, v);
          break;
        }
        case FieldDescriptor::CPPTYPE_DOUBLE: {
          const double v = ADouble(rng);
          rep ? r->AddDouble(m, f, v) : r->SetDouble(m, f, v);
          break;
        }
        case FieldDescriptor::CPPTYPE_FLOAT:  // a type with one is left to protobuf
          break;
        case FieldDescriptor::CPPTYPE_BOOL: {
          const bool v = rng() % 2 == 0;
          rep ? r->AddBool(m, f, v) : r->SetBool(m, f, v);
          break;
        }
        case FieldDescriptor::CPPTYPE_ENUM: {
          const google::protobuf::EnumDescriptor* e = f->enum_type();
          const int v =
              rng() % 5 == 0 ? 77 : e->value(static_cast<int>(rng() % e->value_count()))->number();
          rep ? r->AddEnumValue(m, f, v) : r->SetEnumValue(m, f, v);
          break;
        }
        case FieldDescriptor::CPPTYPE_STRING: {
          const std::string v = AString(rng);
          rep ? r->AddString(m, f, v) : r->SetString(m, f, v);
          break;
        }
        case FieldDescriptor::CPPTYPE_MESSAGE:
          if (depth < 4) Fill(rep ? r->AddMessage(m, f) : r->MutableMessage(m, f), rng, depth + 1);
          break;
      }
    }
  }
}

TEST(ProtoJsonTest, ASessionManifestPrintsAsProtobufPrintsIt) {
  EXPECT_TRUE(SupportedByFastJson(*profctl::v1::SessionManifest::descriptor()));
  const profctl::v1::SessionManifest empty;
  EXPECT_EQ(EveryFieldJson(empty), Protobufs(empty));
  std::mt19937_64 rng(20261129);
  for (int i = 0; i < 300; ++i) {
    profctl::v1::SessionManifest m;
    Fill(&m, rng, 0);
    const std::string fast = EveryFieldJson(m);
    ASSERT_EQ(fast, Protobufs(m)) << "manifest " << i;
  }
}

// The other messages profctl prints with every field (profctl sessions/schedules --json, the
// daemon's state file).
TEST(ProtoJsonTest, TheCoordinatorsAnswersPrintAsProtobufPrintsThem) {
  std::mt19937_64 rng(7);
  for (const Message* prototype : std::initializer_list<const Message*>{
           &profctl::v1::ListSessionsResponse::default_instance(),
           &profctl::v1::ListSchedulesResponse::default_instance(),
           &profctl::v1::SchedulePersistedState::default_instance()}) {
    ASSERT_TRUE(SupportedByFastJson(*prototype->GetDescriptor()))
        << prototype->GetDescriptor()->full_name();
    for (int i = 0; i < 50; ++i) {
      std::unique_ptr<Message> m(prototype->New());
      Fill(m.get(), rng, 0);
      ASSERT_EQ(EveryFieldJson(*m), Protobufs(*m)) << prototype->GetDescriptor()->full_name();
    }
  }
}

TEST(ProtoJsonTest, WellKnownTypesAndMapsAreLeftToProtobuf) {
  EXPECT_FALSE(SupportedByFastJson(*google::protobuf::Struct::descriptor()));  // a map, a WKT
  EXPECT_FALSE(SupportedByFastJson(*google::protobuf::ListValue::descriptor()));
}

// The shapes protobuf prints its own way are refused, wherever they are nested: a float (its
// subnormals), a message in a oneof or a proto3 `optional` message (kept in its declared place).
// A scalar oneof member and a plain message field are fine.
TEST(ProtoJsonTest, ShapesProtobufPrintsItsOwnWayAreLeftToIt) {
  google::protobuf::FileDescriptorProto file;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        name: "shapes.proto"
        package: "shapes"
        syntax: "proto3"
        message_type {
          name: "Sub"
          field { name: "x" number: 1 type: TYPE_INT32 label: LABEL_OPTIONAL }
        }
        message_type {
          name: "Plain"
          field {
            name: "s"
            number: 1
            type: TYPE_MESSAGE
            type_name: ".shapes.Sub"
            label: LABEL_OPTIONAL
          }
          field { name: "i" number: 2 type: TYPE_INT32 label: LABEL_OPTIONAL oneof_index: 0 }
          oneof_decl { name: "o" }
        }
        message_type {
          name: "HasFloat"
          field { name: "f" number: 1 type: TYPE_FLOAT label: LABEL_OPTIONAL }
        }
        message_type {
          name: "MessageInOneof"
          field {
            name: "s"
            number: 1
            type: TYPE_MESSAGE
            type_name: ".shapes.Sub"
            label: LABEL_OPTIONAL
            oneof_index: 0
          }
          oneof_decl { name: "o" }
        }
        message_type {
          name: "OptionalMessage"
          field {
            name: "s"
            number: 1
            type: TYPE_MESSAGE
            type_name: ".shapes.Sub"
            label: LABEL_OPTIONAL
            oneof_index: 0
            proto3_optional: true
          }
          oneof_decl { name: "_s" }
        }
        message_type {
          name: "Outer"
          field {
            name: "inner"
            number: 1
            type: TYPE_MESSAGE
            type_name: ".shapes.HasFloat"
            label: LABEL_REPEATED
          }
        }
      )pb",
      &file));
  google::protobuf::DescriptorPool pool;
  ASSERT_NE(pool.BuildFile(file), nullptr);
  const auto supported = [&pool](const std::string& name) {
    const Descriptor* d = pool.FindMessageTypeByName("shapes." + name);
    EXPECT_NE(d, nullptr) << name;
    return d != nullptr && SupportedByFastJson(*d);
  };
  EXPECT_TRUE(supported("Plain"));
  EXPECT_FALSE(supported("HasFloat"));
  EXPECT_FALSE(supported("MessageInOneof"));
  EXPECT_FALSE(supported("OptionalMessage"));
  EXPECT_FALSE(supported("Outer"));
}

}  // namespace
}  // namespace profctl::coordinator
