#!/usr/bin/env bash
# How many deliberate breakages of what the window shows its tests catch (issue 43): builds the
# window's Qt Test suite with -DFTPLAN_GUI_MUTANTS=ON in build-mutants/, runs it once clean (it
# must pass) and once per mutant of tests/gui/mutants.txt (FTPLAN_GUI_MUTANT=NAME switches one
# on; gui/mutants.hpp), and prints each mutant's fate and the share caught. Fails below 90%, on a
# mutant the list names that the code does not have (or the other way round), or when the clean
# run fails. About 10 s a mutant on 2 cores, after the build.
# Usage: scripts/gui-mutants.sh [NAME...]   (the names: some mutants only)
set -uo pipefail
cd "$(dirname "$0")/.."
list=tests/gui/mutants.txt
dir=build-mutants
# The list and the code name the same mutants.
listed=$(grep -Ev '^\s*(#|$)' "$list" | awk '{print $1}' | sort)
coded=$(grep -ho 'mutant("[a-z_]*")' gui/*.cpp | sed 's/mutant("\(.*\)")/\1/' | sort -u)
if [[ $listed != "$coded" ]]; then
  echo "tests/gui/mutants.txt and gui/*.cpp name different mutants:"
  diff <(echo "$listed") <(echo "$coded") | sed 's/^</  listed only:/; s/^>/  in the code only:/' | grep only
  exit 1
fi
[[ ${1:-} == --check-list ]] && { echo "$(wc -l <<<"$listed") mutants, listed and in the code"; exit 0; }
if [[ ! -f $dir/CMakeCache.txt ]]; then
  generator=(); command -v ninja >/dev/null && generator=(-G Ninja)
  cmake -S . -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DFTPLAN_BUILD_GUI=ON -DFTPLAN_GUI_MUTANTS=ON \
    -DFTPLAN_BUILD_CUDA=OFF >/dev/null || exit 1
fi
cmake --build "$dir" --target ftplan_gui_tests --parallel "$(nproc)" >/dev/null || { echo "build failed"; exit 1; }
tests=$dir/gui/ftplan_gui_tests
export QT_QPA_PLATFORM=offscreen FTPLAN_SCREENSHOT_DIR=$dir/mutant-shots
log=$dir/mutants.log
: >"$log"
if ! "$tests" -silent >>"$log" 2>&1; then echo "the suite fails with no mutant: see $log"; exit 1; fi
names=("$@")
((${#names[@]})) || mapfile -t names <<<"$listed"
caught=0 total=0 survivors=()
for m in "${names[@]}"; do
  total=$((total + 1))
  echo "== $m" >>"$log"
  if FTPLAN_GUI_MUTANT=$m timeout 120 "$tests" -silent >>"$log" 2>&1; then
    survivors+=("$m")
    printf '  %-40s survived\n' "$m"
  else
    caught=$((caught + 1))
    # The first failing check, as Qt Test names it.
    where=$(awk -v m="== $m" '$0 == m {on = 1; next} /^== / {on = 0} on && /^FAIL!/ {sub(/^FAIL!  : MainWindowTest::/, ""); print; exit}' "$log")
    printf '  %-40s caught: %s\n' "$m" "${where:0:90}"
  fi
done
share=$((100 * caught / total))
echo "caught $caught of $total mutants ($share%)${survivors[*]:+; survived: ${survivors[*]}}"
((share >= 90))
