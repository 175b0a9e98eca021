// Package systemd holds the checks of Dex's systemd units.
package systemd

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dexhq/dex/cluster"
	"github.com/dexhq/dex/deploy/internal/cmdflags"
)

// unit is a unit file's [Service] section: each key with its values in order.
type unit map[string][]string

func (u unit) one(t *testing.T, key string) string {
	t.Helper()
	if len(u[key]) != 1 {
		t.Fatalf("%s is set %d times, want once", key, len(u[key]))
	}
	return u[key][0]
}

func parseUnit(t *testing.T, path string) unit {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return parseUnitText(t, path, string(data))
}

func parseUnitText(t *testing.T, path, data string) unit {
	t.Helper()
	u := unit{}
	section, cur := "", ""
	for _, line := range strings.Split(data, "\n") {
		line = strings.TrimSpace(line)
		if cur == "" && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if strings.HasPrefix(line, "[") {
			section = line
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		cur += line
		if section == "[Service]" {
			k, v, ok := strings.Cut(cur, "=")
			if !ok {
				t.Fatalf("%s: %q is not KEY=VALUE", path, cur)
			}
			u[k] = append(u[k], strings.Join(strings.Fields(v), " "))
		}
		cur = ""
	}
	return u
}

// parseEnv reads an EnvironmentFile: KEY=VALUE lines and comments.
func parseEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: %q is not KEY=VALUE", path, line)
		}
		env[k] = v
	}
	return env
}

// splitWords splits a command line as systemd does: at whitespace, with
// '…' and "…" keeping a word together (the quotes removed).
func splitWords(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c in %s", quote, line)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

var (
	// wordVar is a $VAR word: systemd splits its value at whitespace.
	wordVar = regexp.MustCompile(`^\$([A-Za-z_][A-Za-z0-9_]*)$`)
	// braceVar is a ${VAR} anywhere in a word: one word, whitespace kept.
	braceVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
)

// command is an ExecStart expanded for an instance and an env file.
type command struct {
	// shell is the script of a /bin/sh -c wrapper that execs the binary
	// ("" without one).
	shell string
	bin   string
	flags map[string]string // --name=value; %d stays as written
}

// execStart expands the unit's ExecStart as systemd does for instance and
// env (%i, a whitespace-split $VAR, a one-word ${VAR}) and returns the
// binary, its --name=value flags and the wrapping shell script if any.
func execStart(t *testing.T, u unit, instance string, env map[string]string) command {
	t.Helper()
	raw, err := splitWords(strings.ReplaceAll(u.one(t, "ExecStart"), "%i", instance))
	if err != nil {
		t.Fatal(err)
	}
	var words []string
	for _, w := range raw {
		if m := wordVar.FindStringSubmatch(w); m != nil {
			v, ok := env[m[1]]
			if !ok {
				t.Errorf("ExecStart uses $%s, which the example env file does not set", m[1])
			}
			words = append(words, strings.Fields(v)...)
			continue
		}
		words = append(words, braceVar.ReplaceAllStringFunc(w, func(ref string) string {
			name := braceVar.FindStringSubmatch(ref)[1]
			v, ok := env[name]
			if !ok {
				t.Errorf("ExecStart uses ${%s}, which the example env file does not set", name)
			}
			return v
		}))
	}
	if len(words) == 0 {
		t.Fatal("ExecStart runs nothing")
	}
	var c command
	if len(words) > 3 && words[0] == "/bin/sh" && words[1] == "-c" {
		c.shell, words = words[2], words[3:]
	}
	c.bin, c.flags = words[0], map[string]string{}
	for _, w := range words[1:] {
		name, value, ok := strings.Cut(strings.TrimPrefix(w, "--"), "=")
		if !strings.HasPrefix(w, "--") || !ok {
			t.Fatalf("ExecStart argument %q is not --name=value", w)
		}
		if _, dup := c.flags[name]; dup {
			t.Fatalf("ExecStart gives --%s twice", name)
		}
		c.flags[name] = value
	}
	return c
}

func checkFlagsExist(t *testing.T, bin string, flags map[string]string) {
	t.Helper()
	name := filepath.Base(bin)
	if bin != "/usr/local/bin/"+name {
		t.Errorf("ExecStart runs %s, want /usr/local/bin/%s", bin, name)
	}
	known, err := cmdflags.Names(filepath.Join("..", "..", "cmd", name))
	if err != nil {
		t.Fatal(err)
	}
	for f := range flags {
		if !known[f] {
			t.Errorf("--%s is not a flag of cmd/%s", f, name)
		}
	}
}

// checkService checks what both units share: restarts, stop signal, limits,
// an unprivileged user and a state directory that holds path (the unit
// expanded for instance).
func checkService(t *testing.T, u unit, instance, path string) {
	t.Helper()
	for key, want := range map[string]string{
		"Restart": "on-failure", "KillSignal": "SIGTERM", "DynamicUser": "yes",
		"NoNewPrivileges": "yes", "ProtectSystem": "strict", "RestartPreventExitStatus": "2",
		"CapabilityBoundingSet": "",
	} {
		if got := u.one(t, key); got != want {
			t.Errorf("%s=%s, want %s", key, got, want)
		}
	}
	if n, err := strconv.Atoi(u.one(t, "LimitNOFILE")); err != nil || n < 65536 {
		t.Errorf("LimitNOFILE=%s, want at least 65536", u.one(t, "LimitNOFILE"))
	}
	// ProtectSystem=strict leaves only the state directory writable.
	dir := "/var/lib/" + strings.ReplaceAll(u.one(t, "StateDirectory"), "%i", instance)
	if path != dir && !strings.HasPrefix(path, dir+"/") {
		t.Errorf("%s is outside the StateDirectory %s: read-only under ProtectSystem=strict", path, dir)
	}
}

func TestDexdUnit(t *testing.T) {
	u := parseUnit(t, "dexd@.service")
	if got := u.one(t, "EnvironmentFile"); got != "/etc/dex/dexd-%i.env" {
		t.Errorf("EnvironmentFile=%s", got)
	}
	env := parseEnv(t, "dexd.env.example")
	c := execStart(t, u, "n1", env)
	bin, flags := c.bin, c.flags
	if c.shell != "" {
		t.Errorf("dexd runs through a shell: %s", c.shell)
	}
	checkFlagsExist(t, bin, flags)
	checkService(t, u, "n1", flags["data-dir"])
	if flags["id"] != "n1" {
		t.Errorf("--id=%s, want the instance name", flags["id"])
	}
	peers, err := cluster.ParsePeers(flags["peers"])
	if err != nil {
		t.Fatal(err)
	}
	if len(peers) != 3 || peers[0].ID != "n1" || peers[0].RaftAddr != flags["raft-addr"] {
		t.Errorf("the example's --peers %v does not give n1 its --raft-addr %s", peers, flags["raft-addr"])
	}
	for _, f := range []string{"raft-addr", "grpc-addr", "http-addr"} {
		if err := cluster.ValidateAddr(flags[f]); err != nil {
			t.Errorf("--%s: %v", f, err)
		}
	}
	drain, err := time.ParseDuration(flags["drain-timeout"])
	if err != nil {
		t.Fatal(err)
	}
	stop, err := strconv.Atoi(u.one(t, "TimeoutStopSec"))
	if err != nil || time.Duration(stop)*time.Second < drain+15*time.Second {
		t.Errorf("TimeoutStopSec=%s, want at least --drain-timeout %s + 15s", u.one(t, "TimeoutStopSec"), drain)
	}
}

func TestDexworkerUnit(t *testing.T) {
	u := parseUnit(t, "dexworker.service")
	if got := u.one(t, "EnvironmentFile"); got != "/etc/dex/dexworker.env" {
		t.Errorf("EnvironmentFile=%s", got)
	}
	c := execStart(t, u, "", parseEnv(t, "dexworker.env.example"))
	bin, flags := c.bin, c.flags
	checkFlagsExist(t, bin, flags)
	checkService(t, u, "", flags["ledger"])
	if !strings.HasPrefix(flags["addr"], "dex:///") {
		t.Errorf("--addr=%s, want the dex:/// list of nodes", flags["addr"])
	}
	grace, err := time.ParseDuration(flags["shutdown-grace"])
	if err != nil {
		t.Fatal(err)
	}
	stop, _ := strconv.Atoi(u.one(t, "TimeoutStopSec"))
	if time.Duration(stop)*time.Second <= grace {
		t.Errorf("TimeoutStopSec=%d does not outlast --shutdown-grace %s", stop, grace)
	}
}
