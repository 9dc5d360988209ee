package luascript

// TopLevel returns the names src defines with top-level local statements,
// as the library checks them.
func TopLevel(src string) []string { return topLevel(src) }
