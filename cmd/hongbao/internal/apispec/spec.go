// Package apispec is the API contract of the service as one Go table: the
// routes, their parameters, bodies and answers (routes.go), the schemas
// (schemas.go), and the error answers the routes share by reference
// (components/responses). Document builds httpapi/openapi.json from it
// (make openapi); a test fails when the checked-in document is not what
// Document builds. The outcome enums come from hongbao.OutcomeTable, so a
// new outcome reaches the contract without an edit here.
package apispec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/hongbao/hongbao"
)

type (
	obj = map[string]any
	arr = []any
)

// route is one operation of the API.
type route struct {
	Method, Path string
	// ID is its operationId.
	ID, Summary, Description string
	// Security lists the credentials it takes (an empty list: none).
	Security arr
	Params   arr
	Body     obj
	// OK are its answers that are no error, by status.
	OK map[string]obj
	// Errors name its error answers in errorResponses.
	Errors []string
	// DemoOnly marks a route that exists only in the demo mode
	// (x-demo-only).
	DemoOnly bool
}

// errorResponse is an error answer that routes refer to: its status and
// the response object.
type errorResponse struct {
	Status   string
	Response obj
}

// ref is a JSON reference to a component.
func ref(kind, name string) obj { return obj{"$ref": "#/components/" + kind + "/" + name} }

// liveExtras are the live counts of refusals that never reached the
// engine, after the grab outcomes (httpapi's liveOutcome).
var liveExtras = []string{"rate_limited", "busy", "error"}

// Document builds the OpenAPI 3 document, as httpapi serves it.
func Document() ([]byte, error) {
	paths := obj{}
	for _, r := range routes {
		op := obj{"operationId": r.ID, "summary": r.Summary, "security": r.Security}
		if r.Description != "" {
			op["description"] = r.Description
		}
		if r.Params != nil {
			op["parameters"] = r.Params
		}
		if r.Body != nil {
			op["requestBody"] = r.Body
		}
		if r.DemoOnly {
			op["x-demo-only"] = true
		}
		resp := obj{}
		for st, o := range r.OK {
			resp[st] = o
		}
		for _, name := range r.Errors {
			e, ok := errorResponses[name]
			if !ok {
				return nil, fmt.Errorf("apispec: %s %s answers %s, which errorResponses lacks", r.Method, r.Path, name)
			}
			if _, dup := resp[e.Status]; dup {
				return nil, fmt.Errorf("apispec: %s %s answers status %s twice", r.Method, r.Path, e.Status)
			}
			resp[e.Status] = ref("responses", name)
		}
		op["responses"] = resp
		item, _ := paths[r.Path].(obj)
		if item == nil {
			item = obj{}
			paths[r.Path] = item
		}
		if _, dup := item[r.Method]; dup {
			return nil, fmt.Errorf("apispec: %s %s twice", r.Method, r.Path)
		}
		item[r.Method] = op
	}
	responses := obj{}
	for name, e := range errorResponses {
		responses[name] = e.Response
	}
	doc := obj{
		"openapi": "3.0.3",
		"info":    info,
		"paths":   paths,
		"components": obj{
			"securitySchemes": securitySchemes,
			"parameters":      parameters,
			"responses":       responses,
			"schemas":         withOutcomes(),
		},
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// withOutcomes is schemas with the outcomes of hongbao.OutcomeTable: the
// enums of the grab's and the reservation's answers, and the console's
// live counts of grab outcomes.
func withOutcomes() obj {
	var grab, reserve, labels []any
	for _, r := range hongbao.OutcomeTable() {
		switch r.Call {
		case hongbao.CallGrab:
			grab, labels = append(grab, r.Word), append(labels, r.Label)
		case hongbao.CallReserve:
			reserve = append(reserve, r.Word)
		}
	}
	out := obj{}
	for name, s := range schemas {
		out[name] = s
	}
	out["Grab"] = withEnum(schemas["Grab"], grab)
	out["Reservation"] = withEnum(schemas["Reservation"], reserve)
	out["GrabBatchResult"] = withEnum(schemas["GrabBatchResult"], grab)

	live := clone(schemas["LiveView"])
	counts := live["properties"].(obj)["live"].(obj)["properties"].(obj)["outcomes"].(obj)
	props := counts["properties"].(obj)
	var required []any
	for _, l := range labels {
		props[l.(string)] = obj{"type": "integer"}
		required = append(required, l)
	}
	for _, l := range liveExtras {
		required = append(required, l)
	}
	if !slices.Equal(counts["required"].(arr), toArr(liveExtras)) {
		panic("apispec: LiveView's outcome counts list other refusals than liveExtras")
	}
	counts["required"] = required
	out["LiveView"] = live
	return out
}

// withEnum is schema s with its property outcome's enum set to words.
func withEnum(s obj, words []any) obj {
	c := clone(s)
	c["properties"].(obj)["outcome"].(obj)["enum"] = words
	return c
}

// clone copies a JSON value deeply.
func clone(s obj) obj {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	var out obj
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

func toArr(s []string) arr {
	out := arr{}
	for _, v := range s {
		out = append(out, v)
	}
	return out
}
