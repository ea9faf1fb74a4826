// A message as the JSON that session.json and the --json outputs have always had: protobuf's
// MessageToJsonString with add_whitespace, preserve_proto_field_names and
// always_print_primitive_fields, byte for byte (proto_json_test.cc holds it to that on every field
// type, string and number edge these messages can hold), written directly from reflection. That
// printer's default-value pass builds a tree of every field first: a 1,024-host session.json
// took 36-70 ms with it and about 7 ms with this one, and it is written as the capture ends.
#ifndef PROFCTL_COORDINATOR_SESSION_PROTO_JSON_H_
#define PROFCTL_COORDINATOR_SESSION_PROTO_JSON_H_

#include <string>

#include "google/protobuf/message.h"

namespace profctl::coordinator {

// Every field, at its default value too (a repeated one as []), in declaration order; a message
// field only when set. Messages with map, Any or other well-known-type fields are not printed by
// this (none of profctl's are); SupportedByFastJson says whether one is.
std::string EveryFieldJson(const google::protobuf::Message& message);

// Whether EveryFieldJson prints this message type (and every type it holds) as protobuf would.
bool SupportedByFastJson(const google::protobuf::Descriptor& type);

}  // namespace profctl::coordinator

#endif  // PROFCTL_COORDINATOR_SESSION_PROTO_JSON_H_
