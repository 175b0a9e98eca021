// Package chaos is the crash matrix of docs/crash-matrix.md (its rows,
// columns, cells and scenarios, the report), dexchaos certify, which runs the
// matrix against a user's Worker, and the takeover measurement. The
// processes they strike come from chaos/harness; the soak and its history
// checker are chaos/soak.
package chaos
