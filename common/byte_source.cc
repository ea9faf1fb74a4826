#include "common/byte_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace profctl {
namespace {

using google::protobuf::io::ArrayInputStream;
using google::protobuf::io::CopyingInputStream;
using google::protobuf::io::CopyingInputStreamAdaptor;
using google::protobuf::io::ZeroCopyInputStream;

// [offset, offset + length) of a file, by pread(); Skip() only moves the position.
class PreadStream : public CopyingInputStream {
 public:
  PreadStream(const FileByteSource* source, uint64_t offset, uint64_t length)
      : source_(source), pos_(offset), end_(offset + length) {}

  int Read(void* buffer, int size) override {
    if (pos_ >= end_ || size <= 0) return 0;
    const uint64_t want = std::min<uint64_t>(static_cast<uint64_t>(size), end_ - pos_);
    for (;;) {
      const ssize_t n = pread(source_->fd(), buffer, want, static_cast<off_t>(pos_));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        source_->NoteError(absl::DataLossError(absl::StrCat(
            "cannot read ", source_->path(), " at byte ", pos_, ": ", std::strerror(errno))));
        return -1;
      }
      if (n == 0) {
        source_->NoteError(absl::DataLossError(
            absl::StrCat(source_->path(), " ended at byte ", pos_,
                         " while reading it (it shrank from ", source_->size(), " bytes)")));
        return -1;
      }
      pos_ += static_cast<uint64_t>(n);
      return static_cast<int>(n);
    }
  }

  int Skip(int count) override {
    if (count <= 0) return 0;
    const uint64_t n = std::min<uint64_t>(static_cast<uint64_t>(count), end_ - pos_);
    pos_ += n;
    return static_cast<int>(n);
  }

 private:
  const FileByteSource* source_;
  uint64_t pos_;
  uint64_t end_;
};

// Clamps [offset, offset + length) to [0, size).
std::pair<uint64_t, uint64_t> Clamp(uint64_t size, uint64_t offset, uint64_t length) {
  offset = std::min(offset, size);
  return {offset, std::min(length, size - offset)};
}

}  // namespace

std::unique_ptr<ZeroCopyInputStream> StringByteSource::Open(uint64_t offset,
                                                            uint64_t length) const {
  const auto [o, n] = Clamp(bytes_.size(), offset, length);
  // ArrayInputStream takes an int size: a range over 2 GiB reads as its first INT_MAX bytes,
  // which a protobuf reader (limited to 2 GiB per message) rejects anyway.
  const int size = static_cast<int>(std::min<uint64_t>(n, INT32_MAX));
  return std::make_unique<ArrayInputStream>(bytes_.data() + o, size);
}

absl::StatusOr<std::unique_ptr<FileByteSource>> FileByteSource::OpenFile(const std::string& path,
                                                                         int buffer_bytes) {
  struct stat st {};
  absl::StatusOr<UniqueFd> fd = OpenRegularFile(path, &st);
  if (!fd.ok()) return fd.status();
  return std::unique_ptr<FileByteSource>(new FileByteSource(
      fd->release(), path, static_cast<uint64_t>(st.st_size), std::max(buffer_bytes, 1)));
}

FileByteSource::~FileByteSource() { close(fd_); }

std::unique_ptr<ZeroCopyInputStream> FileByteSource::Open(uint64_t offset, uint64_t length) const {
  const auto [o, n] = Clamp(size_, offset, length);
  auto stream = std::make_unique<CopyingInputStreamAdaptor>(
      new PreadStream(this, o, n),
      static_cast<int>(std::min<uint64_t>(buffer_bytes_, std::max<uint64_t>(n, 1))));
  stream->SetOwnsCopyingStream(true);
  return stream;
}

}  // namespace profctl
