#!/usr/bin/env bash
# Issue 29's mutants (tests/world/MUTANTS.md): applies each patch of tests/world/mutants/ to
# src/ in turn, runs the world property tests with CI's seed and case count, and checks that they
# go red twice: with every invariant checked, and with only the invariant the patch's name
# targets (`invN-...`: `WORLD_ONLY=N`). Restores src/ and the regression file after each. Not
# part of CI (one rebuild of the library per mutant). Needs a clean src/.
#
#   scripts/mutants.sh                 # every mutant
#   scripts/mutants.sh inv3            # the mutants whose file name starts with inv3
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-20261202}"
# A mutant's failures are no regressions of main: nothing is written to the regression file.
export PROPTEST_DISABLE_FAILURE_PERSISTENCE=1
if ! git diff --quiet -- src/; then
  echo "mutants.sh: src/ has changes; commit or stash them first" >&2
  exit 2
fi
restore() { git checkout -q -- src/ tests/world_props.proptest-regressions; }
trap restore EXIT

# Runs world_props, its output kept in target/mutants/NAME.log; prints the first line of its
# failure and the cases that passed before it, or SURVIVED.
mkdir -p target/mutants
verdict() {
  local log="target/mutants/$1.log"
  if cargo test -q --test world_props >"$log" 2>&1; then
    echo "SURVIVED"
  else
    (grep -m1 -o 'Test failed: .*' "$log" || echo "failed") | cut -c14-200
    grep -m1 -o 'successes: [0-9]*' "$log" || true
  fi
}

survived=0
for patch in tests/world/mutants/"${1:-}"*.patch; do
  name=$(basename "$patch" .patch)
  target=${name#inv}
  target=${target%%-*}
  git apply "$patch"
  # Build under the shared lock (scripts/test.sh builds alone; helpers share the machine).
  flock /tmp/cargo.lock nice -n 5 cargo test -q --no-run --test world_props 2>/dev/null
  all=$(verdict "$name")
  alone=$(WORLD_ONLY="$target" verdict "$name.inv$target")
  echo "$name" >&2
  echo "  every invariant:   $all" >&2
  echo "  invariant $target alone: $alone" >&2
  case "$all$alone" in *SURVIVED*) survived=1 ;; esac
  restore
done
exit "$survived"
