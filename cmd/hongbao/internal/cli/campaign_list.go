package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/client"
)

// listOut is what list --json prints: the campaigns of each kind asked.
type listOut struct {
	Campaigns *[]client.CampaignStatus `json:"campaigns,omitempty"`
	Discounts *[]client.DiscountStatus `json:"discounts,omitempty"`
}

// runList reads every page of the lists --kind asks for (both by
// default) and prints them.
func (c *campaignCmd) runList(ctx context.Context) error {
	var out listOut
	if c.kind != kindDiscount {
		l, err := allPages(ctx, c.api.CampaignsPage, func(l *client.CampaignList) ([]client.CampaignStatus, bool) { return l.Campaigns, l.More },
			func(s client.CampaignStatus) string { return s.ID })
		if err != nil {
			return fmt.Errorf("list red packet campaigns: %w", err)
		}
		out.Campaigns = &l
	}
	if c.kind != kindRedPacket {
		l, err := allPages(ctx, c.api.DiscountsPage, func(l *client.DiscountList) ([]client.DiscountStatus, bool) { return l.Discounts, l.More },
			func(s client.DiscountStatus) string { return s.ID })
		if err != nil {
			return fmt.Errorf("list discount campaigns: %w", err)
		}
		out.Discounts = &l
	}
	if c.asJSON {
		return json.NewEncoder(c.env.Stdout).Encode(out)
	}
	c.printList(out)
	return nil
}

// allPages reads a list page after page, MaxListPage at a time, until the
// last; a campaign that moved between two pages is listed once.
func allPages[L, T any](ctx context.Context, page func(context.Context, client.Page) (*L, error),
	items func(*L) ([]T, bool), id func(T) string) ([]T, error) {
	out := []T{}
	seen := map[string]bool{}
	for p := (client.Page{Limit: client.MaxListPage}); ; p.Offset += p.Limit {
		l, err := page(ctx, p)
		if err != nil {
			return nil, err
		}
		got, more := items(l)
		for _, x := range got {
			if !seen[id(x)] {
				seen[id(x)] = true
				out = append(out, x)
			}
		}
		if !more {
			return out, nil
		}
	}
}

// printList writes the lists as one table.
func (c *campaignCmd) printList(out listOut) {
	tw := tabwriter.NewWriter(c.env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tID\tSTATE\tPAUSED\tLEFT\tAMOUNT LEFT\tGIVEN\tCLOSES")
	n := 0
	if out.Campaigns != nil {
		for _, s := range *out.Campaigns {
			fmt.Fprintf(tw, "red packet\t%s\t%s\t%s\t%d of %d\t%s of %s\t%d granted, %s\t%s\n", s.ID, stateText(s.State, s.CloseReason),
				yesNo(s.Paused), s.RemainingCount, s.Count, hongbao.FormatCents(s.RemainingCents), hongbao.FormatCents(s.TotalCents),
				s.GrantedCount, hongbao.FormatCents(s.GrantedCents), s.ClosesAt.UTC().Format(time.RFC3339))
		}
		n += len(*out.Campaigns)
	}
	if out.Discounts != nil {
		for _, s := range *out.Discounts {
			fmt.Fprintf(tw, "discount\t%s\t%s\t%s\t%d of %d\t%s of %s\t%d confirmed, %s; %d reserved\t%s\n", s.ID, stateText(s.State, s.CloseReason),
				yesNo(s.Paused), s.RemainingCount, s.Quota, hongbao.FormatCents(s.RemainingCents), hongbao.FormatCents(s.BudgetCents),
				s.ConfirmedCount, hongbao.FormatCents(s.ConfirmedCents), s.ReservedCount, s.ClosesAt.UTC().Format(time.RFC3339))
		}
		n += len(*out.Discounts)
	}
	_ = tw.Flush()
	fmt.Fprintf(c.env.Stdout, "%s not yet settled\n", plural(n, "campaign"))
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
