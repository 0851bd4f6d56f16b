//go:build veneer_aws

// The judge of the effect: Karpenter's AWS provider's own launch path. For each NodeClaim of a
// generated cluster, in two worlds (every overlay; only those not selected), Karpenter's
// NodeOverlay controller and store price the instance types (world.go), the scheduler's rule sets
// karpenter.sh/price-overlay-applied, and the AWS provider's instance provider (v1.14.3,
// pkg/providers/instance DefaultProvider.Create: its filters, truncation, capacity type, launch
// templates and overrides) builds the CreateFleet request over the provider's own fake EC2 API
// (pkg/fake), which records it. EC2's documented choice is applied on top: on-demand
// `prioritized`, the lowest Priority; `lowest-price`, the lowest price (the offering's list
// price); spot, a pool EC2 picks by its capacity (every spot override).
//
// Built only in a module that has the AWS provider (scripts/builds/40-karpenter.sh: -tags
// veneer_aws). Request: {"launch": {"instanceTypes", "nodePools", "overlays" (each with
// "selected"), "zones", "claims": [{"nodePool", "requirements"}], "orders"}}; answer:
// {"statuses", "statusesWithout", "claims": [{"with", "without"}]}, each world's launch as
// {"priceOverlayApplied", "capacityType", "strategy", "overrides", "picks", "orderDependent", "error"}.
// With "orders" > 1, each launch is run again with the catalog in other orders (reversed,
// shuffled): Go's sort.Slice is not stable, and a launch whose outcome changes with the order is
// marked orderDependent.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"github.com/patrickmn/go-cache"
	"github.com/samber/lo"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	coreoptions "sigs.k8s.io/karpenter/pkg/operator/options"
	coretest "sigs.k8s.io/karpenter/pkg/test"

	v1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	awscache "github.com/aws/karpenter-provider-aws/pkg/cache"
	"github.com/aws/karpenter-provider-aws/pkg/fake"
	"github.com/aws/karpenter-provider-aws/pkg/operator/options"
	"github.com/aws/karpenter-provider-aws/pkg/providers/amifamily"
	"github.com/aws/karpenter-provider-aws/pkg/providers/arczonalshift"
	"github.com/aws/karpenter-provider-aws/pkg/providers/capacityreservation"
	"github.com/aws/karpenter-provider-aws/pkg/providers/instance"
	"github.com/aws/karpenter-provider-aws/pkg/providers/launchtemplate"
	"github.com/aws/karpenter-provider-aws/pkg/providers/placementgroup"
	"github.com/aws/karpenter-provider-aws/pkg/providers/securitygroup"
	"github.com/aws/karpenter-provider-aws/pkg/providers/subnet"
)

func init() {
	launchJudge = func(ctx context.Context, raw json.RawMessage) (any, error) {
		var req launchRequest
		if err := json.Unmarshal(raw, &req); err != nil {
			return nil, badRequest{err}
		}
		return judgeLaunches(ctx, req)
	}
}

type launchClaimIn struct {
	NodePool     string                                        `json:"nodePool"`
	Requirements []karpv1.NodeSelectorRequirementWithMinValues `json:"requirements"`
}

type launchRequest struct {
	InstanceTypes []instanceTypeIn `json:"instanceTypes"`
	NodePools     []nodePoolIn     `json:"nodePools"`
	Overlays      []overlayIn      `json:"overlays"`
	Zones         []string         `json:"zones"`
	Claims        []launchClaimIn  `json:"claims"`
	Orders        int              `json:"orders"`
}

type overrideOut struct {
	InstanceType string  `json:"instanceType"`
	Zone         string  `json:"zone"`
	Priority     float64 `json:"priority"`
}

type worldLaunch struct {
	PriceOverlayApplied bool          `json:"priceOverlayApplied"`
	CapacityType        string        `json:"capacityType,omitempty"`
	Strategy            string        `json:"strategy,omitempty"`
	Overrides           []overrideOut `json:"overrides,omitempty"`
	Picks               []string      `json:"picks,omitempty"`
	OrderDependent      bool          `json:"orderDependent,omitempty"`
	Error               string        `json:"error,omitempty"`
}

type claimAnswer struct {
	With    worldLaunch `json:"with"`
	Without worldLaunch `json:"without"`
}

type launchAnswer struct {
	Statuses        map[string]statusOut `json:"statuses"`
	StatusesWithout map[string]statusOut `json:"statusesWithout"`
	Claims          []claimAnswer        `json:"claims"`
	Error           string               `json:"error,omitempty"`
}

// recordingEC2 is the provider's fake EC2 API (launch templates, subnets, security groups), with
// CreateFleet of its own that keeps each request by the NodeClaim it launches for (its
// karpenter.sh/nodeclaim tag): launches run concurrently.
type recordingEC2 struct {
	*fake.EC2API
	mu       sync.Mutex
	fleets   map[string]*ec2.CreateFleetInput
	launched int
	// Launch templates by name: the fake keeps them in a map it scans on every lookup.
	templates map[string]ec2types.LaunchTemplate
}

func (r *recordingEC2) CreateLaunchTemplate(_ context.Context, input *ec2.CreateLaunchTemplateInput, _ ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error) {
	lt := ec2types.LaunchTemplate{LaunchTemplateName: input.LaunchTemplateName, LaunchTemplateId: input.LaunchTemplateName}
	r.mu.Lock()
	r.templates[lo.FromPtr(input.LaunchTemplateName)] = lt
	r.mu.Unlock()
	return &ec2.CreateLaunchTemplateOutput{LaunchTemplate: &lt}, nil
}

// DescribeLaunchTemplates answers by name as EC2 does (NotFound when none of them exists); the
// provider asks by filter only to clean up, which nothing here needs.
func (r *recordingEC2) DescribeLaunchTemplates(_ context.Context, input *ec2.DescribeLaunchTemplatesInput, _ ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error) {
	out := &ec2.DescribeLaunchTemplatesOutput{}
	r.mu.Lock()
	for _, name := range input.LaunchTemplateNames {
		if lt, ok := r.templates[name]; ok {
			out.LaunchTemplates = append(out.LaunchTemplates, lt)
		}
	}
	r.mu.Unlock()
	if len(input.Filters) == 0 && len(out.LaunchTemplates) == 0 {
		return nil, &smithy.GenericAPIError{Code: "InvalidLaunchTemplateName.NotFoundException", Message: "At least one of the launch templates specified in the request does not exist."}
	}
	return out, nil
}

func (r *recordingEC2) CreateFleet(_ context.Context, input *ec2.CreateFleetInput, _ ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	for _, spec := range input.TagSpecifications {
		for _, tag := range spec.Tags {
			if lo.FromPtr(tag.Key) == v1.NodeClaimTagKey {
				r.mu.Lock()
				r.fleets[lo.FromPtr(tag.Value)] = input
				r.mu.Unlock()
			}
		}
	}
	// An instant fleet of one, launched from the first override: which one EC2 would launch is the
	// judge's answer (ec2Picks), read from the request. The provider's fake would do the same, but
	// it also keeps a copy of every request it ever saw, which makes each call slower than the last.
	var instances []ec2types.CreateFleetInstance
	if len(input.LaunchTemplateConfigs) > 0 && len(input.LaunchTemplateConfigs[0].Overrides) > 0 {
		o := input.LaunchTemplateConfigs[0].Overrides[0]
		r.mu.Lock()
		r.launched++
		id := fmt.Sprintf("i-%017d", r.launched)
		r.mu.Unlock()
		instances = append(instances, ec2types.CreateFleetInstance{
			InstanceIds:  []string{id},
			InstanceType: o.InstanceType,
			Lifecycle:    lo.Ternary(input.TargetCapacitySpecification.DefaultTargetCapacityType == ec2types.DefaultTargetCapacityTypeSpot, ec2types.InstanceLifecycleSpot, ec2types.InstanceLifecycleOnDemand),
			LaunchTemplateAndOverrides: &ec2types.LaunchTemplateAndOverridesResponse{
				LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecification{LaunchTemplateName: input.LaunchTemplateConfigs[0].LaunchTemplateSpecification.LaunchTemplateName},
				Overrides:                   &ec2types.FleetLaunchTemplateOverrides{InstanceType: o.InstanceType, AvailabilityZone: o.AvailabilityZone, SubnetId: o.SubnetId, ImageId: o.ImageId, Priority: o.Priority},
			},
		})
	}
	return &ec2.CreateFleetOutput{FleetId: lo.ToPtr("fleet-judge"), Instances: instances}, nil
}

func (r *recordingEC2) take(nodeClaim string) *ec2.CreateFleetInput {
	r.mu.Lock()
	defer r.mu.Unlock()
	input := r.fleets[nodeClaim]
	delete(r.fleets, nodeClaim)
	return input
}

// launcher is the AWS provider's instance provider with what it needs, built once per process as
// Karpenter builds it (pkg/operator), over the fake EC2 API.
type launcher struct {
	ec2      *recordingEC2
	provider *instance.DefaultProvider
	ctx      context.Context
	seq      int64
	mu       sync.Mutex
}

var (
	launcherOnce sync.Once
	theLauncher  *launcher
)

func newLauncher(ctx context.Context) *launcher {
	ctx = coreoptions.ToContext(ctx, coretest.Options(coretest.OptionsFields{FeatureGates: coretest.FeatureGates{NodeOverlay: lo.ToPtr(true)}}))
	// The operator's options as the provider's tests set them (pkg/test Options), written out: importing
	// pkg/test would add its own normalized label to Karpenter's global table, which the record judge
	// in this process reads.
	ctx = options.ToContext(ctx, &options.Options{ClusterName: "test-cluster", ClusterEndpoint: "https://test-cluster", VMMemoryOverheadPercent: 0.075, AMIRefreshInterval: time.Minute, SubnetRefreshInterval: time.Minute})
	ec2api := &recordingEC2{EC2API: fake.NewEC2API(), fleets: map[string]*ec2.CreateFleetInput{}, templates: map[string]ec2types.LaunchTemplate{}}
	newCache := func() *cache.Cache { return cache.New(awscache.DefaultTTL, awscache.DefaultCleanupInterval) }
	subnetProvider := subnet.NewDefaultProvider(ec2api, newCache(), cache.New(awscache.AvailableIPAddressTTL, awscache.DefaultCleanupInterval))
	securityGroupProvider := securitygroup.NewDefaultProvider(ec2api, newCache())
	placementGroupProvider := placementgroup.NewProvider(ec2api, newCache(), cache.New(awscache.PlacementGroupAvailabilityTTL, awscache.DefaultCleanupInterval))
	clk := clocktesting.NewFakeClock(epoch)
	capacityReservationProvider := capacityreservation.NewProvider(ec2api, clk, newCache(), cache.New(awscache.DefaultTTL, awscache.DefaultCleanupInterval))
	zonalshiftProvider := arczonalshift.NewProvider(fake.NewARCZonalShiftAPI(), clk, "")
	launchTemplateProvider := launchtemplate.NewDefaultProvider(ctx, newCache(), ec2api, fake.NewEKSAPI(), amifamily.NewDefaultResolver(fake.DefaultRegion),
		securityGroupProvider, subnetProvider, placementGroupProvider, lo.ToPtr("ca-bundle"), make(chan struct{}), net.ParseIP("10.0.100.10"), "https://test-cluster")
	launchTemplateProvider.CABundle = lo.ToPtr("Y2EtYnVuZGxlCg==")
	launchTemplateProvider.ClusterCIDR.Store(lo.ToPtr("10.100.0.0/16"))
	provider := instance.NewDefaultProvider(ctx, fake.DefaultRegion, coretest.NewEventRecorder(), ec2api, awscache.NewUnavailableOfferings(),
		subnetProvider, launchTemplateProvider, capacityReservationProvider, placementGroupProvider, zonalshiftProvider, cache.New(cache.NoExpiration, cache.NoExpiration))
	return &launcher{ec2: ec2api, provider: provider, ctx: ctx}
}

// nodeClass is an EC2NodeClass as the provider's tests make one (pkg/test EC2NodeClass: an AMI per
// architecture and accelerator kind, security groups, an instance profile), Ready, with one subnet
// per zone asked for.
func nodeClass(zones []string) *v1.EC2NodeClass {
	ami := func(id, arch string, device corev1.NodeSelectorRequirement) v1.AMI {
		return v1.AMI{ID: id, Requirements: []corev1.NodeSelectorRequirement{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{arch}}, device}}
	}
	nc := &v1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "default", Generation: 1},
		Spec: v1.EC2NodeClassSpec{
			AMISelectorTerms:           []v1.AMISelectorTerm{{Alias: "al2023@latest"}},
			Role:                       "test-role",
			SecurityGroupSelectorTerms: []v1.SecurityGroupSelectorTerm{{Tags: map[string]string{"*": "*"}}},
			SubnetSelectorTerms:        []v1.SubnetSelectorTerm{{Tags: map[string]string{"*": "*"}}},
		},
		Status: v1.EC2NodeClassStatus{
			AMIs: []v1.AMI{
				ami("ami-test1", karpv1.ArchitectureAmd64, corev1.NodeSelectorRequirement{Key: v1.LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpDoesNotExist}),
				ami("ami-test2", karpv1.ArchitectureAmd64, corev1.NodeSelectorRequirement{Key: v1.LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpExists}),
				ami("ami-test3", karpv1.ArchitectureAmd64, corev1.NodeSelectorRequirement{Key: v1.LabelInstanceAcceleratorCount, Operator: corev1.NodeSelectorOpExists}),
				ami("ami-test4", karpv1.ArchitectureArm64, corev1.NodeSelectorRequirement{Key: v1.LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpDoesNotExist}),
			},
			InstanceProfile: "test-profile",
			SecurityGroups:  []v1.SecurityGroup{{ID: "sg-test1"}, {ID: "sg-test2"}},
			Subnets: lo.Map(zones, func(z string, i int) v1.Subnet {
				return v1.Subnet{ID: fmt.Sprintf("subnet-%d", i), Zone: z, ZoneID: fmt.Sprintf("zid-%d", i)}
			}),
		},
	}
	nc.StatusConditions().SetTrue(v1.ConditionTypeSubnetsReady)
	return nc
}

// launch runs Create for one NodeClaim over `its` (the NodePool's instance types as its world
// priced them) and reads back the CreateFleet request it sent.
func (l *launcher) launch(nc *v1.EC2NodeClass, pool string, reqs []karpv1.NodeSelectorRequirementWithMinValues, its []*cloudprovider.InstanceType, annotated bool) worldLaunch {
	l.mu.Lock()
	l.seq++
	name := "claim-" + strconv.FormatInt(l.seq, 10)
	l.mu.Unlock()
	claim := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: pool}},
		Spec: karpv1.NodeClaimSpec{
			Requirements: reqs,
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: nc.Name},
		},
	}
	if annotated {
		claim.Annotations = map[string]string{v1alpha1.PriceOverlayAppliedAnnotationKey: "true"}
	}
	out := worldLaunch{PriceOverlayApplied: annotated}
	tags := map[string]string{v1.NodeClaimTagKey: name, karpv1.NodePoolLabelKey: pool}
	_, err := l.provider.Create(l.ctx, nc, claim, tags, its)
	input := l.ec2.take(name)
	if input == nil {
		out.Error = fmt.Sprintf("no CreateFleet request: %v", err)
		return out
	}
	out.CapacityType = string(input.TargetCapacitySpecification.DefaultTargetCapacityType)
	if input.SpotOptions != nil {
		out.Strategy = string(input.SpotOptions.AllocationStrategy)
	} else if input.OnDemandOptions != nil {
		out.Strategy = string(input.OnDemandOptions.AllocationStrategy)
	}
	for _, ltc := range input.LaunchTemplateConfigs {
		for _, o := range ltc.Overrides {
			out.Overrides = append(out.Overrides, overrideOut{InstanceType: string(o.InstanceType), Zone: lo.FromPtr(o.AvailabilityZone), Priority: lo.FromPtr(o.Priority)})
		}
	}
	out.Picks = ec2Picks(out)
	return out
}

// ec2Picks is EC2's documented choice among the overrides: spot, any pool (EC2 picks by its
// capacity); on-demand `prioritized`, the lowest Priority; `lowest-price`, the lowest price. Karpenter
// asks for `lowest-price` only when no candidate had an overlaid price, and then every override's
// Priority is that offering's list price: the lowest Priority is the lowest price either way.
func ec2Picks(out worldLaunch) []string {
	picks := map[string]bool{}
	if out.CapacityType == string(ec2types.DefaultTargetCapacityTypeSpot) {
		for _, o := range out.Overrides {
			picks[o.InstanceType] = true
		}
	} else if len(out.Overrides) > 0 {
		best := lo.MinBy(out.Overrides, func(a, b overrideOut) bool { return a.Priority < b.Priority })
		for _, o := range out.Overrides {
			if o.Priority == best.Priority {
				picks[o.InstanceType] = true
			}
		}
	}
	list := lo.Keys(picks)
	slices.Sort(list)
	return list
}

func judgeLaunches(ctx context.Context, req launchRequest) (launchAnswer, error) {
	launcherOnce.Do(func() { theLauncher = newLauncher(ctx) })
	l := theLauncher
	nc := nodeClass(req.Zones)
	real := func(_ int, o overlayIn) (*string, *string) { return o.Price, o.PriceAdjustment }
	withW, err := reconcileWorld(ctx, req.InstanceTypes, req.NodePools, req.Overlays, real)
	if err != nil {
		return launchAnswer{}, err
	}
	withoutW, err := reconcileWorld(ctx, req.InstanceTypes, req.NodePools, lo.Filter(req.Overlays, func(o overlayIn, _ int) bool { return !o.Selected }), real)
	if err != nil {
		return launchAnswer{}, err
	}
	out := launchAnswer{Statuses: withW.statuses, StatusesWithout: withoutW.statuses, Claims: make([]claimAnswer, len(req.Claims))}
	if withW.err != "" || withoutW.err != "" {
		out.Error = withW.err + withoutW.err
		return out, nil
	}
	// Every launch at once: most of a launch's time is CreateFleet's batching window (35 ms of idle).
	var launches sync.WaitGroup
	for i, c := range req.Claims {
		candidates := map[string]bool{}
		for _, r := range c.Requirements {
			if r.Key == corev1.LabelInstanceTypeStable {
				for _, v := range r.Values {
					candidates[v] = true
				}
			}
		}
		// Only the candidates go to Create: its first filter (compatible and available) drops every
		// other type, keeping the candidates in the order they were given.
		candidateTypes := lo.Filter(req.InstanceTypes, func(it instanceTypeIn, _ int) bool { return candidates[it.Name] })
		run := func(w world) worldLaunch {
			// Fresh instance types for every launch, as Karpenter's instance-type provider lists them:
			// the launch's filters replace their offerings (instance/filter: "only safe to mutate the
			// slice"), and the store returns a type it does not price as it was given.
			its, err := w.store.ApplyAll(c.NodePool, instanceTypes(candidateTypes))
			if err != nil {
				return worldLaunch{Error: fmt.Sprintf("ApplyAll(%q): %v", c.NodePool, err)}
			}
			// nodeclaimtemplate.go ToNodeClaim: the annotation when any candidate had an overlaid price.
			annotated := lo.ContainsBy(its, func(it *cloudprovider.InstanceType) bool { return it.IsPricingOverlayApplied() })
			first := l.launch(nc, c.NodePool, c.Requirements, its, annotated)
			// Only the cut to the 60 cheapest types (Truncate's unstable sort) reads the catalog's order.
			orders := 1
			if len(candidates) > maxLaunchTypes {
				orders = max(req.Orders, 1)
			}
			rnd := rand.New(rand.NewSource(int64(i)))
			for k := 1; k < orders && first.Error == ""; k++ {
				fresh, _ := w.store.ApplyAll(c.NodePool, instanceTypes(candidateTypes))
				reordered := slices.Clone(fresh)
				if k == 1 {
					slices.Reverse(reordered)
				} else {
					rnd.Shuffle(len(reordered), func(a, b int) { reordered[a], reordered[b] = reordered[b], reordered[a] })
				}
				again := l.launch(nc, c.NodePool, c.Requirements, reordered, annotated)
				if again.CapacityType != first.CapacityType || !slices.Equal(again.Picks, first.Picks) {
					first.OrderDependent = true
					break
				}
			}
			return first
		}
		launches.Go(func() { out.Claims[i].With = run(withW) })
		launches.Go(func() { out.Claims[i].Without = run(withoutW) })
	}
	launches.Wait()
	return out, nil
}

// maxLaunchTypes is the instance provider's maxInstanceTypes: a launch with more candidates is cut by price.
const maxLaunchTypes = 60
