// Every kernel of the project, for one nvcc run and one fatbin
// (src/gpu/kernels.h: a new kernel file is included here).
#include "planes.cu"
