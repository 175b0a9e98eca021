#!/usr/bin/env bash
# The Go part of `make e2e`: the tests of the _test.go files that begin with
# the line `//go:build e2e` (the tests that start processes), and only those.
# -tags e2e compiles those files beside the untagged ones, so one `go test`
# runs over the packages that have such files, -run naming their tests; the
# untagged tests of the same packages are `make test`'s.
#
# dexd, dexworker and dexctl are built once, into $BIN (default bin), and
# the tests take them from there ($DEX_BIN, harness.RunWithBinaries) rather
# than each package linking its own.
#
#   chaos/scripts/e2e-go.sh [go test flags]    e.g. chaos/scripts/e2e-go.sh -race -timeout 10m
#   chaos/scripts/e2e-go.sh --list             the package and name of each test it runs
set -euo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
BIN=${BIN:-bin}

# names FILE...: the top-level tests, examples and fuzz targets they declare.
names() {
	[ "$#" -gt 0 ] || return 0
	sed -n 's/^func \(\(Test\|Example\|Fuzz\)[A-Za-z0-9_]*\)(.*/\1/p' "$@" | grep -vx TestMain || true
}

mapfile -t tagged < <(grep -rlx --include='*_test.go' --exclude-dir=node_modules --exclude-dir=.git '//go:build e2e' . | sort)
if [ "${#tagged[@]}" -eq 0 ]; then
	echo "no _test.go file has the line //go:build e2e" >&2
	exit 1
fi
mapfile -t dirs < <(for f in "${tagged[@]}"; do dirname "$f"; done | sort -u)

list=() # "dir name" of each e2e test
for d in "${dirs[@]}"; do
	files=()
	for f in "${tagged[@]}"; do
		[ "$(dirname "$f")" = "$d" ] && files+=("$f")
	done
	while read -r n; do
		[ -n "$n" ] && list+=("$d $n")
	done < <(names "${files[@]}")
done
mapfile -t run < <(printf '%s\n' "${list[@]}" | cut -d' ' -f2 | sort -u)

# -run applies to every package given: a name of an e2e test must not also
# name an untagged test of one of these packages, which would then run in
# both lanes.
clash=0
for d in "${dirs[@]}"; do
	untagged=()
	for f in "$d"/*_test.go; do
		grep -qx '//go:build e2e' "$f" || untagged+=("$f")
	done
	while read -r n; do
		if [ -n "$n" ] && printf '%s\n' "${run[@]}" | grep -qx "$n"; then
			echo "$d: $n is both an untagged test here and an e2e test: rename one" >&2
			clash=1
		fi
	done < <(names "${untagged[@]}")
done
[ "$clash" -eq 0 ] || exit 1

if [ "${1:-}" = "--list" ]; then
	printf '%s\n' "${list[@]}" | sort
	exit 0
fi
"$GO" build -o "$BIN/" ./cmd/dexd ./cmd/dexworker ./cmd/dexctl
DEX_BIN=$(cd "$BIN" && pwd)
export DEX_BIN
exec "$GO" test -tags e2e "$@" -run "^($(IFS='|'; echo "${run[*]}"))\$" "${dirs[@]}"
