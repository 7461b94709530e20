/* A hand-written subset of an MPICH-compatible mpi.h, in the style cbindgen
 * writes. check_abi.sh uses it when include/mpi.h does not exist yet, and
 * for its self-test (which mutates a copy and expects exactly those
 * mutations to be reported). Values are MPICH 4.0's. */
#ifndef FERROCOLL_SAMPLE_MPI_H
#define FERROCOLL_SAMPLE_MPI_H

#include <stdint.h>

#define MPI_VERSION 4
#define MPI_SUBVERSION 0
#define MPI_COMM_WORLD ((MPI_Comm)0x44000000)
#define MPI_COMM_SELF ((MPI_Comm)0x44000001)
#define MPI_COMM_NULL ((MPI_Comm)0x04000000)
#define MPI_DATATYPE_NULL ((MPI_Datatype)0x0c000000)
#define MPI_OP_NULL ((MPI_Op)0x18000000)
#define MPI_REQUEST_NULL ((MPI_Request)0x2c000000)
#define MPI_ERRHANDLER_NULL ((MPI_Errhandler)0x14000000)
#define MPI_ERRORS_ARE_FATAL ((MPI_Errhandler)0x54000000)
#define MPI_ERRORS_RETURN ((MPI_Errhandler)0x54000001)
#define MPI_ERRORS_ABORT ((MPI_Errhandler)0x54000003)
#define MPI_CHAR ((MPI_Datatype)0x4c000101)
#define MPI_INT ((MPI_Datatype)0x4c000405)
#define MPI_LONG_LONG_INT ((MPI_Datatype)0x4c000809)
#define MPI_LONG_LONG MPI_LONG_LONG_INT
#define MPI_DOUBLE ((MPI_Datatype)0x4c00080b)
#define MPI_DOUBLE_INT ((MPI_Datatype)0x8c000001)
#define MPI_2INT ((MPI_Datatype)0x4c000816)
#define MPI_SUM ((MPI_Op)0x58000003)
#define MPI_MAXLOC ((MPI_Op)0x5800000c)
#define MPI_IN_PLACE ((void *)-1)
#define MPI_BOTTOM ((void *)0)
#define MPI_STATUS_IGNORE ((MPI_Status *)1)
#define MPI_STATUSES_IGNORE ((MPI_Status *)1)
#define MPI_PROC_NULL (-1)
#define MPI_ANY_SOURCE (-2)
#define MPI_ROOT (-3)
#define MPI_ANY_TAG (-1)
#define MPI_UNDEFINED (-32766)
#define MPI_THREAD_SERIALIZED 2
#define MPI_IDENT 0
#define MPI_UNEQUAL 3
#define MPI_MAX_PROCESSOR_NAME 128
#define MPI_MAX_ERROR_STRING 512
#define MPI_MAX_OBJECT_NAME 128
#define MPI_MAX_LIBRARY_VERSION_STRING 8192
#define MPI_SUCCESS 0
#define MPI_ERR_BUFFER 1
#define MPI_ERR_TYPE 3
#define MPI_ERR_TRUNCATE 14
#define MPI_ERR_OTHER 15
#define MPI_ERR_LASTCODE 0x3fffffff
#define MPIX_ERR_PROC_FAILED 101

typedef int MPI_Comm;
typedef int MPI_Datatype;
typedef int MPI_Op;
typedef int MPI_Request;
typedef int MPI_Errhandler;
typedef long MPI_Aint;
typedef long MPI_Count;
typedef long MPI_Offset;
typedef int MPI_Fint;

typedef struct MPI_Status {
  int count_lo;
  int count_hi_and_cancelled;
  int MPI_SOURCE;
  int MPI_TAG;
  int MPI_ERROR;
} MPI_Status;

typedef void (MPI_User_function)(void *invec, void *inoutvec, int *len,
                                 MPI_Datatype *datatype);

#ifdef __cplusplus
extern "C" {
#endif

int MPI_Init(int *argc, char ***argv);
int MPI_Finalize(void);
double MPI_Wtime(void);
int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest,
             int tag, MPI_Comm comm);
int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag,
             MPI_Comm comm, MPI_Status *status);
int MPI_Waitall(int count, MPI_Request *array_of_requests,
                MPI_Status *array_of_statuses);
int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count,
                  MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int MPI_Op_create(MPI_User_function *user_fn, int commute, MPI_Op *op);
int MPI_Type_get_extent(MPI_Datatype datatype, MPI_Aint *lb, MPI_Aint *extent);
int PMPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest,
              int tag, MPI_Comm comm);

#ifdef __cplusplus
}
#endif

#endif
