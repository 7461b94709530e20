#!/bin/sh
# Remote shell into a benchmark "host" (a network namespace named like the
# host, with its own hostname in a UTS namespace):
#   netns_rsh.sh HOST COMMAND...   run COMMAND in namespace HOST
#   netns_rsh.sh --here HOST PROG ARGS...   (already inside HOST's namespaces)
#                                   set the hostname, then exec PROG
# Open MPI passes the remote command as several words, ferrorun as one.
if [ "$1" = "--here" ]; then
  hostname "$2" && shift 2 && exec "$@"
fi
host=$1
shift
exec ip netns exec "$host" unshare --uts sh -c "hostname $host && $*"
