/* The C API of weft's collective library: opaque handles, status codes, no
 * exceptions across it (every entry point catches and returns a code).
 *
 *   weft_comm_t* comm;
 *   if (weft_comm_create_from_env(&comm) != WEFT_OK) {     // RANK/WORLD_SIZE/MASTER_ADDR...
 *     fprintf(stderr, "%s\n", weft_last_error());
 *     return 1;
 *   }
 *   weft_allreduce(comm, buf, buf, n, WEFT_F32, WEFT_SUM);
 *   weft_comm_destroy(comm);
 *
 * Every argument is checked before anything is written or sent: a NULL
 * handle, config or output pointer, a NULL buffer with a count > 0, a type,
 * op or status outside its enum, a rank, size or root out of range, a count
 * whose bytes overflow size_t, a negative timeout, an unknown transport or
 * registration handle each return WEFT_INVALID_ARGUMENT, and
 * weft_last_error() names the argument. Output pointers (*out, *handle) are
 * written only on success. weft_last_error() is the one-line message of the
 * last failed call of the calling thread. A communicator is used by one
 * thread at a time; weft_comm_abort may be called from any thread.
 *
 * Registration: a buffer registered with weft_comm_register is used in
 * place by every call whose buffer (recv of allreduce and allgather, buf of
 * broadcast) lies inside it — zero-copy over RDMA. Other buffers are correct
 * too: over RDMA they are copied through the communicator's registered
 * memory or registered for one call only, never kept registered by address
 * (a buffer freed and allocated again at the same address has new pages).
 * A registered buffer must stay allocated until weft_comm_deregister.
 */
#ifndef WEFT_COLLECTIVES_C_API_H_
#define WEFT_COLLECTIVES_C_API_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
/* In C++ the enums are based on int, so that every value a C caller may
 * pass is a value of the type there too (the library rejects those outside
 * the list); in C they are plain enums of the same size. */
#define WEFT_C_ENUM_BASE : int
#else
#define WEFT_C_ENUM_BASE
#endif

typedef struct weft_comm weft_comm_t;
/* A registration (weft_comm_register): an opaque handle, never dereferenced
 * by the caller; valid until weft_comm_deregister or weft_comm_destroy. */
typedef struct weft_reg weft_reg_t;

/* Mirrors weft::StatusCode. */
typedef enum WEFT_C_ENUM_BASE {
  WEFT_OK = 0,
  WEFT_INVALID_ARGUMENT,
  WEFT_NOT_FOUND,
  WEFT_ALREADY_EXISTS,
  WEFT_FAILED_PRECONDITION,
  WEFT_OUT_OF_RANGE,
  WEFT_UNAVAILABLE,       /* a peer died or cannot be reached */
  WEFT_DEADLINE_EXCEEDED, /* a peer did not answer in time */
  WEFT_ABORTED,
  WEFT_DATA_LOSS,
  WEFT_INTERNAL,
  WEFT_UNIMPLEMENTED,
  WEFT_PERMISSION_DENIED,
  WEFT_IO
} weft_status_t;

typedef enum WEFT_C_ENUM_BASE { WEFT_F32, WEFT_F64, WEFT_F16, WEFT_BF16, WEFT_I32, WEFT_I64, WEFT_U8 } weft_dtype_t;
typedef enum WEFT_C_ENUM_BASE { WEFT_SUM, WEFT_PROD, WEFT_MIN, WEFT_MAX } weft_op_t;

typedef struct {
  int rank;               /* 0 .. size-1 */
  int size;               /* >= 1 */
  const char* transport;  /* "tcp", "shm", "auto", "verbs", ...; NULL = "auto" */
  const char* store;      /* "tcp://host:port" (rank 0 serves it) or "file:/dir" */
  const char* host;       /* NULL = gethostname() */
  const char* plan_path;  /* route plan file (weft route), or NULL */
  int timeout_ms;         /* every call's deadline; 0 = 60000; < 0 is an error */
  /* Where TCP peers connect to this rank (TcpOptions::listen_address in
   * transport.h has the rules). NULL: WEFT_LISTEN_ADDR or WEFT_SOCKET_IFNAME
   * from the environment, else loopback on one host and, across hosts, the
   * address on the route to the store's host, else (a file store, or a
   * store host that is loopback here) the first interface that is up and
   * neither loopback nor docker*. At most one of the two. */
  const char* listen_address; /* an IPv4 address of this host, or a comma list (one per plane port) */
  const char* socket_ifname;  /* interfaces, as NCCL_SOCKET_IFNAME: "eth1", "^docker,lo" */
  /* Plan epochs (docs/collectives-routes.md "Plan epochs"): the file newer
   * plans are published in; needs plan_path. NULL: WEFT_PLAN_EPOCHS, else none. */
  const char* plan_epochs;
  const char* job;  /* the job the epochs name; NULL: WEFT_JOB, else "weft" */
  /* In-call plan switches (CommConfig::in_call_switch, switch_stall):
   * nonzero turns them off; the stall after which a wait looks for a newer
   * epoch, in ms (0 = 200). WEFT_IN_CALL_SWITCH, WEFT_SWITCH_STALL_MS win. */
  int in_call_switch_off;
  int switch_stall_ms;
  /* Every key this communicator writes to the store starts with it; NULL =
   * "weft". Each weft_comm_create of a rank on one store takes a name of its
   * own: the prefix, or if an earlier create of the process took it (failed
   * or not, still alive or destroyed), the first free of "<prefix>.1",
   * "<prefix>.2", ... (as PyTorch numbers its process groups). So every
   * rank must create its communicators in the same order, and a create that
   * failed is tried again by every rank. Communicators may be alive at once
   * on one tcp:// store (rank 0's process serves it once). A file store
   * directory an earlier job wrote needs a prefix of its own. */
  const char* store_prefix;
} weft_comm_config_t;

/* Every field to its default (as commented above). Fields are only ever
 * appended: code that calls this, then sets the fields it knows, builds and
 * behaves as before against a newer weft. */
weft_status_t weft_comm_config_init(weft_comm_config_t* config);
weft_status_t weft_comm_create(const weft_comm_config_t* config, weft_comm_t** out);
/* Rank, size and store from torchrun, Open MPI or Slurm variables (plus
 * MASTER_ADDR/MASTER_PORT or WEFT_STORE); transport "auto". */
weft_status_t weft_comm_create_from_env(weft_comm_t** out);
/* Deregisters what is still registered and closes the connections. */
weft_status_t weft_comm_destroy(weft_comm_t* comm);

/* -1 (and weft_last_error says why) when comm is NULL. */
int weft_comm_rank(const weft_comm_t* comm);
int weft_comm_size(const weft_comm_t* comm);

/* Registers [buf, buf + bytes) with the communicator's transports (local:
 * each rank registers its own); ranges of two registrations may not
 * overlap. As ncclCommRegister / ncclCommDeregister. */
weft_status_t weft_comm_register(weft_comm_t* comm, void* buf, size_t bytes, weft_reg_t** handle);
weft_status_t weft_comm_deregister(weft_comm_t* comm, weft_reg_t* handle);

weft_status_t weft_allreduce(weft_comm_t* comm, const void* send, void* recv, size_t count, weft_dtype_t type,
                             weft_op_t op);
weft_status_t weft_reduce_scatter(weft_comm_t* comm, const void* send, void* recv, size_t recv_count,
                                  weft_dtype_t type, weft_op_t op);
weft_status_t weft_allgather(weft_comm_t* comm, const void* send, void* recv, size_t send_count, weft_dtype_t type);
weft_status_t weft_broadcast(weft_comm_t* comm, void* buf, size_t count, weft_dtype_t type, int root);
weft_status_t weft_barrier(weft_comm_t* comm);
/* reason NULL: "aborted through the C API". */
weft_status_t weft_comm_abort(weft_comm_t* comm, const char* reason);

const char* weft_last_error(void);
/* "unknown" for a value outside weft_status_t. */
const char* weft_status_name(weft_status_t status);

#undef WEFT_C_ENUM_BASE

#ifdef __cplusplus
}
#endif

#endif /* WEFT_COLLECTIVES_C_API_H_ */
