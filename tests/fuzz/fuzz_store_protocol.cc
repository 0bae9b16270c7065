// Fuzzes the store's wire decoding as the server runs it: bytes arrive in arbitrary pieces into a
// FrameDecoder, and every whole payload goes to decode_request (and decode_response for every
// opcode, as a client would). Malformed input must be a weft::Error, nothing else; a payload that
// decodes must re-encode to the same bytes (the encoding is canonical).
#include <cstdint>
#include <cstdlib>

#include "runtime/base/error.h"
#include "runtime/store/store_protocol.h"

using namespace weft;
using namespace weft::store_proto;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte chooses the piece size the stream is cut into (1..256 bytes).
  const size_t piece = static_cast<size_t>(data[0]) + 1;
  ++data;
  --size;
  FrameDecoder dec;
  try {
    for (size_t off = 0; off < size; off += piece) {
      dec.feed(data + off, std::min(piece, size - off));
      while (auto p = dec.next()) {
        try {
          Request r = decode_request(p->data(), p->size());
          if (encode_request(r) != *p) std::abort();  // decoded but not canonical: a decoder bug
        } catch (const Error&) {
        }
        for (uint8_t op = 1; op <= 9; ++op) {
          try {
            decode_response(static_cast<Op>(op), p->data(), p->size());
          } catch (const Error&) {
          }
        }
      }
    }
  } catch (const Error&) {
    // An oversized frame: the server drops the connection.
  }
  if (dec.buffered() > size) std::abort();  // never holds more than it was given
  return 0;
}
