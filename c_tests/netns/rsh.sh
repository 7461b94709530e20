#!/bin/sh
# The remote shell of the multi-host test: "rsh.sh NAMESPACE COMMAND" runs
# COMMAND inside NAMESPACE with its own hostname (a UTS namespace), so the
# ranks there look like another host (same boot id, other hostname).
ns=$1
exec ip netns exec "$ns" unshare --uts sh -c "hostname $ns && $2"
