package systemd

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dexhq/dex/api/tlsconf"
	"github.com/dexhq/dex/deploy/internal/cmdflags"
)

// credentials parses the unit's LoadCredential=ID:PATH lines.
func credentials(u unit) (map[string]string, error) {
	creds := map[string]string{}
	for _, v := range u["LoadCredential"] {
		id, path, ok := strings.Cut(v, ":")
		if !ok || id == "" || strings.ContainsAny(id, "/ ") {
			return nil, fmt.Errorf("LoadCredential=%s is not ID:PATH", v)
		}
		if _, dup := creds[id]; dup {
			return nil, fmt.Errorf("LoadCredential %s is given twice", id)
		}
		// Root-only files of the host: systemd reads them, the dynamic
		// user never does.
		if !strings.HasPrefix(path, "/etc/dex/") || filepath.Clean(path) != path {
			return nil, fmt.Errorf("LoadCredential %s reads %s, not a file under /etc/dex", id, path)
		}
		creds[id] = path
	}
	return creds, nil
}

// credRef is a file in the unit's credentials directory.
var credRef = regexp.MustCompile(`%d/([\w.-]+)`)

// tokenShell is the one wrapper a unit may run its binary through: it reads
// a credential into $DEX_TOKEN and execs the binary with its arguments.
var tokenShell = regexp.MustCompile(`^DEX_TOKEN=\$\(cat %d/([\w.-]+)\) && export DEX_TOKEN && exec "\$0" "\$@"$`)

// securityProblems lists what leaves a unit without TLS and a token: the
// flags that turn them on, each file from a credential of the unit, and
// never a secret on the command line.
func securityProblems(u unit, c command) []string {
	var out []string
	creds, err := credentials(u)
	if err != nil {
		return []string{err.Error()}
	}
	if _, ok := c.flags["insecure"]; ok {
		out = append(out, "--insecure: no TLS and no tokens")
	}
	if _, ok := c.flags["token"]; ok {
		out = append(out, "--token on the command line: every user sees it in ps")
	}
	files := []string{"tls-cert", "tls-key", "tls-ca"}
	switch filepath.Base(c.bin) {
	case "dexd":
		files = append(files, "acl-bootstrap-token-file")
		if c.flags["acl"] != "true" {
			out = append(out, fmt.Sprintf("--acl=%q: calls without a token would be served", c.flags["acl"]))
		}
		if c.flags["http-tls"] != "true" {
			out = append(out, fmt.Sprintf("--http-tls=%q: the console's login token would cross the network in clear", c.flags["http-tls"]))
		}
		if c.shell != "" {
			out = append(out, "dexd runs through a shell")
		}
	case "dexworker":
		m := tokenShell.FindStringSubmatch(c.shell)
		if m == nil {
			out = append(out, fmt.Sprintf("dexworker gets no token from a credential: the shell is %q", c.shell))
		}
	}
	for _, f := range files {
		v, ok := c.flags[f]
		if !ok {
			out = append(out, "no --"+f)
		} else if !strings.HasPrefix(v, "%d/") {
			out = append(out, fmt.Sprintf("--%s=%s is not a credential (%%d/ID)", f, v))
		}
	}
	// Each %d/ID names a credential the unit loads, and each one is used.
	used := map[string]bool{}
	refs := credRef.FindAllStringSubmatch(c.shell, -1)
	for _, v := range c.flags {
		refs = append(refs, credRef.FindAllStringSubmatch(v, -1)...)
	}
	for _, m := range refs {
		used[m[1]] = true
		if creds[m[1]] == "" {
			out = append(out, fmt.Sprintf("%%d/%s: no LoadCredential=%s:…", m[1], m[1]))
		}
	}
	for id := range creds {
		if !used[id] {
			out = append(out, fmt.Sprintf("LoadCredential %s is loaded and never used", id))
		}
	}
	return out
}

// The units as shipped: TLS and tokens from credentials, whose files are
// the ones dexctl tls writes under the names docs/tls-and-tokens.md installs.
func TestUnitsTakeTLSAndTokensFromCredentials(t *testing.T) {
	dexd := parseUnit(t, "dexd@.service")
	worker := parseUnit(t, "dexworker.service")
	for _, x := range []struct {
		u    unit
		c    command
		want map[string]string // credential → its file, for n1
	}{
		{dexd, execStart(t, dexd, "n1", parseEnv(t, "dexd.env.example")), map[string]string{
			"bootstrap-token": "/etc/dex/bootstrap-token",
		}},
		{worker, execStart(t, worker, "", parseEnv(t, "dexworker.env.example")), map[string]string{
			"token": "/etc/dex/dexworker-token",
		}},
	} {
		for _, p := range securityProblems(x.u, x.c) {
			t.Errorf("%s: %s", filepath.Base(x.c.bin), p)
		}
		kind, name := "server", "n1"
		if filepath.Base(x.c.bin) == "dexworker" {
			kind, name = "client", "dexworker"
		}
		cert, key := tlsconf.CertFiles("/etc/dex/tls", kind, name)
		x.want[strings.TrimPrefix(x.c.flags["tls-cert"], "%d/")] = cert
		x.want[strings.TrimPrefix(x.c.flags["tls-key"], "%d/")] = key
		x.want[strings.TrimPrefix(x.c.flags["tls-ca"], "%d/")] = "/etc/dex/tls/" + tlsconf.CAFile
		creds, err := credentials(x.u)
		if err != nil {
			t.Fatal(err)
		}
		for id, path := range x.want {
			if got := strings.ReplaceAll(creds[id], "%i", "n1"); got != path {
				t.Errorf("%s: credential %s is %q, want %s", filepath.Base(x.c.bin), id, got, path)
			}
		}
	}
}

// Each way of undoing the security is caught.
func TestSecurityProblemsCatchEachHole(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	dexd, worker := read("dexd@.service"), read("dexworker.service")
	for name, tc := range map[string]struct {
		unit, from, to, want string
	}{
		"insecure":         {dexd, "    $DEX_FLAGS", "    --insecure=true $DEX_FLAGS", "--insecure"},
		"no acl":           {dexd, "    --acl=true \\\n", "", `--acl=""`},
		"http in clear":    {dexd, "--http-tls=true", "--http-tls=false", `--http-tls="false"`},
		"file not loaded":  {dexd, "LoadCredential=dex-ca.pem:/etc/dex/tls/dex-ca.pem\n", "", "%d/dex-ca.pem: no LoadCredential=dex-ca.pem"},
		"file from disk":   {dexd, "--tls-key=%d/server-key.pem", "--tls-key=/etc/dex/tls/n1-server-key.pem", "--tls-key=/etc/dex/tls/n1-server-key.pem is not a credential"},
		"unused":           {dexd, "--tls-cert=%d/server.pem", "--tls-cert=%d/server-key.pem", "LoadCredential server.pem is loaded and never used"},
		"relative source":  {dexd, "bootstrap-token:/etc/dex/bootstrap-token", "bootstrap-token:bootstrap-token", "not a file under /etc/dex"},
		"twice":            {dexd, "LoadCredential=bootstrap-token:/etc/dex/bootstrap-token", "LoadCredential=bootstrap-token:/etc/dex/bootstrap-token\nLoadCredential=bootstrap-token:/etc/dex/a", "given twice"},
		"token in args":    {worker, "    $DEX_FLAGS", "    --token=abc $DEX_FLAGS", "--token on the command line"},
		"no token":         {worker, "/bin/sh -c 'DEX_TOKEN=$(cat %d/token) && export DEX_TOKEN && exec \"$0\" \"$@\"' \\\n    /usr", "/usr", "dexworker gets no token"},
		"token not export": {worker, "&& export DEX_TOKEN ", "", "dexworker gets no token"},
		"no client cert":   {worker, "    --tls-cert=%d/client.pem \\\n", "", "no --tls-cert"},
	} {
		if !strings.Contains(tc.unit, tc.from) {
			t.Fatalf("%s: the unit has no %q", name, tc.from)
		}
		u := parseUnitText(t, name, strings.Replace(tc.unit, tc.from, tc.to, 1))
		env := map[string]string{"DEX_RAFT_ADDR": "", "DEX_GRPC_ADDR": "", "DEX_HTTP_ADDR": "", "DEX_PEERS": "", "DEX_DRAIN_TIMEOUT": "", "DEX_FLAGS": "", "DEX_ADDR": ""}
		problems := strings.Join(securityProblems(u, execStart(t, u, "n1", env)), "\n")
		if !strings.Contains(problems, tc.want) {
			t.Errorf("%s: problems %q, want one with %q", name, problems, tc.want)
		}
	}
}

// No unit or example env file passes the flag that serves without TLS and
// tokens, not even in a comment to uncomment.
func TestNoFileNamesTheInsecureFlag(t *testing.T) {
	paths, err := filepath.Glob("*")
	if err != nil {
		t.Fatal(err)
	}
	naming, n, err := cmdflags.NamingInsecure(paths)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range naming {
		t.Errorf("%s names --insecure", p)
	}
	if n < 4 {
		t.Fatalf("only %d files read", n)
	}
	if !cmdflags.Insecure.MatchString("DEX_FLAGS=--insecure=true") || !cmdflags.Insecure.MatchString("DEX_FLAGS=-insecure") ||
		cmdflags.Insecure.MatchString("--insecure-skip-tls-verify") {
		t.Error("the pattern does not match the flag alone")
	}
}

func TestSplitWordsAsSystemd(t *testing.T) {
	got, err := splitWords(`/bin/sh -c 'a "$0" b'  x"y z"  ""`)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/bin/sh", "-c", `a "$0" b`, "xy z", ""}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("splitWords = %q, want %q", got, want)
	}
	if _, err := splitWords(`/bin/sh -c 'a`); err == nil {
		t.Error("an unterminated quote split without an error")
	}
}
