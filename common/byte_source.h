// Random access to serialized bytes (a file or a string) as protobuf ZeroCopyInputStreams over
// any sub-range, so a wire-format reader can visit a message's fields in the order it needs (an
// XPlane's metadata, serialized after its lines, before the lines) without holding the whole file:
// a file is read with pread() through a small buffer per open stream.
#ifndef PROFCTL_COMMON_BYTE_SOURCE_H_
#define PROFCTL_COMMON_BYTE_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/io/zero_copy_stream.h"

namespace profctl {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual uint64_t size() const = 0;
  // A stream over [offset, offset + length), clamped to size(). Several may be open at once.
  virtual std::unique_ptr<google::protobuf::io::ZeroCopyInputStream> Open(
      uint64_t offset, uint64_t length) const = 0;
  // OK, or the first read error a stream of this source met (the stream then ended early).
  virtual absl::Status status() const { return absl::OkStatus(); }
};

// Bytes in memory; they must outlive the source and its streams.
class StringByteSource : public ByteSource {
 public:
  explicit StringByteSource(absl::string_view bytes) : bytes_(bytes) {}
  uint64_t size() const override { return bytes_.size(); }
  std::unique_ptr<google::protobuf::io::ZeroCopyInputStream> Open(uint64_t offset,
                                                                  uint64_t length) const override;

 private:
  absl::string_view bytes_;
};

// A regular file, read with pread() through a `buffer_bytes` buffer per open stream. Its size is
// taken when opened; a file that shrinks later ends its streams early with an error in status().
// Not thread-safe: one reader at a time.
class FileByteSource : public ByteSource {
 public:
  static constexpr int kDefaultBufferBytes = 256 * 1024;
  static absl::StatusOr<std::unique_ptr<FileByteSource>> OpenFile(
      const std::string& path, int buffer_bytes = kDefaultBufferBytes);
  ~FileByteSource() override;
  FileByteSource(const FileByteSource&) = delete;
  FileByteSource& operator=(const FileByteSource&) = delete;

  uint64_t size() const override { return size_; }
  std::unique_ptr<google::protobuf::io::ZeroCopyInputStream> Open(uint64_t offset,
                                                                  uint64_t length) const override;
  absl::Status status() const override { return status_; }

  // For the streams: records the first error.
  void NoteError(absl::Status status) const {
    if (status_.ok()) status_ = std::move(status);
  }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

 private:
  FileByteSource(int fd, std::string path, uint64_t size, int buffer_bytes)
      : fd_(fd), path_(std::move(path)), size_(size), buffer_bytes_(buffer_bytes) {}

  int fd_;
  std::string path_;
  uint64_t size_;
  int buffer_bytes_;
  mutable absl::Status status_;
};

}  // namespace profctl

#endif  // PROFCTL_COMMON_BYTE_SOURCE_H_
