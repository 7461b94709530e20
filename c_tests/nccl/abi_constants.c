/* Prints what a program compiled against an nccl.h bakes in: sizes and
 * field offsets of every shared struct, sizes of the enum and handle types,
 * the fields of each *_INITIALIZER, NCCL_VERSION(), and the value and type
 * of every enumerator and object-like macro that both NVIDIA's nccl.h and
 * ours define (abi_names.h, made by abi_gen.py). run_abi.sh compiles it
 * once against each header and diffs the two outputs. */
#include <nccl.h>

#include <stddef.h>
#include <stdio.h>

static void p_i(const char *n, const char *t, long long v) { printf("%s = %lld (%s)\n", n, v, t); }
static void p_u(const char *n, const char *t, unsigned long long v) {
  printf("%s = %llu (%s)\n", n, v, t);
}
static void p_f(const char *n, const char *t, double v) { printf("%s = %a (%s)\n", n, v, t); }
static void p_s(const char *n, const char *t, const char *v) { printf("%s = \"%s\" (%s)\n", n, v, t); }
static void p_p(const char *n, const char *t, const void *v) { printf("%s = %p (%s)\n", n, v, t); }

#define TYPENAME(x)                                                            \
  _Generic((x), int: "int", unsigned int: "unsigned int", long: "long",        \
           unsigned long: "unsigned long", long long: "long long",             \
           unsigned long long: "unsigned long long", float: "float",           \
           double: "double", char *: "char *", const char *: "const char *",   \
           void *: "void *", default: "other")
#define PV(x)                                                                  \
  _Generic((x), float: p_f, double: p_f, char *: p_s, const char *: p_s,       \
           void *: p_p, unsigned int: p_u, unsigned long: p_u,                 \
           unsigned long long: p_u, default: p_i)(#x, TYPENAME(x), (x));

#define SZ(t) printf("sizeof(%s) = %zu, alignof = %zu\n", #t, sizeof(t), _Alignof(t));
#define OFF(t, f) printf("offsetof(%s, %s) = %zu, size %zu\n", #t, #f, offsetof(t, f), \
                         sizeof(((t *)0)->f));

int main(void) {
  /* Types. */
  SZ(ncclUniqueId) SZ(ncclComm_t) SZ(ncclWindow_t) SZ(ncclParamHandle_t)
  SZ(ncclResult_t) SZ(ncclRedOp_t) SZ(ncclDataType_t) SZ(ncclScalarResidence_t)
  SZ(ncclCommMemStat_t) SZ(ncclHostCftMode_t) SZ(ncclNvlsHostMode_t)
  SZ(ncclEncryptionMode_t) SZ(cudaStream_t)
  SZ(ncclConfig_t) SZ(ncclConfigExt_t) SZ(ncclCollConfig_t) SZ(ncclSimInfo_t)
  SZ(ncclWaitSignalDesc_t) SZ(ncclEncryptionConfig_t)

  /* Layouts. */
  OFF(ncclUniqueId, internal)
  OFF(ncclConfig_t, size) OFF(ncclConfig_t, magic) OFF(ncclConfig_t, version)
  OFF(ncclConfig_t, blocking) OFF(ncclConfig_t, cgaClusterSize) OFF(ncclConfig_t, minCTAs)
  OFF(ncclConfig_t, maxCTAs) OFF(ncclConfig_t, netName) OFF(ncclConfig_t, splitShare)
  OFF(ncclConfig_t, trafficClass) OFF(ncclConfig_t, commName)
  OFF(ncclConfig_t, collnetEnable) OFF(ncclConfig_t, CTAPolicy)
  OFF(ncclConfig_t, shrinkShare) OFF(ncclConfig_t, nvlsCTAs)
  OFF(ncclConfig_t, nChannelsPerNetPeer) OFF(ncclConfig_t, nvlinkCentricSched)
  OFF(ncclConfig_t, graphUsageMode) OFF(ncclConfig_t, numRmaCtx)
  OFF(ncclConfig_t, maxP2pPeers) OFF(ncclConfig_t, graphStreamOrdering)
  OFF(ncclConfig_t, launchOrderImplicit) OFF(ncclConfig_t, numRmaSig)
  OFF(ncclConfig_t, rmaEagerInit) OFF(ncclConfig_t, hostCftMode)
  OFF(ncclConfig_t, nvlsHostMode)
  OFF(ncclConfigExt_t, next) OFF(ncclConfigExt_t, key) OFF(ncclConfigExt_t, key.vendorId)
  OFF(ncclConfigExt_t, key.optionId) OFF(ncclConfigExt_t, val) OFF(ncclConfigExt_t, val.i)
  OFF(ncclConfigExt_t, val.s) OFF(ncclConfigExt_t, val.raw)
  OFF(ncclCollConfig_t, size) OFF(ncclCollConfig_t, magic) OFF(ncclCollConfig_t, version)
  OFF(ncclCollConfig_t, ext) OFF(ncclCollConfig_t, minCTAs) OFF(ncclCollConfig_t, maxCTAs)
  OFF(ncclCollConfig_t, nvlsCTAs) OFF(ncclCollConfig_t, cgaClusterSize)
  OFF(ncclCollConfig_t, algSelection) OFF(ncclCollConfig_t, forceAlgSelection)
  OFF(ncclCollConfig_t, CTAPolicy) OFF(ncclCollConfig_t, userProfilerTag)
  OFF(ncclCollConfig_t, launchCompletionEvent)
  OFF(ncclSimInfo_t, size) OFF(ncclSimInfo_t, magic) OFF(ncclSimInfo_t, version)
  OFF(ncclSimInfo_t, estimatedTime)
  OFF(ncclWaitSignalDesc_t, opCnt) OFF(ncclWaitSignalDesc_t, peer)
  OFF(ncclWaitSignalDesc_t, sigIdx) OFF(ncclWaitSignalDesc_t, ctx)
  OFF(ncclEncryptionConfig_t, size) OFF(ncclEncryptionConfig_t, magic)
  OFF(ncclEncryptionConfig_t, version) OFF(ncclEncryptionConfig_t, mode)
  OFF(ncclEncryptionConfig_t, psk)

  /* Initializers, field by field. */
  {
    ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
    PV(c.size) PV(c.magic) PV(c.version) PV(c.blocking) PV(c.cgaClusterSize) PV(c.minCTAs)
    PV(c.maxCTAs) PV((void *)c.netName) PV(c.splitShare) PV(c.trafficClass)
    PV((void *)c.commName) PV(c.collnetEnable) PV(c.CTAPolicy) PV(c.shrinkShare)
    PV(c.nvlsCTAs) PV(c.nChannelsPerNetPeer) PV(c.nvlinkCentricSched) PV(c.graphUsageMode)
    PV(c.numRmaCtx) PV(c.maxP2pPeers) PV(c.graphStreamOrdering) PV(c.launchOrderImplicit)
    PV(c.numRmaSig) PV(c.rmaEagerInit) PV(c.hostCftMode) PV(c.nvlsHostMode)
  }
  {
    ncclCollConfig_t c = NCCL_COLLCONFIG_INITIALIZER;
    PV(c.size) PV(c.magic) PV(c.version) PV((void *)c.ext) PV(c.minCTAs) PV(c.maxCTAs)
    PV(c.nvlsCTAs) PV(c.cgaClusterSize) PV((void *)c.algSelection) PV(c.forceAlgSelection)
    PV(c.CTAPolicy) PV((unsigned long long)c.userProfilerTag)
    PV((void *)c.launchCompletionEvent)
  }
  {
    ncclSimInfo_t s = NCCL_SIM_INFO_INITIALIZER;
    PV(s.size) PV(s.magic) PV(s.version) PV(s.estimatedTime)
  }
  {
    ncclEncryptionConfig_t e = NCCL_ENCRYPTION_CONFIG_INITIALIZER;
    PV(e.size) PV(e.magic) PV(e.version) PV(e.mode) PV((void *)e.psk)
  }

  /* Function-like macros. */
  PV(NCCL_VERSION(2, 32, 3)) PV(NCCL_VERSION(2, 8, 4)) PV(NCCL_VERSION(2, 9, 0))
  PV(NCCL_VERSION(3, 0, 1))

  /* Enumerators and object-like macros in both headers. */
#include "abi_names.h"
  return 0;
}
