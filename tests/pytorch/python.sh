#!/usr/bin/env bash
# Debian's /usr/bin/python3 (where python3-torch lives; a python3 earlier on
# PATH may have no torch), or SKIPPED where there is none.
[[ -x /usr/bin/python3 ]] || { echo "SKIPPED: no /usr/bin/python3 (apt-get install python3-torch)"; exit 77; }
exec /usr/bin/python3 "$@"
