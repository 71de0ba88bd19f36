/* grid_mpi — what parallel.c needs of grid.c in MPI terms (not for other files). */
#ifndef GT_GRID_MPI_H
#define GT_GRID_MPI_H

#include <mpi.h>

/* The communicator of this rank's replicas (MPI_COMM_WORLD before grid_init). */
MPI_Comm grid_dp_comm(void);

#endif
