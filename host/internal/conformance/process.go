package conformance

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/plexporter/plexporter/sdk/transport"
)

// cookie runs the binary without the handshake environment, as someone
// running it by hand would: it should say so and exit.
func (c *checker) cookie() {
	const rule = "handshake.cookie"
	if c.s.Sandbox != nil {
		c.skip(rule, "sandboxed: the runner starts the plugin only in its sandbox, and this check would need it started outside (--sandbox=off checks it)")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cookieWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.p.Target)
	cmd.Args[0] = c.p.Path
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		c.fail(rule, "still running %v after it was started without %s", cookieWait, transport.Handshake.MagicCookieKey)
	case strings.Contains(stdout.String(), "|grpc|"):
		c.fail(rule, "printed a handshake line without %s", transport.Handshake.MagicCookieKey)
	case err == nil:
		c.fail(rule, "exited with status 0 without %s: scripts cannot tell it refused", transport.Handshake.MagicCookieKey)
	case errors.As(err, &exit):
		line, _, _ := strings.Cut(strings.TrimSpace(stderr.String()), "\n")
		if line == "" {
			c.fail(rule, "exited (%v) without %s but wrote no message on stderr", err, transport.Handshake.MagicCookieKey)
			return
		}
		c.pass(rule, "%v: %s", err, truncate(line, 200))
	default:
		c.fail(rule, "cannot run it: %v", err)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// stopRule stops a configured process as the host does (close the
// connection, go-plugin's GRPCController/Shutdown) and times its exit: the
// host kills the process group after stopGrace.
func (c *checker) stopRule() {
	const rule = "stop"
	in, err := c.configured(c.s)
	if err != nil {
		c.fail(rule, "%v", err)
		return
	}
	began := time.Now()
	c.retire(in)
	select {
	case <-in.proc.Exited():
	case <-time.After(stopGrace + 3*time.Second):
	}
	took := time.Since(began)
	// go-plugin gives up at stopGrace and kills; an exit that late was not
	// the plugin's own.
	if took >= stopGrace-100*time.Millisecond {
		c.fail(rule, "still running %v after the host closed the connection: killed (exit when the connection closes or on plugin.GRPCController/Shutdown)", round(took))
		return
	}
	c.pass(rule, "in %v", round(took))
}

// lifeline closes the main process's lifeline, leaving the connection
// open, and waits for the plugin to exit.
func (c *checker) lifeline(main *instance) {
	const rule = "lifeline"
	if !main.alive() {
		c.skip(rule, "the process exited before: %v", exitText(main.proc.ExitError()))
		return
	}
	began := time.Now()
	main.proc.CloseLifeline()
	select {
	case <-main.proc.Exited():
		c.pass(rule, "in %v", round(time.Since(began)))
	case <-time.After(lifelineWait):
		c.fail(rule, "still running %v after fd 3 (%s) read EOF: a plugin whose host died would live on", lifelineWait, transport.LifelineEnv)
	}
}

// stayedUp checks that the first process, which the host would have kept
// all along, still runs at the end of the run and at least upAfter after
// its last Collect. A plugin that exits on its own (item 10) is restarted
// by the host, and what it had — its state, its scrape — is lost; a
// plugin that gives up on a stuck collect and exits answers the Collects
// right after it quickly, so collect.stable and collect.cancel alone pass
// it.
func (c *checker) stayedUp(main *instance) {
	const rule = "process.up"
	if wait := time.Until(main.lastCollect.Add(upAfter)); wait > 0 {
		select {
		case <-main.proc.Exited():
		case <-time.After(wait):
		}
	}
	if !main.alive() {
		c.fail(rule, "the process exited on its own during the run (%v), after its last Collect: the host would restart it, and its state and a scrape would be lost", exitText(main.proc.ExitError()))
		return
	}
	c.pass(rule, "still running %v after its last Collect", round(time.Since(main.lastCollect)))
}
