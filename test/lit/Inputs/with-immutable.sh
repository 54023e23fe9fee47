#!/usr/bin/env bash
# with-immutable.sh PATH cmd args...: runs cmd while PATH carries the
# immutable attribute (which even root cannot write through), then clears it
# whatever happened, so no undeletable file outlives the test. Exits with
# cmd's status.
path=$1
shift
chattr +i "$path" || exit 125
"$@"
status=$?
chattr -i "$path"
exit $status
