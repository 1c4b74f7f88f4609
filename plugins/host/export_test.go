package host

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"

	"github.com/switchyard/switchyard/engine/policy"
)

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

// LargeDetails returns details over n records as large as the API lets a
// client make them: each task and each agent with labels maxLabels of
// keyLen- and valueLen-byte keys and values.
func LargeDetails(n, maxLabels, keyLen, valueLen int) policy.Details {
	d := SyntheticDetails(n, "").(syntheticDetails)
	for i := range d {
		m := make(map[string]string, maxLabels)
		for j := range maxLabels {
			k := fmt.Sprintf("%0*d", keyLen, i*maxLabels+j)
			m[k] = strings.Repeat("v", valueLen)
		}
		d[i].labels = policy.MakeLabels(m)
		d[i].info.Labels = policy.MakeLabels(m)
	}
	return d
}

// Idle is an instance a test took out of a plugin's pool.
type Idle struct{ in *instance }

// TakeIdle takes an idle instance of p out of its pool, as a decision
// does (nil when there is none).
func TakeIdle(p *Plugin) Idle { return Idle{p.idle.tryGet()} }

// Slip puts the instance back into a slot of p's pool without looking at
// whether the pool is closed: what a decision's put-back does between
// taking the slot and reading that its pool closed meanwhile.
func (i Idle) Slip(p *Plugin) bool {
	for s := range p.idle.slots {
		if p.idle.slots[s].CompareAndSwap(nil, i.in) {
			return true
		}
	}
	return false
}

// Memory returns the instance's linear memory, as long as it is now.
func (i Idle) Memory() []byte {
	b, _ := i.in.mem.Read(0, i.in.mem.Size())
	return b
}

// RebuildFrom makes p build the instances that replace discarded ones from
// wasm rather than from its own module: a test's way to give a rebuild an
// initialisation that the load did not meet (a module's initialisation is
// deterministic, so its own would behave at the rebuild as at the load).
// Nothing may build an instance of p meanwhile.
func RebuildFrom(ctx context.Context, p *Plugin, wasm []byte) error {
	cm, key, err := p.rt.compile(ctx, wasm)
	if err != nil {
		return err
	}
	old := p.key
	p.compiled, p.key = cm, key
	p.rt.releaseCompiled(ctx, old)
	return nil
}

// ThreadCPU returns the calling thread's CPU time, in ns, and false where
// a thread's CPU clock cannot be read (elsewhere than Linux).
func ThreadCPU() (int64, bool) {
	const clockThreadCPUTime = 3 // CLOCK_THREAD_CPUTIME_ID
	t := clockRead(clockThreadCPUTime)
	return t, t >= 0
}

// Ready reports whether none of p's instances is being rebuilt: a decision
// made while one is falls back at once rather than wait for it.
func Ready(p *Plugin) bool { return p.building.Load() == 0 }

// Compiled reports, for each module, whether rt holds it compiled.
func Compiled(rt *Runtime, wasm ...[]byte) []bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	held := make([]bool, len(wasm))
	for i, w := range wasm {
		_, held[i] = rt.compiled[sha256.Sum256(w)]
	}
	return held
}
