package tlsconf

import (
	"os"
	"os/signal"
	"syscall"
)

// ReloadOnSIGHUP reloads the store on every SIGHUP and reports each
// result (nil: the new files are in use) to done. stop ends the watch.
func (s *Store) ReloadOnSIGHUP(done func(error)) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	quit := make(chan struct{})
	go func() {
		for {
			select {
			case <-ch:
				done(s.Reload())
			case <-quit:
				return
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(quit)
	}
}
