package rebuild

// SetSwapHook makes every later rebuild call fn after each shard's swap
// (nil: none); an error from fn cuts the rebuild short there.
func SetSwapHook(fn func(k int) error) { testHookSwapped = fn }
