#!/usr/bin/env bash
# `make test`'s legs, every one run even when an earlier one fails, each leg's result printed at the end and the
# exit status non-zero when any failed (issue 33: when the main leg failed, py310, kilted and aarch64 never ran and
# nothing said so).
#
# Usage: scripts/test_legs.sh VENV [pytest args...]
#   With pytest args (PYTEST_ARGS) only the main leg runs, with them; the other legs say they were skipped.
#   LEGS_DRY_RUN=1: print each leg's command instead of running it (exit 0).
#   LEG_MAIN, LEG_PY310, LEG_KILTED, LEG_AARCH64, LEG_DOCS: a leg's command instead of the real one (the stand-in legs of
#   test/test_test_legs.py); the main leg gets VENV and the pytest args appended.
# The main leg's pytest exit code 5 ("no tests collected") is scripts/run_tests.sh's failure with an explanation.
set -uo pipefail

venv="${1:?usage: $0 VENV [pytest args...]}"
shift
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

names=(main py310 kilted aarch64 docs)
declare -A cmd=(
  [main]="${LEG_MAIN:-scripts/run_tests.sh}"
  [py310]="${LEG_PY310:-scripts/test_py310.sh -q}"
  [kilted]="${LEG_KILTED:-scripts/test_kilted.sh}"
  [aarch64]="${LEG_AARCH64:-scripts/test_aarch64_qemu.sh --leg}"
  [docs]="${LEG_DOCS:-scripts/docs_build.sh $venv}"
)
declare -A result=()
failed=0
for leg in "${names[@]}"; do
  if [ "$leg" != main ] && [ "$#" -gt 0 ]; then
    result[$leg]="skipped (PYTEST_ARGS given; run make test-$leg)"
    continue
  fi
  if [ "$leg" = main ]; then line="${cmd[$leg]} $venv${*:+ $*}"; else line="${cmd[$leg]}"; fi
  if [ "${LEGS_DRY_RUN:-0}" = 1 ]; then
    echo "legs: $leg: $line"
    result[$leg]="dry run"
    continue
  fi
  echo "legs: ---- $leg: $line"
  start=$SECONDS
  if [ "$leg" = main ]; then
    ${cmd[$leg]} "$venv" "$@"
  else
    # shellcheck disable=SC2086  # a leg's command and its options, split on purpose
    ${cmd[$leg]}
  fi
  rc=$?
  if [ "$rc" -eq 0 ]; then
    result[$leg]="passed ($((SECONDS - start)) s)"
  else
    result[$leg]="FAILED (exit status $rc, $((SECONDS - start)) s)"
    failed=1
  fi
done
echo "legs: summary"
for leg in "${names[@]}"; do
  echo "legs:   $leg: ${result[$leg]}"
done
exit "$failed"
