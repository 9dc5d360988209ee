package hongbao_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/hongbao/hongbao"
)

// A discount campaign of three discounts of 1.00, one per user: a
// reservation held for a payment, repeated, confirmed; a second order of
// the same user over the limit; a cancelled reservation whose amount goes
// to the next payer.
func ExampleDiscounts_Reserve() {
	ctx := context.Background()
	client := exampleClient()
	defer client.Close()
	eng, err := hongbao.New(hongbao.Config{Redis: client})
	if err != nil {
		panic(err)
	}
	d, err := eng.Discounts().Create(ctx, hongbao.DiscountSpec{ID: "example-discount", Budget: 300, Quota: 3,
		Min: 100, Max: 100, PerUserCount: 1})
	if err != nil {
		panic(err)
	}
	reserve := func(user, order string, orderCents int64) {
		r, err := eng.Discounts().Reserve(ctx, d.ID, user, order, orderCents)
		if err != nil {
			panic(err)
		}
		fmt.Println("reserve", user, order, r.Outcome, hongbao.FormatCents(r.Cents))
	}
	then := func(op string, r hongbao.Reservation, err error) {
		if err != nil {
			panic(err)
		}
		fmt.Println(op, r.User, r.Order, r.State, hongbao.FormatCents(r.Cents))
	}
	reserve("alice", "o-1", 3520)
	reserve("alice", "o-1", 3520) // a retry: the same discount
	r, err := eng.Discounts().Confirm(ctx, d.ID, "alice", "o-1")
	then("confirm", r, err)
	reserve("alice", "o-2", 990)
	reserve("bob", "o-7", 50) // clipped to the order; the rest waits in compensation
	r, err = eng.Discounts().Cancel(ctx, d.ID, "bob", "o-7")
	then("cancel", r, err)
	_, err = eng.Discounts().Confirm(ctx, d.ID, "bob", "o-7")
	fmt.Println(errors.Is(err, hongbao.ErrReservationCancelled))
	st, _ := eng.Discounts().Status(ctx, d.ID)
	fmt.Println(hongbao.FormatCents(st.ConfirmedCents), "confirmed,", hongbao.FormatCents(st.RemainingCents), "left in", st.RemainingCount)
	// Output:
	// reserve alice o-1 reserved 1.00
	// reserve alice o-1 already 1.00
	// confirm alice o-1 confirmed 1.00
	// reserve alice o-2 limit 0.00
	// reserve bob o-7 reserved 0.50
	// cancel bob o-7 cancelled 0.50
	// true
	// 1.00 confirmed, 2.00 left in 2
}
