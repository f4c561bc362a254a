package conformance

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/plexporter/plexporter/host/internal/discover"
	"github.com/plexporter/plexporter/internal/wire"
	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
	"github.com/plexporter/plexporter/sdk/transport"
)

// describe asks Info and judges what the plugin says about itself.
func (c *checker) describe(in *instance) bool {
	began := time.Now()
	info, err := in.client.Info(in.ctx, &pluginv1.InfoRequest{}, wire.MaxMessage)
	took := round(time.Since(began))
	if err != nil {
		c.fail("info", "after %v (start timeout %v): %v", took, c.s.StartTimeout, err)
		return false
	}
	major, _, _ := strings.Cut(info.GetApiVersion(), ".")
	if want, _, _ := strings.Cut(transport.APIVersion, "."); major != want {
		c.fail("info", "api_version %q: the host speaks %s and accepts only major %s", info.GetApiVersion(), transport.APIVersion, want)
		return false
	}
	c.info = info
	c.pass("info", "in %v, api_version %s", took, info.GetApiVersion())
	if info.GetName() == c.p.Name {
		c.pass("info.name", "%q", info.GetName())
	} else {
		c.fail("info.name", "Info reports %q, the file is %s%s (the host only warns, but its logs and plexporter plugins then disagree)", info.GetName(), discover.Prefix, c.p.Name)
	}
	if v := strings.TrimSpace(info.GetVersion()); v != "" {
		c.pass("info.version", "%q", info.GetVersion())
	} else {
		c.fail("info.version", "empty: plexporter_plugin_info{version} and plexporter plugins show nothing")
	}
	c.catalogue(info.GetMetrics())
	return true
}

// catalogue runs one sample of every catalogue entry through the guard: an
// entry is valid exactly when a sample of it would be exposed. A glob
// (rdma_*_total) is checked with its wildcards made a letter.
func (c *checker) catalogue(descs []*pluginv1.MetricDescriptor) {
	const rule = "info.catalogue"
	if len(descs) == 0 {
		c.skip(rule, "the catalogue is empty")
		return
	}
	seen := map[string]bool{}
	b := newBatchBuilder()
	for _, d := range descs {
		if seen[d.GetName()] {
			c.fail(rule, "%s is listed twice", d.GetName())
			return
		}
		seen[d.GetName()] = true
		b.sample(d)
	}
	res := c.guard(nil, []*pluginv1.Batch{b.b})
	if detail := drops(res, c.p.Name, nil); detail != "" {
		c.fail(rule, "%d entries, a sample of which the host would drop: %s", len(descs), detail)
		return
	}
	c.pass(rule, "%d entries", len(descs))
}

func (c *checker) sentInCatalogue(col *collection) {
	const rule = "collect.catalogue"
	var missing []string
	for _, name := range slices.Sorted(maps.Keys(col.families)) {
		if !inCatalogue(c.info.GetMetrics(), strings.TrimPrefix(name, c.s.MetricPrefix)) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		c.fail(rule, "%d of %d families sent are not in Info's catalogue: %s (plexporter metrics does not show them, and an allowlist pattern for them is warned about as matching nothing)", len(missing), len(col.families), strings.Join(missing, ", "))
		return
	}
	c.pass(rule, "%d families, all listed", len(col.families))
}

// inCatalogue reports whether a family name (as written, prefix removed)
// is listed, literally or by a glob.
func inCatalogue(descs []*pluginv1.MetricDescriptor, name string) bool {
	for _, d := range descs {
		if d.GetName() == name {
			return true
		}
		if strings.ContainsAny(d.GetName(), "*?[") {
			if ok, err := pathMatch(d.GetName(), name); err == nil && ok {
				return true
			}
		}
	}
	return false
}
