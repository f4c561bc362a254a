package sdk

import (
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/plexporter/plexporter/sdk/transport"
)

// Serve runs the plugin until the host stops it or goes away. Call it from
// main; it does not return.
func Serve(p Plugin) {
	if lvl := os.Getenv(transport.LogLevelEnv); lvl != "" {
		sink.SetLevel(hclog.LevelFromString(lvl))
	}
	watchLifeline()
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  transport.Handshake,
		VersionedPlugins: transport.PluginSet(newServer(p, logger)),
		GRPCServer:       plugin.DefaultGRPCServer,
		Logger:           sink,
	})
	// go-plugin returns when the host closed the connection (it stopped us,
	// or it died): let the plugin stop its background work, then make sure
	// nothing we started outlives us.
	closePlugin(p)
	exitGroup()
}

// closeTimeout bounds Close (see Closer).
const closeTimeout = 2 * time.Second

// closePlugin calls the plugin's Close (see Closer), bounded so a stuck
// Close cannot keep the process alive. Its error is not logged: the host
// has closed the connection, perhaps by dying, and a write to a stderr
// nobody reads raises SIGPIPE (see exitGroup).
func closePlugin(p Plugin) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		switch c := p.(type) {
		case Closer:
			_ = c.Close()
		case interface{ Close() }:
			// The form without a result that earlier SDKs also accepted:
			// plugins written for them still stop their work.
			c.Close()
		}
	}()
	select {
	case <-done:
	case <-time.After(closeTimeout):
	}
}

// watchLifeline exits the plugin, with every process it started, once the
// host's end of the lifeline pipe closes or transport.ParentDeathSignal
// arrives. The signal alone is not enough: the kernel sends it when the
// parent *thread* exits, and a host not written in Go, or a future one, may
// retire threads.
func watchLifeline() {
	term := make(chan os.Signal, 1)
	signal.Notify(term, transport.ParentDeathSignal)
	go func() {
		<-term
		exitGroup()
	}()
	fdText := os.Getenv(transport.LifelineEnv)
	if fdText == "" {
		return
	}
	fd, err := strconv.Atoi(fdText)
	if err != nil || fd < 3 {
		logger.Warn("ignoring bad lifeline descriptor", "env", transport.LifelineEnv, "value", fdText)
		return
	}
	f := os.NewFile(uintptr(fd), "lifeline")
	go func() {
		var buf [1]byte
		for {
			if _, err := f.Read(buf[:]); err != nil {
				break
			}
		}
		exitGroup()
	}()
}

// exitGroup ends the plugin. The host starts plugins as process group
// leaders: take the group down so children we spawned do not outlive us.
// It logs nothing: with the host gone, a write to stderr raises SIGPIPE,
// which would kill us before the group.
func exitGroup() {
	if syscall.Getpgrp() == os.Getpid() {
		_ = syscall.Kill(-os.Getpid(), syscall.SIGKILL)
	}
	os.Exit(1)
}
