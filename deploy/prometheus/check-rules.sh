#!/bin/sh
# The check of the alert rules that `make test` runs: promtool (Debian's
# prometheus package) loads alerts.yml and runs the cases of
# alerts_test.yml. Without promtool the check is skipped with a note, but
# not in CI (CI set, as CI services do): there it must run, so a missing
# promtool fails.
set -eu
case $0 in */*) cd "${0%/*}" ;; esac
if ! command -v promtool >/dev/null 2>&1; then
	case ${CI:-} in
	"" | false | 0)
		echo "promtool not found: the alert rules are not checked (apt-get install prometheus)" >&2
		exit 0
		;;
	esac
	echo "promtool not found, and CI must check the alert rules: install it (apt-get install prometheus)" >&2
	exit 1
fi
promtool check rules alerts.yml
promtool test rules alerts_test.yml
