#!/usr/bin/env bash
# with-busy-file.sh FILE cmd args...: runs cmd while FILE is bind-mounted over
# itself: it stays writable, but renaming another file over it fails (EBUSY),
# as at the end of a run that wrote everything else. Unmounted whatever
# happened; exits with cmd's status, 125 when the mount failed (needs root).
file=$1
shift
mount --bind "$file" "$file" || exit 125
"$@"
status=$?
umount "$file"
exit $status
