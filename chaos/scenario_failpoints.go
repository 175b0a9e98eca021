package chaos

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/dexhq/dex/chaos/harness"
)

// cellFailpoints drives the failpoints of a cell's chaos build through
// each node's gofail endpoint.
type cellFailpoints struct {
	*cellLog
	gofail map[string]string // node id → GOFAIL_HTTP address
}

// armFailpoint sets a failpoint's terms on the node that leads now.
func (e *cellEnv) armFailpoint(name, terms string) (*harness.Node, error) {
	n, err := e.waitReady()
	if err != nil {
		return nil, err
	}
	return n, e.failpointHTTP(n, http.MethodPut, name, terms)
}

func (e *cellFailpoints) disarmFailpoint(n *harness.Node, name string) error {
	if !n.Running() {
		return nil
	}
	return e.failpointHTTP(n, http.MethodDelete, name, "")
}

// fpCount is how often a node evaluated a failpoint (gofail's /NAME/count).
func (e *cellFailpoints) fpCount(n *harness.Node, name string) (int, error) {
	resp, err := harness.HTTPClient.Get("http://" + e.gofail[n.ID] + "/" + name + "/count")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var c int
	if _, err := fmt.Fscan(resp.Body, &c); err != nil {
		return 0, fmt.Errorf("failpoint %s count on %s: %w", name, n.ID, err)
	}
	return c, nil
}

// waitFailpoint waits until n evaluated the failpoint more than before.
func (e *cellFailpoints) waitFailpoint(n *harness.Node, name string, before int) error {
	deadline := time.Now().Add(waitShort)
	for {
		c, err := e.fpCount(n, name)
		if err == nil && c > before {
			e.notef("%s reached failpoint %s", n.ID, name)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s never reached failpoint %s (count %d, %v)", n.ID, name, c, err)
		}
		if err := e.sleep(10 * time.Millisecond); err != nil {
			return err
		}
	}
}

func (e *cellFailpoints) failpointHTTP(n *harness.Node, method, name, terms string) error {
	addr := e.gofail[n.ID]
	if addr == "" {
		return errors.New("the cell's nodes have no GOFAIL_HTTP")
	}
	if method == http.MethodDelete {
		terms = ""
	}
	if err := harness.SetFailpoint(addr, name, terms); err != nil {
		return fmt.Errorf("failpoint %s on %s (is dexd built with -tags chaos?): %w", name, n.ID, err)
	}
	e.notef("failpoint %s %s %q on %s", method, name, terms, n.ID)
	return nil
}
