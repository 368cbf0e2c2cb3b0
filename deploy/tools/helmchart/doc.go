// Package helmchart holds the tests of deploy/helm/parley that need a real
// process: the config a pod would get, rendered by the chart's init script
// from the chart's ConfigMap and Secret, starts a real parley node.
package helmchart
