package main

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// flushTraces sends the spans still buffered before dexd exits, waiting a
// few seconds at most for the collector.
func flushTraces(stop func(context.Context) error, log *zap.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := stop(ctx); err != nil {
		log.Warn("traces not all exported at exit", zap.Error(err))
	}
}
