// Package clienttest holds the tests of the Go client (module
// github.com/hongbao/hongbao/client) that need a real service: serve's
// handler on a real Redis with a SQLite ledger, behind a real listener
// with a fault hook. They live in the root module so that the client
// module requires nothing of it. The package has no code of its own.
package clienttest
