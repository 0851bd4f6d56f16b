// This file is NOT part of the judge's package main. The build recipe (scripts/builds/40-karpenter.sh)
// adds it, with `go build -overlay`, to Karpenter's own package sigs.k8s.io/karpenter/pkg/controllers/disruption
// for the judge's build only (in a byte-for-byte copy of the module: the go command refuses an overlay
// beneath GOMODCACHE); every file of Karpenter's stays as the module has it. It exports the
// unexported things the consolidation judge (consolidate.go) calls, and nothing else: no rule of
// Karpenter's is copied here. Its source is part of the judge's source hash: an edit rebuilds the judge.

package disruption

import (
	"context"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/events"
)

// JudgeComputeConsolidation is Karpenter's consolidation (as MakeConsolidation builds it for the
// single- and multi-node methods) asked computeConsolidation for exactly these candidates.
func JudgeComputeConsolidation(ctx context.Context, clk clock.Clock, cluster *state.Cluster, kubeClient client.Client,
	provisioner *provisioning.Provisioner, cloudProvider cloudprovider.CloudProvider, recorder events.Recorder, queue *Queue,
	candidates ...*Candidate,
) (Command, error) {
	c := MakeConsolidation(clk, cluster, kubeClient, provisioner, cloudProvider, recorder, queue)
	return c.computeConsolidation(ctx, candidates...)
}

// JudgeCandidatePrice is sumCandidatePrices: the price computeConsolidation compares replacements with.
func JudgeCandidatePrice(candidates ...*Candidate) float64 {
	return sumCandidatePrices(candidates)
}

// JudgeFilterOutSameInstanceType is filterOutSameInstanceType: what MultiNodeConsolidation
// (firstNConsolidationOption) does with the replacement computeConsolidation returns for several
// candidates. Its signature is the same in v1.14.3 and v1.15.0.
func JudgeFilterOutSameInstanceType(replacement *Replacement, candidates []*Candidate) (*Replacement, error) {
	return filterOutSameInstanceType(replacement, candidates)
}
