package history

import (
	"fmt"
	"sort"
)

// checkPackets is the set and bank check of one red packet campaign:
// what users were told against Redis's claims and the ledger's grants,
// and the sums. It adds each user's grant to paid.
func checkPackets(ops []Op, c Campaign, open map[string]bool, paid map[string]int64) []Anomaly {
	byUser, out := told(ops, c.ID)
	grants := map[string]Grant{}
	grantOf := map[int64]string{}
	var grantSum int64
	for _, g := range c.Grants {
		grantSum += g.Cents
		paid[g.User] += g.Cents
		if before, ok := grants[g.User]; ok {
			out = append(out, Anomaly{Kind: LedgerRedis, Key: c.ID + " " + g.User,
				Detail: fmt.Sprintf("paid packets %d and %d", before.Seq, g.Seq)})
		}
		grants[g.User] = g
		if other, ok := grantOf[g.Seq]; ok && other != g.User {
			out = append(out, Anomaly{Kind: PacketTwice, Key: fmt.Sprintf("%s/%d", c.ID, g.Seq), Detail: "paid to " + other + " and to " + g.User})
		}
		grantOf[g.Seq] = g.User
	}
	claimOf := map[int64]string{}
	for _, u := range sortedKeys(c.Claims) {
		p := c.Claims[u]
		if other, ok := claimOf[p.Seq]; ok {
			out = append(out, Anomaly{Kind: PacketTwice, Key: fmt.Sprintf("%s/%d", c.ID, p.Seq), Detail: "claimed by " + other + " and by " + u})
		}
		claimOf[p.Seq] = u
	}
	for _, u := range sortedKeys(byUser) {
		p := byUser[u]
		if h, ok := c.Claims[u]; !ok || h != p {
			out = append(out, Anomaly{Kind: NotHeld, Key: c.ID + " " + u,
				Detail: fmt.Sprintf("told of %d (%d cents); Redis holds %v (claimed: %v)", p.Seq, p.Cents, h, ok)})
		}
		if g, ok := grants[u]; (ok || c.Settled) && (g.Seq != p.Seq || g.Cents != p.Cents) {
			out = append(out, Anomaly{Kind: NotPaid, Key: c.ID + " " + u,
				Detail: fmt.Sprintf("told of %d (%d cents); the ledger paid %v", p.Seq, p.Cents, g)})
		}
	}
	out = append(out, untold(c, byUser, grants, open)...)
	return append(out, packetSums(c, grantSum)...)
}

// untold reports claims and grants of users nobody told of them (unless an
// unresolved Unknown call of the user may explain them), and grants that
// differ from the claims.
func untold(c Campaign, byUser map[string]Packet, grants map[string]Grant, open map[string]bool) []Anomaly {
	var out []Anomaly
	for _, u := range sortedKeys(c.Claims) {
		p := c.Claims[u]
		if _, ok := byUser[u]; !ok && !open[c.ID+" "+u] {
			out = append(out, Anomaly{Kind: Untold, Key: c.ID + " " + u, Detail: fmt.Sprintf("Redis holds %d (%d cents) for a user told of none", p.Seq, p.Cents)})
		}
		if g, ok := grants[u]; (ok || c.Settled) && (g.Seq != p.Seq || g.Cents != p.Cents) {
			out = append(out, Anomaly{Kind: LedgerRedis, Key: c.ID + " " + u, Detail: fmt.Sprintf("Redis holds %v, the ledger paid %v", p, g)})
		}
	}
	for _, u := range sortedKeys(grants) {
		g := grants[u]
		if _, ok := byUser[u]; !ok && !open[c.ID+" "+u] {
			out = append(out, Anomaly{Kind: Untold, Key: c.ID + " " + u, Detail: fmt.Sprintf("the ledger paid %d (%d cents) to a user told of none", g.Seq, g.Cents)})
		}
		if _, ok := c.Claims[u]; !ok {
			out = append(out, Anomaly{Kind: LedgerRedis, Key: c.ID + " " + u, Detail: fmt.Sprintf("the ledger paid %v, Redis holds no claim", g)})
		}
	}
	return out
}

// packetSums is the bank check of a campaign: funded is its total, and
// once settled funded = granted + refunded + quarantined.
func packetSums(c Campaign, grantSum int64) []Anomaly {
	var out []Anomaly
	if c.Funded != c.Total {
		out = append(out, Anomaly{Kind: Sum, Key: c.ID, Detail: fmt.Sprintf("funded %d cents, created with %d", c.Funded, c.Total)})
	}
	var claimSum int64
	for _, p := range c.Claims {
		claimSum += p.Cents
	}
	if claimSum > c.Total {
		out = append(out, Anomaly{Kind: Sum, Key: c.ID, Detail: fmt.Sprintf("claims hold %d cents of %d", claimSum, c.Total)})
	}
	if c.Settled && grantSum+c.Refunded+c.Quarantined != c.Funded {
		out = append(out, Anomaly{Kind: Sum, Key: c.ID, Detail: fmt.Sprintf("granted %d + refunded %d + quarantined %d = %d, funded %d",
			grantSum, c.Refunded, c.Quarantined, grantSum+c.Refunded+c.Quarantined, c.Funded)})
	}
	return out
}

// orderTold is what a history told of one order.
type orderTold struct {
	amount    int64 // order amount asked at reserve
	confirmed bool  // told confirmed (a confirm, or a cancel refused as confirmed)
	cents     int64 // the discount an answer named
	released  bool  // told cancelled or expired
}

func toldOrders(ops []Op, campaign string) map[string]*orderTold {
	out := map[string]*orderTold{}
	for _, op := range ops {
		if op.Campaign != campaign || (op.Kind != Reserve && op.Kind != Confirm && op.Kind != Cancel) {
			continue
		}
		k := op.User + " " + op.Order
		o := out[k]
		if o == nil {
			o = &orderTold{}
			out[k] = o
		}
		if op.Kind == Reserve && o.amount == 0 {
			o.amount = op.OrderCents
		}
		if op.Result != OK {
			continue
		}
		if op.Cents > 0 && o.cents == 0 {
			o.cents = op.Cents
		}
		switch {
		case op.Outcome == "confirmed":
			o.confirmed = true
		case op.Outcome == "cancelled" || op.Outcome == "expired":
			o.released = true
		}
	}
	return out
}

// checkDiscounts is the set and bank check of one discount campaign. It
// adds each confirmed discount to its user's paid.
func checkDiscounts(ops []Op, d DiscountCampaign, open map[string]bool, paid map[string]int64) []Anomaly {
	orders := toldOrders(ops, d.ID)
	var out []Anomaly
	byOrder := map[string]Discount{}
	seqs := map[int64]string{}
	var sum int64
	for _, x := range d.Confirmed {
		k := x.User + " " + x.Order
		sum += x.Cents
		paid[x.User] += x.Cents
		if _, ok := byOrder[k]; ok {
			out = append(out, Anomaly{Kind: DiscountTwice, Key: d.ID + " " + k, Detail: "the order is confirmed twice in the ledger"})
		}
		byOrder[k] = x
		if other, ok := seqs[x.Seq]; ok {
			out = append(out, Anomaly{Kind: DiscountTwice, Key: fmt.Sprintf("%s unit %d", d.ID, x.Seq), Detail: "confirmed for " + other + " and for " + k})
		}
		seqs[x.Seq] = k
		o := orders[k]
		switch {
		case o == nil || (!o.confirmed && !open[d.ID+" "+k]):
			out = append(out, Anomaly{Kind: DiscountUntold, Key: d.ID + " " + k, Detail: fmt.Sprintf("the ledger paid %d cents, nobody was told confirmed", x.Cents)})
		case o.released:
			out = append(out, Anomaly{Kind: DiscountUntold, Key: d.ID + " " + k, Detail: fmt.Sprintf("the ledger paid %d cents for an order told cancelled or expired", x.Cents)})
		case o.amount > 0 && x.Cents > o.amount:
			out = append(out, Anomaly{Kind: Limit, Key: d.ID + " " + k, Detail: fmt.Sprintf("discount %d above the order's %d", x.Cents, o.amount)})
		}
		if x.Cents < 1 || x.Cents > d.Max {
			out = append(out, Anomaly{Kind: Limit, Key: d.ID + " " + k, Detail: fmt.Sprintf("discount %d outside 1..max %d", x.Cents, d.Max)})
		}
	}
	for _, k := range sortedKeys(orders) {
		o := orders[k]
		if !o.confirmed || !d.Settled {
			continue
		}
		if x, ok := byOrder[k]; !ok || (o.cents > 0 && x.Cents != o.cents) {
			out = append(out, Anomaly{Kind: DiscountLost, Key: d.ID + " " + k, Detail: fmt.Sprintf("told confirmed (%d cents); the ledger holds %v", o.cents, x)})
		}
	}
	out = append(out, discountLimits(d, sum)...)
	return out
}

// discountLimits checks the budget, the quota, the per-user limits and the
// sums of a discount campaign's ledger.
func discountLimits(d DiscountCampaign, sum int64) []Anomaly {
	var out []Anomaly
	add := func(key, format string, args ...any) {
		out = append(out, Anomaly{Kind: Limit, Key: d.ID + key, Detail: fmt.Sprintf(format, args...)})
	}
	if n := int64(len(d.Confirmed)); n > d.Quota {
		add("", "%d discounts confirmed, quota %d", n, d.Quota)
	}
	if sum > d.Budget {
		add("", "%d cents confirmed, budget %d", sum, d.Budget)
	}
	count, cents := map[string]int64{}, map[string]int64{}
	for _, x := range d.Confirmed {
		count[x.User]++
		cents[x.User] += x.Cents
	}
	for _, u := range sortedKeys(count) {
		if d.PerUserCount > 0 && count[u] > d.PerUserCount {
			add(" "+u, "%d discounts, per-user limit %d", count[u], d.PerUserCount)
		}
		if d.PerUserAmount > 0 && cents[u] > d.PerUserAmount {
			add(" "+u, "%d cents, per-user limit %d", cents[u], d.PerUserAmount)
		}
	}
	if d.Funded != d.Budget {
		out = append(out, Anomaly{Kind: Sum, Key: d.ID, Detail: fmt.Sprintf("funded %d cents, budget %d", d.Funded, d.Budget)})
	}
	if d.Settled && sum+d.Refunded != d.Funded {
		out = append(out, Anomaly{Kind: Sum, Key: d.ID, Detail: fmt.Sprintf("confirmed %d + refunded %d = %d, funded %d", sum, d.Refunded, sum+d.Refunded, d.Funded)})
	}
	if d.Settled && d.RedisConfirmed >= 0 && (d.RedisConfirmed != int64(len(d.Confirmed)) || d.RedisSumConf != sum) {
		out = append(out, Anomaly{Kind: Sum, Key: d.ID, Detail: fmt.Sprintf("Redis confirmed %d (%d cents), the ledger %d (%d cents)",
			d.RedisConfirmed, d.RedisSumConf, len(d.Confirmed), sum)})
	}
	return out
}

// checkBalances compares every user's ledger balance with what the
// ledger's grants and discounts paid them.
func checkBalances(balances, paid map[string]int64) []Anomaly {
	var out []Anomaly
	users := map[string]bool{}
	for u := range balances {
		users[u] = true
	}
	for u := range paid {
		users[u] = true
	}
	for _, u := range sortedKeys(users) {
		b, ok := balances[u]
		if !ok || b != paid[u] {
			out = append(out, Anomaly{Kind: Balance, Key: u, Detail: fmt.Sprintf("balance %d (read: %v), paid %d", b, ok, paid[u])})
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
