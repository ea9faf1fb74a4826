// Merging XPlanes from several sources (the agent's collectors, a framework profiler server's
// answer) into one host's XSpace, with one plane per name.
//
// Rules (docs/tensorflow-interop.md, "The agent's tsl collector"):
//   - Planes are identified by name. A plane whose name the space already has is merged into that
//     plane, which keeps its id, name and plane stats; otherwise it is appended, keeping its id
//     unless another plane has it (then it gets the space's largest plane id + 1).
//   - Lines are appended, never merged (two sources' events on one line could overlap partly,
//     which XProf forbids). A line keeps its id and display_id unless either collides with an id
//     or display id of the plane's lines (XProf's trace viewer keys threads by display id); then
//     both become the plane's largest line id or display id + 1. Names are kept.
//   - Stat metadata are matched by name (stat meaning is the name): the destination's id is reused,
//     unknown names get fresh ids. Every XStat's metadata_id and every ref_value (a ref names stat
//     metadata) is remapped, on events, event metadata and the plane.
//   - Event metadata are reused by name only when both entries are plain (name and display name
//     alike, no stats, children or metadata bytes); every other one is copied with a fresh id (so
//     metadata stats such as an XLA op's never mix), child ids remapped. Event names never change.
//   - Plane stats of the merged plane whose stat name the destination plane already has are
//     dropped (the destination's value wins); the others are appended.
// Ids from a source that its own metadata does not define stay undefined (they get fresh ids that
// no metadata names), so a reader sees what it would have seen in the source.
#ifndef PROFCTL_XSPACE_XSPACE_MERGE_H_
#define PROFCTL_XSPACE_XSPACE_MERGE_H_

#include "tensorflow/profiler/xplane.pb.h"

namespace profctl::xspace {

// Moves every line, the metadata they use and the plane stats of `src` into `dst` (see the rules
// above); `src` is left without lines. `src` and `dst` must be different planes.
void MergePlaneInto(tensorflow::profiler::XPlane* src, tensorflow::profiler::XPlane* dst);

// Moves `plane` into `space`: merged into the plane with its name, else appended (new id if its id
// is taken). `plane` is left empty.
void AddOrMergePlane(tensorflow::profiler::XPlane* plane, tensorflow::profiler::XSpace* space);

// Merges every plane of `space` into the first plane with the same name, keeping plane order
// otherwise. Returns how many planes were merged away (0: nothing changed).
int MergeDuplicatePlanes(tensorflow::profiler::XSpace* space);

}  // namespace profctl::xspace

#endif  // PROFCTL_XSPACE_XSPACE_MERGE_H_
