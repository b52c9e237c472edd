// Package funderapi is the client oapi-codegen generates from openapi.yaml,
// a small funder portal's API: the SDK shape a pipeline gets from a
// funder's OpenAPI document. Its generated file is not edited by hand.
package funderapi

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -config cfg.yaml openapi.yaml
