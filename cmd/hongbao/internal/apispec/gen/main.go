// Command gen writes the API contract, apispec.Document, to the file its
// -o flag names (make openapi: httpapi/openapi.json).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/hongbao/hongbao/cmd/hongbao/internal/apispec"
)

func main() {
	out := flag.String("o", "httpapi/openapi.json", "the file to write")
	flag.Parse()
	doc, err := apispec.Document()
	if err == nil {
		err = os.WriteFile(*out, doc, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
