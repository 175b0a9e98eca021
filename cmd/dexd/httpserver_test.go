package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// serveStub serves endpoints like the node's through newHTTPServer.
func serveStub(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(mux)
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Error(err)
		}
	}()
	t.Cleanup(func() { srv.Close() })
	return "http://" + lis.Addr().String()
}

func TestHealthEndpointsAnswer405ToWrites(t *testing.T) {
	base := serveStub(t)
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
			req, _ := http.NewRequest(m, base+path, strings.NewReader("x"))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: %d, Allow %q; want 405 with Allow: GET, HEAD", m, path, resp.StatusCode, resp.Header.Get("Allow"))
			}
		}
		for _, m := range []string{http.MethodGet, http.MethodHead} {
			req, _ := http.NewRequest(m, base+path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s %s: %d; want 200", m, path, resp.StatusCode)
			}
		}
	}
}

func TestAHugeHeaderGets431(t *testing.T) {
	base := serveStub(t)
	req, _ := http.NewRequest(http.MethodGet, base+"/readyz", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 2<<20))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("a 2 MB header got no answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("status %d; want 431", resp.StatusCode)
	}
	// A client that writes its whole request before it reads (as curl
	// does) gets the answer too, not a reset.
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	raw := "GET /readyz HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 2<<20) + "\r\n\r\n"
	if _, err := conn.Write([]byte(raw)); err != nil {
		t.Fatalf("writing a 2 MB header: %v", err)
	}
	got, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.Contains(got, " 431 ") {
		t.Fatalf("status line %q, %v; want 431", got, err)
	}
	// An ordinary request on the same server still answers.
	resp, err = http.Get(base + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("after the huge header: %v, %v", resp, err)
	}
	resp.Body.Close()
}

// The node's bare address (http://NODE/) sends a browser to the console.
func TestRootRedirectsToTheConsole(t *testing.T) {
	tag := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if name == "node" && r.URL.Path != "/healthz" {
				http.NotFound(w, r)
				return
			}
			w.Write([]byte(name))
		})
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(withConsole(tag("node"), tag("console")))
	go srv.Serve(lis)
	t.Cleanup(func() { srv.Close() })
	base := "http://" + lis.Addr().String()

	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, m := range []string{http.MethodGet, http.MethodHead} {
		req, _ := http.NewRequest(m, base+"/", nil)
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/ui/" {
			t.Errorf("%s /: %d, Location %q; want 302 to /ui/", m, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	// A browser follows it to the console.
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	body := new(strings.Builder)
	_, _ = io.Copy(body, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || body.String() != "console" || resp.Request.URL.Path != "/ui/" {
		t.Errorf("following / ended at %s with %d %q; want the console", resp.Request.URL, resp.StatusCode, body)
	}
	// Only the bare root moves: other paths are the node's as before.
	for _, path := range []string{"/nope", "/healthz"} {
		resp, err := noFollow.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusFound {
			t.Errorf("GET %s redirected", path)
		}
	}
}
