// Package httpapi is the HTTP service of hongbao: the /v1 JSON API,
// authentication, limits, metrics and the mapping of errors to HTTP
// statuses. It is the only package that knows about HTTP status codes.
//
// Users are authenticated with HS256 JWTs signed by the platform (the
// user id is the token's sub and nothing else); operators with admin bearer
// keys. Every error answers {"error":{"code":"...","message":"..."}} with a
// stable code; internal error text is logged, never sent.
//
// The routes are listed in openapi.json, served at /openapi.json.
package httpapi
