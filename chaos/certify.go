package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
)

// dexchaos certify: the crash matrix's rows that a user's Worker decides,
// run against a Worker started from the user's own command line (any
// language, on a Dex Worker library), with the model scripted behind the
// providers' APIs and the executions counted by the library's ledger
// (docs/certify.md).

// CertifyColumns are the columns certify runs by default.
var CertifyColumns = []string{ColWorkerKill, ColServerRestart, ColTakeover}

// CertifyTool is one tool of a tools file: its name, the policy the user
// says it has, and sample arguments for the scripted model's call.
type CertifyTool struct {
	Name      string          `json:"name"`
	Policy    string          `json:"policy"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// UserWorker is how certify starts the user's Worker.
type UserWorker struct {
	// Command is the program and its arguments.
	Command []string
	// Dir is its working directory ("": certify's).
	Dir string
}

// LoadCertifyTools reads a tools file: {"tools": [{"name", "policy",
// "arguments"}]}.
func LoadCertifyTools(path string) ([]CertifyTool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f struct {
		Tools []CertifyTool `json:"tools"`
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := CheckCertifyTools(f.Tools); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f.Tools, nil
}

var toolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// CheckCertifyTools says what is wrong with a tools list.
func CheckCertifyTools(tools []CertifyTool) error {
	if len(tools) == 0 {
		return errors.New("no tools: list the tools to exercise")
	}
	seen := map[string]bool{}
	var errs []error
	for i, t := range tools {
		switch {
		case !toolName.MatchString(t.Name):
			errs = append(errs, fmt.Errorf("tool %d: name %q must be 1-64 letters, digits, _ or -", i+1, t.Name))
		case seen[t.Name]:
			errs = append(errs, fmt.Errorf("tool %q listed twice", t.Name))
		}
		seen[t.Name] = true
		if !slices.Contains([]string{PolicyRead, PolicyIdempotentWrite, PolicySingleAttempt}, t.Policy) {
			errs = append(errs, fmt.Errorf("tool %q: policy %q must be %s, %s or %s", t.Name, t.Policy, PolicyRead, PolicyIdempotentWrite, PolicySingleAttempt))
		}
		if len(t.Arguments) > 0 {
			var obj map[string]any
			if err := json.Unmarshal(t.Arguments, &obj); err != nil {
				errs = append(errs, fmt.Errorf("tool %q: arguments must be a JSON object: %v", t.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// policyOf names a registered access as a tools file does.
func policyOf(a dexv1.ToolAccess) string {
	switch a {
	case dexv1.ToolAccess_TOOL_ACCESS_READ:
		return PolicyRead
	case dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE:
		return PolicyIdempotentWrite
	case dexv1.ToolAccess_TOOL_ACCESS_SINGLE_ATTEMPT:
		return PolicySingleAttempt
	}
	return a.String()
}

// registeredTools waits until a Worker registered and returns its tools.
func (e *cellEnv) registeredTools() ([]*dexv1.ToolSpec, error) {
	deadline := time.Now().Add(waitShort)
	for {
		var resp *dexv1.ListWorkersResponse
		err := e.retry("list the Workers", func(ctx context.Context) error {
			var err error
			resp, err = e.admin.ListWorkers(ctx, &dexv1.ListWorkersRequest{})
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, w := range resp.Workers {
			if id := w.GetWorker().GetId(); id == e.w.Name || (e.opts.TestCluster == nil && id != "") {
				return w.GetWorker().GetTools(), nil
			}
		}
		if !e.w.Running() {
			return nil, fmt.Errorf("your Worker exited before it registered: %s", harness.Tail(e.w.Log(), 8))
		}
		if time.Now().After(deadline) {
			why := "is it reading DEX_ADDR?"
			if e.opts.TestCluster != nil {
				why = "on a test cluster certify finds it by its id: does it take DEX_WORKER_ID as its id?"
			}
			return nil, fmt.Errorf("your Worker %s did not register within %s (%s): %s", e.w.Name, waitShort, why, harness.Tail(e.w.Log(), 8))
		}
		if err := e.sleep(100 * time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// checkPolicies: each tool is registered with the policy the tools file
// says it has; a mismatch is what the user must fix, before any fault.
func (e *cellEnv) checkPolicies(want []CertifyTool) error {
	specs, err := e.registeredTools()
	if err != nil {
		return err
	}
	for _, t := range want {
		i := slices.IndexFunc(specs, func(s *dexv1.ToolSpec) bool { return s.Name == t.Name })
		if i < 0 {
			return fmt.Errorf("tool `%s` is in your tools file but your Worker did not register it", t.Name)
		}
		got := policyOf(specs[i].Access)
		if got != t.Policy {
			return fmt.Errorf("tool `%s` is %s in your tools file but registered as %s: register it with access %s (or correct the tools file)", t.Name, t.Policy, got, t.Policy)
		}
		if specs[i].NeedsApproval || specs[i].LongRunning || specs[i].Inline {
			return fmt.Errorf("tool `%s` needs approval, is long-running or inline: certify does not drive those yet", t.Name)
		}
	}
	return nil
}

// keyUsed: every side effect a write reported used the Step's idempotency
// key; a write that repeats without it repeats its effect.
func keyUsed(r *cellRun, st *dexv1.Step, n int) error {
	l, err := r.ledgerLines()
	if err != nil {
		return err
	}
	for _, x := range l {
		if x.Session != r.id || x.CallID != st.CallId || !x.IsEffect() || x.EffectKey == st.IdempotencyKey {
			continue
		}
		ran := fmt.Sprintf("ran %d times under policy idempotent_write", n)
		if n == 1 {
			ran = "ran under policy idempotent_write (once here; a repeat would do its effect again)"
		}
		if x.EffectKey == "" {
			return fmt.Errorf("tool `%s` %s but used no idempotency key: give the call's idempotency key to the system it writes to, so that a repeat is recognised", st.Tool, ran)
		}
		return fmt.Errorf("tool `%s` %s with key %q, not the call's idempotency key %q: use the key Dex hands the call, the same in every attempt", st.Tool, ran, x.EffectKey, st.IdempotencyKey)
	}
	return nil
}
