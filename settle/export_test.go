package settle

// Remembered counts what the worker keeps between passes about campaigns:
// fund marks, reclaim positions and sweep terms.
func (w *Worker) Remembered() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.funded) + len(w.claimAt) + len(w.swept)
}
