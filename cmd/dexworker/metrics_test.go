package main

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/dexhq/dex/api/client"
)

func TestMetricsAddrServesAndRefusesABusyPort(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	if _, err := serveMetrics(busy.Addr().String(), client.NewWorkerMetrics(), zap.NewNop()); err == nil || !strings.Contains(err.Error(), "--metrics-addr") {
		t.Fatalf("a busy port: %v; want an error naming --metrics-addr", err)
	}

	addr := busy.Addr().String()
	busy.Close()
	stop, err := serveMetrics(addr, client.NewWorkerMetrics(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "go_goroutines") {
		t.Fatalf("/metrics answered %d:\n%.300s", resp.StatusCode, body)
	}
}
