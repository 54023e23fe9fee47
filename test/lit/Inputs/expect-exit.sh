#!/usr/bin/env bash
# expect-exit.sh N cmd args...: runs cmd; succeeds only if it exits with N.
expected=$1
shift
"$@"
actual=$?
if [ "$actual" != "$expected" ]; then
  echo "expect-exit.sh: '$*' exited with $actual, expected $expected" >&2
  exit 1
fi
