/* Weft public C API. Shaped after NCCL so that frameworks which speak NCCL port quickly.
 *
 * Every call returns a weftResult_t. On failure, weftCommGetLastError(comm) (or
 * weftGetLastErrorMessage() for calls with no valid communicator) gives the message. The
 * library never prints to stdout and never calls exit(). */
#ifndef WEFT_WEFT_H
#define WEFT_WEFT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define WEFT_API __attribute__((visibility("default")))
#else
#define WEFT_API
#endif

typedef struct weftComm* weftComm_t;
typedef struct weftRequest* weftRequest_t;
typedef struct weftReducer* weftReducer_t;

typedef enum {
  weftSuccess = 0,
  weftInvalidArgument = 1, /* a bad argument: null pointer, bad enum, out-of-range root, overflow */
  weftInvalidUsage = 2,    /* a call that is not valid now: mismatched ranks, destroyed comm, ... */
  weftSystemError = 3,     /* the OS or a library (UCX, hwloc, MPI) failed */
  weftRemoteError = 4,     /* a peer failed, vanished or reported an error */
  weftTimeout = 5,         /* a wait ran past its timeout (WEFT_TIMEOUT_MS) */
  weftInternalError = 6,   /* a bug in Weft */
  weftNumResults = 7
} weftResult_t;

/* float16 and bfloat16 buffers hold IEEE binary16 and bfloat16 bit patterns (uint16_t). */
typedef enum {
  weftInt8 = 0,
  weftUint8 = 1,
  weftInt32 = 2,
  weftInt64 = 3,
  weftFloat16 = 4,
  weftBfloat16 = 5,
  weftFloat32 = 6,
  weftFloat64 = 7,
  weftNumTypes = 8
} weftDataType_t;

typedef enum { weftSum = 0, weftProd = 1, weftMin = 2, weftMax = 3, weftAvg = 4, weftNumOps = 5 } weftRedOp_t;

/* ---- Versions and errors ---------------------------------------------------------------- */
/// Weft's version as major*10000 + minor*100 + patch.
WEFT_API weftResult_t weftGetVersion(int* version);
/// A static, human-readable name for a result code.
WEFT_API const char* weftGetErrorString(weftResult_t result);
/// The last error message of a communicator (empty string when there was none).
WEFT_API const char* weftCommGetLastError(weftComm_t comm);
/// The last error message of this thread, for calls that had no valid communicator.
WEFT_API const char* weftGetLastErrorMessage(void);

/* ---- Communicators ------------------------------------------------------------------------ */
/// Creates the world communicator from the launcher's environment (mpirun, MPICH/Hydra, Slurm,
/// weftrun or WEFT_RANK/WEFT_WORLD_SIZE/WEFT_MASTER_ADDR/WEFT_MASTER_PORT/WEFT_JOB_SECRET).
WEFT_API weftResult_t weftCommInitFromEnv(weftComm_t* comm);
/// Splits a communicator: ranks with the same color form a new one, ordered by key then rank.
/// A negative color gives *newcomm == NULL. Collective over comm.
WEFT_API weftResult_t weftCommSplit(weftComm_t comm, int color, int key, weftComm_t* newcomm);
/// The levels of a job's hierarchy (the groups the hierarchical collectives work in).
typedef enum {
  weftLevelNode = 0,  ///< the ranks of this rank's node, by local rank (MPI_COMM_TYPE_SHARED; Horovod's local)
  weftLevelRail = 1,  ///< the ranks with this rank's local rank, one per node, by node: its rail (Horovod's cross)
  weftNumLevels = 2
} weftLevel_t;
/// Splits comm into the groups of one level: a weftCommSplit by node (weftLevelNode) or by local
/// rank (weftLevelRail), as weftCommNode / weftCommLocalRank report them. Collective over comm;
/// every rank must pass the same level (weftInvalidArgument for an unknown one).
WEFT_API weftResult_t weftCommSplitLevel(weftComm_t comm, weftLevel_t level, weftComm_t* newcomm);
/// Forces the algorithm of the collectives submitted on comm after this call, as WEFT_ALGO does
/// for the whole process: any row of the algorithm table, "ring", "tree", "rhd", "hier", "chain",
/// "binomial", "direct", "pieces", "window", ... (docs/ALGORITHMS.md), for every collective that has
/// it; or per collective and size range, "allreduce:0-32K:direct,32K-:ring;broadcast:chain" (sizes
/// count x type size; the sizes and collectives not named keep the automatic choice). A native row
/// that cannot take a call (too large, no windows) leaves it to the automatic choice. NULL or ""
/// restores the automatic choice. weftInvalidArgument naming the problem for a bad spec. Not collective, but every rank must
/// set the same algorithm before the same call (as for the call's arguments). Communicators split
/// from comm afterwards start with it.
WEFT_API weftResult_t weftCommSetAlgorithm(weftComm_t comm, const char* algorithm);
/// Deterministic mode (docs/DETERMINISM.md) for the collectives submitted on comm after this call
/// (1: on, 0: off; WEFT_DETERMINISTIC=1 sets it for every communicator): every element of an
/// all-reduce, reduce-scatter or reduce is combined in rank order, ((x0 op x1) op x2) ..., so that a
/// run repeated with the same rank count gives the same bits whatever the timing, the message size,
/// WEFT_SLICE_BYTES, the channels or a forced algorithm (algorithms whose order differs are
/// replaced by the "det" schedule; the algorithm log says so). Host buffers only: device buffers go
/// to NCCL, whose order is NCCL's. Waits for the operations in flight on comm first. Not
/// collective, but every rank must set the same before the same call. Communicators split from
/// comm afterwards inherit it. weftInvalidArgument unless deterministic is 0 or 1.
WEFT_API weftResult_t weftCommSetDeterministic(weftComm_t comm, int deterministic);
/// *deterministic: 1 when comm is in deterministic mode, else 0.
WEFT_API weftResult_t weftCommGetDeterministic(weftComm_t comm, int* deterministic);
/// This rank's index in comm.
WEFT_API weftResult_t weftCommRank(weftComm_t comm, int* rank);
/// The number of ranks in comm.
WEFT_API weftResult_t weftCommCount(weftComm_t comm, int* count);
/// This rank's index among the ranks of its node, and their number.
WEFT_API weftResult_t weftCommLocalRank(weftComm_t comm, int* local_rank);
WEFT_API weftResult_t weftCommLocalCount(weftComm_t comm, int* local_count);
/// The index of this rank's node (0..nodes-1) and the number of nodes.
WEFT_API weftResult_t weftCommNode(weftComm_t comm, int* node, int* node_count);
/// Aborts every operation in flight on comm (from any thread); comm is broken afterwards.
WEFT_API weftResult_t weftCommAbort(weftComm_t comm);
/// Writes the flight recorder (the last WEFT_TRACE_BUFFER operations of every communicator of this
/// process) as JSON to WEFT_DUMP_DIR/rank<R>.json (docs/OBSERVABILITY.md; `weft-doctor DIR` reads
/// a job's dumps). Not collective. weftInvalidUsage when the recorder is off (WEFT_TRACE_BUFFER=0),
/// weftSystemError when the file cannot be written.
WEFT_API weftResult_t weftCommDump(weftComm_t comm);
/// *algorithm: the algorithm that ran comm's last operation, an algorithm table id (the native rows
/// "direct", "pieces", "window" of the shared-memory latency path; "ring", "tree", "rhd", "hier", ...
/// docs/ALGORITHMS.md), "p2p", "nccl"; "" before the first.
/// A static string. Not synchronised with operations still running on another thread.
WEFT_API weftResult_t weftCommLastAlgorithm(weftComm_t comm, const char** algorithm);
/// Allocates `bytes` of host memory for comm's collectives. Collective: every rank of comm calls it,
/// in the same order, with the same size. When every rank is on one node over shared memory the
/// buffer is this rank's region of a segment every rank of the node maps, and an all-reduce whose
/// buffers are such on every rank runs without copies: each rank reduces its share straight from
/// the others' buffers into all of them (MPI_Win_allocate_shared and NCCL's registered buffers in
/// spirit; docs/ARCHITECTURE.md, "Windows"). Otherwise plain memory. Contents start at zero.
/// weftInvalidUsage for 0 bytes or unequal sizes (on every rank); weftSystemError when shared memory
/// runs out. Free it with weftMemFree on the same communicator before destroying it.
WEFT_API weftResult_t weftMemAlloc(weftComm_t comm, size_t bytes, void** ptr);
/// Frees what weftMemAlloc returned (not collective: the peers' views of a window stay
/// valid until they free theirs). NULL is ignored; weftInvalidUsage for any other pointer.
WEFT_API weftResult_t weftMemFree(weftComm_t comm, void* ptr);
/// Destroys comm, waiting for its operations; the handle is invalid afterwards.
WEFT_API weftResult_t weftCommDestroy(weftComm_t comm);

/* ---- Surviving a rank failure (docs/RELIABILITY.md, "Shrink") ------------------------------ */
/// Builds a new communicator of the ranks that survive, numbered densely in their order in comm,
/// with its own topology, plans and transports. Called by every surviving rank (an excluded rank
/// must not call it); works on a communicator that has failed and on a healthy one (which first
/// finishes the operations queued on it). excludeRanks/excludeCount: the ranks to leave out,
/// the same list on every survivor (weftInvalidUsage when they differ); excludeRanks = NULL (or
/// excludeCount = 0): the ranks comm saw fail, agreed among the survivors, so that all build the
/// same group even if they noticed different failures first. A rank that dies during the shrink
/// is left out too (NULL) or ends the call with weftRemoteError on every survivor (a list).
/// Afterwards comm can only be destroyed (every other call is weftInvalidUsage). Needs the job's
/// store, which weftrun serves outside the ranks (docs/LAUNCHING.md). weftInvalidArgument for an
/// entry out of range, twice, or this rank.
WEFT_API weftResult_t weftCommShrink(weftComm_t comm, const int* excludeRanks, int excludeCount, weftComm_t* newcomm);
/// The ranks of comm known to have died (their store connection closed, or the transport saw
/// them fail), ascending. ranks: room for weftCommCount entries, or NULL to get only *count.
WEFT_API weftResult_t weftCommGetFailedRanks(weftComm_t comm, int* ranks, int* count);

/* ---- Requests ----------------------------------------------------------------------------- */
/// Waits for a request to finish, at most timeout_ms (negative: the communicator's timeout).
/// Frees the request when it returns anything but weftTimeout.
WEFT_API weftResult_t weftWait(weftRequest_t request, int timeout_ms);
/// Sets *done to 1 when the request has finished (weftWait then returns at once).
WEFT_API weftResult_t weftTest(weftRequest_t request, int* done);

/* ---- Collectives (NCCL's argument order) ---------------------------------------------------- */
/// All-reduce. float16 / bfloat16 sums and averages are accumulated in float32 and rounded once
/// (docs/KERNELS.md). With WEFT_WIRE_DTYPE=bfloat16 or float16 in the environment when the
/// communicator is made, float32 sums and averages that run as a schedule cross at 16 bits: each
/// rank's input rounded once, summed in float32, rounded once, the same values on every rank
/// (the one-node latency path and weftMemAlloc buffers keep float32). docs/ENVIRONMENT.md.
WEFT_API weftResult_t weftAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                    weftDataType_t datatype, weftRedOp_t op, weftComm_t comm);
WEFT_API weftResult_t weftAllReduceAsync(const void* sendbuff, void* recvbuff, size_t count,
                                         weftDataType_t datatype, weftRedOp_t op, weftComm_t comm,
                                         weftRequest_t* request);
/// Reproducible across rank counts (docs/DETERMINISM.md, "Virtual shards"): an all-reduce over
/// `shards` virtual shards (V; data shards or micro-batches, the same V whatever the rank count).
/// sendbuff holds this rank's V/size shards one after the other, count elements each: rank r holds
/// shards r*V/size .. (r+1)*V/size-1. recvbuff (count elements, on every rank) receives the shards
/// combined by one fixed binary tree over V (each node left op right, [lo,hi) split at
/// lo+ceil((hi-lo)/2)); weftAvg divides by V once at the end. Each rank's shards must form one
/// subtree of that tree, so that 1, 2, 4, ... ranks give the same bits: weftInvalidArgument
/// naming the rank counts that can hold V shards otherwise (for V a power of two: every power of
/// two up to V). recvbuff may be sendbuff. Blocking, also between weftGroupStart and weftGroupEnd
/// (call it outside a group); host buffers; costs an all-to-all and an
/// all-gather of count elements besides the local combination.
WEFT_API weftResult_t weftAllReduceShards(const void* sendbuff, void* recvbuff, size_t count, int shards,
                                          weftDataType_t datatype, weftRedOp_t op, weftComm_t comm);
/// sendbuff holds size*recvcount elements; recvbuff receives this rank's reduced block of
/// recvcount. In place (NCCL's convention) when recvbuff == sendbuff + rank*recvcount.
WEFT_API weftResult_t weftReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                        weftDataType_t datatype, weftRedOp_t op, weftComm_t comm);
WEFT_API weftResult_t weftReduceScatterAsync(const void* sendbuff, void* recvbuff, size_t recvcount,
                                             weftDataType_t datatype, weftRedOp_t op, weftComm_t comm,
                                             weftRequest_t* request);
/// recvbuff receives size*sendcount elements; in place when sendbuff == recvbuff + rank*sendcount.
WEFT_API weftResult_t weftAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                    weftDataType_t datatype, weftComm_t comm);
WEFT_API weftResult_t weftAllGatherAsync(const void* sendbuff, void* recvbuff, size_t sendcount,
                                         weftDataType_t datatype, weftComm_t comm, weftRequest_t* request);
/// sendbuff is read on root only.
WEFT_API weftResult_t weftBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                    weftDataType_t datatype, int root, weftComm_t comm);
WEFT_API weftResult_t weftBroadcastAsync(const void* sendbuff, void* recvbuff, size_t count,
                                         weftDataType_t datatype, int root, weftComm_t comm,
                                         weftRequest_t* request);
/// recvbuff is written on root only.
WEFT_API weftResult_t weftReduce(const void* sendbuff, void* recvbuff, size_t count,
                                 weftDataType_t datatype, weftRedOp_t op, int root, weftComm_t comm);
WEFT_API weftResult_t weftReduceAsync(const void* sendbuff, void* recvbuff, size_t count,
                                      weftDataType_t datatype, weftRedOp_t op, int root, weftComm_t comm,
                                      weftRequest_t* request);
/// count elements go to each peer: block p of sendbuff to rank p, block p of recvbuff from rank p.
WEFT_API weftResult_t weftAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                                   weftDataType_t datatype, weftComm_t comm);
WEFT_API weftResult_t weftAllToAllAsync(const void* sendbuff, void* recvbuff, size_t count,
                                        weftDataType_t datatype, weftComm_t comm, weftRequest_t* request);
/// All-to-all with unequal splits (MPI_Alltoallv's shape; gloo's all_to_all with split sizes).
/// Counts and displacements are in elements, one per rank: sendcounts[p] elements at
/// sendbuff + sdispls[p] go to rank p, and recvcounts[p] elements from rank p land at
/// recvbuff + rdispls[p]. NCCL has no alltoallv (users build it from ncclSend/ncclRecv inside
/// ncclGroupStart/End); this is the one call for it. sendcounts[p] on rank r must equal
/// recvcounts[r] on rank p: a disagreement fails the call with weftInvalidUsage naming both ranks
/// and both counts (the communicator is then broken, as for any mismatch, and the other ranks'
/// next calls fail too). Zero counts are allowed (a rank may send or receive nothing); every rank
/// of the communicator calls it. That the displacements stay inside the caller's buffers is the
/// caller's responsibility. weftInvalidArgument for a NULL array, this rank's own block of two
/// sizes (sendcounts[rank] != recvcounts[rank]), receive blocks that overlap, or sendbuff and
/// recvbuff that overlap (not supported in place). Host buffers only.
WEFT_API weftResult_t weftAllToAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
                                    void* recvbuff, const size_t recvcounts[], const size_t rdispls[],
                                    weftDataType_t datatype, weftComm_t comm);
WEFT_API weftResult_t weftAllToAllvAsync(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
                                         void* recvbuff, const size_t recvcounts[], const size_t rdispls[],
                                         weftDataType_t datatype, weftComm_t comm, weftRequest_t* request);
WEFT_API weftResult_t weftBarrier(weftComm_t comm);
WEFT_API weftResult_t weftBarrierAsync(weftComm_t comm, weftRequest_t* request);
WEFT_API weftResult_t weftSend(const void* sendbuff, size_t count, weftDataType_t datatype, int peer,
                               weftComm_t comm);
WEFT_API weftResult_t weftSendAsync(const void* sendbuff, size_t count, weftDataType_t datatype, int peer,
                                    weftComm_t comm, weftRequest_t* request);
WEFT_API weftResult_t weftRecv(void* recvbuff, size_t count, weftDataType_t datatype, int peer,
                               weftComm_t comm);
WEFT_API weftResult_t weftRecvAsync(void* recvbuff, size_t count, weftDataType_t datatype, int peer,
                                    weftComm_t comm, weftRequest_t* request);
/// Receives the next message from whichever rank's arrives first (MPI_ANY_SOURCE); *source is
/// that rank. Messages from one rank still arrive in the order they were sent, and receives posted
/// after this one wait until it has matched (MPI's order). weftTimeout when none arrives in time.
WEFT_API weftResult_t weftRecvAnySource(void* recvbuff, size_t count, weftDataType_t datatype, int* source,
                                        weftComm_t comm);

/* ---- Groups (NCCL's ncclGroupStart/End) ----------------------------------------------------- */
/* Between weftGroupStart and weftGroupEnd (on one thread; groups nest), the blocking calls are
 * posted as they are made and do not wait: weftGroupEnd waits for all of them and returns the
 * first error. Sends and receives posted in any order complete once each has its match, so a
 * group may post every receive before any send. Asynchronous calls inside a group are unchanged. */
WEFT_API weftResult_t weftGroupStart(void);
WEFT_API weftResult_t weftGroupEnd(void);

/* ---- Device buffers and CUDA streams (docs/GPU.md) ------------------------------------------ */
/* Builds with NCCL send device buffers (cudaMalloc'd or managed) of the calls above to NCCL: the
 * plain calls enqueue on Weft's own stream and wait for it; the ...Stream calls below enqueue on
 * the caller's stream (a cudaStream_t passed as void*; NULL = the legacy default stream) and return
 * once enqueued, like NCCL. Host buffers passed to a ...Stream call wait for the stream, then take
 * the host path. Builds without NCCL return weftInvalidUsage ("built without NCCL"). */
/// Sets *available to 1 when this build has the NCCL path, 0 otherwise.
WEFT_API weftResult_t weftNcclAvailable(int* available);
WEFT_API weftResult_t weftAllReduceStream(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype,
                                          weftRedOp_t op, weftComm_t comm, void* stream);
WEFT_API weftResult_t weftReduceScatterStream(const void* sendbuff, void* recvbuff, size_t recvcount,
                                              weftDataType_t datatype, weftRedOp_t op, weftComm_t comm, void* stream);
WEFT_API weftResult_t weftAllGatherStream(const void* sendbuff, void* recvbuff, size_t sendcount, weftDataType_t datatype,
                                          weftComm_t comm, void* stream);
WEFT_API weftResult_t weftBroadcastStream(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype,
                                          int root, weftComm_t comm, void* stream);
WEFT_API weftResult_t weftReduceStream(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype,
                                       weftRedOp_t op, int root, weftComm_t comm, void* stream);

/* ---- Gradient reducer: bucketed all-reduce overlapped with the backward (docs/OVERLAP.md) ---- */
typedef enum { weftCompressNone = 0, weftCompressFloat16 = 1, weftCompressBfloat16 = 2 } weftCompression_t;

typedef struct {
  size_t bucketCapBytes;       /* default 25 MiB */
  size_t firstBucketCapBytes;  /* default 1 MiB */
  int average;                 /* 1 (default): average over ranks; 0: sum */
  int gradientAsBucketView;    /* 1: the framework writes into weftReducerGradView(); no copies */
  int findUnused;              /* 1: finalize zero-fills parameters that were never marked */
  int rebuildBuckets;          /* 1 (default): after the first synced step, buckets in ready order */
  int overlap;                 /* 1 (default): launch buckets as they fill; 0: all at finalize */
  weftCompression_t compression; /* 16-bit wire format for float32 buckets */
  const char* timelinePath;    /* NULL or "": WEFT_TIMELINE; "%r"/"{rank}" replaced by the rank */
} weftReducerConfig_t;

typedef struct {
  uint64_t step;          /* 1-based */
  int synced;             /* 0 for a no_sync step */
  int buckets;
  uint64_t wireBytes;     /* bytes all-reduced by this rank */
  double stepMs;          /* begin of the step -> finalize returned */
  double backwardMs;      /* reported by weftReducerSetBackwardTime, else begin -> last mark */
  double commMs;          /* sum of the buckets' all-reduce times */
  double exposedCommMs;   /* the part of commMs after the last mark (not hidden by the backward) */
  double tailMs;          /* last mark -> finalize returned */
  double compressMs;      /* float16/bfloat16 conversions */
  double overlapRatio;    /* 1 - exposed/comm, in [0,1] */
  double syncOverhead;    /* exposedCommMs / stepMs */
} weftStepStats_t;

/// Fills config with the defaults (PyTorch DDP's: 25 MiB buckets, 1 MiB first bucket, average).
WEFT_API weftResult_t weftReducerConfigInit(weftReducerConfig_t* config);
/// Creates a reducer over comm (config NULL: defaults). comm must outlive it.
WEFT_API weftResult_t weftReducerCreate(weftComm_t comm, const weftReducerConfig_t* config, weftReducer_t* reducer);
/// Registers a parameter's gradient buffer, in model (forward) order, before the first step.
/// grad may be NULL in bucket-view mode. *index (may be NULL) receives its index.
WEFT_API weftResult_t weftReducerAddParam(weftReducer_t reducer, void* grad, size_t count, weftDataType_t datatype,
                                          const char* name, int* index);
/// The parameter's slice of its bucket (bucket-view mode writes gradients there). May change at
/// the weftReducerBeginStep after the first synced step (buckets rebuilt; contents kept).
WEFT_API weftResult_t weftReducerGradView(weftReducer_t reducer, int index, void** view);
/// Starts a step; sync=0 is a no_sync step (gradients accumulate locally, nothing is sent).
WEFT_API weftResult_t weftReducerBeginStep(weftReducer_t reducer, int sync);
/// Optional: the caller's own measurement of this step's backward compute time.
WEFT_API weftResult_t weftReducerSetBackwardTime(weftReducer_t reducer, double ms);
/// The parameter's gradient is final for this step (call from the gradient hook).
WEFT_API weftResult_t weftReducerMarkReady(weftReducer_t reducer, int index);
/// Device gradients: the gradient is final once `stream` (a cudaStream_t; NULL = the legacy default
/// stream) reaches this point; the bucket copy and all-reduce wait for it on the device (a CUDA
/// event), not on the host. Host gradients: the same as weftReducerMarkReady.
WEFT_API weftResult_t weftReducerMarkReadyStream(weftReducer_t reducer, int index, void* stream);
/// The parameter received no gradient this step; it contributes zeros.
WEFT_API weftResult_t weftReducerMarkUnused(weftReducer_t reducer, int index);
/// Waits for every bucket, averages or sums, copies back (copy mode); stats may be NULL.
WEFT_API weftResult_t weftReducerFinalize(weftReducer_t reducer, weftStepStats_t* stats);
/// Device gradients: `stream` (NULL = the legacy default stream) waits on the device for the
/// results (a CUDA event); returns without waiting for the device. Host gradients: as
/// weftReducerFinalize.
WEFT_API weftResult_t weftReducerFinalizeStream(weftReducer_t reducer, weftStepStats_t* stats, void* stream);
/// The number of buckets of the current (or next step's) layout.
WEFT_API weftResult_t weftReducerBucketCount(weftReducer_t reducer, int* count);
/// Waits for buckets in flight, writes the timeline (if any) and frees the reducer.
WEFT_API weftResult_t weftReducerDestroy(weftReducer_t reducer);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_WEFT_H */
