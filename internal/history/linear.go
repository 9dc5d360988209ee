package history

import (
	"fmt"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// A user's packet of a campaign is a write-once register: none, then one
// packet for good. Its state is "" (none) or "<packet>#<cents>".
//
// A grab answered granted writes it (from none only: a second GRANTED is
// an anomaly even for the same packet); already_granted reads it (it must
// hold that packet); sold_out, closed and not_open read none (a user who
// holds a packet is answered already_granted in every state). GET
// grants/me reads it. An Unknown grab either did nothing or wrote the
// packet the user is later seen with (the only one it could ever hold).

// regInput is the input of one register call.
type regInput struct {
	kind    Kind
	unknown bool
	// cand is, for an Unknown grab, the state it may have written: the
	// packet the user is seen with in an answer, or "" when none is.
	cand string
}

// regOutput is the answer of a register call.
type regOutput struct {
	outcome string
	value   string // "<packet>#<cents>" or ""
}

func regValue(packet string, cents int64) string {
	if packet == "" {
		return ""
	}
	return fmt.Sprintf("%s#%d", packet, cents)
}

func regStep(state, input, output any) []any {
	s, in, out := state.(string), input.(regInput), output.(regOutput)
	if in.unknown {
		if in.kind == Grab && s == "" && in.cand != "" {
			return []any{s, in.cand}
		}
		return []any{s}
	}
	switch {
	case in.kind == Grab && out.outcome == "granted":
		if s == "" && out.value != "" {
			return []any{out.value}
		}
	case in.kind == Grab && out.outcome == "already_granted", in.kind == Held && out.outcome != NoGrant:
		if s != "" && s == out.value {
			return []any{s}
		}
	case in.kind == Grab || in.kind == Held: // sold_out, closed, not_open, no_grant
		if s == "" {
			return []any{s}
		}
	}
	return nil
}

var registerModel = (&porcupine.NondeterministicModel{
	Init: func() []any { return []any{""} },
	Step: regStep,
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		if in.unknown {
			return fmt.Sprintf("%s -> ? (may write %q)", in.kind, in.cand)
		}
		return fmt.Sprintf("%s -> %s %s", in.kind, out.outcome, out.value)
	},
}).ToModel()

// An order's discount: none, held(d), confirmed(d), cancelled, expired.
type orderState struct {
	st    byte // 0 none, 'h' held, 'c' confirmed, 'x' cancelled, 'e' expired
	cents int64
}

type orderInput struct {
	kind    Kind
	unknown bool
	cand    int64 // for an Unknown reserve: the amount the order is seen with, 0 if none
}

type orderOutput struct {
	outcome string
	cents   int64
}

func orderStep(state, input, output any) []any {
	s, in, out := state.(orderState), input.(orderInput), output.(orderOutput)
	if in.unknown {
		return orderUnknown(s, in)
	}
	same := func(ok bool) []any {
		if ok {
			return []any{s}
		}
		return nil
	}
	to := func(ok bool, n orderState) []any {
		if ok {
			return []any{n}
		}
		return nil
	}
	switch in.kind {
	case Reserve:
		switch out.outcome {
		case "reserved":
			return to(s.st == 0 && out.cents > 0, orderState{'h', out.cents})
		case "already":
			return same((s.st == 'h' || s.st == 'c') && s.cents == out.cents)
		case "cancelled":
			return same(s.st == 'x')
		case "expired":
			return to(s.st == 'e' || s.st == 'h', orderState{'e', s.cents})
		}
		return same(s.st == 0) // limit, exhausted, closed, not_open
	case Confirm:
		switch out.outcome {
		case "confirmed":
			return to((s.st == 'h' || s.st == 'c') && s.cents == out.cents, orderState{'c', s.cents})
		case "cancelled":
			return same(s.st == 'x')
		case "expired":
			return to(s.st == 'e' || s.st == 'h', orderState{'e', s.cents})
		}
		return same(s.st == 0) // no_reservation
	case Cancel:
		switch out.outcome {
		case "cancelled":
			return to(s.st == 'h' || s.st == 'x', orderState{'x', s.cents})
		case "expired":
			return to(s.st == 'e' || s.st == 'h', orderState{'e', s.cents})
		case "confirmed":
			return same(s.st == 'c')
		}
		return same(s.st == 0) // no_reservation
	}
	return nil
}

// orderUnknown is what an Unknown call may have done: nothing, or its one
// step.
func orderUnknown(s orderState, in orderInput) []any {
	switch {
	case in.kind == Reserve && s.st == 0 && in.cand > 0:
		return []any{s, orderState{'h', in.cand}}
	case in.kind == Confirm && s.st == 'h':
		return []any{s, orderState{'c', s.cents}}
	case in.kind == Cancel && s.st == 'h':
		return []any{s, orderState{'x', s.cents}}
	}
	return []any{s}
}

var orderModel = (&porcupine.NondeterministicModel{
	Init: func() []any { return []any{orderState{}} },
	Step: orderStep,
	DescribeOperation: func(input, output any) string {
		in, out := input.(orderInput), output.(orderOutput)
		if in.unknown {
			return fmt.Sprintf("%s -> ?", in.kind)
		}
		return fmt.Sprintf("%s -> %s %d", in.kind, out.outcome, out.cents)
	},
}).ToModel()

// registerKey names a register: campaign and user, and the order for a
// discount call.
func registerKey(op Op) string {
	if op.Kind == Grab || op.Kind == Held {
		return op.Campaign + " " + op.User
	}
	return op.Campaign + " " + op.User + " " + op.Order
}

// linearizable checks every register of the history with porcupine and
// reports those that are not linearizable (or that porcupine could not
// decide within timeout, per register).
func linearizable(ops []Op, timeout time.Duration) []Anomaly {
	byKey := map[string][]Op{}
	var end time.Duration
	seen := map[string]bool{} // register and kind of an Unknown call kept
	ops = append([]Op(nil), ops...)
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Start < ops[j].Start })
	for _, op := range ops {
		end = max(end, op.End, op.Start)
		if op.Result == Fail || (op.Result == Unknown && op.Kind == Held) {
			continue
		}
		k := registerKey(op)
		if op.Result == Unknown {
			// Every step of these models is idempotent and no state comes
			// back, so Unknown calls of one kind on one register, open
			// until the end, do what the earliest alone may do: keep it,
			// which spares porcupine an exponential search.
			if seen[k+" "+op.Kind.String()] {
				continue
			}
			seen[k+" "+op.Kind.String()] = true
		}
		byKey[k] = append(byKey[k], op)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []Anomaly
	for _, k := range keys {
		kops := byKey[k]
		model, hist := toPorcupine(kops, end+1)
		res, _ := porcupine.CheckOperationsVerbose(model, hist, timeout)
		switch res {
		case porcupine.Illegal:
			out = append(out, Anomaly{Kind: NotLinearizable, Key: k, Detail: describe(kops)})
		case porcupine.Unknown:
			out = append(out, Anomaly{Kind: Undecided, Key: k, Detail: describe(kops)})
		}
	}
	return out
}

// toPorcupine turns one register's Ops into porcupine's, an Unknown call
// returning after everything else (end).
func toPorcupine(ops []Op, end time.Duration) (porcupine.Model, []porcupine.Operation) {
	orders := ops[0].Kind != Grab && ops[0].Kind != Held
	var cand string
	var candCents int64
	for _, op := range ops {
		if op.Result == OK && op.Packet != "" && cand == "" {
			cand = regValue(op.Packet, op.Cents)
		}
		if op.Result == OK && op.Cents > 0 && candCents == 0 {
			candCents = op.Cents
		}
	}
	hist := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		ret := op.End
		if op.Result == Unknown {
			ret = end
		}
		p := porcupine.Operation{ClientId: op.Client, Call: int64(op.Start), Return: int64(ret)}
		if orders {
			p.Input = orderInput{kind: op.Kind, unknown: op.Result == Unknown, cand: candCents}
			p.Output = orderOutput{outcome: op.Outcome, cents: op.Cents}
		} else {
			p.Input = regInput{kind: op.Kind, unknown: op.Result == Unknown, cand: cand}
			p.Output = regOutput{outcome: op.Outcome, value: regValue(op.Packet, op.Cents)}
		}
		hist = append(hist, p)
	}
	if orders {
		return orderModel, hist
	}
	return registerModel, hist
}

// describe lists a register's calls for a report.
func describe(ops []Op) string {
	s := ""
	for i, op := range ops {
		if i == 20 {
			return s + fmt.Sprintf("; ... %d more", len(ops)-i)
		}
		if i > 0 {
			s += "; "
		}
		end := op.End.String()
		if op.Result == Unknown {
			end = "?"
		}
		s += fmt.Sprintf("[%v..%s] %s %s %s %s %d", op.Start, end, op.Kind, op.Result, op.Outcome, op.Packet, op.Cents)
	}
	return s
}
