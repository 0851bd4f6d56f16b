// aws-instance-keys prints which label keys the AWS cloud provider (aws/karpenter-provider-aws)
// defines in an instance type's requirements and in its offerings' requirements. Karpenter's
// NodeOverlay controller compares an overlay only with those (plus karpenter.sh/nodepool and the
// NodePool's template labels), so every other node label is undefined for it.
//
// Nothing here re-implements the provider: the instance types come from its own
// instancetype.DefaultProvider (UpdateInstanceTypes, UpdateInstanceTypeOfferings, then List,
// which runs DefaultResolver.Resolve -> NewInstanceType -> computeRequirements and
// offering.DefaultProvider.InjectOfferings with the base, reserved-capacity and placement-group
// resolvers). What this program supplies are inputs: a few ec2types.InstanceTypeInfo samples,
// the zones they are offered in, EC2NodeClasses (status as the nodeclass controller would have
// written it) and a placement group, served by a stub that answers only the three EC2 calls
// those code paths make.
//
// Version: built in the Karpenter v1.14.3 module (kit/karpenter-build/v1.14.3) beside the judge and
// the AWS controller of the same release, github.com/aws/karpenter-provider-aws v1.14.3 with
// sigs.k8s.io/karpenter v1.14.3: the keys are those of the very controller the AWS kit runs.
//
// Output (stdout, one JSON object):
//
//	{"version": "<aws provider version>", "karpenterVersion": "<core version>",
//	 "instanceTypeKeys": [...], "offeringKeys": [...],
//	 "instanceTypeKeysNotAlways": [...], "offeringKeysNotAlways": [...],
//	 "kwok": {"instanceTypeKeys": [...], "offeringKeys": [...]}}
//
// The first two key lists are sorted unions over every sample and node class; the "NotAlways"
// lists name the keys of those unions that some instance type (or offering) lacks. "kwok" is
// the same for the KWOK provider of the core module, from its own ConstructInstanceTypes.
// With -dump, every requirement is printed to stderr as well.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/go-logr/logr"
	"github.com/patrickmn/go-cache"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	kwok "sigs.k8s.io/karpenter/kwok/cloudprovider"
	kwokoptions "sigs.k8s.io/karpenter/kwok/options"
	coreoptions "sigs.k8s.io/karpenter/pkg/operator/options"

	v1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	sdk "github.com/aws/karpenter-provider-aws/pkg/aws"
	awscache "github.com/aws/karpenter-provider-aws/pkg/cache"
	"github.com/aws/karpenter-provider-aws/pkg/operator/options"
	"github.com/aws/karpenter-provider-aws/pkg/providers/arczonalshift"
	"github.com/aws/karpenter-provider-aws/pkg/providers/capacityreservation"
	"github.com/aws/karpenter-provider-aws/pkg/providers/instancetype"
	"github.com/aws/karpenter-provider-aws/pkg/providers/placementgroup"
	"github.com/aws/karpenter-provider-aws/pkg/providers/pricing"
)

const region = "us-west-2"

var zones = []v1.Subnet{
	{ID: "subnet-a", Zone: "us-west-2a", ZoneID: "usw2-az1"},
	{ID: "subnet-b", Zone: "us-west-2b", ZoneID: "usw2-az2"},
	{ID: "subnet-c", Zone: "us-west-2c", ZoneID: "usw2-az3"},
}

// network builds the NetworkInfo that computeCapacity (ENI-limited pods) and the EFA resource read.
func network(enis, ipsPerENI, efas int32, cards int32, encryptionInTransit bool) *ec2types.NetworkInfo {
	ni := &ec2types.NetworkInfo{
		MaximumNetworkInterfaces:     aws.Int32(enis),
		Ipv4AddressesPerInterface:    aws.Int32(ipsPerENI),
		EncryptionInTransitSupported: aws.Bool(encryptionInTransit),
		DefaultNetworkCardIndex:      aws.Int32(0),
	}
	for i := range cards {
		ni.NetworkCards = append(ni.NetworkCards, ec2types.NetworkCardInfo{NetworkCardIndex: aws.Int32(i), MaximumNetworkInterfaces: aws.Int32(enis / cards)})
	}
	if efas > 0 {
		ni.EfaSupported = aws.Bool(true)
		ni.EfaInfo = &ec2types.EfaInfo{MaximumEfaInterfaces: aws.Int32(efas)}
	}
	return ni
}

func ebs(maxMbps int32) *ec2types.EbsInfo {
	return &ec2types.EbsInfo{
		EbsOptimizedSupport: ec2types.EbsOptimizedSupportDefault,
		EbsOptimizedInfo:    &ec2types.EbsOptimizedInfo{BaselineBandwidthInMbps: aws.Int32(maxMbps / 4), MaximumBandwidthInMbps: aws.Int32(maxMbps)},
		NvmeSupport:         ec2types.EbsNvmeSupportRequired,
	}
}

func processor(manufacturer string, arch ec2types.ArchitectureType, ghz float64) *ec2types.ProcessorInfo {
	return &ec2types.ProcessorInfo{Manufacturer: aws.String(manufacturer), SupportedArchitectures: []ec2types.ArchitectureType{arch}, SustainedClockSpeedInGhz: aws.Float64(ghz)}
}

var (
	allStrategies = &ec2types.PlacementGroupInfo{SupportedStrategies: []ec2types.PlacementGroupStrategy{"cluster", "partition", "spread"}}
	usage         = []ec2types.UsageClassType{ec2types.UsageClassTypeOnDemand, ec2types.UsageClassTypeSpot}
	hvm           = []ec2types.VirtualizationType{ec2types.VirtualizationTypeHvm}
)

// samples: values as DescribeInstanceTypes reports them (trimmed to the fields the provider reads).
var samples = []ec2types.InstanceTypeInfo{
	{ // plain x86
		InstanceType: "m5.xlarge", SupportedUsageClasses: usage, SupportedVirtualizationTypes: hvm, Hypervisor: "nitro",
		BurstablePerformanceSupported: aws.Bool(false), BareMetal: aws.Bool(false),
		ProcessorInfo: processor("Intel", "x86_64", 3.1), VCpuInfo: &ec2types.VCpuInfo{DefaultVCpus: aws.Int32(4), DefaultCores: aws.Int32(2)},
		MemoryInfo: &ec2types.MemoryInfo{SizeInMiB: aws.Int64(16384)}, EbsInfo: ebs(4750),
		NetworkInfo: network(4, 15, 0, 1, false), PlacementGroupInfo: allStrategies,
	},
	{ // Graviton
		InstanceType: "r6g.large", SupportedUsageClasses: usage, SupportedVirtualizationTypes: hvm, Hypervisor: "nitro",
		BurstablePerformanceSupported: aws.Bool(false), BareMetal: aws.Bool(false),
		ProcessorInfo: processor("AWS", "arm64", 2.5), VCpuInfo: &ec2types.VCpuInfo{DefaultVCpus: aws.Int32(2), DefaultCores: aws.Int32(2)},
		MemoryInfo: &ec2types.MemoryInfo{SizeInMiB: aws.Int64(16384)}, EbsInfo: ebs(4750),
		NetworkInfo: network(3, 10, 0, 1, false), PlacementGroupInfo: allStrategies,
	},
	{ // one NVIDIA GPU, local NVMe
		InstanceType: "g5.xlarge", SupportedUsageClasses: usage, SupportedVirtualizationTypes: hvm, Hypervisor: "nitro",
		BurstablePerformanceSupported: aws.Bool(false), BareMetal: aws.Bool(false),
		ProcessorInfo: processor("AMD", "x86_64", 3.3), VCpuInfo: &ec2types.VCpuInfo{DefaultVCpus: aws.Int32(4), DefaultCores: aws.Int32(2)},
		MemoryInfo: &ec2types.MemoryInfo{SizeInMiB: aws.Int64(16384)}, EbsInfo: ebs(3500),
		GpuInfo: &ec2types.GpuInfo{Gpus: []ec2types.GpuDeviceInfo{{
			Name: aws.String("A10G"), Manufacturer: aws.String("NVIDIA"), Count: aws.Int32(1), MemoryInfo: &ec2types.GpuDeviceMemoryInfo{SizeInMiB: aws.Int32(22888)},
		}}},
		InstanceStorageInfo: &ec2types.InstanceStorageInfo{NvmeSupport: ec2types.EphemeralNvmeSupportRequired, TotalSizeInGB: aws.Int64(250)},
		NetworkInfo:         network(4, 15, 0, 1, true), PlacementGroupInfo: allStrategies,
	},
	{ // 8 NVIDIA GPUs, EFA, 4 network cards, local NVMe; EC2 also lists capacity blocks
		InstanceType: "p4d.24xlarge", SupportedVirtualizationTypes: hvm, Hypervisor: "nitro",
		SupportedUsageClasses:         []ec2types.UsageClassType{ec2types.UsageClassTypeOnDemand, ec2types.UsageClassTypeSpot, ec2types.UsageClassTypeCapacityBlock},
		BurstablePerformanceSupported: aws.Bool(false), BareMetal: aws.Bool(false),
		ProcessorInfo: processor("Intel", "x86_64", 3.0), VCpuInfo: &ec2types.VCpuInfo{DefaultVCpus: aws.Int32(96), DefaultCores: aws.Int32(48)},
		MemoryInfo: &ec2types.MemoryInfo{SizeInMiB: aws.Int64(1179648)}, EbsInfo: ebs(19000),
		GpuInfo: &ec2types.GpuInfo{Gpus: []ec2types.GpuDeviceInfo{{
			Name: aws.String("A100"), Manufacturer: aws.String("NVIDIA"), Count: aws.Int32(8), MemoryInfo: &ec2types.GpuDeviceMemoryInfo{SizeInMiB: aws.Int32(40960)},
		}}},
		InstanceStorageInfo: &ec2types.InstanceStorageInfo{NvmeSupport: ec2types.EphemeralNvmeSupportRequired, TotalSizeInGB: aws.Int64(8000)},
		NetworkInfo:         network(60, 50, 4, 4, true), PlacementGroupInfo: allStrategies,
	},
	{ // AWS Neuron accelerator
		InstanceType: "inf2.xlarge", SupportedUsageClasses: usage, SupportedVirtualizationTypes: hvm, Hypervisor: "nitro",
		BurstablePerformanceSupported: aws.Bool(false), BareMetal: aws.Bool(false),
		ProcessorInfo: processor("AMD", "x86_64", 2.9), VCpuInfo: &ec2types.VCpuInfo{DefaultVCpus: aws.Int32(4), DefaultCores: aws.Int32(2)},
		MemoryInfo: &ec2types.MemoryInfo{SizeInMiB: aws.Int64(16384)}, EbsInfo: ebs(10000),
		NeuronInfo: &ec2types.NeuronInfo{
			NeuronDevices: []ec2types.NeuronDeviceInfo{{
				Name: aws.String("Inferentia2"), Count: aws.Int32(1),
				CoreInfo:   &ec2types.NeuronDeviceCoreInfo{Count: aws.Int32(2), Version: aws.Int32(2)},
				MemoryInfo: &ec2types.NeuronDeviceMemoryInfo{SizeInMiB: aws.Int32(32768)},
			}},
			TotalNeuronDeviceMemoryInMiB: aws.Int32(32768),
		},
		NetworkInfo: network(4, 15, 0, 1, true), PlacementGroupInfo: allStrategies,
	},
	{ // flex, burstable, no instance storage
		InstanceType: "m7i-flex.large", SupportedUsageClasses: usage, SupportedVirtualizationTypes: hvm, Hypervisor: "nitro",
		BurstablePerformanceSupported: aws.Bool(false), BareMetal: aws.Bool(false),
		ProcessorInfo: processor("Intel", "x86_64", 3.2), VCpuInfo: &ec2types.VCpuInfo{DefaultVCpus: aws.Int32(2), DefaultCores: aws.Int32(1)},
		MemoryInfo: &ec2types.MemoryInfo{SizeInMiB: aws.Int64(8192)}, EbsInfo: ebs(10000),
		NetworkInfo: network(3, 10, 0, 1, true), PlacementGroupInfo: allStrategies,
	},
	{ // previous generation on Xen, no processor clock, EBS optimization not by default
		InstanceType: "m4.large", SupportedUsageClasses: usage, SupportedVirtualizationTypes: hvm, Hypervisor: "xen",
		BurstablePerformanceSupported: aws.Bool(false), BareMetal: aws.Bool(false),
		ProcessorInfo: &ec2types.ProcessorInfo{Manufacturer: aws.String("Intel"), SupportedArchitectures: []ec2types.ArchitectureType{"x86_64"}},
		VCpuInfo:      &ec2types.VCpuInfo{DefaultVCpus: aws.Int32(2), DefaultCores: aws.Int32(1)},
		MemoryInfo:    &ec2types.MemoryInfo{SizeInMiB: aws.Int64(8192)},
		EbsInfo:       &ec2types.EbsInfo{EbsOptimizedSupport: ec2types.EbsOptimizedSupportDefault},
		NetworkInfo:   network(2, 10, 0, 1, false), PlacementGroupInfo: allStrategies,
	},
}

// offeredIn: the zones DescribeInstanceTypeOfferings reports per type (p4d not in every zone).
var offeredIn = map[ec2types.InstanceType][]string{
	"p4d.24xlarge": {"us-west-2b", "us-west-2c"},
}

// ec2Stub answers the EC2 calls the instance type, offering and placement group providers make.
// Any other call panics on the nil embedded interface.
type ec2Stub struct {
	sdk.EC2API
}

func (ec2Stub) DescribeInstanceTypes(context.Context, *ec2.DescribeInstanceTypesInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	return &ec2.DescribeInstanceTypesOutput{InstanceTypes: samples}, nil
}

func (ec2Stub) DescribeInstanceTypeOfferings(context.Context, *ec2.DescribeInstanceTypeOfferingsInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error) {
	out := &ec2.DescribeInstanceTypeOfferingsOutput{}
	for _, info := range samples {
		in, ok := offeredIn[info.InstanceType]
		if !ok {
			in = []string{"us-west-2a", "us-west-2b", "us-west-2c"}
		}
		for _, zone := range in {
			out.InstanceTypeOfferings = append(out.InstanceTypeOfferings, ec2types.InstanceTypeOffering{
				InstanceType: info.InstanceType, Location: aws.String(zone), LocationType: ec2types.LocationTypeAvailabilityZone,
			})
		}
	}
	return out, nil
}

func (ec2Stub) DescribePlacementGroups(context.Context, *ec2.DescribePlacementGroupsInput, ...func(*ec2.Options)) (*ec2.DescribePlacementGroupsOutput, error) {
	return &ec2.DescribePlacementGroupsOutput{PlacementGroups: []ec2types.PlacementGroup{{
		GroupId: aws.String("pg-0123456789abcdef0"), GroupName: aws.String("training"), Strategy: ec2types.PlacementStrategyPartition,
		PartitionCount: aws.Int32(3), State: ec2types.PlacementGroupStateAvailable,
	}}}, nil
}

func nodeClass(name, alias string, mutate func(*v1.EC2NodeClass)) *v1.EC2NodeClass {
	nc := &v1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1.EC2NodeClassSpec{AMISelectorTerms: []v1.AMISelectorTerm{{Alias: alias}}},
		Status:     v1.EC2NodeClassStatus{Subnets: zones},
	}
	if mutate != nil {
		mutate(nc)
	}
	return nc
}

// nodeClasses: the configurations that change which keys the provider defines.
var nodeClasses = []*v1.EC2NodeClass{
	nodeClass("al2023", "al2023@latest", nil),
	nodeClass("bottlerocket", "bottlerocket@latest", nil),
	nodeClass("windows2022", "windows2022@latest", nil),
	// Capacity reservations as the nodeclass controller records them in status.
	nodeClass("reserved", "al2023@latest", func(nc *v1.EC2NodeClass) {
		nc.Status.CapacityReservations = []v1.CapacityReservation{
			{ID: "cr-0000000000000000a", InstanceType: "m5.xlarge", AvailabilityZone: "us-west-2a", OwnerID: "012345678901",
				InstanceMatchCriteria: "targeted", ReservationType: v1.CapacityReservationTypeDefault, State: v1.CapacityReservationStateActive},
			{ID: "cr-0000000000000000b", InstanceType: "g5.xlarge", AvailabilityZone: "us-west-2b", OwnerID: "012345678901",
				InstanceMatchCriteria: "targeted", ReservationType: v1.CapacityReservationTypeDefault, Interruptible: true, State: v1.CapacityReservationStateActive},
			{ID: "cr-0000000000000000c", InstanceType: "p4d.24xlarge", AvailabilityZone: "us-west-2c", OwnerID: "012345678901",
				InstanceMatchCriteria: "targeted", ReservationType: v1.CapacityReservationTypeCapacityBlock, State: v1.CapacityReservationStateActive},
		}
	}),
	// A partition placement group (resolved through DescribePlacementGroups).
	nodeClass("placement-group", "al2023@latest", func(nc *v1.EC2NodeClass) {
		nc.Spec.PlacementGroupSelector = &v1.PlacementGroupSelector{ID: aws.String("pg-0123456789abcdef0")}
	}),
	// Subnets recorded before Karpenter knew zone IDs (an upgrade from an older version).
	nodeClass("no-zone-id", "al2023@latest", func(nc *v1.EC2NodeClass) {
		nc.Status.Subnets = []v1.Subnet{{ID: "subnet-a", Zone: "us-west-2a"}}
	}),
}

type output struct {
	Version                   string   `json:"version"`
	KarpenterVersion          string   `json:"karpenterVersion"`
	InstanceTypeKeys          []string `json:"instanceTypeKeys"`
	OfferingKeys              []string `json:"offeringKeys"`
	InstanceTypeKeysNotAlways []string `json:"instanceTypeKeysNotAlways"`
	OfferingKeysNotAlways     []string `json:"offeringKeysNotAlways"`
	KWOK                      kwokKeys `json:"kwok"`
}

// kwokKeys: the same for Karpenter's KWOK provider (sigs.k8s.io/karpenter/kwok/cloudprovider,
// ConstructInstanceTypes with its embedded catalog). Its offerings carry whatever keys the
// catalog lists: the embedded one lists capacity type and zone.
type kwokKeys struct {
	InstanceTypeKeys []string `json:"instanceTypeKeys"`
	OfferingKeys     []string `json:"offeringKeys"`
}

type keyTally struct {
	union, always sets.Set[string]
	seen          bool
}

func (k *keyTally) add(keys sets.Set[string]) {
	if !k.seen {
		k.union, k.always, k.seen = sets.New[string](), keys.Clone(), true
	}
	k.union = k.union.Union(keys)
	k.always = k.always.Intersection(keys)
}

func moduleVersion(path string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, dep := range info.Deps {
		if dep.Path == path {
			if dep.Replace != nil {
				return dep.Replace.Version
			}
			return dep.Version
		}
	}
	return "unknown"
}

// dump, with -dump: every instance type's and offering's requirements, per node class, to stderr.
var dump = flag.Bool("dump", false, "print every instance type's and offering's requirements to stderr")

func run() (*output, error) {
	ctrllog.SetLogger(logr.Discard())
	ctx := context.Background()
	// Reserved offerings are built only with the ReservedCapacity feature gate (on by default
	// since core v1.6); NodeOverlay stays off so no overlay price is looked up.
	ctx = coreoptions.ToContext(ctx, &coreoptions.Options{FeatureGates: coreoptions.FeatureGates{ReservedCapacity: true}})
	ctx = options.ToContext(ctx, &options.Options{ClusterName: "veneer", VMMemoryOverheadPercent: 0.075})

	api := ec2Stub{}
	provider := instancetype.NewDefaultProvider(
		cache.New(awscache.InstanceTypesZonesAndOfferingsTTL, awscache.DefaultCleanupInterval),
		cache.New(awscache.InstanceTypesZonesAndOfferingsTTL, awscache.DefaultCleanupInterval),
		cache.New(awscache.DiscoveredCapacityCacheTTL, awscache.DefaultCleanupInterval),
		api,
		nil, // subnet.Provider: not used by List
		pricing.NewDefaultProvider(nil, api, region, false),
		capacityreservation.NewProvider(api, clock.RealClock{}, cache.New(awscache.DefaultTTL, awscache.DefaultCleanupInterval), cache.New(awscache.CapacityReservationAvailabilityTTL, awscache.DefaultCleanupInterval)),
		placementgroup.NewProvider(api, cache.New(awscache.DefaultTTL, awscache.DefaultCleanupInterval), cache.New(awscache.PlacementGroupAvailabilityTTL, awscache.DefaultCleanupInterval)),
		awscache.NewUnavailableOfferings(),
		instancetype.NewDefaultResolver(region),
		arczonalshift.NewNoopProvider(),
		nil, // kube client: only read for NodeOverlay prices
	)
	if err := provider.UpdateInstanceTypes(ctx); err != nil {
		return nil, err
	}
	if err := provider.UpdateInstanceTypeOfferings(ctx); err != nil {
		return nil, err
	}

	var its, ofs keyTally
	for _, nc := range nodeClasses {
		types, err := provider.List(ctx, nc)
		if err != nil {
			return nil, fmt.Errorf("listing instance types for node class %s: %w", nc.Name, err)
		}
		if len(types) != len(samples) {
			return nil, fmt.Errorf("node class %s: %d instance types, want %d", nc.Name, len(types), len(samples))
		}
		for _, it := range types {
			if *dump {
				fmt.Fprintf(os.Stderr, "%s %s: %s\n", nc.Name, it.Name, it.Requirements)
				for _, of := range it.Offerings {
					fmt.Fprintf(os.Stderr, "  offering (available %t): %s\n", of.Available, of.Requirements)
				}
			}
			its.add(it.Requirements.Keys())
			if len(it.Offerings) == 0 {
				return nil, fmt.Errorf("node class %s: %s has no offerings", nc.Name, it.Name)
			}
			for _, of := range it.Offerings {
				ofs.add(of.Requirements.Keys())
			}
		}
	}
	kwokTypes, err := kwok.ConstructInstanceTypes(kwokoptions.ToContext(ctx, &kwokoptions.Options{}))
	if err != nil {
		return nil, fmt.Errorf("kwok instance types: %w", err)
	}
	var kwokIts, kwokOfs keyTally
	for _, it := range kwokTypes {
		kwokIts.add(it.Requirements.Keys())
		for _, of := range it.Offerings {
			kwokOfs.add(of.Requirements.Keys())
		}
	}
	return &output{
		KWOK:                      kwokKeys{InstanceTypeKeys: sets.List(kwokIts.union), OfferingKeys: sets.List(kwokOfs.union)},
		Version:                   moduleVersion("github.com/aws/karpenter-provider-aws"),
		KarpenterVersion:          moduleVersion("sigs.k8s.io/karpenter"),
		InstanceTypeKeys:          sets.List(its.union),
		OfferingKeys:              sets.List(ofs.union),
		InstanceTypeKeysNotAlways: sortedOrEmpty(its.union.Difference(its.always)),
		OfferingKeysNotAlways:     sortedOrEmpty(ofs.union.Difference(ofs.always)),
	}, nil
}

func sortedOrEmpty(s sets.Set[string]) []string {
	l := sets.List(s)
	if l == nil {
		return []string{}
	}
	return slices.Clip(l)
}

func main() {
	flag.Parse()
	out, err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "aws-instance-keys:", err)
		os.Exit(1)
	}
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "aws-instance-keys:", err)
		os.Exit(1)
	}
}
