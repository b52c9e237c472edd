// Package wormtest checks the fleet's trail shipped to write-once storage
// by the worm module, and verified there. It is a module of its own, so
// that the fleet's module requires neither the worm module nor the AWS
// SDK: a program that uses the fleet builds without them.
package wormtest
