package hongbao

import (
	"reflect"
	"time"

	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/ledger"
)

// A campaign's terms have one record, ledger.Terms, and one codec: the
// ledger stores the record (as JSON), the root's meta holds it field by
// field under the same names (redisstore.TermsOf), and a Campaign holds
// each field of the record under the same name (termsOf, setTerms). So
// create, Status, the ledger, a rebuild and an idempotent create's
// comparison (sameTerms, Spec.Describes) read and write every term, a new
// one included, without an edit of their own: a new term is a field of
// ledger.Terms and of Campaign (and of Spec, copied in Spec.campaign,
// when a create decides it).

// ledgerOnly are the fields of the record that a Campaign does not hold:
// an operator's close (Status.CloseReason tells every close), the
// packets a rebuild found lost (Status counts them), the frontier's block
// size (a deployment's, not the campaign's).
var ledgerOnly = map[string]bool{"CloseReason": true, "ClosedAt": true, "Lost": true, "Block": true}

// notSpecified are the fields of the record a spec does not decide, or
// decides only when it gives them: an idempotent create compares every
// other one (sameTerms).
var notSpecified = map[string]bool{"Seed": true, "OpensAt": true, "ClosesAt": true, "Owner": true,
	"CloseReason": true, "ClosedAt": true, "Lost": true, "Block": true}

// termPair is a field of the record and the field of Campaign that holds
// it.
type termPair struct {
	term, campaign int
	ms             bool // a time.Time in Campaign, ms since the epoch in the record
}

var (
	timeType  = reflect.TypeFor[time.Time]()
	termPairs = func() []termPair {
		tt, ct := reflect.TypeFor[ledger.Terms](), reflect.TypeFor[Campaign]()
		var out []termPair
		for i := range tt.NumField() {
			name := tt.Field(i).Name
			cf, ok := ct.FieldByName(name)
			if ledgerOnly[name] {
				continue
			}
			if !ok {
				panic("hongbao: term " + name + " has no field in Campaign")
			}
			out = append(out, termPair{term: i, campaign: cf.Index[0], ms: cf.Type == timeType})
		}
		return out
	}()
)

// termsOf are the terms of campaign c with the window opens..closes (ms).
func termsOf(c *Campaign, opens, closes int64) ledger.Terms {
	var t ledger.Terms
	tv, cv := reflect.ValueOf(&t).Elem(), reflect.ValueOf(c).Elem()
	for _, p := range termPairs {
		if !p.ms {
			tv.Field(p.term).Set(cv.Field(p.campaign).Convert(tv.Field(p.term).Type()))
		}
	}
	t.OpensAt, t.ClosesAt = opens, closes
	return t
}

// setTerms sets every field of c that holds a term to t's (a window of 0
// is the epoch, as Status reads it).
func setTerms(c *Campaign, t ledger.Terms) {
	tv, cv := reflect.ValueOf(&t).Elem(), reflect.ValueOf(c).Elem()
	for _, p := range termPairs {
		f := cv.Field(p.campaign)
		if p.ms {
			f.Set(reflect.ValueOf(time.UnixMilli(tv.Field(p.term).Int())))
			continue
		}
		f.Set(tv.Field(p.term).Convert(f.Type()))
	}
}

// metaTerms are the terms of c as begin stores them in its root's meta.
func metaTerms(c *Campaign) *redisstore.Terms {
	t := termsOf(c, 0, 0)
	return &t
}

// sameTerms says whether got holds every term a spec decides as want
// does (the fields notSpecified aside).
func sameTerms(want, got ledger.Terms) bool {
	wv, gv := reflect.ValueOf(want), reflect.ValueOf(got)
	for i := range wv.NumField() {
		if notSpecified[wv.Type().Field(i).Name] {
			continue
		}
		if !reflect.DeepEqual(wv.Field(i).Interface(), gv.Field(i).Interface()) {
			return false
		}
	}
	return true
}

// specTerms are the terms spec decides, its defaults applied: no seed and
// no window (those a spec leaves out are drawn or resolved at create).
func (spec Spec) specTerms() (ledger.Terms, error) {
	sp, err := spec.check()
	if err != nil {
		return ledger.Terms{}, err
	}
	return termsOf(spec.campaign(sp, 0), 0, 0), nil
}

// Describes says whether campaign c is what spec creates: every term the
// spec decides, with the defaults of those it left out. Times left out
// were "now" at the first create and match any; so does a seed left out
// (it was drawn at random). An API that answers a replayed create asks it
// (an Idempotency-Key's second request).
func (spec Spec) Describes(c *Campaign) bool {
	want, err := spec.specTerms()
	if err != nil {
		return false
	}
	return sameTerms(want, termsOf(c, 0, 0)) && (spec.Seed == nil || *spec.Seed == c.Seed) &&
		(spec.OpensAt.IsZero() || spec.OpensAt.UnixMilli() == c.OpensAt.UnixMilli()) &&
		(spec.ClosesAt.IsZero() || spec.ClosesAt.UnixMilli() == c.ClosesAt.UnixMilli())
}
