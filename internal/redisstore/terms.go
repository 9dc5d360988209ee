package redisstore

import (
	"reflect"
	"strconv"
	"strings"

	"github.com/hongbao/hongbao/ledger"
)

// A red packet campaign's terms in its root's meta. The record is
// ledger.Terms, the one that create, status, the ledger, a rebuild and an
// idempotent create's comparison all read and write; each of its fields
// lives in meta under its JSON name (the ledger stores the record as JSON
// under the same names). A new term is a field of ledger.Terms: begin
// writes it (appendTerms) and TermsOf reads it back, with no edit here.

// Terms is a campaign's terms record.
type Terms = ledger.Terms

// laterTerms are the fields of the record that begin does not write,
// each kept in meta by the step that decides it: the layout (ShardShare
// writes shards), the window (activate.lua), a close (close.lua), the
// pop frontier (Frontier writes block); Lost is the ledger's alone (meta
// counts the lost packets instead).
var laterTerms = map[string]bool{"shards": true, "opens_at": true, "closes_at": true,
	"close_reason": true, "closed_at": true, "block": true, "lost": true}

// termField is one scalar field of the record: its index and its name in
// meta.
type termField struct {
	index int
	name  string
	kind  reflect.Kind
}

// termFields are the record's scalar fields, in its order.
var termFields = func() []termField {
	var out []termField
	rt := reflect.TypeFor[Terms]()
	for i := range rt.NumField() {
		f := rt.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch f.Type.Kind() {
		case reflect.String, reflect.Int, reflect.Int64, reflect.Uint64:
			out = append(out, termField{index: i, name: name, kind: f.Type.Kind()})
		case reflect.Slice:
			// Lost: the ledger's alone.
		default:
			panic("redisstore: a term of kind " + f.Type.Kind().String() + " has no meta encoding: " + f.Name)
		}
	}
	return out
}()

// TermNames are the meta names of the record's scalar fields.
func TermNames() []string {
	out := make([]string, len(termFields))
	for i, f := range termFields {
		out[i] = f.name
	}
	return out
}

// appendTerms appends to a the fields of t that begin writes, as field,
// value pairs: every number, and every string that is not empty (an owner
// of "" records none).
func appendTerms(t *Terms, a []string) []string {
	if t == nil {
		return a
	}
	v := reflect.ValueOf(t).Elem()
	for _, f := range termFields {
		if laterTerms[f.name] {
			continue
		}
		fv := v.Field(f.index)
		switch f.kind {
		case reflect.String:
			if s := fv.String(); s != "" {
				a = append(a, f.name, s)
			}
		case reflect.Uint64:
			a = append(a, f.name, strconv.FormatUint(fv.Uint(), 10))
		default:
			a = append(a, f.name, strconv.FormatInt(fv.Int(), 10))
		}
	}
	return a
}

// TermsOf reads the terms a root's meta holds, each field from its name
// (0 or "" when absent or not a number); Shards is at least 1, as a
// one-shard campaign's meta does not say. Lost is not in meta.
func TermsOf(meta map[string]string) Terms {
	var t Terms
	v := reflect.ValueOf(&t).Elem()
	for _, f := range termFields {
		s, ok := meta[f.name]
		if !ok {
			continue
		}
		fv := v.Field(f.index)
		switch f.kind {
		case reflect.String:
			fv.SetString(s)
		case reflect.Uint64:
			n, _ := strconv.ParseUint(s, 10, 64)
			fv.SetUint(n)
		default:
			n, _ := strconv.ParseInt(s, 10, 64)
			fv.SetInt(n)
		}
	}
	t.Shards = max(t.Shards, 1)
	return t
}
