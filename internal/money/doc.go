// Package money is the one formatter of dollar figures: caps, costs and meter readings, in views, refusal
// sentences, ledger findings and log headers alike, so that no cap or cost is ever shown as zero or as a raw
// float. It formats; it neither parses nor rounds what is stored.
package money
