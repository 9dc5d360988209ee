package atomicop

import (
	"cmp"
	"context"
	_ "embed"
	"fmt"
	"sort"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao/internal/luascript"
)

//go:embed lua/update.lua
var updateLua string

var updateScript = luascript.New(updateLua)

const (
	// MaxVersion is the largest version Update accepts: 2^53 - 1. Versions
	// are compared inside Redis as Lua numbers (doubles), which stop telling
	// neighbouring integers apart at 2^53. Milliseconds since 1970 stay
	// below it for another 285,000 years.
	MaxVersion = 1<<53 - 1

	// VersionField is the record field that holds the stored version. It is
	// reserved: updates may not write it.
	VersionField = "_v"

	// MaxBatch is the most updates one UpdateBatch call takes.
	MaxBatch = 1000

	// MaxFields is the most fields one update may carry.
	MaxFields = 1000
)

// DefaultVersionedPrefix is the key prefix of a Versioned with no Prefix
// configured.
const DefaultVersionedPrefix = "hb:v:"

// VersionedConfig configures a Versioned. The zero value is the default.
type VersionedConfig struct {
	// Prefix starts every Redis key the Versioned writes: records are
	// <Prefix>rec:<key>, summaries <Prefix>sum:{<tag>}:<name>. It must not
	// contain braces. Default: DefaultVersionedPrefix.
	Prefix string
}

// Validate reports whether the configuration can be used.
func (c *VersionedConfig) Validate() error {
	return checkPrefix(c.Prefix)
}

// Versioned stores records under keys only when their version is newer than
// the stored one ("update if newer"), so data that arrives late never
// overwrites newer data, however the writers interleave. A record is a Redis
// hash; its version lives in the field VersionField.
//
// Each decision runs as one Lua script that reads the stored version,
// compares and writes: there is no window between the read and the write in
// which another writer can slip in, which is what a GET followed by a SET
// has. Versions are integers in [0, MaxVersion], typically the time of the
// event in milliseconds, or any counter that grows with newer data. An
// update whose version equals the stored one is stale (ties are rejected):
// the first writer of a version wins, and a retried update changes nothing.
//
// A Versioned is safe for concurrent use.
type Versioned struct {
	client rueidis.Client
	prefix string
}

// NewVersioned returns a Versioned using client. A nil cfg means defaults.
func NewVersioned(client rueidis.Client, cfg *VersionedConfig) (*Versioned, error) {
	var c VersionedConfig
	if cfg != nil {
		c = *cfg
	}
	c.Prefix = cmp.Or(c.Prefix, DefaultVersionedPrefix)
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &Versioned{client: client, prefix: c.Prefix}, nil
}

// Aggregate keeps a summary of a group of records in step with them: a hash
// that counts, for each value of Field, how many records of the group hold
// it (for example how many devices are in each status). When an update is
// applied and changes Field, the same script moves one count from the old
// value to the new one; a stale update moves nothing. Values whose count
// falls to zero are removed from the summary.
//
// The summary is exact when every write of Field in the group goes through
// updates carrying the same Aggregate. The group is the records sharing a
// hash tag: give keys like "{fleet-7}dev-42" to count a fleet together.
type Aggregate struct {
	// Summary names the summary hash within the group.
	Summary string
	// Field is the record field whose values are counted. It must not be
	// VersionField.
	Field string
}

// Update is one write of a record.
type Update struct {
	// Key names the record. A key may carry a hash tag ("{fleet-7}dev-42")
	// to join a group of records; one without braces is a group of its
	// own. Braces without a tag ("a}b") are refused.
	Key string
	// Version of this data, in [0, MaxVersion]; the update is applied only
	// if it is greater than the stored version.
	Version int64
	// Fields to store. Fields not given keep their stored values. The name
	// VersionField is reserved.
	Fields map[string]string
	// Aggregate, when not nil, counts Fields[Aggregate.Field] into the
	// group's summary.
	Aggregate *Aggregate
}

// Result is the outcome of one update.
type Result struct {
	// Applied is true when the update was stored, false when it was stale:
	// the stored version was equal or newer.
	Applied bool
	// Stored is the version the record holds once the update has run: the
	// update's version when applied, else the newer (or equal) one that
	// made it stale.
	Stored int64
}

// Update stores u when its version is newer than the stored one. A stale
// update is not an error: Result.Applied says what happened.
func (v *Versioned) Update(ctx context.Context, u Update) (Result, error) {
	rs, err := v.run(ctx, "update", []Update{u})
	if err != nil {
		return Result{}, err
	}
	return rs[0], nil
}

// UpdateBatch applies updates in order, in one script call, each as Update
// would. All keys must share one hash tag (ErrCrossSlot otherwise), so the
// call touches a single Redis Cluster slot. A key may appear more than once;
// each update sees the writes of those before it. Nothing is written when any
// update is invalid.
func (v *Versioned) UpdateBatch(ctx context.Context, updates []Update) ([]Result, error) {
	return v.run(ctx, "update batch", updates)
}

func (v *Versioned) run(ctx context.Context, op string, updates []Update) ([]Result, error) {
	if len(updates) == 0 || len(updates) > MaxBatch {
		return nil, fmt.Errorf("atomicop: %s: %w: %d updates, want 1..%d", op, ErrBatchSize, len(updates), MaxBatch)
	}
	keys := make([]string, len(updates), len(updates)+1)
	args := make([]string, 1, 1+5*len(updates))
	args[0] = strconv.Itoa(len(updates))
	summaries := map[string]int{}
	var summaryKeys []string
	var group string
	for i, u := range updates {
		rkey, tag, err := recordKey(v.prefix, u.Key)
		if err != nil {
			return nil, fmt.Errorf("atomicop: %s: %w", op, err)
		}
		if i == 0 {
			group = tag
		} else if tag != group {
			return nil, fmt.Errorf("atomicop: %s: %w: %q and %q", op, ErrCrossSlot, updates[0].Key, u.Key)
		}
		if u.Version < 0 || u.Version > MaxVersion {
			return nil, fmt.Errorf("atomicop: %s %q: %w: %d", op, u.Key, ErrVersionRange, u.Version)
		}
		if len(u.Fields) > MaxFields {
			return nil, fmt.Errorf("atomicop: %s %q: %w: %d fields, want at most %d", op, u.Key, ErrBatchSize, len(u.Fields), MaxFields)
		}
		if _, ok := u.Fields[VersionField]; ok {
			return nil, fmt.Errorf("atomicop: %s %q: %w: %q", op, u.Key, ErrReservedField, VersionField)
		}
		keys[i] = rkey
		si, field := 0, ""
		if a := u.Aggregate; a != nil {
			if a.Summary == "" || a.Field == "" {
				return nil, fmt.Errorf("atomicop: %s %q: aggregate needs a summary name and a field", op, u.Key)
			}
			if a.Field == VersionField {
				return nil, fmt.Errorf("atomicop: %s %q: %w: cannot count %q", op, u.Key, ErrReservedField, VersionField)
			}
			skey := summaryKey(v.prefix, tag, a.Summary)
			if si = summaries[skey]; si == 0 {
				summaryKeys = append(summaryKeys, skey)
				si = len(summaryKeys)
				summaries[skey] = si
			}
			field = a.Field
		}
		args = append(args, strconv.FormatInt(u.Version, 10), strconv.Itoa(si), field, strconv.Itoa(len(u.Fields)))
		// Sorted, so the same update always sends the same arguments.
		names := make([]string, 0, len(u.Fields))
		for name := range u.Fields {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			args = append(args, name, u.Fields[name])
		}
	}
	keys = append(keys, summaryKeys...)
	out, err := runScript(ctx, v.client, op, updateScript, keys, args)
	if err != nil {
		return nil, err
	}
	if len(out) != 2*len(updates) {
		return nil, fmt.Errorf("atomicop: %s: %w: reply of %d integers for %d updates", op, ErrCorrupt, len(out), len(updates))
	}
	rs := make([]Result, len(updates))
	for i := range rs {
		rs[i] = Result{Applied: out[2*i] == 1, Stored: out[2*i+1]}
	}
	return rs, nil
}

// Record is a stored record.
type Record struct {
	// Version is the stored version.
	Version int64
	// Fields are the record's fields, without VersionField.
	Fields map[string]string
}

// Get reads the record key. ok is false when there is none.
func (v *Versioned) Get(ctx context.Context, key string) (rec Record, ok bool, err error) {
	rkey, _, err := recordKey(v.prefix, key)
	if err != nil {
		return Record{}, false, fmt.Errorf("atomicop: get: %w", err)
	}
	m, err := v.client.Do(ctx, v.client.B().Hgetall().Key(rkey).Build()).AsStrMap()
	if err != nil {
		return Record{}, false, fmt.Errorf("atomicop: get %q: %w", key, err)
	}
	vs, ok := m[VersionField]
	if !ok {
		return Record{}, false, nil
	}
	ver, err := strconv.ParseInt(vs, 10, 64)
	if err != nil {
		return Record{}, false, fmt.Errorf("atomicop: get %q: %w: version %q", key, ErrCorrupt, vs)
	}
	delete(m, VersionField)
	return Record{Version: ver, Fields: m}, true, nil
}

// Summary reads the counts of the summary hash name in the group of the
// record key (any record of the group will do): value -> number of records
// holding it. Values with no record are absent.
func (v *Versioned) Summary(ctx context.Context, key, name string) (map[string]int64, error) {
	_, tag, err := recordKey(v.prefix, key)
	if err != nil {
		return nil, fmt.Errorf("atomicop: summary: %w", err)
	}
	m, err := v.client.Do(ctx, v.client.B().Hgetall().Key(summaryKey(v.prefix, tag, name)).Build()).AsIntMap()
	if err != nil {
		return nil, fmt.Errorf("atomicop: summary %q: %w", name, err)
	}
	return m, nil
}
