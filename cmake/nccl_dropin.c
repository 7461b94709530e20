/* The NCCL drop-in: a library whose SONAME is libnccl.so.2 and whose only
 * content is its dependency on libferrocoll.so, which defines every nccl*
 * name. Loaded first (LD_PRELOAD, or found first on LD_LIBRARY_PATH), it
 * satisfies programs' NEEDED libnccl.so.2, so NVIDIA's library is never
 * loaded, and their nccl* references resolve to ferrocoll. */
const char ferrocoll_nccl_dropin[] = "ferrocoll";
