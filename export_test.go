package hongbao

// SetPauseStep makes every Pause and Resume of e (of its discount
// campaigns too) call step after each shard it writes, with how many it
// has written: a test holds a call there.
func SetPauseStep(e *Engine, step func(written int)) { e.pauseStep = step }
