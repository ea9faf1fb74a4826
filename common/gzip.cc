#include "common/gzip.h"

#include <zlib.h>

#include "absl/strings/str_cat.h"

namespace profctl {
namespace {
constexpr int kGzipWindowBits = 15 + 16;  // zlib: 15-bit window, gzip wrapper.
}  // namespace

absl::StatusOr<std::string> GzipCompress(absl::string_view data) {
  z_stream zs{};
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, kGzipWindowBits, 8,
                   Z_DEFAULT_STRATEGY) != Z_OK) {
    return absl::InternalError("gzip: deflateInit2 failed");
  }
  std::string out;
  out.resize(deflateBound(&zs, data.size()));
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  const size_t written = zs.total_out;
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) return absl::InternalError(absl::StrCat("gzip: deflate returned ", rc));
  out.resize(written);
  return out;
}

absl::StatusOr<std::string> GzipDecompress(absl::string_view data) {
  z_stream zs{};
  if (inflateInit2(&zs, kGzipWindowBits) != Z_OK) {
    return absl::InternalError("gzip: inflateInit2 failed");
  }
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  std::string out;
  char buf[1 << 16];
  int rc = Z_OK;
  while (rc == Z_OK) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof(buf);
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(buf, sizeof(buf) - zs.avail_out);
  }
  inflateEnd(&zs);
  if (rc != Z_STREAM_END) {
    return absl::DataLossError(absl::StrCat("gzip: corrupt or truncated data (zlib ", rc, ")"));
  }
  return out;
}

}  // namespace profctl
