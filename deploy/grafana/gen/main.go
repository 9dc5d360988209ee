// Command gen writes hongbao's Grafana dashboard, built with the Grafana
// foundation SDK, as JSON: to the file named by -o, else to standard
// output. `make dashboard` runs it to refresh deploy/grafana/hongbao.json.
//
// It is a module of its own so that the SDK stays out of the library's
// dependencies.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	out := flag.String("o", "", "write the dashboard to this file (default: standard output)")
	flag.Parse()
	b, err := Render()
	if err == nil {
		if *out == "" {
			_, err = os.Stdout.Write(b)
		} else {
			err = os.WriteFile(*out, b, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
