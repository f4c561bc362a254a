package conformance

// Rule is one check of the runner. Its ID is stable: vendors' CI logs and
// docs/plugin-protocol.md's conformance checklist name it.
type Rule struct {
	ID   string
	What string // one short line, as printed
	// Checklist lists the items of docs/plugin-protocol.md's conformance
	// checklist the rule checks.
	Checklist []int
}

// Rules are every rule, in the order they run and are printed.
var Rules = []Rule{
	{"binary.name", "executable named plexporter-<name>, <name> matching ^[a-z0-9][a-z0-9_-]*$", []int{1}},
	{"manifest", "the manifest beside the binary, if any, is valid and can be honoured here", []int{34}},
	{"handshake.cookie", "refuses to run without the magic cookie", []int{2}},
	{"handshake", "handshake within the start timeout: core protocol 1, an offered app protocol, a unix socket in the socket directory, grpc, AutoMTLS", []int{3, 4, 5, 7}},
	{"info", "Info answers within the start timeout with api_version 1.x.y", []int{12, 13, 15}},
	{"info.name", "Info's name is valid and equals the file's <name>", []int{13}},
	{"info.version", "Info's version is not empty", []int{13}},
	{"info.catalogue", "every catalogue entry passes the host's guard (name, type, labels), none twice", []int{14, 24, 25, 28}},
	{"configure", "Configure accepts the plugin's config (none, or --config's section) within the start timeout", []int{15, 16}},
	{"configure.unknown-key", "a config with an unknown key is refused with INVALID_ARGUMENT and a message, without a crash", []int{16}},
	{"configure.wrong-type", "a config with a known key of the wrong type is refused with INVALID_ARGUMENT and a message, without a crash", []int{16}},
	{"collect", "Collect ends with status OK within the collect timeout", []int{20, 21}},
	{"collect.guard", "every batch passes the host's guard without a drop (duplicates aside)", []int{22, 23, 24, 25, 26, 27, 28, 29, 30}},
	{"collect.duplicates", "no series is sent twice in one collect", []int{27}},
	{"collect.catalogue", "every family sent is listed in the catalogue", []int{14}},
	{"collect.stable", "three more Collects succeed, the series count does not keep growing, the process stays up", []int{10}},
	{"collect.cancel", "a Collect cancelled mid-way ends promptly: the next Collect is answered in its usual time", []int{11, 20}},
	{"allowlist.one", "with an allowlist of one family sent, no other family is sent", []int{19}},
	{"allowlist.none", "with an allowlist that matches no family, no family is sent", []int{19}},
	{"metric-prefix", "with a metric_prefix, every family sent starts with it", []int{18}},
	{"allowlist.prefixed", "with a metric_prefix, the allowlist matches the names as exposed: the prefixed names select families, the bare names none", []int{18, 19}},
	{"stop", "exits within 2s of the host closing the connection", []int{9}},
	{"process.up", "the first process is still running at the end of the run, 2s or more after its last Collect", []int{10}},
	{"lifeline", "exits once its lifeline (fd 3) reads EOF (within 30s)", []int{8}},
}

func ruleByID(id string) Rule {
	for _, r := range Rules {
		if r.ID == id {
			return r
		}
	}
	panic("conformance: no rule " + id)
}
