package batch

import "github.com/hongbao/hongbao/ledger"

// kind says how one kind of entry (grants, discounts) meets the rows
// stored for it: an entry's row (R) and amount, its first unique key
// (K1, whose stored row is a replay when it is the entry's own row and a
// conflict of kind first otherwise) and its second (K2, a conflict of
// kind second), the conflict C and the batch's result Res it reports,
// and its errors.
type kind[E any, R, K1, K2 comparable, C, Res any] struct {
	row           func(E) R
	cents         func(E) int64
	key1          func(R) K1
	key2          func(R) K2
	first, second ledger.ConflictKind
	conflict      func(e E, k ledger.ConflictKind, have R) C
	extra         func(R) error // a row the insert returned that is no entry's
	missing       func(E) error // an entry neither inserted nor stored
	result        func(sorted[E, C]) Res
}

// sorted is a batch sorted out by classify.
type sorted[E, C any] struct {
	done      []E // inserted, in batch order
	cents     int64
	replayed  int
	conflicts []C
}

// classify sorts each entry of the batch, in batch order, into inserted,
// replayed or conflict, as Classify describes, and returns the result and
// the inserted entries.
func classify[E any, R, K1, K2 comparable, C, Res any](k kind[E, R, K1, K2, C, Res], entries []E, inserted, stored []R) (Res, []E, error) {
	s, err := sortOut(k, entries, inserted, stored)
	if err != nil {
		var none Res
		return none, nil, err
	}
	return k.result(s), s.done, nil
}

func sortOut[E any, R, K1, K2 comparable, C, Res any](k kind[E, R, K1, K2, C, Res], entries []E, inserted, stored []R) (sorted[E, C], error) {
	done, others, extra := Inserted(entries, inserted, k.row)
	if len(extra) > 0 {
		return sorted[E, C]{}, k.extra(extra[0])
	}
	s := sorted[E, C]{done: done}
	for _, e := range done {
		s.cents += k.cents(e)
	}
	by1 := make(map[K1]R, len(stored))
	by2 := make(map[K2]R, len(stored))
	for _, r := range stored {
		by1[k.key1(r)] = r
		by2[k.key2(r)] = r
	}
	for _, e := range others {
		r := k.row(e)
		if have, ok := by1[k.key1(r)]; ok {
			if have == r {
				s.replayed++
				continue
			}
			s.conflicts = append(s.conflicts, k.conflict(e, k.first, have))
			continue
		}
		if have, ok := by2[k.key2(r)]; ok {
			s.conflicts = append(s.conflicts, k.conflict(e, k.second, have))
			continue
		}
		return sorted[E, C]{}, k.missing(e)
	}
	return s, nil
}
