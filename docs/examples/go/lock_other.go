//go:build !unix

package main

// lockFile takes no lock where flock(2) is missing: only one Worker process
// may use a store there (InvoiceStore's mutex orders its goroutines).
func lockFile(string) (unlock func(), err error) {
	return func() {}, nil
}
