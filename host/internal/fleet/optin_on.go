//go:build !plexporter_no_capability_optin

package fleet

// skipCapabilityOptIn turns the capability opt-in check off, in a host
// built with the tag plexporter_no_capability_optin only: the end-to-end
// test (host/capopt_test.go) builds one to show that the check is what
// refuses. Never in a shipped build.
const skipCapabilityOptIn = false
