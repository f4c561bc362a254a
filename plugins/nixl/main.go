// Command plexporter-nixl is the plexporter plugin for NIXL agents: it
// drains the telemetry ring every NIXL agent on the host writes to
// $NIXL_TELEMETRY_DIR/<agent name> and serves all of them, with NIXL's own
// metric names, behind one endpoint. See README.md.
package main

import "github.com/plexporter/plexporter/sdk"

func main() { sdk.Serve(newPlugin()) }
