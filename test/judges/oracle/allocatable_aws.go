//go:build veneer_aws

package main

// The AWS provider's allocatable, by its own code: each case's instance type (as DescribeInstanceTypes
// describes it) and EC2NodeClass kubelet settings go through instancetype.NewInstanceType, and the
// core's InstanceType.Allocatable gives what scheduling compares the pods' requests with.
// Request: {"allocatable": {"cases": [{"vcpus", "memoryMiB", "arch", "maxENIs", "ipv4PerENI",
// "amiFamily", "maxPods", "podsPerCore", "kubeReserved", "systemReserved", "evictionHard",
// "vmMemoryOverheadPercent", "reservedENIs"}]}}; answer: {"allocatable": [{"cpu" (millicores),
// "memory" (bytes), "pods"}]}.

import (
	"context"
	"encoding/json"
	"time"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/samber/lo"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	"github.com/aws/karpenter-provider-aws/pkg/operator/options"
	"github.com/aws/karpenter-provider-aws/pkg/providers/instancetype"
)

type allocatableCase struct {
	VCPUs                   int32             `json:"vcpus"`
	MemoryMiB               int64             `json:"memoryMiB"`
	Arch                    string            `json:"arch"`
	MaxENIs                 int32             `json:"maxENIs"`
	IPv4PerENI              int32             `json:"ipv4PerENI"`
	AMIFamily               string            `json:"amiFamily"`
	MaxPods                 *int32            `json:"maxPods"`
	PodsPerCore             *int32            `json:"podsPerCore"`
	KubeReserved            map[string]string `json:"kubeReserved"`
	SystemReserved          map[string]string `json:"systemReserved"`
	EvictionHard            map[string]string `json:"evictionHard"`
	VMMemoryOverheadPercent float64           `json:"vmMemoryOverheadPercent"`
	ReservedENIs            int               `json:"reservedENIs"`
}

type allocatableOut struct {
	CPU    int64 `json:"cpu"`
	Memory int64 `json:"memory"`
	Pods   int64 `json:"pods"`
	// The parts, for reading a disagreement: capacity and each overhead's memory, in bytes.
	Parts map[string]int64 `json:"parts"`
	// Capacity (CPU, memory, pods) and the overhead's total (CPU, memory) as quantities: a judge's
	// instance type made of them has the provider's allocatable.
	Capacity map[string]string `json:"capacity"`
	Overhead map[string]string `json:"overhead"`
}

func init() {
	allocatableJudge = func(ctx context.Context, raw json.RawMessage) (any, error) {
		var req struct {
			Cases []allocatableCase `json:"cases"`
		}
		if err := json.Unmarshal(raw, &req); err != nil {
			return nil, badRequest{err}
		}
		out := make([]allocatableOut, len(req.Cases))
		for i, c := range req.Cases {
			out[i] = allocatableOf(ctx, c)
		}
		return map[string]any{"allocatable": out}, nil
	}
}

func allocatableOf(ctx context.Context, c allocatableCase) allocatableOut {
	ctx = options.ToContext(ctx, &options.Options{ClusterName: "test-cluster", ClusterEndpoint: "https://test-cluster",
		VMMemoryOverheadPercent: c.VMMemoryOverheadPercent, ReservedENIs: c.ReservedENIs,
		AMIRefreshInterval: time.Minute, SubnetRefreshInterval: time.Minute})
	info := ec2types.InstanceTypeInfo{
		InstanceType:          ec2types.InstanceType("x1.large"),
		SupportedUsageClasses: []ec2types.UsageClassType{ec2types.UsageClassTypeOnDemand, ec2types.UsageClassTypeSpot},
		VCpuInfo:              &ec2types.VCpuInfo{DefaultVCpus: lo.ToPtr(c.VCPUs)},
		MemoryInfo:            &ec2types.MemoryInfo{SizeInMiB: lo.ToPtr(c.MemoryMiB)},
		ProcessorInfo:         &ec2types.ProcessorInfo{SupportedArchitectures: []ec2types.ArchitectureType{ec2types.ArchitectureType(c.Arch)}},
		NetworkInfo: &ec2types.NetworkInfo{
			DefaultNetworkCardIndex:   lo.ToPtr[int32](0),
			NetworkCards:              []ec2types.NetworkCardInfo{{MaximumNetworkInterfaces: lo.ToPtr(c.MaxENIs)}},
			MaximumNetworkInterfaces:  lo.ToPtr(c.MaxENIs),
			Ipv4AddressesPerInterface: lo.ToPtr(c.IPv4PerENI),
		},
		Hypervisor:        ec2types.InstanceTypeHypervisorNitro,
		BareMetal:         lo.ToPtr(false),
		CurrentGeneration: lo.ToPtr(true),
	}
	it := instancetype.NewInstanceType(ctx, info, "us-east-1", []string{"us-east-1a"},
		[]v1.ZoneInfo{{Zone: "us-east-1a", ZoneID: "use1-az1"}}, nil, nil, nil,
		c.MaxPods, c.PodsPerCore, c.KubeReserved, c.SystemReserved, c.EvictionHard, nil, c.AMIFamily, nil)
	a := it.Allocatable()
	return allocatableOut{
		CPU:    lo.ToPtr(a[corev1.ResourceCPU]).MilliValue(),
		Memory: lo.ToPtr(a[corev1.ResourceMemory]).Value(),
		Pods:   lo.ToPtr(a[corev1.ResourcePods]).Value(),
		Parts: map[string]int64{
			"capacity":       lo.ToPtr(it.Capacity[corev1.ResourceMemory]).Value(),
			"kubeReserved":   lo.ToPtr(it.Overhead.KubeReserved[corev1.ResourceMemory]).Value(),
			"systemReserved": lo.ToPtr(it.Overhead.SystemReserved[corev1.ResourceMemory]).Value(),
			"eviction":       lo.ToPtr(it.Overhead.EvictionThreshold[corev1.ResourceMemory]).Value(),
		},
		Capacity: quantities(it.Capacity, corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods),
		Overhead: quantities(it.Overhead.Total(), corev1.ResourceCPU, corev1.ResourceMemory),
	}
}

func quantities(list corev1.ResourceList, names ...corev1.ResourceName) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		if q, ok := list[n]; ok {
			out[string(n)] = q.String()
		}
	}
	return out
}
