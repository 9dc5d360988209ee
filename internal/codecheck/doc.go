// Package codecheck holds tests that check the module's source as a whole:
// rules of the style guide that a compiler or vet does not check. It has
// no code of its own.
package codecheck
