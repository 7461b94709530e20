// Prints the C++ type of every function that both NVIDIA's nccl.h and ours
// declare (abi_protos.h, made by abi_gen.py), as typeid().name() spells it:
// return type and every parameter type, so an int where NVIDIA has a
// size_t, or a missing const on a pointee, shows up. run_abi.sh compiles
// it against each header, maps versioned struct tags (ncclConfig_v23100)
// onto their typedef names, and diffs the outputs.
#include <nccl.h>

#include <cstdio>
#include <typeinfo>

#define PROTO(f) std::printf("%s %s\n", #f, typeid(f).name());

int main() {
#include "abi_protos.h"
  return 0;
}
