#!/usr/bin/env bash
# full-disk.sh DISK SEED cmd args...: runs cmd with a full file system at DISK.
#
# Mounts a tmpfs of $FULL_DISK_SIZE (default 64k) at DISK, copies the folder
# SEED into it ("-": none), runs $FULL_DISK_PREPARE (a bash command, when
# set), fills every block left with DISK/.filler but $FULL_DISK_LEAVE_KB KiB
# (default 0), and runs cmd. Before and after cmd it lists what DISK holds
# (each path with its type and permissions, each file's checksum; the filler
# left out) into DISK.before and DISK.after, and copies what DISK holds after
# cmd into DISK.after.d (the filler left out), so that the test can look at
# it once the tmpfs is gone. The tmpfs is unmounted whatever happened. Exits
# with cmd's status, 125 when the disk could not be set up.
#
# full-disk.sh --check: fails with a clear message unless run as root (the
# tests run as root, as CI does).
if [ "$(id -u)" != 0 ]; then
  echo "full-disk.sh: mounting a tmpfs needs root; run the tests as root" \
    "(as CI does)" >&2
  [ "$1" = --check ] && exit 1
  exit 125
fi
[ "$1" = --check ] && exit 0

disk=$1
seed=$2
shift 2
size=${FULL_DISK_SIZE:-64k}
leave_kb=${FULL_DISK_LEAVE_KB:-0}

inventory() {
  (cd "$disk" && find . -path ./.filler -prune -o -printf '%y %m %p\n' |
    sort && find . -path ./.filler -prune -o -type f -print0 | sort -z |
    xargs -0 -r md5sum)
}

rm -rf "$disk" "$disk.before" "$disk.after" "$disk.after.d"
mkdir -p "$disk" || exit 125
mount -t tmpfs -o "size=$size" tmpfs "$disk" || exit 125
trap 'umount "$disk"' EXIT
if [ "$seed" != - ]; then
  cp -a "$seed/." "$disk/" || exit 125
fi
if [ -n "$FULL_DISK_PREPARE" ]; then
  bash -c "$FULL_DISK_PREPARE" || exit 125
fi
# dd stops at ENOSPC.
dd if=/dev/zero of="$disk/.filler" bs=1k 2>/dev/null
if [ "$leave_kb" != 0 ]; then
  truncate -s "-${leave_kb}K" "$disk/.filler" || exit 125
elif echo x 2>/dev/null >"$disk/.probe"; then
  rm -f "$disk/.probe"
  echo "full-disk.sh: $disk is not full" >&2
  exit 125
fi
rm -f "$disk/.probe"
inventory >"$disk.before"

"$@"
status=$?

inventory >"$disk.after"
mkdir -p "$disk.after.d" && cp -a "$disk/." "$disk.after.d/" &&
  rm -f "$disk.after.d/.filler"
exit $status
