#!/bin/sh
# A cmake whose File API reply is malformed: `fake-cmake.sh -S SRC -B BUILD`
# writes the reply files of the case named in BUILD/malformed-case, with
# their source and build folders.
reply="$4/.cmake/api/v1/reply"
mkdir -p "$reply" || exit 1
for file in "$(dirname "$0")/$(cat "$4/malformed-case")"/*.json; do
  sed -e "s|@SOURCE@|$2|g" -e "s|@BUILD@|$4|g" "$file" > "$reply/${file##*/}" || exit 1
done
