#!/usr/bin/env bash
# `cmake --install` gives a working ftplan outside the tree: installs BUILD_DIR into a temporary
# prefix, then, from inside that prefix with no FTPLAN_ZOO, runs the installed binary on an
# installed scenario and checks that its output is the golden one (the same numbers as the build
# tree's). A model written only into the installed zoo must be found: a binary that read the
# source tree's zoo (the build's compiled-in path) would not know it.
# Usage: install_test.sh BUILD_DIR EXPECTED_JSON
set -euo pipefail
build=$1 expected=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
share=$prefix/share/ftplan
[[ -x $prefix/bin/ftplan ]] || { echo "no $prefix/bin/ftplan"; exit 1; }
sed 's/^name: llama-3.2-1b$/name: install-check-1b/' "$share/model_zoo/models/llama-3.2-1b.yaml" \
  >"$share/model_zoo/models/install-check-1b.yaml"
cd "$prefix"
unset FTPLAN_ZOO
if ! "$prefix/bin/ftplan" zoo show install-check-1b >/dev/null; then
  echo "the installed ftplan does not read the zoo installed beside it ($share/model_zoo)"; exit 1
fi
rm "$share/model_zoo/models/install-check-1b.yaml"
"$prefix/bin/ftplan" compare share/ftplan/scenarios/llama8b-single-gpu.yaml --format json >compare.json
if ! diff -u "$expected" compare.json; then
  echo "the installed ftplan's compare differs from $expected"; exit 1
fi
echo "installed into $prefix: ftplan compare on an installed scenario gives the golden output"
