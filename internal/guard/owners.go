package guard

import (
	"fmt"
	"slices"
	"strings"

	pluginv1 "github.com/plexporter/plexporter/proto/plexporter/plugin/v1"
)

// ReasonForeignFamily: the family, or a series name it exposes, belongs to
// another plugin, whose catalogue declares it (Owners). Counted against the
// plugin that sent it.
const ReasonForeignFamily = "foreign_family"

// Catalogue is the families one plugin declares in its Info, with the
// plugin's metric prefix already applied to their names.
type Catalogue struct {
	Plugin   string
	Families []*pluginv1.MetricDescriptor
	Prefix   string
}

// Owners says which plugin may send each family some catalogue declares,
// so that a plugin earlier in merge order cannot take another's family
// (its genuine series would be dropped as the victim's duplicates, or its
// histogram as a name collision). A family belongs to the first plugin, by
// name, whose catalogue declares it; a declaration marked shared (the
// MetricDescriptor's shared field) opens the family to every plugin that
// declares it shared too, and to no one else. Every series name the
// family exposes (x_bucket, x_total, x_created, ...) belongs to it as
// well. Families no catalogue declares, and globs, belong to no one: the
// first plugin to send them wins, as before.
type Owners struct {
	names map[string]*owner // series name -> its family's owner
}

type owner struct {
	family, plugin string
	shared         []string // the plugins allowed besides plugin, when shared
	isShared       bool
}

// Contested names a family that more than one catalogue declares for
// itself alone, and who got it.
type Contested struct {
	Family, Owner, Other string
}

// NewOwners builds the owners of the families of catalogues (in any
// order: they are taken by plugin name). It also returns the families
// declared by more than one plugin without both marking them shared.
func NewOwners(catalogues []Catalogue) (*Owners, []Contested) {
	cats := slices.Clone(catalogues)
	slices.SortFunc(cats, func(a, b Catalogue) int { return strings.Compare(a.Plugin, b.Plugin) })
	o := &Owners{names: map[string]*owner{}}
	byFamily := map[string]*owner{}
	var contested []Contested
	for _, c := range cats {
		for _, d := range c.Families {
			if strings.Contains(d.GetName(), "*") || d.GetName() == "" {
				continue
			}
			name := c.Prefix + d.GetName()
			if ow := byFamily[name]; ow != nil {
				switch {
				case ow.plugin == c.Plugin:
				case ow.isShared && d.GetShared():
					if !slices.Contains(ow.shared, c.Plugin) {
						ow.shared = append(ow.shared, c.Plugin)
					}
				default:
					contested = append(contested, Contested{Family: name, Owner: ow.plugin, Other: c.Plugin})
				}
				continue
			}
			ow := &owner{family: name, plugin: c.Plugin, isShared: d.GetShared()}
			byFamily[name] = ow
			for _, s := range seriesNames(name, d.GetType()) {
				if _, taken := o.names[s]; !taken {
					o.names[s] = ow
				}
			}
		}
	}
	return o, contested
}

// foreign explains why plugin may not send family name of type t, or
// returns "".
func (o *Owners) foreign(name string, t pluginv1.MetricType, plugin string) string {
	if o == nil {
		return ""
	}
	for _, s := range seriesNames(name, t) {
		ow := o.names[s]
		if ow == nil || ow.plugin == plugin || slices.Contains(ow.shared, plugin) {
			continue
		}
		if s == ow.family {
			return fmt.Sprintf("family %s belongs to plugin %s, whose catalogue declares it", name, ow.plugin)
		}
		return fmt.Sprintf("family %s (%s) would expose %s, a series name of family %s, which belongs to plugin %s", name, typeName(t), s, ow.family, ow.plugin)
	}
	return ""
}
