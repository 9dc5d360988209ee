package hongbao

// SetPauseStep makes every Pause and Resume of e (of its discount
// campaigns too) call step after each shard it writes, with how many it
// has written: a test holds a call there.
func SetPauseStep(e *Engine, step func(written int)) { e.pauseStep = step }

// TreeBuilds says how many proof trees e is building and how many wait
// for a slot to build (fair.go).
func TreeBuilds(e *Engine) (building, waiting int64) {
	return e.fair.building.Load(), e.fair.waiting.Load()
}
