/* Sums a vector over every rank through weft's C API. Rank, size and
 * rendezvous come from the launcher environment (RANK, WORLD_SIZE,
 * MASTER_ADDR, MASTER_PORT; or mpirun, srun). */
#include <stdio.h>
#include <stdlib.h>

#include "weft/collectives/c_api.h"

int main(void) {
  weft_comm_t* comm = NULL;
  if (weft_comm_create_from_env(&comm) != WEFT_OK) {
    fprintf(stderr, "%s\n", weft_last_error());
    return 1;
  }
  const int rank = weft_comm_rank(comm), size = weft_comm_size(comm);
  const size_t n = 100003;
  double* v = malloc(n * sizeof *v);
  for (size_t i = 0; i < n; ++i) v[i] = rank + 1;
  weft_status_t s = weft_allreduce(comm, v, v, n, WEFT_F64, WEFT_SUM);
  if (s != WEFT_OK) {
    fprintf(stderr, "allreduce: %s: %s\n", weft_status_name(s), weft_last_error());
    return 1;
  }
  /* Small integers add up exactly in double: every element must be the sum. */
  const double want = size * (size + 1) / 2.0;
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) wrong += v[i] != want;
  printf("rank %d of %d: sum %g (expected %g), %zu of %zu elements wrong\n", rank, size, v[n - 1], want, wrong, n);
  free(v);
  weft_comm_destroy(comm);
  return wrong == 0 ? 0 : 1;
}
