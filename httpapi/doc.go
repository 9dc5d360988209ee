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
//
// The same mux answers the Connect and gRPC procedures of
// proto/hongbao/v1 (rpc.go, rpc_grab.go, rpc_discount.go) and gRPC's
// health and reflection services. They pass the JSON routes' gates and
// call their operations; their errors come from the same error table,
// which gives each code its HTTP status and its gRPC code.
//
// The handlers call small interfaces declared in services.go (Grabber,
// Campaigns, Discounts, Settlement, Store), which a *hongbao.Engine and a
// *settle.Backlogs satisfy; the package holds no Redis client of its own.
//
// The same handler serves the operator console (/console/) and the play
// page (/play/{campaign}), from package web. The console's live view of a
// campaign (GET /v1/campaigns/{id}/events, Server-Sent Events) is read
// from Redis once a second per watched campaign and shared by every
// viewer; its outcome counts and amounts are this process's answers to
// grabs, counted on the grab path (live.go, livehub.go, console.go).
package httpapi
