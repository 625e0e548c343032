#!/usr/bin/env bash
# The house style (.clang-format: Google base, 120 columns) on every C++ file the repository
# tracks: lists the files that differ and fails (ctest format). --fix rewrites them in place.
# clang-format 14 (Debian's clang-format-14, installed by scripts/setup.sh): another version
# formats some constructs differently, so the check names the one it was written against.
set -uo pipefail
cd "$(dirname "$0")/.."
cf=$(command -v clang-format-14) || { echo "clang-format-14 is not installed (scripts/setup.sh)"; exit 77; }
git rev-parse --is-inside-work-tree >/dev/null 2>&1 || { echo "not a git checkout: no list of tracked files"; exit 77; }
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.h' '*.cu' '*.cuh')
if [[ ${1:-} == --fix ]]; then
  "$cf" -i "${files[@]}"
  exit
fi
# One run over every file (one process per file took 30 s); each violation names its file.
mapfile -t bad < <("$cf" --dry-run --Werror "${files[@]}" 2>&1 >/dev/null | grep -o '^[^:]*:[0-9]*:[0-9]*: error' |
                    cut -d: -f1 | sort -u)
if ((${#bad[@]} == 0)); then
  echo "${#files[@]} files in the house style"
  exit 0
fi
echo "${#bad[@]} of ${#files[@]} files are not in the house style (.clang-format; scripts/check-format.sh --fix):"
printf '  %s\n' "${bad[@]}"
exit 1
