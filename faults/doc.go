// Package faults runs grantretry against faults injected over real TCP by
// an in-process Toxiproxy on loopback. It is a module of its own so that
// users of the core never download Toxiproxy, its logger and what they
// require; it holds tests only.
package faults
