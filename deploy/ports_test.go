package deploy

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Dex's one port scheme ("Ports" in deploy/README.md): a node serves
// raft on 7001, gRPC on 7101 and HTTP on 7201; `make run`'s three nodes on
// one machine take 7001-7003, 7101-7103 and 7201-7203; HAProxy in front of
// them listens on 7100. So `--addr HOST:7101` is a gRPC port everywhere.
const (
	raftPort = 7001
	grpcPort = 7101
	httpPort = 7201
	lbPort   = 7100
	// localNodes: make run's node k adds k-1 to each port.
	localNodes = 3
)

// role is what a port of the scheme serves, or "" outside the scheme's range.
func role(port int) string {
	switch {
	case port >= raftPort && port < raftPort+localNodes:
		return "raft"
	case port == lbPort || (port >= grpcPort && port < grpcPort+localNodes):
		return "grpc"
	case port >= httpPort && port < httpPort+localNodes:
		return "http"
	case port >= 7000 && port < 7300:
		return "outside"
	}
	return ""
}

// Places where the files name an address and the role it must have.
var addressUses = []struct {
	re   *regexp.Regexp
	want string
}{
	{regexp.MustCompile(`--raft-addr[ =]"?([^\s"\\]+)`), "raft"},
	{regexp.MustCompile(`DEX_RAFT_ADDR=(\S+)`), "raft"},
	{regexp.MustCompile(`--peers[ =]"?([^\s"\\]+)`), "raft"},
	{regexp.MustCompile(`DEX_PEERS=(\S+)`), "raft"},
	{regexp.MustCompile(`--grpc-addr[ =]"?([^\s"\\]+)`), "grpc"},
	{regexp.MustCompile(`DEX_GRPC_ADDR=(\S+)`), "grpc"},
	{regexp.MustCompile(`\s--addr[ =]"?([^\s"\\]+)`), "grpc"},
	{regexp.MustCompile(`dex:///([^\s"'` + "`" + `)]+)`), "grpc"},
	{regexp.MustCompile(`DEX_ADDR=(\S+)`), "grpc"},
	{regexp.MustCompile(`--http-addr[ =]"?([^\s"\\]+)`), "http"},
	{regexp.MustCompile(`DEX_HTTP_ADDR=(\S+)`), "http"},
	{regexp.MustCompile(`https?://[\w.-]+:(\d+)`), "http"},
}

var portOf = regexp.MustCompile(`:(\d{4,5})\b`)

// TestOnePortScheme reads every document, deployment file, script and
// example and checks that each raft, gRPC and HTTP address it names uses
// the scheme's port for that role (a gRPC client pointed at a raft port
// hangs instead of failing).
func TestOnePortScheme(t *testing.T) {
	root := filepath.Join("..")
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if strings.HasPrefix(name, ".") && path != root || name == "node_modules" || name == "gen" || name == "bin" {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, "_test.go") || strings.HasSuffix(name, ".pb.go") || !scanned(name) {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(data), "\n") {
			for _, u := range addressUses {
				for _, m := range u.re.FindAllStringSubmatch(line, -1) {
					for _, p := range portOf.FindAllStringSubmatch(":"+strings.TrimPrefix(m[1], ":"), -1) {
						port, _ := strconv.Atoi(p[1])
						got := role(port)
						if got == "" {
							continue
						}
						checked++
						if got == "outside" {
							t.Errorf("%s:%d: port %d is outside Dex's port scheme (a %s address is on %d): %s", path, i+1, port, u.want, map[string]int{"raft": raftPort, "grpc": grpcPort, "http": httpPort}[u.want], strings.TrimSpace(line))
						} else if got != u.want {
							t.Errorf("%s:%d: port %d is a %s port in Dex's scheme, but it is used as a %s address: %s", path, i+1, port, got, u.want, strings.TrimSpace(line))
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("only %d addresses checked: the scan misses the files", checked)
	}
}

// scanned: the files that show users addresses.
func scanned(name string) bool {
	for _, ext := range []string{".md", ".yaml", ".yml", ".cfg", ".sh", ".example", ".service", ".py", ".ts", ".go"} {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return name == "Dockerfile" || name == "Makefile"
}

// The shipped files' own defaults follow the scheme, beyond the addresses
// the scan reads.
func TestShippedDefaultsFollowThePortScheme(t *testing.T) {
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	cfg := read("haproxy/haproxy.cfg")
	want := []string{`"${DEX_LB_ADDR-127.0.0.1:` + strconv.Itoa(lbPort) + `}"`}
	for k := 1; k <= localNodes; k++ {
		want = append(want, `"${DEX_N`+strconv.Itoa(k)+`_GRPC-127.0.0.1:`+strconv.Itoa(grpcPort+k-1)+`}" check port "${DEX_N`+strconv.Itoa(k)+`_HTTP_PORT-`+strconv.Itoa(httpPort+k-1)+`}"`)
	}
	for _, w := range want {
		if !strings.Contains(cfg, w) {
			t.Errorf("haproxy.cfg lacks %s", w)
		}
	}
	sts := read("kubernetes/statefulset.yaml")
	for name, port := range map[string]int{"raft": raftPort, "grpc": grpcPort, "http": httpPort} {
		if !regexp.MustCompile(`name: ` + name + `\s+containerPort: ` + strconv.Itoa(port) + `\b`).MatchString(sts) {
			t.Errorf("statefulset.yaml: the %s containerPort is not %d", name, port)
		}
	}
	if !regexp.MustCompile(`(?m)^EXPOSE ` + strconv.Itoa(raftPort) + ` ` + strconv.Itoa(grpcPort) + ` ` + strconv.Itoa(httpPort) + `$`).MatchString(read("../Dockerfile")) {
		t.Errorf("the Dockerfile does not EXPOSE %d %d %d", raftPort, grpcPort, httpPort)
	}
	// make run: node k on raftPort+k-1 and so on, from one base.
	run := read("local/run-local.sh")
	if !strings.Contains(run, "PORT_BASE=${PORT_BASE:-"+strconv.Itoa(raftPort-1)+"}") {
		t.Errorf("deploy/local/run-local.sh: the default PORT_BASE is not %d", raftPort-1)
	}
}
