package host

// AbandonRunning stops every running call of p's instances now, as the
// watchdog stops a call past its deadline: tests release a decision they
// hold with it.
func AbandonRunning(p *Plugin) {
	d := p.rt.dog
	d.mu.Lock()
	defer d.mu.Unlock()
	for in := range d.instances {
		if start := in.started.Load(); in.plugin == p && start != 0 {
			in.abandon(start)
		}
	}
}

// Running reports whether one of p's instances is in a call.
func Running(p *Plugin) bool {
	d := p.rt.dog
	d.mu.Lock()
	defer d.mu.Unlock()
	for in := range d.instances {
		if in.plugin == p && in.started.Load() != 0 {
			return true
		}
	}
	return false
}

// LiveMappings is how many guest memories are mapped now (64-bit Linux;
// 0 elsewhere).
func LiveMappings() int64 { return liveMappings.Load() }
