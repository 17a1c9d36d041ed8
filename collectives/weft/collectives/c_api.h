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
 * weft_last_error() is the one-line message of the last failed call of the
 * calling thread. A communicator is used by one thread at a time;
 * weft_comm_abort may be called from any thread.
 */
#ifndef WEFT_COLLECTIVES_C_API_H_
#define WEFT_COLLECTIVES_C_API_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_comm weft_comm_t;

/* Mirrors weft::StatusCode. */
typedef enum {
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

typedef enum { WEFT_F32, WEFT_F64, WEFT_F16, WEFT_BF16, WEFT_I32, WEFT_I64, WEFT_U8 } weft_dtype_t;
typedef enum { WEFT_SUM, WEFT_PROD, WEFT_MIN, WEFT_MAX } weft_op_t;

typedef struct {
  int rank;
  int size;
  const char* transport;  /* "tcp", "shm", "auto"; NULL = "auto" */
  const char* store;      /* "tcp://host:port" (rank 0 serves it) or "file:/dir" */
  const char* host;       /* NULL = gethostname() */
  const char* plan_path;  /* route plan file (weft route), or NULL */
  int timeout_ms;         /* every call's deadline; 0 = 60000 */
  /* Where TCP peers connect to this rank (TcpOptions::listen_address in
   * transport.h has the rules). NULL: WEFT_LISTEN_ADDR or WEFT_SOCKET_IFNAME
   * from the environment, else loopback on one host and, across hosts, the
   * address on the route to the store's host. At most one of the two. */
  const char* listen_address; /* an IPv4 address of this host */
  const char* socket_ifname;  /* interfaces, as NCCL_SOCKET_IFNAME: "eth1", "^docker,lo" */
} weft_comm_config_t;

/* Every field to its default (as commented above). Fields are only ever
 * appended: code that calls this, then sets the fields it knows, builds and
 * behaves as before against a newer weft. */
void weft_comm_config_init(weft_comm_config_t* config);
weft_status_t weft_comm_create(const weft_comm_config_t* config, weft_comm_t** out);
/* Rank, size and store from torchrun, Open MPI or Slurm variables (plus
 * MASTER_ADDR/MASTER_PORT or WEFT_STORE); transport "auto". */
weft_status_t weft_comm_create_from_env(weft_comm_t** out);
void weft_comm_destroy(weft_comm_t* comm);

int weft_comm_rank(const weft_comm_t* comm);
int weft_comm_size(const weft_comm_t* comm);

weft_status_t weft_allreduce(weft_comm_t* comm, const void* send, void* recv, size_t count, weft_dtype_t type,
                             weft_op_t op);
weft_status_t weft_reduce_scatter(weft_comm_t* comm, const void* send, void* recv, size_t recv_count,
                                  weft_dtype_t type, weft_op_t op);
weft_status_t weft_allgather(weft_comm_t* comm, const void* send, void* recv, size_t send_count, weft_dtype_t type);
weft_status_t weft_broadcast(weft_comm_t* comm, void* buf, size_t count, weft_dtype_t type, int root);
weft_status_t weft_barrier(weft_comm_t* comm);
void weft_comm_abort(weft_comm_t* comm, const char* reason);

const char* weft_last_error(void);
const char* weft_status_name(weft_status_t status);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_COLLECTIVES_C_API_H_ */
