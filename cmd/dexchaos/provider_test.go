package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestProvider_BadUsageExits2(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"turns":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{}, {"--script", filepath.Join(t.TempDir(), "missing.json")}, {"--script", bad}} {
		if code := runProvider(context.Background(), args, io.Discard, io.Discard); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

func TestProvider_ServesAndPrintsBaseURLs(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "script.json")
	if err := os.WriteFile(script, []byte(`{"turns":[{"prefix":"hi","outputs":[{"text":"hello"}]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "calls.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int)
	go func() {
		done <- runProvider(ctx, []string{"--script", script, "--log", logPath}, pw, io.Discard)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	var openai, anthropic string
	for anthropic == "" && lines.Scan() {
		k, v, _ := strings.Cut(lines.Text(), "=")
		switch k {
		case "OPENAI_BASE_URL":
			openai = v
		case "ANTHROPIC_BASE_URL":
			anthropic = v
		}
	}
	go io.Copy(io.Discard, pr)
	if !strings.HasPrefix(openai, "http://127.0.0.1:") || openai != anthropic+"/v1" {
		t.Fatalf("printed %q and %q", openai, anthropic)
	}
	resp, err := http.Post(anthropic+"/v1/messages", "application/json",
		strings.NewReader(`{"model":"c","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status %d", resp.StatusCode)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
	log, err := os.ReadFile(logPath)
	if err != nil || !strings.Contains(string(log), `"api":"messages"`) {
		t.Errorf("log %q, %v", log, err)
	}
}
