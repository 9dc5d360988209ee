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
