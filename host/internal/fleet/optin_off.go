//go:build plexporter_no_capability_optin

package fleet

// skipCapabilityOptIn: see optin_on.go. This build does not require the
// operator's opt-in for capabilities; tests only.
const skipCapabilityOptIn = true
