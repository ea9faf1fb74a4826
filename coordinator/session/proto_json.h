// A message as the JSON that session.json and the --json outputs have always had: protobuf's
// MessageToJsonString with add_whitespace, preserve_proto_field_names and
// always_print_primitive_fields, byte for byte (proto_json_test.cc holds it to that on every field
// type, string and number edge these messages can hold), written directly from reflection. That
// printer's default-value pass builds a tree of every field first: a 1,024-host session.json
// took 28-48 ms with it and about 7 ms with this one (one core, a loaded machine), and it is
// written as the capture ends.
#ifndef PROFCTL_COORDINATOR_SESSION_PROTO_JSON_H_
#define PROFCTL_COORDINATOR_SESSION_PROTO_JSON_H_

#include <string>

#include "google/protobuf/message.h"

namespace profctl::coordinator {

// Every field, at its default value too (a repeated one as []), in declaration order, then the
// members of oneofs (proto3 `optional`) that are set; a message field only when set. Only for
// types SupportedByFastJson accepts.
std::string EveryFieldJson(const google::protobuf::Message& message);

// Whether EveryFieldJson prints this message type (and every type it holds) as protobuf would:
// not with a map, a well-known type, a float (protobuf prints subnormal floats its own way) or a
// message inside a oneof (protobuf keeps those in their declared place). None of profctl's
// printed messages has one.
bool SupportedByFastJson(const google::protobuf::Descriptor& type);

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_SESSION_PROTO_JSON_H_
