#!/usr/bin/env bash
# Runs a command with the memory of its processes capped at LIMIT_MIB mebibytes, the operating system's page cache
# for the files they read included: what a container's memory limit does to a service. Without it, a machine whose
# RAM holds the whole store ends up serving "larger than memory" reads from its page cache, and the kernel's own
# read-ahead decides which store looks faster.
#
# Usage: benchmarks/with-memory-limit.sh LIMIT_MIB command [arguments...]
# Needs root and a writable memory cgroup (v1, or v2 with the memory controller enabled for the child group). The
# command runs in a new group under the caller's own, which is removed when the command exits; its exit code is the
# command's.
set -euo pipefail

if [[ $# -lt 2 || ! $1 =~ ^[0-9]+$ || $1 -lt 64 ]]; then
    echo "usage: $0 LIMIT_MIB command [arguments...]   (LIMIT_MIB: 64 or more)" >&2
    exit 2
fi

limit_bytes=$(( $1 * 1024 * 1024 ))
shift
name="folio-memory-limit-$$"

if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
    # cgroup v2: the unified hierarchy is mounted at /sys/fs/cgroup.
    own=$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup)
    group="/sys/fs/cgroup${own%/}/$name"
    limit_file=memory.max
else
    # cgroup v1: the memory controller has a hierarchy of its own.
    own=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ { print $3 }' /proc/self/cgroup)
    group="/sys/fs/cgroup/memory${own%/}/$name"
    limit_file=memory.limit_in_bytes
fi

if ! mkdir "$group" 2>/dev/null; then
    echo "$0: cannot create the memory cgroup $group (root and a writable memory controller are needed)" >&2
    exit 1
fi

trap 'rmdir "$group" 2>/dev/null || true' EXIT
if ! echo "$limit_bytes" > "$group/$limit_file"; then
    echo "$0: cannot set $group/$limit_file" >&2
    exit 1
fi

echo "$0: running in $group with $limit_file = $limit_bytes bytes" >&2
status=0
( echo "$BASHPID" > "$group/cgroup.procs" && exec "$@" ) || status=$?
if [[ -f "$group/memory.max_usage_in_bytes" ]]; then
    echo "$0: peak usage $(cat "$group/memory.max_usage_in_bytes") bytes" >&2
elif [[ -f "$group/memory.peak" ]]; then
    echo "$0: peak usage $(cat "$group/memory.peak") bytes" >&2
fi
exit "$status"
