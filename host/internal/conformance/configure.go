package conformance

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/plexporter/plexporter/internal/wire"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// refuses starts a process with config cfg and expects Configure to answer
// INVALID_ARGUMENT with a message, and the process to live on.
func (c *checker) refuses(rule, what string, cfg map[string]any) {
	raw, err := structpb.NewStruct(cfg)
	if err != nil {
		c.skip(rule, "cannot encode the config: %v", err)
		return
	}
	s := c.s
	s.Config = raw
	in, _, err := c.start(s)
	if err != nil {
		c.fail(rule, "the plugin did not start again: %v", err)
		return
	}
	defer c.retire(in)
	if _, err := in.client.Info(in.ctx, &pluginv1.InfoRequest{}, wire.MaxMessage); err != nil {
		c.fail(rule, "Info: %v", err)
		return
	}
	_, err = in.client.Configure(in.ctx, s.ConfigureRequest(), wire.MaxMessage)
	code, msg := status.Code(err), status.Convert(err).Message()
	// A crash shows as a broken connection, or as an answer just before
	// the process dies: give it a moment to, a longer one when the
	// connection broke (a loaded machine may take that long to reap it).
	wait := 100 * time.Millisecond
	if code == codes.Unavailable || code == codes.Canceled {
		wait = 2 * time.Second
	}
	exited := false
	select {
	case <-in.proc.Exited():
		exited = true
	case <-time.After(wait):
	}
	switch {
	case exited:
		c.fail(rule, "given %s, the plugin crashed (%v; Configure: %v)", what, exitText(in.proc.ExitError()), err)
	case err == nil:
		c.fail(rule, "given %s, Configure succeeded: a typo in an operator's config would go unnoticed", what)
	case code != codes.InvalidArgument:
		c.fail(rule, "given %s, Configure answered %s, not INVALID_ARGUMENT: the host would restart the plugin in a loop instead of reporting it misconfigured (%s)", what, code, msg)
	case strings.TrimSpace(msg) == "":
		c.fail(rule, "given %s, Configure answered INVALID_ARGUMENT with no message: the operator is not told what is wrong", what)
	default:
		c.pass(rule, "given %s: %q", what, msg)
	}
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

func (c *checker) configure(in *instance) bool {
	from := "no config section"
	if loc := c.s.ConfigLocation; c.s.Config != nil {
		from = "the section " + loc.String()
	}
	began := time.Now()
	resp, err := in.client.Configure(in.ctx, c.s.ConfigureRequest(), wire.MaxMessage)
	took := round(time.Since(began))
	switch {
	case status.Code(err) == codes.InvalidArgument:
		c.fail("configure", "refused %s: %s", from, status.Convert(err).Message())
		return false
	case err != nil:
		c.fail("configure", "with %s, after %v (start timeout %v): %v", from, took, c.s.StartTimeout, err)
		return false
	}
	detail := fmt.Sprintf("%s, in %v", from, took)
	if w := resp.GetWarnings(); len(w) > 0 {
		detail += fmt.Sprintf("; %d warnings: %s", len(w), strings.Join(w, "; "))
	}
	c.pass("configure", "%s", detail)
	return true
}

// malformed offers two configs the plugin cannot work with, each to a
// process of its own (the host configures a process once).
func (c *checker) malformed() {
	fields := map[string]any{}
	if c.s.Config != nil {
		fields = c.s.Config.AsMap()
	}
	unknown := maps.Clone(fields)
	unknown["plexporter_check_unknown_key"] = true
	c.refuses("configure.unknown-key", "an unknown key plexporter_check_unknown_key", unknown)

	keys := slices.Sorted(maps.Keys(fields))
	if len(keys) == 0 {
		c.skip("configure.wrong-type", "no key of the plugin's config is known: give --config with a section for plugins.%s.config", c.p.Name)
		return
	}
	key := keys[0]
	wrong := maps.Clone(fields)
	var kind string
	if _, isMap := fields[key].(map[string]any); isMap {
		wrong[key], kind = 12345.0, "a number"
	} else {
		wrong[key], kind = map[string]any{"plexporter_check_wrong_type": true}, "a mapping"
	}
	c.refuses("configure.wrong-type", fmt.Sprintf("%s for %s (from --config)", kind, key), wrong)
}
