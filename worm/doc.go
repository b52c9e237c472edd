// Package worm ends a grantretry audit trail in write-once storage: it
// cuts the trail's hash chain into segments, uploads each to an S3 bucket
// with Object Lock in COMPLIANCE mode, follows each segment with a
// checkpoint, and verifies the store and the local files against each
// other (see docs/write-once.md).
//
// A Shipper reads a Source (the trail files, Files; or the fleet's trail,
// one stream per writer) off the request path, seals segments by size, age
// or Close, queues them on local disk and uploads them in order with
// backoff. FailClosed makes a Transport refuse calls once too much of the
// trail has waited too long for its anchor. Verify lists every version in
// the store and names the stream and seq of anything edited, removed,
// hidden or rewritten.
package worm
