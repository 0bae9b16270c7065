#include "runtime/store/store_protocol.h"

#include <cstring>

#include "runtime/base/error.h"

namespace weft::store_proto {
namespace {

void put_u32(Bytes& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_i64(Bytes& out, int64_t v) {
  auto u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(u >> (8 * i)));
}
void put_str(Bytes& out, const void* p, size_t n) {
  put_u32(out, static_cast<uint32_t>(n));
  auto* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n);
}

class Reader {
 public:
  Reader(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  uint8_t u8() {
    need(1);
    return d_[p_++];
  }
  uint32_t u32() {
    need(4);
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(d_[p_ + i]) << (8 * i);
    p_ += 4;
    return v;
  }
  int64_t i64() {
    need(8);
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(d_[p_ + i]) << (8 * i);
    p_ += 8;
    return static_cast<int64_t>(v);
  }
  Bytes bytes(uint32_t limit) {
    uint32_t n = u32();
    if (n > limit) fail(ErrorCode::kInvalidArgument, "store protocol: field of {} bytes exceeds the limit {}", n, limit);
    need(n);
    Bytes out(d_ + p_, d_ + p_ + n);
    p_ += n;
    return out;
  }
  void end() {
    if (p_ != n_) fail(ErrorCode::kInvalidArgument, "store protocol: {} trailing bytes in a message", n_ - p_);
  }

 private:
  void need(size_t k) {
    if (n_ - p_ < k) fail(ErrorCode::kInvalidArgument, "store protocol: message truncated");
  }
  const uint8_t* d_;
  size_t n_, p_ = 0;
};

// Requests that carry a value, and responses that return one.
bool carries_value(Op op) { return op == Op::kSet || op == Op::kOnDisconnect || op == Op::kSetIfAbsent; }
bool returns_value(Op op) { return op == Op::kGet || op == Op::kSetIfAbsent; }

}  // namespace

Bytes encode_request(const Request& r) {
  Bytes out;
  out.push_back(static_cast<uint8_t>(r.op));
  put_str(out, r.key.data(), r.key.size());
  if (carries_value(r.op)) put_str(out, r.value.data(), r.value.size());
  if (r.op == Op::kAdd) put_i64(out, r.delta);
  return out;
}

Request decode_request(const uint8_t* data, size_t len) {
  Reader rd(data, len);
  Request r;
  uint8_t op = rd.u8();
  if (op < 1 || op > 9) fail(ErrorCode::kInvalidArgument, "store protocol: unknown opcode {}", op);
  r.op = static_cast<Op>(op);
  Bytes key = rd.bytes(kMaxKeyBytes);
  r.key.assign(key.begin(), key.end());
  if (carries_value(r.op)) r.value = rd.bytes(kMaxFrameBytes);
  if (r.op == Op::kAdd) r.delta = rd.i64();
  rd.end();
  return r;
}

Bytes encode_response(Op op, const Response& r) {
  Bytes out;
  out.push_back(static_cast<uint8_t>(r.status));
  if (r.status == Status::kError) {
    put_str(out, r.error.data(), r.error.size());
    return out;
  }
  if (returns_value(op) && r.status == Status::kOk) put_str(out, r.value.data(), r.value.size());
  if (op == Op::kAdd) put_i64(out, r.number);
  return out;
}

Response decode_response(Op op, const uint8_t* data, size_t len) {
  Reader rd(data, len);
  Response r;
  uint8_t st = rd.u8();
  if (st > 2) fail(ErrorCode::kInvalidArgument, "store protocol: bad status {}", st);
  r.status = static_cast<Status>(st);
  if (r.status == Status::kError) {
    Bytes e = rd.bytes(kMaxKeyBytes);
    r.error.assign(e.begin(), e.end());
  } else {
    if (returns_value(op) && r.status == Status::kOk) r.value = rd.bytes(kMaxFrameBytes);
    if (op == Op::kAdd) r.number = rd.i64();
  }
  rd.end();
  return r;
}

void FrameDecoder::feed(const uint8_t* data, size_t len) {
  if (pos_ > 0 && pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  }
  buf_.insert(buf_.end(), data, data + len);
  if (buffered() >= 4) {
    uint32_t n = 0;
    for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(buf_[pos_ + i]) << (8 * i);
    if (n > kMaxFrameBytes) fail(ErrorCode::kInvalidArgument, "store protocol: frame of {} bytes exceeds {}", n, kMaxFrameBytes);
  }
}

std::optional<Bytes> FrameDecoder::next() {
  if (buffered() < 4) return std::nullopt;
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(buf_[pos_ + i]) << (8 * i);
  if (n > kMaxFrameBytes) fail(ErrorCode::kInvalidArgument, "store protocol: frame of {} bytes exceeds {}", n, kMaxFrameBytes);
  if (buffered() < 4 + static_cast<size_t>(n)) return std::nullopt;
  Bytes out(buf_.begin() + pos_ + 4, buf_.begin() + pos_ + 4 + n);
  pos_ += 4 + n;
  if (pos_ > (1u << 20) && pos_ * 2 > buf_.size()) {  // compact
    buf_.erase(buf_.begin(), buf_.begin() + pos_);
    pos_ = 0;
  }
  return out;
}

Bytes frame(const Bytes& payload) {
  Bytes out;
  out.reserve(payload.size() + 4);
  put_u32(out, static_cast<uint32_t>(payload.size()));
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

}  // namespace weft::store_proto
