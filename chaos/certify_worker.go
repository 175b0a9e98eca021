package chaos

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/dexhq/dex/api/client"
	"github.com/dexhq/dex/chaos/harness"
	"github.com/dexhq/dex/chaos/provider"
)

// What certify gives the user's Worker process (docs/certify.md): the
// cluster, its name, the ledger and holds the Worker library reads, and
// the scripted model's base URLs.
const (
	AddrEnv     = "DEX_ADDR"
	WorkerIDEnv = "DEX_WORKER_ID"
	// CertifyAPIKey is the API key the Worker is given: the scripted model
	// accepts any.
	CertifyAPIKey = "dex-certify"
)

// startProvider serves the row's script on loopback for the cell.
func (e *cellEnv) startProvider(s *provider.Script) error {
	p, err := provider.New(s)
	if err != nil {
		return fmt.Errorf("the row's model script: %w", err)
	}
	url, err := p.Start("127.0.0.1:0")
	if err != nil {
		return err
	}
	e.provider, e.providerURL = p, url
	e.notef("scripted model at %s", url)
	return nil
}

// userWorker prepares the user's Worker with the cell's environment; args
// are the row's hold flags (--hold MOMENT, --hold-all).
func (e *cellEnv) userWorker(name, token string, args []string) (*harness.Worker, error) {
	u := e.opts.UserWorker
	if len(u.Command) == 0 {
		return nil, fmt.Errorf("no Worker command")
	}
	env := []string{
		AddrEnv + "=" + e.target,
		WorkerIDEnv + "=" + name,
		client.LedgerEnv + "=" + e.ledger,
		"OPENAI_BASE_URL=" + e.providerURL + "/v1",
		"ANTHROPIC_BASE_URL=" + e.providerURL,
		"OPENAI_API_KEY=" + CertifyAPIKey,
		"ANTHROPIC_API_KEY=" + CertifyAPIKey,
	}
	if token != "" {
		env = append(env, client.TokenEnv+"="+token)
	}
	var hold []string
	all := "0"
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "--hold":
			if i+1 < len(args) {
				hold = append(hold, args[i+1])
				i++
			}
		case "--hold-all":
			all = "1"
		default:
			return nil, fmt.Errorf("a certify row cannot pass %q to your Worker", args[i])
		}
	}
	env = append(env, client.HoldEnv+"="+strings.Join(hold, ","), client.HoldAllEnv+"="+all)
	w := &harness.Worker{Proc: harness.Proc{Name: name, Bin: u.Command[0], Args: u.Command[1:], Dir: u.Dir, Env: env,
		LogPath: filepath.Join(e.dir, name+".log")}, Ledger: e.ledger}
	return w, nil
}
