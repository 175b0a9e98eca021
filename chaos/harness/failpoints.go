package harness

import (
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Failpoints of the chaos build of dexd (api/server/failpoint.go). Their
// terms are go.etcd.io/gofail's: `sleep(3000)` (ms) or `sleep("2s")`,
// `panic("why")`, `N*TERM` (only the first N evaluations), `P%TERM`, chained
// with `->`, `off`. The environment variable GOFAIL_FAILPOINTS sets them at
// start: `NAME=TERMS[;NAME=TERMS]`.
const (
	FailpointBeforeCommitResult = "dexBeforeCommitResult"
	FailpointAfterWaitResolved  = "dexAfterWaitResolved"
	// FailpointAfterArchiveWrite: the leader's session collector wrote a
	// batch of sessions to the archive and has not proposed their delete.
	FailpointAfterArchiveWrite = "dexAfterArchiveWrite"
	// FailpointBeforeScheduleFire and FailpointAfterScheduleFire: the timer
	// wheel before it proposes a FireScheduleSlot and after one committed.
	FailpointBeforeScheduleFire = "dexBeforeScheduleFire"
	FailpointAfterScheduleFire  = "dexAfterScheduleFire"
)

// BuildChaos builds the chaos binaries (dexd with failpoints, go build
// -tags chaos) into dir. Run it inside the module.
func BuildChaos(dir string) error {
	cmd := exec.Command("go", "build", "-tags", "chaos", "-o", strings.TrimSuffix(dir, "/")+"/", "github.com/dexhq/dex/cmd/dexd")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build -tags chaos: %v: %s", err, out)
	}
	return nil
}

var envMu sync.Mutex

// envWrapped remembers the command a Proc ran before SetEnv wrapped it.
var envWrapped = map[*Proc][2][]string{}

// SetEnv makes p run with the extra environment kv ("NAME=VALUE") from its
// next Start on, replacing what an earlier SetEnv gave; no kv clears it. It
// runs p through env(1), so every process of a scenario can have its own.
func SetEnv(p *Proc, kv ...string) error {
	envMu.Lock()
	defer envMu.Unlock()
	orig, ok := envWrapped[p]
	if !ok {
		orig = [2][]string{{p.Bin}, p.Args}
	}
	if len(kv) == 0 {
		p.Bin, p.Args = orig[0][0], orig[1]
		delete(envWrapped, p)
		return nil
	}
	envBin, err := exec.LookPath("env")
	if err != nil {
		return err
	}
	for _, s := range kv {
		if !strings.Contains(s, "=") {
			return fmt.Errorf("SetEnv: %q is not NAME=VALUE", s)
		}
	}
	args := append(append(append([]string{}, kv...), orig[0][0]), orig[1]...)
	p.Bin, p.Args = envBin, args
	envWrapped[p] = orig
	return nil
}

// SetFailpoints gives a node of a chaos build the failpoint terms
// "NAME=TERMS[;NAME=TERMS]" from its next Start on. With httpAddr it also
// serves gofail's HTTP endpoint there, for SetFailpoint while it runs.
func SetFailpoints(n *Node, terms, httpAddr string) error {
	var kv []string
	if terms != "" {
		kv = append(kv, "GOFAIL_FAILPOINTS="+terms)
	}
	if httpAddr != "" {
		kv = append(kv, "GOFAIL_HTTP="+httpAddr)
	}
	return SetEnv(&n.Proc, kv...)
}

// SetFailpoint changes a failpoint of a running chaos dexd through its
// GOFAIL_HTTP endpoint; empty terms disable it.
func SetFailpoint(httpAddr, name, terms string) error {
	method, body := http.MethodPut, io.Reader(strings.NewReader(terms))
	if terms == "" {
		method, body = http.MethodDelete, nil
	}
	req, err := http.NewRequest(method, "http://"+httpAddr+"/"+name, body)
	if err != nil {
		return err
	}
	resp, err := HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 && !(terms == "" && strings.Contains(string(b), "disabled")) {
		return fmt.Errorf("failpoint %s: %s: %s", name, resp.Status, strings.TrimSpace(string(b)))
	}
	return nil
}

// FailpointsOf lists a running chaos dexd's failpoints ("NAME=TERMS" lines).
func FailpointsOf(httpAddr string) (string, error) {
	resp, err := HTTPClient.Get("http://" + httpAddr + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// ChaosDexd finds a dexd built with -tags chaos: BinDir/chaos/dexd, then
// BinDir/dexd. It returns the directory holding it, or why there is none.
func ChaosDexd(binDir string) (string, error) {
	var why []string
	for _, dir := range []string{filepath.Join(binDir, "chaos"), binDir} {
		path := filepath.Join(dir, "dexd")
		info, err := buildinfo.ReadFile(path)
		if err != nil {
			why = append(why, fmt.Sprintf("%s: %v", path, err))
			continue
		}
		for _, s := range info.Settings {
			if s.Key == "-tags" && slices.Contains(strings.Split(s.Value, ","), "chaos") {
				return dir, nil
			}
		}
		why = append(why, path+" is not built with -tags chaos")
	}
	return "", errors.New(strings.Join(why, "; "))
}
