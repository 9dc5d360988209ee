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
	"sync"

	"go.yaml.in/yaml/v3"
)

// The flags every command has (newFlagSet declares them).
const (
	configFlag  = "config"
	versionFlag = "version"
)

// configUsage is the usage of --config.
const configUsage = "YAML file of flags, the one file every command of a deployment reads: each key a flag's name without dashes (listen: 127.0.0.1:8080), a list for a repeatable flag; a key at the top is read by every command that has the flag and ignored by the others, one under a command's section (serve:, settle:, reconcile: ...) by that command alone; the environment (HONGBAO_<NAME>) overrides it and the command line overrides both; it names secret files (admin-key-file: PATH) but never holds a secret"

// readConfig sets the flags of fs that neither the command line nor the
// environment set (skip) from the file --config names (or
// HONGBAO_CONFIG), when one is named.
func readConfig(fs *flag.FlagSet, skip map[string]bool) error {
	f := fs.Lookup(configFlag)
	if f == nil || f.Value.String() == "" {
		return nil
	}
	path := f.Value.String()
	data, err := os.ReadFile(path)
	if err != nil {
		return usageErrorf("--config: %v", err)
	}
	if err := applyConfig(fs, data, skip); err != nil {
		return usageErrorf("--config %s: %v", path, err)
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

// commandFlags are the flags of one command: the flag sets its
// parseFlags declares (bench has one per --mode).
type commandFlags []*flag.FlagSet

// lookup finds the flag name in any of c's flag sets, a repeatable one
// first (the shape a config file may give it).
func (c commandFlags) lookup(name string) *flag.Flag {
	var found *flag.Flag
	for _, fs := range c {
		if f := fs.Lookup(name); f != nil && (found == nil || isList(f)) {
			found = f
		}
	}
	return found
}

// flagVariants is a command whose flags depend on its command line (bench
// --mode): the command lines, each ending in -h, whose flag sets are all
// of its flags.
type flagVariants interface {
	flagVariants() [][]string
}

// everyCommandFlags is collectCommandFlags, collected once.
var everyCommandFlags = sync.OnceValue(collectCommandFlags)

// collectCommandFlags returns the flags of every command that reads
// --config, by the command's name. Each command's parseFlags declares its
// flags before it reads an argument, so given -h it declares them all and
// returns flag.ErrHelp; newFlagSet hands each flag set to IO.declared.
func collectCommandFlags() map[string]commandFlags {
	out := map[string]commandFlags{}
	for _, c := range commands {
		variants := [][]string{{"-h"}}
		var sets commandFlags
		env := &IO{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" },
			declared: func(fs *flag.FlagSet) { sets = append(sets, fs) }}
		if v, ok := c.new(env).(flagVariants); ok {
			variants = v.flagVariants()
		}
		for _, args := range variants {
			_ = c.new(env).parseFlags(args)
		}
		if sets.lookup(configFlag) != nil {
			out[c.name] = sets
		}
	}
	return out
}

// applyConfig sets the flags of fs named in the YAML document b, at its
// top and in the section of fs's command, except those in skip. Every key
// of the file is checked, whichever command reads it: a key at the top
// must be a flag of some command (the commands without it ignore it), a
// key in a command's section a flag of that command. A key no command
// knows, a value of the wrong shape and a secret written into the file
// are errors naming the key and its line; a value is never quoted, in
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
	all := everyCommandFlags()
	seen := map[string]bool{}
	var own *yaml.Node // this command's section
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		if sec, ok := all[k.Value]; ok && v.Kind == yaml.MappingNode {
			if k.Value == cmd {
				own = v
			} else if err := checkSection(k.Value, sec, v); err != nil {
				return err
			}
			continue
		}
		if err := applyConfigKey(fs, k, v, skip, seen, all); err != nil {
			return err
		}
	}
	if own == nil {
		return nil
	}
	for i := 0; i+1 < len(own.Content); i += 2 {
		k, v := own.Content[i], own.Content[i+1]
		if fs.Lookup(k.Value) == nil {
			// Another of this command's flag sets (bench's other modes)
			// has it, or it is refused.
			if err := checkSectionKey(cmd, all[cmd], k, v); err != nil {
				return err
			}
			continue
		}
		if err := applyConfigKey(fs, k, v, skip, seen, all); err != nil {
			return err
		}
	}
	return nil
}

// applyConfigKey checks the key k and its value v and, when it is a flag
// of fs that neither the command line nor the environment set, sets it. A
// key at the top that is no flag of fs is checked against the command
// that has it, and ignored.
func applyConfigKey(fs *flag.FlagSet, k, v *yaml.Node, skip, seen map[string]bool, all map[string]commandFlags) error {
	name := k.Value
	if err := reservedKey(name, k.Line); err != nil {
		return err
	}
	f := fs.Lookup(name)
	if f == nil {
		return checkOtherKey(k, v, all)
	}
	if seen[name] {
		return fmt.Errorf("line %d: %q is given twice (at the top and in a section, or twice in one)", k.Line, name)
	}
	seen[name] = true
	// A key the command line or the environment overrides is checked all
	// the same: the file is wrong whatever wins.
	if err := setFromNode(f, v, !skip[name]); err != nil {
		return fmt.Errorf("line %d: %s: %w", v.Line, name, err)
	}
	return nil
}

// reservedKey refuses the keys a config file cannot set: --config itself
// and --version.
func reservedKey(name string, line int) error {
	if name == configFlag || name == versionFlag {
		return fmt.Errorf("line %d: %q cannot be set in a config file", line, name)
	}
	return nil
}

// checkOtherKey checks a key at the top that the command reading the file
// lacks: it must be a flag of another command, with a value of the shape
// that flag takes; it is not set.
func checkOtherKey(k, v *yaml.Node, all map[string]commandFlags) error {
	var f *flag.Flag
	for _, name := range sortedNames(all) {
		if g := all[name].lookup(k.Value); g != nil && (f == nil || isList(g)) {
			f = g
		}
	}
	if f == nil {
		if err := secretKey(k.Value, k.Line, func(n string) bool { return anyCommandHas(all, n) }); err != nil {
			return err
		}
		return fmt.Errorf("line %d: unknown key %q: no hongbao command has a flag of that name", k.Line, k.Value)
	}
	if err := setFromNode(f, v, false); err != nil {
		return fmt.Errorf("line %d: %s: %w", v.Line, k.Value, err)
	}
	return nil
}

// checkSection checks the section of command cmd, whose flags are sec,
// for another command reading the file: every key a flag of cmd, with a
// value of the shape it takes. Nothing is set.
func checkSection(cmd string, sec commandFlags, v *yaml.Node) error {
	for i := 0; i+1 < len(v.Content); i += 2 {
		if err := checkSectionKey(cmd, sec, v.Content[i], v.Content[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// checkSectionKey checks the key k, in the section of command cmd (whose
// flags are sec), and its value v, without setting anything.
func checkSectionKey(cmd string, sec commandFlags, k, v *yaml.Node) error {
	if err := reservedKey(k.Value, k.Line); err != nil {
		return err
	}
	f := sec.lookup(k.Value)
	if f == nil {
		if err := secretKey(k.Value, k.Line, func(n string) bool { return sec.lookup(n) != nil }); err != nil {
			return err
		}
		return fmt.Errorf("line %d: unknown key %q under %s: not a flag of hongbao %s (a key at the top is read by every command that has the flag, one under %s: by %s alone)",
			k.Line, k.Value, cmd, cmd, cmd, cmd)
	}
	if err := setFromNode(f, v, false); err != nil {
		return fmt.Errorf("line %d: %s: %w", v.Line, k.Value, err)
	}
	return nil
}

// secretKey refuses the name of a secret whose file is a flag (has says
// which flags there are): the file holds the secret, the config names it.
func secretKey(name string, line int, has func(string) bool) error {
	if has(name + "-file") {
		return fmt.Errorf("line %d: %q would hold a secret: a config file names the secret's file, as %s-file", line, name, name)
	}
	return nil
}

// anyCommandHas reports whether a command of all has the flag name.
func anyCommandHas(all map[string]commandFlags, name string) bool {
	for _, c := range all {
		if c.lookup(name) != nil {
			return true
		}
	}
	return false
}

// sortedNames are the command names of all, sorted, so that what a key is
// checked against does not depend on map order.
func sortedNames(all map[string]commandFlags) []string {
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
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
