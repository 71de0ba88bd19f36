/* grid_mpi — what the gradient reducer (par_reducer.c) needs of grid.c in MPI terms. */
#ifndef GT_GRID_MPI_H
#define GT_GRID_MPI_H


#ifndef GT_DIST_MODULE
#error "grid_mpi.h is internal to src/dist/ (elsewhere: grid.h)"
#endif
#include <mpi.h>

/* The communicator of this rank's replicas (MPI_COMM_WORLD before grid_init). */
MPI_Comm grid_dp_comm(void);

#endif
