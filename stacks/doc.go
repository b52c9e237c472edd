// Package stacks runs grantretry inside the client stacks pipelines build
// on (golang.org/x/oauth2 among them), as a user would wire them. It is a
// module of its own so that users of the core never download those stacks;
// it holds tests only.
package stacks
