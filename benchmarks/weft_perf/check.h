// weft-perf: data types, deterministic inputs, independently computed expected results, and the
// comparison (with a tolerance for float16/bfloat16 and for averages). Nothing here uses Weft's
// own kernels or conversions, so a bug there cannot hide itself.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <weft/weft.h>

namespace wperf {

struct TypeInfo {
  const char* name;       // nccl-tests' spelling
  const char* alias;      // Weft's spelling
  weftDataType_t dt;
  size_t size;
  bool is_float, is_signed;
};
const std::vector<TypeInfo>& all_types();
const TypeInfo* find_type(const std::string& name);
const char* op_name(weftRedOp_t op);
bool parse_op(const std::string& name, weftRedOp_t* op);

enum class Coll { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kReduce, kAllToAll, kSendRecv };
const char* coll_name(Coll c);
bool parse_coll(const std::string& name, Coll* c);
bool coll_reduces(Coll c);
bool coll_rooted(Coll c);
// nccl-tests' bus-bandwidth factor: busbw = algbw * factor.
double bus_factor(Coll c, int nranks);

// Element counts of one call whose nccl-tests "size" is total_elems elements (the largest buffer):
// count is the argument given to Weft; send/recv are the buffers' lengths in elements.
struct Shape {
  size_t count = 0, send_elems = 0, recv_elems = 0;
  size_t total = 0;                    // elements reported in the "count" column
  size_t inplace_send_off = 0;         // in place: send = recv + this (allgather)
  size_t inplace_recv_off = 0;         // in place: recv = send + this (reducescatter)
};
Shape make_shape(Coll c, size_t total_elems, int nranks, int rank);

// Element i of rank r's send buffer, as a double that is exact in every type.
double input_value(Coll c, weftRedOp_t op, const TypeInfo& t, int rank, size_t i);
void store_value(const TypeInfo& t, void* buf, size_t i, double v);
double load_value(const TypeInfo& t, const void* buf, size_t i);
void fill_input(Coll c, weftRedOp_t op, const TypeInfo& t, int rank, void* buf, size_t elems);

// Counts wrong elements of this rank's receive buffer (recv_elems elements; nothing on a
// non-root rank of reduce). root is the peer for sendrecv's source.
size_t count_wrong(Coll c, weftRedOp_t op, const TypeInfo& t, int rank, int nranks, int root,
                   const void* recv, const Shape& s);

}  // namespace wperf
