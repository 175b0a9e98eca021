//go:build chaos

package server

import (
	"strings"
	"testing"
	"time"

	gofail "go.etcd.io/gofail/runtime"
)

// go test -tags chaos ./api/server: every failpoint is registered with
// gofail and runs its terms; the timer wheel's hook reaches them.
func TestFailpoints_RegisteredAndEvaluated(t *testing.T) {
	for _, name := range FailpointNames {
		if err := gofail.Enable(name, `panic("boom")`); err != nil {
			t.Fatalf("enable %s: %v", name, err)
		}
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), "boom") {
					t.Errorf("%s did not panic: %v", name, r)
				}
			}()
			failpoint(name)
		}()
		if err := gofail.Enable(name, "sleep(50)"); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		failpoint(name)
		if d := time.Since(start); d < 50*time.Millisecond {
			t.Errorf("%s slept %s; want 50ms", name, d)
		}
		if err := gofail.Disable(name); err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		failpoint(name)
		if d := time.Since(start); d > 20*time.Millisecond {
			t.Errorf("disabled %s took %s", name, d)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("an unknown failpoint name did not panic")
		}
	}()
	failpoint("dexNoSuchFailpoint")
}
