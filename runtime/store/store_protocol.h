// The TCP store's wire format. A frame is a little-endian u32 payload length followed by the
// payload; a payload is an opcode byte followed by fields (u32-length-prefixed byte strings or
// little-endian i64). Decoding is strict and bounded: anything malformed is rejected.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/store/store.h"

namespace weft::store_proto {

inline constexpr uint32_t kMaxFrameBytes = 64u << 20;  // values are addresses and summaries
inline constexpr uint32_t kMaxKeyBytes = 4096;

enum class Op : uint8_t { kAuth = 1, kSet = 2, kGet = 3, kAdd = 4, kCheck = 5, kErase = 6, kOnDisconnect = 7, kCancelOnDisconnect = 8,
                        kSetIfAbsent = 9 };
enum class Status : uint8_t { kOk = 0, kMissing = 1, kError = 2 };

struct Request {
  Op op{};
  std::string key;  // the secret for kAuth
  Bytes value;      // kSet, kOnDisconnect, kSetIfAbsent
  int64_t delta = 0;  // kAdd
};

struct Response {
  Status status = Status::kOk;
  Bytes value;       // kGet, kSetIfAbsent (the value the key holds afterwards)
  int64_t number = 0;  // kAdd
  std::string error;   // kError
};

Bytes encode_request(const Request& r);
Bytes encode_response(Op op, const Response& r);
// Parses one payload (without its length prefix). Throws weft::Error(kInvalidArgument) when malformed.
Request decode_request(const uint8_t* data, size_t len);
Response decode_response(Op op, const uint8_t* data, size_t len);

// Accumulates bytes from a stream and yields whole payloads. Rejects a frame whose declared
// length exceeds kMaxFrameBytes (throws), so a hostile peer cannot make the server allocate.
class FrameDecoder {
 public:
  void feed(const uint8_t* data, size_t len);
  // The next whole payload, if one is buffered.
  std::optional<Bytes> next();
  size_t buffered() const { return buf_.size() - pos_; }

 private:
  Bytes buf_;
  size_t pos_ = 0;
};

// Prefixes a payload with its length.
Bytes frame(const Bytes& payload);

}  // namespace weft::store_proto
