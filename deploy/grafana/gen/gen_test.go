package main

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// TestCheckedInIsGenerated: the dashboard in the repository is what the
// generator makes, so that an edit of the Go is never lost to a stale
// file, nor a hand edit of the JSON to the next `make dashboard`.
func TestCheckedInIsGenerated(t *testing.T) {
	want, err := Render()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../hongbao.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("deploy/grafana/hongbao.json differs from the generator's output: run `make dashboard` and commit it")
	}
}

// TestPanels checks what Grafana needs of each panel: a unique id, a
// title, the datasource variable, and queries with distinct refIds.
func TestPanels(t *testing.T) {
	b, err := Render()
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID        string `json:"uid"`
		Templating struct {
			List []struct{ Name, Type string } `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID         int    `json:"id"`
			Type       string `json:"type"`
			Title      string `json:"title"`
			Datasource *struct{ Type, UID string }
			Targets    []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID != uid || len(d.Templating.List) != 1 || d.Templating.List[0].Name != "datasource" || d.Templating.List[0].Type != "datasource" {
		t.Fatalf("uid %q, variables %+v", d.UID, d.Templating.List)
	}
	ids, graphs := map[int]bool{}, 0
	for _, p := range d.Panels {
		if p.Title == "" || ids[p.ID] {
			t.Fatalf("panel %d %q: no title, or its id twice", p.ID, p.Title)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		graphs++
		if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Fatalf("panel %q: datasource %+v, %d queries", p.Title, p.Datasource, len(p.Targets))
		}
		refs := map[string]bool{}
		for _, q := range p.Targets {
			if q.Expr == "" || refs[q.RefID] {
				t.Fatalf("panel %q: an empty query, or refId %q twice", p.Title, q.RefID)
			}
			refs[q.RefID] = true
		}
	}
	if graphs < 15 {
		t.Fatalf("%d panels", graphs)
	}
}
