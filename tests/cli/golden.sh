#!/usr/bin/env bash
# Golden tests of the CLI: run a command, compare its stdout with tests/cli/expected/NAME.txt,
# and check its exit status. Usage: golden.sh FTPLAN NAME STATUS ARGS...
# With FTPLAN_UPDATE_GOLDEN=1 the expected file is rewritten instead.
set -uo pipefail
ftplan=$1 name=$2 want_status=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
expected="$here/expected/$name.txt"
cd "$here/../.."  # repository root, so paths in output are relative
actual=$(FTPLAN_ZOO=model_zoo "$ftplan" "$@" 2>&1)
status=$?
if [[ "${FTPLAN_UPDATE_GOLDEN:-0}" == 1 ]]; then
  printf '%s\n' "$actual" >"$expected"
fi
if [[ $status != "$want_status" ]]; then
  echo "exit status $status, expected $want_status"; printf '%s\n' "$actual"; exit 1
fi
if ! diff -u "$expected" <(printf '%s\n' "$actual"); then
  echo "output differs from $expected (FTPLAN_UPDATE_GOLDEN=1 to accept)"; exit 1
fi
