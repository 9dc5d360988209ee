package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	neturl "net/url"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// declareConfig adds --config to fs, for the long-running commands (serve,
// settle) that deployments start from a file.
func declareConfig(fs *flag.FlagSet, path *string) {
	fs.StringVar(path, "config", "", "YAML file of flags: each key a flag's name without dashes (listen: 127.0.0.1:8080), a list for a repeatable flag; the environment (HONGBAO_<NAME>) overrides it and the command line overrides both; it names secret files (admin-key-file: PATH) but never holds a secret")
}

// parseFlagsConfig is parseFlags, then the flags that neither the command
// line nor the environment set are taken from the file *path (--config or
// HONGBAO_CONFIG), when one is named. The command keeps fs.
func (b *base) parseFlagsConfig(fs *flag.FlagSet, args []string, path *string) error {
	b.flags = fs
	env := b.env
	if err := parseFlags(fs, env, args); err != nil {
		return err
	}
	if *path == "" {
		return nil
	}
	data, err := os.ReadFile(*path)
	if err != nil {
		return usageErrorf("--config: %v", err)
	}
	if err := applyConfig(fs, data, setByUser(fs, env)); err != nil {
		return usageErrorf("--config %s: %v", *path, err)
	}
	return nil
}

// setByUser returns the flags of fs given on the command line or by an
// environment variable: the file does not override them.
func setByUser(fs *flag.FlagSet, env *IO) map[string]bool {
	set := given(fs)
	fs.VisitAll(func(f *flag.Flag) {
		if env.Getenv(envName(f.Name)) != "" {
			set[f.Name] = true
		}
	})
	return set
}

// envName is the environment variable of the flag name.
func envName(name string) string {
	return "HONGBAO_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// configSections are the commands that read --config. One file serves
// them all: a key at the top sets the flag of that name of every command
// reading the file (so it must be a flag of each), a key under a section
// (serve:, settle:) only that command's.
var configSections = []string{"serve", "settle"}

// applyConfig sets the flags of fs named in the YAML document b, at its
// top and in the section of fs's command, except those in skip. A key that
// is not a flag, a value of the wrong shape and a secret written into the
// file are errors naming the key and its line; a value is never quoted, in
// case it is a secret after all.
func applyConfig(fs *flag.FlagSet, b []byte, skip map[string]bool) error {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty file sets nothing
		}
		return err
	}
	if len(doc.Content) == 0 {
		return nil
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: the file must be a mapping of flag names to values", top.Line)
	}
	cmd := strings.TrimPrefix(fs.Name(), "hongbao ")
	seen := map[string]bool{}
	var own *yaml.Node // this command's section
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		if slices.Contains(configSections, k.Value) && v.Kind == yaml.MappingNode {
			if k.Value == cmd {
				own = v
			}
			continue
		}
		if err := applyConfigKey(fs, k, v, skip, seen); err != nil {
			return err
		}
	}
	if own == nil {
		return nil
	}
	for i := 0; i+1 < len(own.Content); i += 2 {
		if err := applyConfigKey(fs, own.Content[i], own.Content[i+1], skip, seen); err != nil {
			return err
		}
	}
	return nil
}

// applyConfigKey checks the key k and its value v and, unless the command
// line or the environment set the flag, sets it.
func applyConfigKey(fs *flag.FlagSet, k, v *yaml.Node, skip, seen map[string]bool) error {
	name := k.Value
	if err := checkConfigKey(fs, name, k.Line, seen); err != nil {
		return err
	}
	seen[name] = true
	// A key the command line or the environment overrides is checked all
	// the same: the file is wrong whatever wins.
	if err := setFromNode(fs.Lookup(name), v, !skip[name]); err != nil {
		return fmt.Errorf("line %d: %s: %w", v.Line, name, err)
	}
	return nil
}

// checkConfigKey refuses a key that is no flag of fs (a secret's own name
// included, with the hint of its file flag), --config itself, and a key
// given twice.
func checkConfigKey(fs *flag.FlagSet, name string, line int, seen map[string]bool) error {
	switch {
	case seen[name]:
		return fmt.Errorf("line %d: %q is given twice (at the top and in a section, or twice in one)", line, name)
	case name == "config":
		return fmt.Errorf("line %d: %q cannot be set in a config file", line, name)
	case fs.Lookup(name) != nil:
		return nil
	case fs.Lookup(name+"-file") != nil:
		return fmt.Errorf("line %d: %q would hold a secret: a config file names the secret's file, as %s-file", line, name, name)
	}
	return fmt.Errorf("line %d: unknown key %q (not a flag of %s; a key at the top is read by serve and settle alike, one of a single command goes under serve: or settle:)", line, name, fs.Name())
}

// setFromNode checks v and, when set, sets f from it: from a scalar, or a
// repeatable flag from a list of scalars, as its command-line flag would be.
func setFromNode(f *flag.Flag, v *yaml.Node, set bool) error {
	var vals []*yaml.Node
	switch {
	case v.Kind == yaml.ScalarNode && v.Tag != "!!null":
		vals = []*yaml.Node{v}
	case v.Kind == yaml.SequenceNode && isList(f):
		vals = v.Content
	case v.Kind == yaml.SequenceNode:
		return errors.New("takes one value, not a list")
	default:
		return errors.New("needs a value")
	}
	for _, s := range vals {
		if s.Kind != yaml.ScalarNode || s.Tag == "!!null" {
			return errors.New("a list of single values is expected")
		}
		if err := refuseSecret(f.Name, s.Value); err != nil {
			return err
		}
		if !set {
			continue
		}
		if err := f.Value.Set(s.Value); err != nil {
			return fmt.Errorf("not a valid value for --%s", f.Name)
		}
	}
	return nil
}

// isList reports whether f may be repeated.
func isList(f *flag.Flag) bool {
	_, ok := f.Value.(*fileList)
	return ok
}

// refuseSecret refuses a Redis URL, a ledger DSN or a webhook URL with a
// password in it: a config file is read by more people and tools than a
// secret file.
func refuseSecret(name, v string) error {
	if name != "redis" && name != "ledger" && name != "webhook" {
		return nil
	}
	if name == "redis" && !strings.Contains(v, "://") {
		v = "redis://" + v // as dialRedis reads it
	}
	if u, err := neturl.Parse(v); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			return errors.New("the URL holds a password: keep it out of the config file (Redis: redis-password-file; PostgreSQL: passfile=FILE in the URL)")
		}
	}
	if name == "ledger" && (strings.Contains(strings.ToLower(v), "password=")) {
		return errors.New("the DSN holds a password: keep it out of the config file (passfile=FILE in the DSN)")
	}
	return nil
}
