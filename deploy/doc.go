// Package deploy holds the tests of the deployment files beside it: the
// container image (docker/), the compose file (compose/), the Helm chart
// (kubernetes/) and the sample config file (hongbao.yaml). It is a module of
// its own so that the compose, Helm and Kubernetes libraries these tests
// load stay out of the library's go.mod.
package deploy
