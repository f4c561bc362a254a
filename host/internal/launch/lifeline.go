package launch

// CloseLifeline closes the host's end of the plugin's lifeline pipe and
// nothing else: to the plugin it looks as if the host had died, while the
// gRPC connection stays open. `plexporter plugin check` uses it to see that
// a plugin notices the host's death on its own; the host itself closes the
// lifeline only in Stop and Kill. The exit that follows is expected, so it
// is not logged as a failure.
func (p *Process) CloseLifeline() {
	if p.run == nil {
		return
	}
	p.run.expectExit()
	p.run.closeLifeline.Do(func() {
		if p.run.lifeline != nil {
			p.run.lifeline.Close()
		}
	})
}
