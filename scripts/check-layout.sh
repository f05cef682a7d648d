#!/usr/bin/env bash
# Checks that the component tables say what src/ holds (issue 40):
#   - every src/*/ folder has a row in README.md's layout table (under "## Layout") and in
#     docs/architecture.md's component table (under "## Components"), and a README.md of its own
#     (what it owns, what it may call);
#   - every row of those tables names folders and files that exist (a README row's code spans;
#     an architecture row's folder, under src/ unless the row says "(top level)").
# Prints what is missing and exits 1; prints one line and exits 0 when nothing is. Reads two
# files and lists one folder: it takes a few milliseconds.
#
# usage: scripts/check-layout.sh [ROOT]   (ROOT: the tree to check; by default this repository)
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"

PROBLEMS=()
problem() { PROBLEMS+=("$1"); }

# first_cells FILE HEADING: the first cell of every row of the first table under the line that
# starts with "## HEADING", one a line.
first_cells() {
  awk -v heading="## $2" '
    index($0, heading) == 1 { inside = 1; next }
    inside && /^## / { exit }
    inside && /^\|/ { seen = 1; split($0, cell, "|"); print cell[2]; next }
    inside && seen { exit }
  ' "$1"
}
# spans CELL: the cell's code spans (`...`), one a line, each cut at its first space
# ("`scripts/soak.sh [MINUTES]`" names scripts/soak.sh).
# shellcheck disable=SC2016  # the backquotes are the pattern, not a command
spans() { grep -o '`[^`]*`' <<<"$1" | tr -d '`' | cut -d' ' -f1 || true; }

declare -A IN_README=() IN_ARCH=()

rows=0
while IFS= read -r cell; do
  mapfile -t paths < <(spans "$cell")
  for path in "${paths[@]}"; do
    rows=$((rows + 1))
    [ -e "$path" ] || problem "README.md's layout table names \`$path\`, which does not exist"
    case $path in
      src/*/*/) problem "README.md's layout table names \`$path\`: a row names a component, src/NAME/" ;;
      src/*/) IN_README[${path#src/}]=1 ;;
    esac
  done
done < <(first_cells README.md Layout)
[ "$rows" -gt 0 ] || problem "README.md has no layout table under a \"## Layout\" heading"

rows=0
while IFS= read -r cell; do
  mapfile -t paths < <(spans "$cell")
  for path in "${paths[@]}"; do
    rows=$((rows + 1))
    if [[ $cell == *"(top level)"* ]]; then
      [ -e "$path" ] || problem "docs/architecture.md's component table names \`$path\` (top level), which does not exist"
    else
      [ -d "src/$path" ] || problem "docs/architecture.md's component table names \`$path\`, but src/$path does not exist"
      IN_ARCH[${path%/}/]=1
    fi
  done
done < <(first_cells docs/architecture.md Components)
[ "$rows" -gt 0 ] || problem "docs/architecture.md has no component table under a \"## Components\" heading"

folders=0
for dir in src/*/; do
  name=${dir#src/}
  folders=$((folders + 1))
  [ -n "${IN_README[$name]:-}" ] || problem "src/$name has no row in README.md's layout table (## Layout)"
  [ -n "${IN_ARCH[$name]:-}" ] || problem "src/$name has no row in docs/architecture.md's component table (## Components)"
  [ -f "${dir}README.md" ] || problem "src/$name has no README.md (what it owns, what it may call)"
done

if [ "${#PROBLEMS[@]}" -gt 0 ]; then
  printf 'check-layout: %s\n' "${PROBLEMS[@]}" >&2
  echo "check-layout: FAILED: ${#PROBLEMS[@]} thing(s) missing or wrong" >&2
  exit 1
fi
echo "check-layout: ok: $folders folders under src/, each with a README.md and a row in both tables"
