package split_test

import (
	"fmt"
	"slices"

	"github.com/hongbao/hongbao/split"
)

// A fixed split hands out equal shares; the cent that does not divide goes
// to one packet, and the seed decides which.
func ExampleSplit() {
	amounts, err := split.Split(split.Spec{Total: 1000, Count: 3, Algorithm: split.Fixed}, 42)
	if err != nil {
		fmt.Println(err)
		return
	}
	var sum int64
	for _, a := range amounts {
		sum += a
	}
	slices.Sort(amounts)
	fmt.Println(amounts, "sum:", sum)
	// Output: [333 333 334] sum: 1000
}

// Invalid specs are reported with the field at fault.
func ExampleSpec_Normalize() {
	_, err := split.Spec{Total: 500, Count: 10, Min: 100}.Normalize()
	fmt.Println(err)
	// Output: split: total: 500 cents cannot give 10 packets of at least 100 cents
}

// A discount campaign's amounts: 100.00 over 25 discounts within [0.01,
// 10.00]. List 1 is one group of ten pairs, each pair summing to a
// constant of its band; the tail is two 1-cent amounts, one dealt last to
// each of two shards.
func ExampleDiscounts() {
	l, err := split.Discounts(split.DiscountSpec{Budget: 10000, Quota: 25, Max: 1000}, 7)
	if err != nil {
		fmt.Println(err)
		return
	}
	var sum int64
	for _, a := range l.All() {
		sum += a
	}
	fmt.Println("pairs:", len(l.Pairs), "rest:", len(l.Rest), "tail:", l.Tail, "sum:", sum)
	for _, q := range l.Deal(2, 7) {
		fmt.Println("queue of", len(q), "ends with", q[len(q)-1])
	}
	// Output:
	// pairs: 20 rest: 3 tail: [1 1] sum: 10000
	// queue of 13 ends with 1
	// queue of 12 ends with 1
}
