package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/hongbao/hongbao"
)

// The lists an operator pages through: the registered campaigns of each
// kind and the users blocked on one. Each takes ?offset= (default 0) and
// ?limit= (default and at most its page's maximum) and answers total, how
// many there are in all; the next page starts at offset + limit.

// maxBlockedListed bounds the users one GET .../blocked answers.
const maxBlockedListed = hongbao.MaxBlockedPage

// maxOffset bounds ?offset=: far beyond any list, and an int everywhere.
const maxOffset = 1 << 30

// page is an ?offset=&limit= of a list.
type page struct{ offset, limit int }

// pageOf reads ?offset= and ?limit= (1..most, default most).
func pageOf(r *http.Request, most int) (page, error) {
	q := r.URL.Query()
	p := page{limit: most}
	for _, f := range []struct {
		name     string
		to       *int
		min, max int
	}{{"offset", &p.offset, 0, maxOffset}, {"limit", &p.limit, 1, most}} {
		if !q.Has(f.name) {
			continue
		}
		v, err := strconv.Atoi(q.Get(f.name))
		if err != nil || v < f.min || v > f.max || len(q[f.name]) > 1 {
			return page{}, badRequest(CodeInvalidRequest, "%s: want one integer within %d and %d", f.name, f.min, f.max)
		}
		*f.to = v
	}
	return p, nil
}

// key names the page for the requests that share a reading.
func (p page) key(list string) string { return fmt.Sprintf("%s %d %d", list, p.offset, p.limit) }

// listed reads one page of a list, the requests for the same page that
// arrive while one reads Redis sharing its reading, and answers it.
func (s *Server) listed(w http.ResponseWriter, r *http.Request, list string, read func(context.Context, page) (any, error)) {
	p, err := pageOf(r, maxListed)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v, err, _ := s.lists.Do(p.key(list), func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 4*s.cfg.Timeout)
		defer cancel()
		return read(ctx, p)
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// discountListOut answers GET /v1/discounts.
type discountListOut struct {
	Discounts []discountStatusOut `json:"discounts"`
	Total     int                 `json:"total"`
	More      bool                `json:"more"`
}

// listDiscounts answers a page of the registered discount campaigns
// (created and not yet settled), by close time, with their status.
func (s *Server) listDiscounts(w http.ResponseWriter, r *http.Request, _ string) {
	s.listed(w, r, "discounts", func(ctx context.Context, p page) (any, error) {
		out := discountListOut{Discounts: []discountStatusOut{}}
		ids, total, err := s.cfg.Discounts.CampaignsPage(ctx, p.offset, p.limit)
		if err != nil {
			return out, err
		}
		out.Total, out.More = total, p.offset+len(ids) < total
		for _, id := range ids {
			st, err := s.cfg.Discounts.Status(ctx, id)
			if errors.Is(err, hongbao.ErrCampaignNotFound) {
				continue // still loading, or gone since the listing
			}
			if err != nil {
				return out, err
			}
			out.Discounts = append(out.Discounts, discountStatusJSON(st))
		}
		return out, nil
	})
}
