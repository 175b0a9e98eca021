// Package deploy holds the checks of the top-level Dockerfile; the
// deployment files themselves are in the directories below.
package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// instruction is one Dockerfile line: the keyword and the rest.
type instruction struct{ op, args string }

// parseDockerfile joins continued lines and drops comments.
func parseDockerfile(t *testing.T, path string) []instruction {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []instruction
	var cur string
	for _, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur == "" && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur += strings.TrimSuffix(trimmed, "\\") + " "
			continue
		}
		cur += trimmed
		op, args, _ := strings.Cut(cur, " ")
		out = append(out, instruction{strings.ToUpper(op), strings.TrimSpace(args)})
		cur = ""
	}
	return out
}

var cmdPath = regexp.MustCompile(`\./cmd/([a-z]+)`)

func TestDockerfileBuildsStaticBinariesOfExistingCommands(t *testing.T) {
	ins := parseDockerfile(t, "../Dockerfile")
	var built []string
	for _, in := range ins {
		if in.op != "RUN" || !strings.Contains(in.args, "go build") {
			continue
		}
		if !strings.Contains(in.args, "CGO_ENABLED=0") {
			t.Errorf("%q builds with cgo: the runtime image has no libc", in.args)
		}
		for _, m := range cmdPath.FindAllStringSubmatch(in.args, -1) {
			built = append(built, m[1])
		}
	}
	want := []string{"dexd", "dexctl", "dexworker"}
	if strings.Join(built, " ") != strings.Join(want, " ") {
		t.Fatalf("the Dockerfile builds %v, want %v", built, want)
	}
	for _, name := range built {
		src, err := os.ReadFile(filepath.Join("..", "cmd", name, "main.go"))
		if err != nil || !strings.Contains(string(src), "package main") {
			t.Errorf("cmd/%s is not a command: %v", name, err)
		}
	}
	// The last stage must carry every binary built.
	final := finalStage(t, ins)
	for _, name := range built {
		found := false
		for _, in := range final {
			if in.op == "COPY" && strings.Contains(in.args, "/"+name+" ") && strings.HasSuffix(in.args, " /usr/local/bin/") {
				found = true
			}
		}
		if !found {
			t.Errorf("the runtime image does not copy %s into /usr/local/bin/", name)
		}
	}
}

func TestDockerfileRunsAsNonRoot(t *testing.T) {
	final := finalStage(t, parseDockerfile(t, "../Dockerfile"))
	user := ""
	for _, in := range final {
		if in.op == "USER" {
			user = in.args
		}
		if in.op == "RUN" {
			t.Errorf("the runtime stage runs %q: it has no shell", in.args)
		}
	}
	name, group, _ := strings.Cut(user, ":")
	if user == "" || name == "0" || name == "root" || group == "0" || group == "root" {
		t.Fatalf("the runtime image's USER is %q, want a non-root user", user)
	}
	from := final[0].args
	if !strings.HasPrefix(from, "gcr.io/distroless/static") && !strings.HasPrefix(from, "scratch") {
		t.Errorf("the runtime image is %q, want a static distroless image or scratch", from)
	}
}

func TestDockerignoreKeepsTheSources(t *testing.T) {
	data, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	ignored := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			ignored[strings.TrimSuffix(line, "/")] = true
		}
	}
	for _, must := range []string{".git", "bin"} {
		if !ignored[must] {
			t.Errorf(".dockerignore does not exclude %s", must)
		}
	}
	for _, keep := range []string{"go.mod", "go.sum", "cmd", "api", "cluster", "*.go", "**/*.go", "*"} {
		if ignored[keep] {
			t.Errorf(".dockerignore excludes %s, which the build needs", keep)
		}
	}
}

// finalStage returns the instructions from the last FROM on.
func finalStage(t *testing.T, ins []instruction) []instruction {
	t.Helper()
	last := -1
	for i, in := range ins {
		if in.op == "FROM" {
			last = i
		}
	}
	if last < 1 {
		t.Fatal("the Dockerfile is not multi-stage")
	}
	return ins[last:]
}
